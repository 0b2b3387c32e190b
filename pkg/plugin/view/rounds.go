package view

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"

	sednav1 "github.com/nereid-ml/nereid/pkg/apis/sedna/v1alpha1"
	"github.com/nereid-ml/nereid/pkg/globalmanager/controllers/common"
	"github.com/nereid-ml/nereid/pkg/globalmanager/controllers/learningcycle"
	"github.com/nereid-ml/nereid/pkg/globalmanager/kinds"
	"github.com/nereid-ml/nereid/pkg/plugin/cli"
)

// roundReaders read the rounds of the kinds that have rounds.
var roundReaders = map[schema.GroupKind]func(ctx context.Context, c *cli.Clients, namespace, name string) (string, []Point, error){
	sednav1.FederatedLearningJobKind.GroupKind():   federatedRounds,
	sednav1.IncrementalLearningJobKind.GroupKind(): incrementalRounds,
	sednav1.LifelongLearningJobKind.GroupKind():    lifelongRounds,
}

// ReadRounds reads the rounds of one job: kind is any name kubectl takes
// for it (fl, federatedlearningjob, federatedlearningjobs.sedna.io, il,
// ll...).
//
// A federated learning job has a point per edge node, from its
// status.edgeNodes: the node's last report (round, stage, state), when it
// was applied (lastHeardTime), and the report's numeric metrics (the round
// itself, reported as currentRound or round, is Round, and totalRounds the job's length: neither is a metric; a
// metric holding a JSON list gives its numbers as "<metric>[<i>]", one
// holding a JSON object its numeric fields as "<metric>.<field>"). A
// learning cycle has a point per round of its status.history, and one for
// the current round: node the one its stage ran on (a finished round's
// eval pod's, else its train pod's; the current stage's pod's, the
// inference worker's for deploy; the dataset's node once those pods are
// gone or the user may not list pods), stage and state the cycle's
// for the current round (the result for a finished one: Deployed,
// NotDeployed, Failed), time its completion (the current round's last
// transition), metrics the numeric evaluation metrics of its models,
// "<i>:<metric>" when the round has several models (i counted from 0 in
// the round's order, MODEL_URLS').
func ReadRounds(ctx context.Context, c *cli.Clients, kind, namespace, name string) (*Rounds, error) {
	k, err := ResolveKind(ctx, c, kind)
	if err != nil {
		return nil, err
	}
	read := roundReaders[k.GVK.GroupKind()]
	if read == nil {
		return nil, fmt.Errorf("a %s has no rounds: want a %s", k.GVK.Kind, strings.Join(kindsWithRounds(), ", "))
	}
	if namespace == "" {
		return nil, errors.New("no namespace: rounds reads one job, in one namespace")
	}
	gotKind, points, err := read(ctx, c, namespace, name)
	if apierrors.IsNotFound(err) {
		return nil, fmt.Errorf("no %s %s/%s: not found", strings.ToLower(k.GVK.Kind), namespace, name)
	} else if err != nil {
		return nil, fmt.Errorf("reading %s %s/%s: %w", strings.ToLower(k.GVK.Kind), namespace, name, err)
	}
	r := &Rounds{Kind: gotKind, Namespace: namespace, Name: name, Points: points, Metrics: []string{}}
	for _, p := range points {
		for m := range p.Metrics {
			r.Metrics = append(r.Metrics, m)
		}
	}
	slices.Sort(r.Metrics)
	r.Metrics = slices.Compact(r.Metrics)
	if r.Points == nil {
		r.Points = []Point{}
	}
	return r, nil
}

// HasRounds says whether jobs of kind (a Kind such as
// FederatedLearningJob) have rounds ReadRounds reads.
func HasRounds(kind string) bool {
	for gk := range roundReaders {
		if gk.Kind == kind {
			return true
		}
	}
	return false
}

func kindsWithRounds() []string {
	var out []string
	for gk := range roundReaders {
		out = append(out, strings.ToLower(gk.Kind))
	}
	slices.Sort(out)
	return out
}

// ResolveKind finds the job kind of the GlobalManager's table (a kind with
// a Progress) that name names as kubectl would: its kind or resource,
// alone or with its group, in any case, or a short name the API server
// gives it (fl, il, ll, ji, dijob).
func ResolveKind(ctx context.Context, c *cli.Clients, name string) (*kinds.Kind, error) {
	want := strings.ToLower(name)
	var table []*kinds.Kind
	for _, k := range kinds.All() {
		if k.Progress == nil {
			continue
		}
		table = append(table, k)
		for _, n := range []string{strings.ToLower(k.GVK.Kind), k.Resource} {
			if want == n || want == n+"."+k.GVK.Group {
				return k, nil
			}
		}
	}
	// The short names are the CRDs', as discovery serves them.
	var known []string
	served := map[schema.GroupVersion][]metav1.APIResource{}
	for _, k := range table {
		gv := k.GVK.GroupVersion()
		if _, ok := served[gv]; !ok {
			served[gv] = nil
			if l, err := c.Kube.Discovery().ServerResourcesForGroupVersion(gv.String()); err == nil {
				served[gv] = l.APIResources
			}
		}
		names := strings.ToLower(k.GVK.Kind)
		for _, r := range served[gv] {
			if r.Name != k.Resource {
				continue
			}
			if slices.Contains(r.ShortNames, want) {
				return k, nil
			}
			if len(r.ShortNames) > 0 {
				names += " (" + strings.Join(r.ShortNames, ", ") + ")"
			}
		}
		known = append(known, names)
	}
	return nil, fmt.Errorf("unknown kind %q: want one of %s", name, strings.Join(known, ", "))
}

