package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	sednav1 "github.com/nereid-ml/nereid/pkg/apis/sedna/v1alpha1"
	sednaclient "github.com/nereid-ml/nereid/pkg/client/clientset/versioned"
	"github.com/nereid-ml/nereid/pkg/edgeproto"
	"github.com/nereid-ml/nereid/pkg/globalmanager/controllers/common"
	"github.com/nereid-ml/nereid/test/framework"
)

// The sustained scenario: joint inference edge workers that each report
// every period, as Sedna's do (every 30s), in rising steps of N workers,
// until the reports fall behind. S JointInferenceServices each have their
// edge worker on one of the first S nodes; the N workers are N/S pods of each
// service on its node. The bench makes these pods itself, controlled by the
// service (the hub accepts a report only from a pod of the service on the
// reporting node), since the local controller-manager would take minutes to
// make tens of thousands through Deployments; kwok runs them.

type sustainedOptions struct {
	services int
	steps    string
	period   time.Duration
	hold     time.Duration
}

func (o *sustainedOptions) addFlags(fs *flag.FlagSet) {
	fs.IntVar(&o.services, "ji-services", 100, "JointInferenceServices of the sustained scenario, one on each of the first nodes (at most -edge-nodes); 0 skips the scenario.")
	fs.StringVar(&o.steps, "ji-workers", "5000,10000,20000,30000", "Rising counts of joint inference edge workers, comma-separated; the scenario stops at the first that falls behind.")
	fs.DurationVar(&o.period, "ji-period", 30*time.Second, "How often each joint inference worker reports.")
	fs.DurationVar(&o.hold, "ji-hold", time.Minute, "How long each step is measured, after one period to reach its pace.")
}

func (o sustainedOptions) parse(nodes int) ([]int, error) {
	if o.services == 0 {
		return nil, nil
	}
	var errs []error
	if o.services < 0 || o.services > nodes {
		errs = append(errs, errors.New("-ji-services must be between 0 and -edge-nodes"))
	}
	if o.period < time.Second || o.hold < o.period {
		errs = append(errs, errors.New("-ji-period must be at least 1s and -ji-hold at least -ji-period"))
	}
	var steps []int
	for _, f := range strings.Split(o.steps, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		switch {
		case err != nil || n < 1:
			errs = append(errs, fmt.Errorf("-ji-workers: %q is not a positive count", f))
		case len(steps) > 0 && n <= steps[len(steps)-1]:
			errs = append(errs, fmt.Errorf("-ji-workers must rise: %d after %d", n, steps[len(steps)-1]))
		case o.services > 0 && n/o.services > edgeproto.MaxWorkers:
			errs = append(errs, fmt.Errorf("-ji-workers: %d workers over %d services is more than %d on one node", n, o.services, edgeproto.MaxWorkers))
		default:
			steps = append(steps, n)
		}
	}
	return steps, errors.Join(errs...)
}

func jiName(j int) string { return fmt.Sprintf("ji-%d", j) }

// jiWorkerName is the pod of worker r of service ji.
func jiWorkerName(ji string, r int) string { return fmt.Sprintf("%s-edge-w%d", ji, r) }

// jiWorkerPod is worker r of service ji, on node.
func jiWorkerPod(ji *sednav1.JointInferenceService, r int, node string) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Name: jiWorkerName(ji.Name, r), Namespace: ji.Namespace,
			Labels: map[string]string{
				common.LabelOwnerUID: string(ji.UID), common.LabelOwnerName: ji.Name, common.LabelWorkerRole: "edge", "nereid.io/bench": "sustained",
			},
			OwnerReferences: []metav1.OwnerReference{*metav1.NewControllerRef(ji, sednav1.JointInferenceServiceKind)},
		},
		Spec: corev1.PodSpec{NodeName: node, Containers: []corev1.Container{{Name: "worker", Image: "worker:v1"}}},
	}
}

