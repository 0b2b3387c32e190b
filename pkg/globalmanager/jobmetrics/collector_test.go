package jobmetrics_test

import (
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	div2 "github.com/nereid-ml/nereid/pkg/apis/diengine/v2alpha1"
	sednav1 "github.com/nereid-ml/nereid/pkg/apis/sedna/v1alpha1"
	"github.com/nereid-ml/nereid/pkg/client/clientset/versioned/fake"
	nereidinformers "github.com/nereid-ml/nereid/pkg/client/informers/externalversions"
	"github.com/nereid-ml/nereid/pkg/globalmanager/jobmetrics"
	"github.com/nereid-ml/nereid/pkg/globalmanager/kinds"
	_ "github.com/nereid-ml/nereid/pkg/globalmanager/kinds/all"
)

// collector is the Collector of every kind of the table, each kind's
// informer's indexer seeded with the objects of objs of its type.
func collector(t *testing.T, maxJobs int, objs ...metav1.Object) *jobmetrics.Collector {
	t.Helper()
	factory := nereidinformers.NewSharedInformerFactory(fake.NewSimpleClientset(), 0)
	table := kinds.All()
	for _, obj := range objs {
		added := false
		for _, k := range table {
			if reflect.TypeOf(obj).Elem().Name() == k.GVK.Kind {
				if err := k.Informer(factory).GetIndexer().Add(obj); err != nil {
					t.Fatal(err)
				}
				added = true
			}
		}
		if !added {
			t.Fatalf("no kind of the table holds a %T", obj)
		}
	}
	return jobmetrics.New(jobmetrics.Sources(table, func(k *kinds.Kind) func() []any {
		return k.Informer(factory).GetStore().List
	}), maxJobs)
}

func meta(name string) metav1.ObjectMeta { return metav1.ObjectMeta{Namespace: "ns", Name: name} }

func metrics(kv ...string) []sednav1.Metric {
	var out []sednav1.Metric
	for i := 0; i < len(kv); i += 2 {
		out = append(out, sednav1.Metric{Key: kv[i], Value: kv[i+1]})
	}
	return out
}

const help = `
# HELP nereid_job_metric The latest value of each numeric metric the job's status records (an evaluated round's model metrics, a service's summed inference counts, a federated job's last reporting node's values), at most 16 per job, the first by name.
# TYPE nereid_job_metric gauge
# HELP nereid_job_metrics_omitted_jobs Jobs whose nereid_job_* gauges this scrape left out: those past --metrics-max-jobs, the last by kind, namespace and name.
# TYPE nereid_job_metrics_omitted_jobs gauge
# HELP nereid_job_phase 1 for the job's current status.phase (federated learning jobs, DIJobs).
# TYPE nereid_job_phase gauge
# HELP nereid_job_round A learning cycle's current round, counted from 1 (0: not started), or a federated learning job's (its fastest node's).
# TYPE nereid_job_round gauge
# HELP nereid_job_stage 1 for a learning cycle's current stage and that stage's state (incremental and lifelong learning jobs).
# TYPE nereid_job_stage gauge
`

