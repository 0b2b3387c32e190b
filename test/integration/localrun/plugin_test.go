package localrun

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os/exec"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	sednav1 "github.com/nereid-ml/nereid/pkg/apis/sedna/v1alpha1"
	sednaclient "github.com/nereid-ml/nereid/pkg/client/clientset/versioned"
	"github.com/nereid-ml/nereid/pkg/globalmanager/controllers/common"
	"github.com/nereid-ml/nereid/pkg/plugin/view"
	"github.com/nereid-ml/nereid/pkg/plugin/view/golden"
	"github.com/nereid-ml/nereid/test/framework"
)

// kubectlNereid is kubectl-nereid built from cmd/kubectl-nereid, run
// against the local run's kubeconfig as a user who copied it onto PATH
// runs `kubectl nereid`.
type kubectlNereid struct{ bin, kubeconfig string }

// pluginOnLocalRun is kubectl-nereid run on the local run's kubeconfig.
func pluginOnLocalRun(t *testing.T) kubectlNereid {
	t.Helper()
	return kubectlNereid{bin: built(t, "./cmd/kubectl-nereid"), kubeconfig: framework.KubeconfigPath()}
}

// run runs it with args and returns its stdout, and its stderr in err when
// it exits non-zero.
func (k kubectlNereid) run(t *testing.T, args ...string) (string, error) {
	t.Helper()
	cmd := exec.CommandContext(t.Context(), k.bin, append(args, "--kubeconfig", k.kubeconfig)...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return stdout.String(), errors.Join(err, errors.New(stderr.String()))
	}
	t.Logf("kubectl nereid %s:\n%s", strings.Join(args, " "), stdout.String())
	return stdout.String(), nil
}

// json runs it with -o json and decodes its output into v.
func (k kubectlNereid) json(t *testing.T, v any, args ...string) {
	t.Helper()
	out, err := k.run(t, append(args, "-o", "json")...)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal([]byte(out), v); err != nil {
		t.Fatalf("decoding the output of kubectl nereid %v: %v\n%s", args, err, out)
	}
}

