package gang

import (
	"regexp"
	"strconv"

	corev1 "k8s.io/api/core/v1"

	"github.com/nereid-ml/nereid/pkg/globalmanager/controllers/common"
	"github.com/nereid-ml/nereid/pkg/globalmanager/placement"
)

// quotedMinimums are how the schedulers name a gang's minimum in what they
// write while it waits: kube-scheduler's GangScheduling plugin ("minCount
// (3) cannot be satisfied: …"), scheduler-plugins' coscheduling ("…,
// minMember of group: 3") and Volcano's gang plugin ("…, 3 minAvailable").
var quotedMinimums = []*regexp.Regexp{
	regexp.MustCompile(`minCount \((\d+)\)`),
	regexp.MustCompile(`minMember of group: (\d+)`),
	regexp.MustCompile(`(\d+) minAvailable`),
}

// quotedMinimum is the gang minimum a scheduler's message names, if it
// names one.
func quotedMinimum(msg string) (int32, bool) {
	for _, re := range quotedMinimums {
		if m := re.FindStringSubmatch(msg); m != nil {
			if n, err := strconv.ParseInt(m[1], 10, 32); err == nil {
				return int32(n), true
			}
		}
	}
	return 0, false
}

// schedulerSays is what the scheduler last said of the gang as Nereid asks
// for it now, with minimum pods placed together: the group's own condition
// where the scheduler writes one, else pod's. A message that names another
// minimum was written before the gang changed (a worker removed, the
// annotation edited) and stays until the scheduler tries the gang again,
// after its backoff: it is left out, and stale says one was. Neither the
// message's times nor the group's generation can tell this: a condition's
// lastTransitionTime moves only when its status does, and the API server
// does not count the generations of a scheduling.k8s.io PodGroup.
func (p *Plan) schedulerSays(pod *corev1.Pod, minimum int32) (says string, stale bool) {
	for _, says := range []string{p.m.groupSays(p.Mode, p.owner.GetNamespace(), p.Name), placement.SchedulerSays(pod)} {
		if says == "" {
			continue
		}
		if n, ok := quotedMinimum(says); ok && n != minimum {
			stale = true
			continue
		}
		return common.ClipText(says, 1024), false
	}
	return "", stale
}