func benchJointInference(j int) *sednav1.JointInferenceService {
	tmpl := func(node string) corev1.PodTemplateSpec {
		return corev1.PodTemplateSpec{Spec: corev1.PodSpec{NodeName: node, Containers: []corev1.Container{{Name: "worker", Image: "worker:v1"}}}}
	}
	return &sednav1.JointInferenceService{
		ObjectMeta: metav1.ObjectMeta{Name: jiName(j), Namespace: edgeNamespace},
		Spec: sednav1.JointInferenceServiceSpec{
			EdgeWorker: sednav1.EdgeWorker{Model: sednav1.ModelRef{Name: benchModelName}, HardExampleMining: sednav1.HardExampleMining{Name: "IBT"},
				Template: tmpl(edgeNodeName(j))},
			CloudWorker: sednav1.CloudWorker{Model: sednav1.ModelRef{Name: benchModelName}, Template: tmpl(edgeAggregatorNode)},
		},
	}
}

// jiReportData is what the worker API appends for worker's report about ji.
func jiReportData(ji, worker string, round int) ([]byte, error) {
	body, err := json.Marshal(edgeproto.WorkerInfo{
		Name: worker, Namespace: edgeNamespace, OwnerName: ji,
		OwnerKind: edgeproto.OwnerJointInferenceService, Kind: edgeproto.StageInference, Status: edgeproto.WorkerRunning,
		OwnerInfo: json.RawMessage(fmt.Sprintf(`{"inferenceNumber":%d,"hardExampleNumber":%d}`, 100*round, 10*round)),
	})
	if err != nil {
		return nil, err
	}
	return edgeproto.OutboxRecord(edgeproto.Report{Worker: worker, Body: body, ReceivedAt: time.Now().UTC()})
}

// stepResult is one step of the sustained scenario.
type stepResult struct {
	workers          int
	offered, handled float64 // reports/s in the hold
	backlog          int     // reports in the outboxes at the end
	refused          float64
	appendBehind     bool // the bench itself could not append at the pace
}

func (s stepResult) sustained(period time.Duration) bool {
	// Behind: more waiting at the end than arrives in 5s, or reports
	// refused (a worker the hub did not know yet counts as lost).
	return !s.appendBehind && float64(s.backlog) <= 5*float64(s.workers)/period.Seconds() && s.refused == 0
}

// runSustained runs the steps and returns the scenario's row.
func runSustained(ctx context.Context, o sustainedOptions, steps []int, fl *fleet, kube kubernetes.Interface, sedna sednaclient.Interface, metricsAddr string) (result, error) {
	services := make([]*sednav1.JointInferenceService, o.services)
	progress("edge: sustained: %d JointInferenceServices, one on each of the first nodes", o.services)
	err := framework.ForEach(ctx, o.services, setupWorkers, func(ctx context.Context, j int) error {
		ji, err := sedna.SednaV1alpha1().JointInferenceServices(edgeNamespace).Create(ctx, benchJointInference(j), metav1.CreateOptions{})
		services[j] = ji
		return err
	})
	if err != nil {
		return result{}, fmt.Errorf("creating the services: %w", err)
	}
	var rows []string
	best, made := 0, 0
	for _, n := range steps {
		perService := n / o.services
		progress("edge: sustained: %d workers (%d pods on each service's node), reporting every %s", perService*o.services, perService, o.period)
		err := framework.ForEach(ctx, o.services*(perService-made), benchWriters, func(ctx context.Context, k int) error {
			j, r := k%o.services, made+k/o.services
			_, err := kube.CoreV1().Pods(edgeNamespace).Create(ctx, jiWorkerPod(services[j], r, edgeNodeName(j)), metav1.CreateOptions{})
			return err
		})
		if err != nil {
			return result{}, fmt.Errorf("creating the worker pods: %w", err)
		}
		made = perService
		res, err := sustainStep(ctx, o, fl, services, perService, metricsAddr)
		if err != nil {
			return result{}, err
		}
		verdict := "kept up"
		if !res.sustained(o.period) {
			verdict = "FELL BEHIND"
		}
		rows = append(rows, fmt.Sprintf("%d workers: %.0f reports/s offered, %.0f handled, %d waiting at the end, %.0f refused: %s",
			res.workers, res.offered, res.handled, res.backlog, res.refused, verdict))
		progress("edge: sustained: %s", rows[len(rows)-1])
		if !res.sustained(o.period) {
			break
		}
		best = res.workers
	}
	note := strings.Join(rows, "; ")
	if best == steps[len(steps)-1]/o.services*o.services {
		note += "; the largest step kept up: the limit is higher"
	}
	return result{Name: fmt.Sprintf("edge: joint inference edge workers sustained, reporting every %s", o.period), Value: float64(best), Unit: "workers", Goal: ">= 20000",
		Note: fmt.Sprintf("%d services, each with its workers on one node; after one period to reach the pace, %s measured per step; kept up = at most 5s of reports waiting in the outboxes at the end and none refused: %s", o.services, o.hold, note)}, nil
}