// After the federated learning and incremental learning demos, kubectl
// nereid shows what the cluster holds: the edge nodes connected, each
// node's workers, the jobs' phases, and each job's rounds as its status
// records them.
func TestKubectlNereidShowsTheDemosAsTheClusterHoldsThem(t *testing.T) {
	kn := pluginOnLocalRun(t)
	runDemo(t, "federatedlearningjob")
	runDemo(t, "incrementallearningjob")
	sedna, err := sednaclient.NewForConfig(framework.RESTConfig())
	if err != nil {
		t.Fatal(err)
	}
	fl, err := sedna.SednaV1alpha1().FederatedLearningJobs("demo").Get(t.Context(), "surface-defect-detection", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	il, err := sedna.SednaV1alpha1().IncrementalLearningJobs("demo").Get(t.Context(), "helmet-detection-demo", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Run("status", func(t *testing.T) { checkStatus(t, kn, fl, il) })
	t.Run("nodes", func(t *testing.T) { checkNodes(t, kn, fl, il) })
	t.Run("rounds of the federated learning job", func(t *testing.T) { checkFederatedRounds(t, kn, fl) })
	t.Run("rounds of the incremental learning job", func(t *testing.T) { checkIncrementalRounds(t, kn, sedna, il) })
	t.Run("a user who may read only some of it", func(t *testing.T) { checkRestrictedUser(t, kn) })
	t.Run("a job that does not exist", func(t *testing.T) {
		_, err := kn.run(t, "rounds", "fl/no-such-job", "-n", "demo")
		if err == nil || !strings.Contains(err.Error(), "kubectl nereid rounds: no federatedlearningjob demo/no-such-job: not found") {
			t.Errorf("got %v, want the job named as not found", err)
		}
	})
}

func checkStatus(t *testing.T, kn kubectlNereid, fl *sednav1.FederatedLearningJob, il *sednav1.IncrementalLearningJob) {
	var snap view.Snapshot
	kn.json(t, &snap, "status", "-n", "demo")
	for _, name := range []string{"edge-0", "edge-1"} {
		i := slices.IndexFunc(snap.Nodes, func(n view.Node) bool { return n.Name == name })
		if i < 0 || snap.Nodes[i].Link != view.LinkConnected || !snap.Nodes[i].Edge || snap.Nodes[i].LastHeard == nil {
			t.Errorf("node %s: %+v, want an edge node connected and heard from", name, snap.Nodes)
		}
	}
	i := slices.IndexFunc(snap.Jobs, func(j view.Job) bool { return j.Kind == "FederatedLearningJob" && j.Name == fl.Name })
	if i < 0 {
		t.Fatalf("jobs %+v, want the federated learning job", snap.Jobs)
	}
	if j := snap.Jobs[i]; j.Phase != "Succeeded" || j.Waiting != "" || !j.Created.Equal(fl.CreationTimestamp.Time) {
		t.Errorf("the federated learning job: %+v, want Succeeded, created %s, waiting for nothing", j, fl.CreationTimestamp)
	}
	if len(snap.Notes) != 0 {
		t.Errorf("notes %q, want none: the local run's user may read everything", snap.Notes)
	}
	out, err := kn.run(t, "status", "-n", "demo")
	if err != nil {
		t.Fatal(err)
	}
	if first, _, _ := strings.Cut(out, "\n"); !regexp.MustCompile(`^Edge nodes: \d+/\d+ connected$`).MatchString(first) || !sameCounts(first) {
		t.Errorf("the fleet's line is %q, want every node connected", first)
	}
	if !regexp.MustCompile(`(?m)^demo\s+FederatedLearningJob\s+surface-defect-detection\s+Succeeded\s`).MatchString(out) {
		t.Errorf("no row of the federated learning job, Succeeded, in\n%s", out)
	}
	row := fmt.Sprintf(`(?m)^demo\s+IncrementalLearningJob\s+helmet-detection-demo\s+%s %s\s+round %d \(deployed %d\)\s`,
		il.Status.Stage, il.Status.State, il.Status.Round, il.Status.DeployedRound)
	if !regexp.MustCompile(row).MatchString(out) {
		t.Errorf("no row of the incremental learning job at %s %s, round %d, in\n%s", il.Status.Stage, il.Status.State, il.Status.Round, out)
	}
}

// sameCounts says whether "Edge nodes: N/M connected" has N == M.
func sameCounts(line string) bool {
	m := regexp.MustCompile(`(\d+)/(\d+)`).FindStringSubmatch(line)
	return m != nil && m[1] == m[2]
}

// checkNodes: a node's workers of the two demo jobs are those jobs' pods
// on it that have not ended, as the API server lists them by their owner's
// UID (other tests' jobs on the same local run may still be coming and
// going), the ended ones are counted, and each node with one lists the job.
func checkNodes(t *testing.T, kn kubectlNereid, jobs ...metav1.Object) {
	var snap view.Snapshot
	kn.json(t, &snap, "nodes", "-A")
	want := map[string][]string{}     // node: workers of jobs
	wantJobs := map[string][]string{} // node: jobs
	ended := map[string]int{}         // node: ended pods of jobs
	for _, j := range jobs {
		pods, err := framework.KubeClient(t).CoreV1().Pods(j.GetNamespace()).List(t.Context(), metav1.ListOptions{
			LabelSelector: common.OwnerSelector(j).String()})
		if err != nil {
			t.Fatal(err)
		}
		kind := "FederatedLearningJob"
		if _, ok := j.(*sednav1.IncrementalLearningJob); ok {
			kind = "IncrementalLearningJob"
		}
		for _, p := range pods.Items {
			if common.PodFinished(&p) {
				ended[p.Spec.NodeName]++
			} else {
				want[p.Spec.NodeName] = append(want[p.Spec.NodeName], p.Namespace+"/"+p.Name)
			}
			if ref := view.JobRef(kind, j.GetNamespace(), j.GetName()); !slices.Contains(wantJobs[p.Spec.NodeName], ref) {
				wantJobs[p.Spec.NodeName] = append(wantJobs[p.Spec.NodeName], ref)
			}
		}
	}
	for _, n := range snap.Nodes {
		var got, gotJobs []string
		for _, w := range n.Workers {
			if strings.HasPrefix(w, "demo/surface-defect-detection-") || strings.HasPrefix(w, "demo/helmet-detection-demo-") {
				got = append(got, w)
			}
		}
		for _, j := range n.Jobs {
			if strings.HasSuffix(j, "/demo/surface-defect-detection") || strings.HasSuffix(j, "/demo/helmet-detection-demo") {
				gotJobs = append(gotJobs, j)
			}
		}
		slices.Sort(want[n.Name])
		slices.Sort(wantJobs[n.Name])
		if diff := cmp.Diff(want[n.Name], got); diff != "" {
			t.Errorf("node %s's workers of the demo jobs (-want,+got):\n%s", n.Name, diff)
		}
		if n.Ended < ended[n.Name] {
			t.Errorf("node %s counts %d ended workers, fewer than the demo jobs' %d", n.Name, n.Ended, ended[n.Name])
		}
		if diff := cmp.Diff(wantJobs[n.Name], gotJobs); diff != "" {
			t.Errorf("node %s's demo jobs (-want,+got):\n%s", n.Name, diff)
		}
	}
	out, err := kn.run(t, "nodes", "-A")
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"edge-0", "edge-1"} {
		if !regexp.MustCompile(`(?m)^` + name + `\s+connected\s+\d+\w*\s+\d+%\s+\d+\s+\d+\s`).MatchString(out) {
			t.Errorf("no row of %s connected, heard from, with its outbox, in\n%s", name, out)
		}
	}
}

// checkFederatedRounds: a point per edge node, as status.edgeNodes says.
func checkFederatedRounds(t *testing.T, kn kubectlNereid, fl *sednav1.FederatedLearningJob) {
	var r view.Rounds
	kn.json(t, &r, "rounds", "fl/surface-defect-detection", "-n", "demo")
	type point struct {
		Node         string
		Round        int32
		Stage, State string
		Heard        string
	}
	var want, got []point
	for _, e := range fl.Status.EdgeNodes {
		want = append(want, point{e.Name, e.Round, e.Stage, e.State, e.LastHeardTime.UTC().String()})
	}
	slices.SortFunc(want, func(a, b point) int { return strings.Compare(a.Node, b.Node) })
	for _, p := range r.Points {
		got = append(got, point{p.Node, p.Round, p.Stage, p.State, p.Time.UTC().String()})
	}
	if diff := cmp.Diff(want, got); diff != "" || len(got) != 2 {
		t.Errorf("points (-want,+got):\n%s", diff)
	}
	for _, e := range fl.Status.EdgeNodes {
		i := slices.IndexFunc(r.Points, func(p view.Point) bool { return p.Node == e.Name })
		if i < 0 {
			continue // reported above
		}
		if v, ok := r.Points[i].Metrics["loss"]; !ok || !slices.Contains(metricValues(e.Metrics, "loss"), v) {
			t.Errorf("node %s: metrics %v, want the status's loss in %v", e.Name, r.Points[i].Metrics, e.Metrics)
		}
	}
	out, err := kn.run(t, "rounds", "fl", "surface-defect-detection", "--namespace=demo")
	if err != nil {
		t.Fatal(err)
	}
	golden.Check(t, "rounds-fl", maskColumn(out, "TIME"))
}

// metricValues are the numbers metrics hold under key.
func metricValues(metrics []sednav1.Metric, key string) []float64 {
	var out []float64
	for _, m := range metrics {
		var f float64
		if m.Key == key && json.Unmarshal([]byte(m.Value), &f) == nil {
			out = append(out, f)
		}
	}
	return out
}

// checkIncrementalRounds: a point per round of the history and one for
// the current round, on the dataset's node.
func checkIncrementalRounds(t *testing.T, kn kubectlNereid, sedna sednaclient.Interface, il *sednav1.IncrementalLearningJob) {
	ds, err := sedna.SednaV1alpha1().Datasets("demo").Get(t.Context(), il.Spec.Dataset.Name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var r view.Rounds
	kn.json(t, &r, "rounds", "il/helmet-detection-demo", "-n", "demo")
	if len(il.Status.History) == 0 || len(r.Points) != len(il.Status.History)+1 {
		t.Fatalf("points %+v, want one per round of the history %+v and the current round", r.Points, il.Status.History)
	}
	for i, h := range il.Status.History {
		p := r.Points[i]
		if p.Node != ds.Spec.NodeName || p.Round != h.Round || p.State != h.Result {
			t.Errorf("point %d: %+v, want round %d %s on %s", i, p, h.Round, h.Result, ds.Spec.NodeName)
		}
		for _, m := range h.Models[0].Metrics {
			var f float64
			if json.Unmarshal([]byte(m.Value), &f) == nil && p.Metrics[m.Key] != f {
				t.Errorf("point %d: %s is %v, want the status's %v", i, m.Key, p.Metrics[m.Key], f)
			}
		}
	}
	if last := r.Points[len(r.Points)-1]; last.Round != il.Status.Round || last.Stage != string(il.Status.Stage) || last.State != string(il.Status.State) {
		t.Errorf("the current round's point %+v, want round %d %s %s", last, il.Status.Round, il.Status.Stage, il.Status.State)
	}
	out, err := kn.run(t, "rounds", "il/helmet-detection-demo", "-n", "demo")
	if err != nil {
		t.Fatal(err)
	}
	golden.Check(t, "rounds-il", maskColumn(out, "TIME"))
}

// maskColumn replaces a table's column (by header) with "<masked>", and
// the runs of spaces between cells, which depend on the widths of what was
// masked, with one space each.
func maskColumn(table, header string) string {
	lines := strings.Split(strings.TrimRight(table, "\n"), "\n")
	col := -1
	for i, line := range lines {
		f := strings.Fields(line)
		if j := slices.Index(f, header); j >= 0 {
			col = j
		} else if col >= 0 && col < len(f) {
			f[col] = "<masked>"
		}
		lines[i] = strings.Join(f, " ")
	}
	return strings.Join(lines, "\n") + "\n"
}

// checkRestrictedUser: a user who may list only the demo namespace's
// federated learning jobs, Datasets and pods sees those, and notes for the
// rest (as the API server refuses it), instead of an error.
func checkRestrictedUser(t *testing.T, kn kubectlNereid) {
	kube := framework.KubeClient(t)
	const name = "plugin-reader"
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: "demo", Name: name}}
	role := &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Namespace: "demo", Name: name}, Rules: []rbacv1.PolicyRule{
		{APIGroups: []string{"sedna.io"}, Resources: []string{"federatedlearningjobs", "datasets"}, Verbs: []string{"get", "list"}},
		{APIGroups: []string{""}, Resources: []string{"pods"}, Verbs: []string{"list"}},
	}}
	binding := &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Namespace: "demo", Name: name},
		RoleRef:  rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "Role", Name: name},
		Subjects: []rbacv1.Subject{{Kind: "ServiceAccount", Namespace: "demo", Name: name}}}
	ctx := t.Context()
	if _, err := kube.CoreV1().ServiceAccounts("demo").Create(ctx, sa, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	if _, err := kube.RbacV1().Roles("demo").Create(ctx, role, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	if _, err := kube.RbacV1().RoleBindings("demo").Create(ctx, binding, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx := context.Background()
		_ = kube.RbacV1().RoleBindings("demo").Delete(ctx, name, metav1.DeleteOptions{})
		_ = kube.RbacV1().Roles("demo").Delete(ctx, name, metav1.DeleteOptions{})
		_ = kube.CoreV1().ServiceAccounts("demo").Delete(ctx, name, metav1.DeleteOptions{})
	})
	tr, err := kube.CoreV1().ServiceAccounts("demo").CreateToken(ctx, name, &authenticationv1.TokenRequest{}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	path, err := framework.WriteTokenKubeconfig(name, tr.Status.Token)
	if err != nil {
		t.Fatal(err)
	}
	reader := kn
	reader.kubeconfig = path
	var snap view.Snapshot
	reader.json(t, &snap, "status", "-n", "demo")
	for _, want := range []string{
		"You may not list dijobs.diengine.opendilab.org in namespace demo",
		"You may not list incrementallearningjobs.sedna.io in namespace demo",
		"You may not list jointinferenceservices.sedna.io in namespace demo",
		"You may not list lifelonglearningjobs.sedna.io in namespace demo",
		"You may not list nodes",
		"You may not list leases in namespace " + view.LeaseNamespace,
	} {
		if !slices.ContainsFunc(snap.Notes, func(n string) bool { return strings.HasPrefix(n, want) }) {
			t.Errorf("no note %q in %q", want, snap.Notes)
		}
	}
	if len(snap.Jobs) == 0 || slices.ContainsFunc(snap.Jobs, func(j view.Job) bool { return j.Kind != "FederatedLearningJob" }) {
		t.Errorf("jobs %+v, want the namespace's federated learning jobs only", snap.Jobs)
	}
	// The nodes are those of the workers, ended or not, with no link known.
	for _, n := range snap.Nodes {
		if n.Link != view.LinkUnknown || n.Ready != "" || len(n.Workers)+n.Ended == 0 {
			t.Errorf("node %+v, want one of a worker's, its link and readiness unknown", n)
		}
	}
	out, err := reader.run(t, "status", "-n", "demo")
	if err != nil || !strings.Contains(out, "\nNotes:\n") || !strings.Contains(out, "\n  You may not list nodes.\n") {
		t.Errorf("status as the user: %v, want the notes after the table in\n%s", err, out)
	}
	if _, err := reader.run(t, "rounds", "fl/surface-defect-detection", "-n", "demo"); err != nil {
		t.Errorf("rounds of a job the user may read: %v", err)
	}
}