// Each kind's gauges say what its status records: a phase, a cycle's stage
// and round, the latest metric values; nothing per node, and nothing for
// what is no job.
func TestJobGaugesSayWhatEachKindsStatusRecords(t *testing.T) {
	early, late := metav1.NewTime(time.Unix(1000, 0)), metav1.NewTime(time.Unix(2000, 0))
	cases := map[string]struct {
		obj  metav1.Object
		want string
	}{
		"federated learning job: phase, round, and the metrics of the node heard from last": {
			obj: &sednav1.FederatedLearningJob{ObjectMeta: meta("fl"), Status: sednav1.FederatedLearningJobStatus{
				Phase: sednav1.FLJobRunning, Round: 7, SlowestRound: 6,
				EdgeNodes: []sednav1.EdgeNodeStatus{
					{Name: "edge-1", LastHeardTime: late, Metrics: metrics("round", "7", "loss", "0.25")},
					{Name: "edge-2", LastHeardTime: early, Metrics: metrics("round", "6", "loss", "0.5")},
				},
			}},
			want: `
nereid_job_metric{kind="FederatedLearningJob",metric="loss",name="fl",namespace="ns"} 0.25
nereid_job_metric{kind="FederatedLearningJob",metric="round",name="fl",namespace="ns"} 7
nereid_job_phase{kind="FederatedLearningJob",name="fl",namespace="ns",phase="Running"} 1
nereid_job_round{kind="FederatedLearningJob",name="fl",namespace="ns"} 7
`,
		},
		"incremental learning job: stage, state, round, and the last evaluated round's model": {
			obj: &sednav1.IncrementalLearningJob{ObjectMeta: meta("il"), Status: sednav1.IncrementalLearningJobStatus{
				CycleStatus: sednav1.CycleStatus{
					Stage: sednav1.StageTrain, State: sednav1.StageRunning, Round: 3,
					CurrentRound: &sednav1.RoundStatus{Round: 3, Models: []sednav1.RoundModel{{URL: "/m/3"}}},
					History: []sednav1.RoundStatus{
						{Round: 1, Models: []sednav1.RoundModel{{URL: "/m/1", Metrics: metrics("precision", "0.5")}}},
						{Round: 2, Models: []sednav1.RoundModel{{URL: "/m/2", Metrics: metrics("precision", "0.75", "recall", "[0.1, 0.2]")}}},
					},
				},
			}},
			want: `
nereid_job_metric{kind="IncrementalLearningJob",metric="precision",name="il",namespace="ns"} 0.75
nereid_job_round{kind="IncrementalLearningJob",name="il",namespace="ns"} 3
nereid_job_stage{kind="IncrementalLearningJob",name="il",namespace="ns",stage="Train",state="Running"} 1
`,
		},
		"lifelong learning job not started: round 0": {
			obj: &sednav1.LifelongLearningJob{ObjectMeta: meta("ll")},
			want: `
nereid_job_round{kind="LifelongLearningJob",name="ll",namespace="ns"} 0
`,
		},
		"joint inference service: the summed counts": {
			obj: &sednav1.JointInferenceService{ObjectMeta: meta("ji"), Status: sednav1.JointInferenceServiceStatus{
				Metrics: metrics("inferenceNumber", "100", "hardExampleNumber", "5", "uploadCloudRatio", "0.0500"),
			}},
			want: `
nereid_job_metric{kind="JointInferenceService",metric="hardExampleNumber",name="ji",namespace="ns"} 5
nereid_job_metric{kind="JointInferenceService",metric="inferenceNumber",name="ji",namespace="ns"} 100
nereid_job_metric{kind="JointInferenceService",metric="uploadCloudRatio",name="ji",namespace="ns"} 0.05
`,
		},
		"DIJob: phase": {
			obj: &div2.DIJob{ObjectMeta: meta("di"), Status: div2.DIJobStatus{Phase: div2.JobRestarting}},
			want: `
nereid_job_phase{kind="DIJob",name="di",namespace="ns",phase="Restarting"} 1
`,
		},
		"a phase that is no valid label value is left out, not a panic": {
			obj: &sednav1.FederatedLearningJob{ObjectMeta: meta("fl"), Status: sednav1.FederatedLearningJobStatus{Phase: "\xff"}},
			want: `
nereid_job_round{kind="FederatedLearningJob",name="fl",namespace="ns"} 0
`,
		},
		"a Model is no job": {
			obj: &sednav1.Model{ObjectMeta: meta("m"), Status: sednav1.ModelStatus{Metrics: metrics("precision", "0.9")}},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			want := help + tc.want + "nereid_job_metrics_omitted_jobs 0\n"
			if err := testutil.CollectAndCompare(collector(t, 10, tc.obj), strings.NewReader(want)); err != nil {
				t.Error(err)
			}
		})
	}
}

// A job exports at most MaxMetricsPerJob numbers, the first by name, each
// under a name of at most MaxMetricNameBytes that the status did not cut.
func TestJobMetricsAreBoundedAndOnlyNumbersUnderValidNames(t *testing.T) {
	var kv []string
	for i := range 20 {
		kv = append(kv, fmt.Sprintf("m%02d", i), fmt.Sprint(i))
	}
	kv = append(kv,
		"a-list", "[1,2]",
		"a"+strings.Repeat("x", jobmetrics.MaxMetricNameBytes), "1",
		"a-cut"+sednav1.TruncatedSuffix, "1",
		sednav1.DroppedMetricsKey, "3",
		"\xff", "1",
	)
	ji := &sednav1.JointInferenceService{ObjectMeta: meta("ji"), Status: sednav1.JointInferenceServiceStatus{Metrics: metrics(kv...)}}
	c := collector(t, 10, ji)
	var want strings.Builder
	for i := range jobmetrics.MaxMetricsPerJob {
		fmt.Fprintf(&want, "nereid_job_metric{kind=\"JointInferenceService\",metric=\"m%02d\",name=\"ji\",namespace=\"ns\"} %d\n", i, i)
	}
	if err := testutil.CollectAndCompare(c, strings.NewReader(help+want.String()), "nereid_job_metric"); err != nil {
		t.Error(err)
	}
	if problems, err := testutil.CollectAndLint(c); err != nil || len(problems) > 0 {
		t.Errorf("lint: %v, %v", problems, err)
	}
}

// Past --metrics-max-jobs, the last jobs by kind, namespace and name are
// left out, and a gauge says how many.
func TestJobsPastTheLimitAreCountedNotExported(t *testing.T) {
	var objs []metav1.Object
	for _, name := range []string{"d", "b", "a", "c"} {
		objs = append(objs, &div2.DIJob{ObjectMeta: meta(name), Status: div2.DIJobStatus{Phase: div2.JobRunning}})
	}
	objs = append(objs, &sednav1.FederatedLearningJob{ObjectMeta: meta("a"), Status: sednav1.FederatedLearningJobStatus{Phase: sednav1.FLJobPending}})
	want := help + `
nereid_job_metrics_omitted_jobs 2
nereid_job_phase{kind="DIJob",name="a",namespace="ns",phase="Running"} 1
nereid_job_phase{kind="DIJob",name="b",namespace="ns",phase="Running"} 1
nereid_job_phase{kind="DIJob",name="c",namespace="ns",phase="Running"} 1
`
	if err := testutil.CollectAndCompare(collector(t, 3, objs...), strings.NewReader(want)); err != nil {
		t.Error(err)
	}
}