func federatedRounds(ctx context.Context, c *cli.Clients, ns, name string) (string, []Point, error) {
	j, err := c.Nereid.SednaV1alpha1().FederatedLearningJobs(ns).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return "", nil, err
	}
	return sednav1.FederatedLearningJobKind.Kind, edgePoints(j.Status.EdgeNodes), nil
}

// edgePoints is a point per edge node's last report, by node.
func edgePoints(nodes []sednav1.EdgeNodeStatus) []Point {
	out := []Point{}
	for _, e := range nodes {
		p := Point{Node: e.Name, Round: e.Round, Stage: e.Stage, State: e.State, Time: timeOf(e.LastHeardTime),
			Metrics: numeric(e.Metrics, "", "currentRound", "round", "totalRounds")}
		out = append(out, p)
	}
	slices.SortFunc(out, func(a, b Point) int { return strings.Compare(a.Node, b.Node) })
	return out
}

func incrementalRounds(ctx context.Context, c *cli.Clients, ns, name string) (string, []Point, error) {
	j, err := c.Nereid.SednaV1alpha1().IncrementalLearningJobs(ns).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return "", nil, err
	}
	nodes := readRoundNodes(ctx, c, j, datasetNode(ctx, c, ns, j.Spec.Dataset.Name, j.Status.EdgeNodes), j.Status.InferenceWorker)
	return sednav1.IncrementalLearningJobKind.Kind, cyclePoints(&j.Status.CycleStatus, j.Status.Conditions, nodes), nil
}

func lifelongRounds(ctx context.Context, c *cli.Clients, ns, name string) (string, []Point, error) {
	j, err := c.Nereid.SednaV1alpha1().LifelongLearningJobs(ns).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return "", nil, err
	}
	nodes := readRoundNodes(ctx, c, j, datasetNode(ctx, c, ns, j.Spec.Dataset.Name, j.Status.EdgeNodes), j.Status.InferenceWorker)
	return sednav1.LifelongLearningJobKind.Kind, cyclePoints(&j.Status.CycleStatus, j.Status.Conditions, nodes), nil
}

// datasetNode is the node of a learning cycle's dataset (spec.nodeName);
// when the Dataset cannot be read, the node its status last heard from.
func datasetNode(ctx context.Context, c *cli.Clients, ns, dataset string, heard []sednav1.EdgeNodeStatus) string {
	d, err := c.Nereid.SednaV1alpha1().Datasets(ns).Get(ctx, dataset, metav1.GetOptions{})
	if err == nil {
		return d.Spec.NodeName
	}
	if len(heard) > 0 {
		return heard[0].Name
	}
	return ""
}

// roundNodes say where a learning cycle's rounds ran: the nodes of the
// stage pods that remain (a cycle keeps the current rounds' and deletes
// those of rounds long over), by round and role, the inference worker's,
// and the dataset's node for a round whose pods are gone.
type roundNodes struct {
	dataset, inference string
	byRound            map[int32]map[string]string
}

// readRoundNodes reads where job's stage pods ran. When the user may not
// list pods, every round is on the dataset's node.
func readRoundNodes(ctx context.Context, c *cli.Clients, job metav1.Object, dataset, inferenceWorker string) roundNodes {
	rn := roundNodes{dataset: dataset, byRound: map[int32]map[string]string{}}
	sel := common.LabelOwnerUID + "=" + string(job.GetUID())
	l, err := c.Kube.CoreV1().Pods(job.GetNamespace()).List(ctx, metav1.ListOptions{LabelSelector: sel})
	if err != nil {
		return rn
	}
	for _, p := range l.Items {
		if p.Spec.NodeName == "" {
			continue
		}
		if p.Name == inferenceWorker {
			rn.inference = p.Spec.NodeName
		}
		round, err := strconv.ParseInt(p.Labels[learningcycle.LabelRound], 10, 32)
		if err != nil {
			continue
		}
		if rn.byRound[int32(round)] == nil {
			rn.byRound[int32(round)] = map[string]string{}
		}
		rn.byRound[int32(round)][p.Labels[common.LabelWorkerRole]] = p.Spec.NodeName
	}
	return rn
}