// sustainStep has every worker report once a period, each at its own offset
// in the period, for one period and then o.hold, and measures the hold.
func sustainStep(ctx context.Context, o sustainedOptions, fl *fleet, services []*sednav1.JointInferenceService, perService int, metricsAddr string) (stepResult, error) {
	workers := len(services) * perService
	res := stepResult{workers: workers}
	ctx, cancel := context.WithTimeout(ctx, o.period+o.hold+time.Minute)
	defer cancel()
	const tick = 100 * time.Millisecond
	perTick := float64(workers) * tick.Seconds() / o.period.Seconds()
	start := time.Now()
	var appended atomic.Int64
	var m0 metricsSample
	holdFrom := start.Add(o.period)
	var holdAppended int64
	due, sent := 0.0, 0
	round := 1
	t := time.NewTicker(tick)
	defer t.Stop()
	for now := start; now.Before(holdFrom.Add(o.hold)); now = time.Now() {
		if m0 == nil && !now.Before(holdFrom) {
			var err error
			if m0, err = scrapeMetrics(ctx, metricsAddr); err != nil {
				return res, err
			}
			holdAppended = appended.Load()
		}
		due += perTick
		var batch []int
		for ; float64(sent) < due; sent++ {
			batch = append(batch, sent%workers)
			if sent%workers == workers-1 {
				round++
			}
		}
		r := round
		err := framework.ForEach(ctx, len(batch), benchWriters, func(ctx context.Context, k int) error {
			w := batch[k]
			j, i := w%len(services), w/len(services)
			data, err := jiReportData(services[j].Name, jiWorkerName(services[j].Name, i), r)
			if err != nil {
				return err
			}
			if _, err := fl.lcs[j].link.Outbox().AppendReport(data); err != nil {
				return err
			}
			appended.Add(1)
			return nil
		})
		if err != nil {
			return res, fmt.Errorf("appending reports: %w", err)
		}
		select {
		case <-t.C:
		case <-ctx.Done():
			return res, ctx.Err()
		}
		if len(t.C) > 0 {
			res.appendBehind = true
		}
	}
	m1, err := scrapeMetrics(ctx, metricsAddr)
	if err != nil {
		return res, err
	}
	took := time.Since(holdFrom).Seconds()
	res.offered = float64(appended.Load()-holdAppended) / took
	res.refused = m1.Get("nereid_edgehub_reports_refused_total") - m0.Get("nereid_edgehub_reports_refused_total")
	res.handled = (m1.Get("nereid_edgehub_reports_applied_total") - m0.Get("nereid_edgehub_reports_applied_total") + res.refused) / took
	for j := range services {
		n, _, err := fl.lcs[j].store.OutboxLen()
		if err != nil {
			return res, err
		}
		res.backlog += n
	}
	return res, nil
}
