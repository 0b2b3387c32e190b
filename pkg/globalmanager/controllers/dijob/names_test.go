package dijob

import (
	"strconv"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/util/validation"
)

// TestPodNamesDoNotCollideAcrossTasks: a rank is digits and task names
// cannot hold "_", so <job>-<task>-<rank> is read back one way only, also
// when a long job name is cut: task "a" rank 10 is a-10, task "a-1" rank 0
// a-1-0. (Across jobs of one namespace names can meet, job x task y-z and
// job x-y task z; the second job's pod is then refused as AlreadyExists and
// its owner told, never adopted: children are claimed by UID.)
func TestPodNamesDoNotCollideAcrossTasks(t *testing.T) {
	tasks := []string{"a", "a-1", "a-1-0", "a-10", "1", "10", "1-0", "learner", strings.Repeat("t", 38) + "-1", strings.Repeat("t", 40)}
	jobs := []string{"j", strings.Repeat("j", 50), strings.Repeat("j", 63), strings.Repeat("long-name", 20)}
	for _, job := range jobs {
		seen := map[string]string{}
		for _, task := range tasks {
			for rank := range 1024 {
				name := PodName(job, task, rank)
				if errs := validation.IsDNS1123Label(name); len(errs) > 0 {
					t.Fatalf("job of %d characters, task %s, rank %d: %q is no DNS label: %v", len(job), task, rank, name, errs)
				}
				who := task + "/" + strconv.Itoa(rank)
				if other, dup := seen[name]; dup {
					t.Fatalf("job of %d characters: %q is the name of task/rank %s and %s", len(job), name, other, who)
				}
				seen[name] = who
			}
		}
	}
}