// of is the node of round's stage: of a finished round (stage ""), its
// eval pod's, whose metrics the round's are, else its train pod's; of the
// deploy stage, the inference worker's; else the stage's pod's; the
// dataset's when that pod is gone.
func (rn roundNodes) of(round int32, stage sednav1.Stage) string {
	pods := rn.byRound[round]
	var node string
	switch stage {
	case "":
		node = cmp.Or(pods[string(learningcycle.RoleEval)], pods[string(learningcycle.RoleTrain)])
	case sednav1.StageTrain:
		node = pods[string(learningcycle.RoleTrain)]
	case sednav1.StageEval:
		node = pods[string(learningcycle.RoleEval)]
	case sednav1.StageDeploy:
		node = rn.inference
	}
	return cmp.Or(node, rn.dataset)
}

// cyclePoints is a point per round of the history, then the current
// round's unless the history ends with it (a failed job), each on the
// node its stage ran on (roundNodes.of).
func cyclePoints(st *sednav1.CycleStatus, transitions []sednav1.StageCondition, nodes roundNodes) []Point {
	out := []Point{}
	for i := range st.History {
		r := &st.History[i]
		p := Point{Node: nodes.of(r.Round, ""), Round: r.Round, State: r.Result, Metrics: modelMetrics(r.Models)}
		if r.Result == sednav1.RoundFailed {
			p.Message = r.Message
		}
		if r.CompletionTime != nil {
			p.Time = timeOf(*r.CompletionTime)
		}
		out = append(out, p)
	}
	if st.Round == 0 || slices.ContainsFunc(st.History, func(r sednav1.RoundStatus) bool { return r.Round == st.Round }) {
		return out
	}
	p := Point{Node: nodes.of(st.Round, st.Stage), Round: st.Round, Stage: string(st.Stage), State: string(st.State)}
	if st.CurrentRound != nil {
		p.Metrics = modelMetrics(st.CurrentRound.Models)
		if st.CurrentRound.StartTime != nil {
			p.Time = timeOf(*st.CurrentRound.StartTime)
		}
	}
	if n := len(transitions); n > 0 {
		p.Time = timeOf(transitions[n-1].LastTransitionTime)
	}
	return append(out, p)
}

// modelMetrics are the numeric metrics of a round's models, "<i>:<metric>"
// when there are several.
func modelMetrics(models []sednav1.RoundModel) map[string]float64 {
	var out map[string]float64
	for i, m := range models {
		prefix := ""
		if len(models) > 1 {
			prefix = strconv.Itoa(i) + ":"
		}
		for k, v := range numeric(m.Metrics, prefix) {
			if out == nil {
				out = map[string]float64{}
			}
			out[k] = v
		}
	}
	return out
}

// numeric are the metrics that hold a number, keys prefixed; of those
// that hold a JSON list, each number as "<key>[<i>]" (Sedna's eval
// workers report precision_delta so, a value per class); of those that
// hold a JSON object, each number or list of numbers of its fields as
// "<key>.<field>" (a worker's results nest their metrics so: {"metrics":
// {"accuracy": 0.9}}). It leaves out those named in except, the count of
// metrics a status dropped, keys the status cut, and NaN and infinities
// (JSON has no such numbers); nil when none.
func numeric(metrics []sednav1.Metric, prefix string, except ...string) map[string]float64 {
	out := map[string]float64{}
	for _, m := range metrics {
		if slices.Contains(except, m.Key) || m.Key == sednav1.DroppedMetricsKey || strings.HasSuffix(m.Key, sednav1.TruncatedSuffix) {
			continue
		}
		if f, ok := number(m.Value); ok {
			out[prefix+m.Key] = f
			continue
		}
		if numbers(prefix+m.Key, json.RawMessage(m.Value), out) {
			continue
		}
		var fields map[string]json.RawMessage
		if json.Unmarshal([]byte(m.Value), &fields) != nil {
			continue
		}
		for k, v := range fields {
			if f, ok := number(string(v)); ok {
				out[prefix+m.Key+"."+k] = f
			} else {
				numbers(prefix+m.Key+"."+k, v, out)
			}
		}
	}
	if len(out) == 0 {
		return nil
	}
	return out
}

// numbers puts into out, as "<key>[<i>]", the numbers of raw when it is a
// JSON list, and says whether it was.
func numbers(key string, raw json.RawMessage, out map[string]float64) bool {
	var list []json.RawMessage
	if json.Unmarshal(raw, &list) != nil {
		return false
	}
	for i, v := range list {
		if f, ok := number(string(v)); ok {
			out[key+"["+strconv.Itoa(i)+"]"] = f
		}
	}
	return true
}

// number is the finite number s holds, if it holds one.
func number(s string) (float64, bool) {
	f, err := strconv.ParseFloat(strings.TrimSpace(s), 64)
	return f, err == nil && !math.IsNaN(f) && !math.IsInf(f, 0)
}
