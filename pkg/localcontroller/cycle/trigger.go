package cycle

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"path"
	"slices"
	"strconv"
	"strings"
	"time"

	"k8s.io/klog/v2"

	sednav1 "github.com/nereid-ml/nereid/pkg/apis/sedna/v1alpha1"
	"github.com/nereid-ml/nereid/pkg/edgeproto"
	"github.com/nereid-ml/nereid/pkg/localcontroller/dataset"
	"github.com/nereid-ml/nereid/pkg/localcontroller/nodefs"
)

// DefaultCheckPeriod is the train trigger's period when checkPeriodSeconds is 0.
const DefaultCheckPeriod = 60 * time.Second

// MetricNumOfSamples is the one trigger metric the LocalController evaluates:
// how many samples the Dataset gained since the last round was prepared.
const MetricNumOfSamples = "num_of_samples"

// Results of a train trigger check, the label of
// nereid_cycle_train_trigger_checks_total.
const (
	CheckFired         = "fired"          // the round's data was prepared and reported ready
	CheckNotMet        = "not_met"        // the condition does not hold for the new samples
	CheckOutsideWindow = "outside_window" // the wall clock is outside the daily timer window
	CheckUnevaluable   = "unevaluable"    // the trigger or the Dataset cannot be evaluated, or preparing failed
)

// trainInfo is the ownerInfo of the "train ready" report.
type trainInfo struct {
	Round int32 `json:"round"`
	// NumberOfSamples is how many new samples the round was prepared from.
	NumberOfSamples int32 `json:"numberOfSamples"`
	// DatasetSamples is the Dataset's whole count when the trigger fired.
	DatasetSamples  int32  `json:"datasetSamples"`
	TrainDatasetURL string `json:"trainDatasetURL"`
	TestDatasetURL  string `json:"testDatasetURL"`
	// TriggeredAt is the wall clock's time when the trigger fired (RFC 3339).
	TriggeredAt string `json:"triggeredAt"`
}

// trigger evaluates j's train trigger when the cloud is waiting for a round
// this node has not prepared, and when it fires prepares the round's data and
// reports it ready.
func (m *Manager) trigger(ctx context.Context, j *job, mem *jobMemory, ds *sednav1.Dataset) error {
	logger := klog.FromContext(ctx)
	// Only a cycle the GlobalManager has started (round 1 on) and that waits
	// for this round's trigger: the GlobalManager ignores a trigger for any
	// other status, and a round recorded as prepared is never fired again.
	st := j.status
	round := st.Round
	if st.Stage != sednav1.StageTrain || st.State != sednav1.StageWaiting || round < 1 ||
		round <= mem.state.PreparedRound {
		return nil
	}
	now := m.clock.Now()
	if now.Before(mem.nextCheck) {
		return nil
	}
	mem.nextCheck = now.Add(checkPeriod(j.trigger))
	result := CheckUnevaluable
	defer func() { m.checks.WithLabelValues(result).Inc() }()

	cond := j.trigger.Condition
	if cond.Metric != MetricNumOfSamples {
		mem.warnOnce(logger, "The train trigger's metric is not one the LocalController evaluates; it never fires",
			"metric", cond.Metric, "want", MetricNumOfSamples)
		return nil
	}
	if _, err := cond.Holds(0); err != nil {
		mem.warnOnce(logger, "The train trigger never fires", "err", err)
		return nil
	}
	wall := m.Wall.Now()
	in, err := inWindow(j.trigger.Timer, wall)
	if err != nil {
		mem.warnOnce(logger, "The train trigger never fires", "err", err)
		return nil
	}
	if !in {
		result = CheckOutsideWindow
		logger.V(4).Info("Train trigger outside its timer window", "now", wall, "start", j.trigger.Timer.Start, "end", j.trigger.Timer.End)
		return nil
	}

	index, err := m.cfg.Root.Resolve(ds.Spec.URL)
	if err != nil {
		mem.warnOnce(logger, "The train trigger cannot read the Dataset", "dataset", ds.Name, "err", err)
		return nil
	}
	header, samples, err := dataset.Samples(index, ds.Spec.Format)
	if err != nil {
		logger.V(2).Info("The train trigger cannot read the Dataset; not firing", "dataset", ds.Name, "url", ds.Spec.URL,
			"err", describe(m.cfg.Root.Dir, err))
		return nil
	}
	count := int32(len(samples))
	fresh := samples
	if count >= mem.state.Baseline {
		fresh = samples[mem.state.Baseline:]
	}
	fire, _ := cond.Holds(float64(len(fresh)))
	logger.V(4).Info("Train trigger checked", "round", round, "newSamples", len(fresh), "operator", cond.Operator,
		"threshold", cond.Threshold, "fire", fire)
	if !fire {
		result = CheckNotMet
		return nil
	}
	err = m.prepare(ctx, j, mem, preparation{
		round: round, format: ds.Spec.Format, header: header, fresh: fresh, count: count, at: wall,
	})
	if err == nil {
		result = CheckFired
	}
	return err
}

// preparation is a round the trigger fired for.
type preparation struct {
	round  int32
	format string
	header string
	// fresh are the samples the round trains and tests on.
	fresh []string
	// count is the Dataset's whole count, the next round's baseline.
	count int32
	at    time.Time
}

// prepare writes the round's train and test files under outputDir and reports
// the round ready, with the round recorded as prepared in the same transaction.
func (m *Manager) prepare(ctx context.Context, j *job, mem *jobMemory, p preparation) error {
	train, test := split(p.fresh, j.dataset.TrainProb, p.round)
	dataDir := path.Join(j.outputDir, fmt.Sprintf("round-%d", p.round), "data")
	info := trainInfo{
		Round: p.round, NumberOfSamples: int32(len(p.fresh)), DatasetSamples: p.count,
		TrainDatasetURL: path.Join(dataDir, "train."+p.format),
		TestDatasetURL:  path.Join(dataDir, "test."+p.format),
		TriggeredAt:     p.at.Format(time.RFC3339),
	}
	for _, f := range []struct {
		url   string
		lines []string
	}{{info.TrainDatasetURL, train}, {info.TestDatasetURL, test}} {
		file, err := m.cfg.Root.Resolve(f.url)
		if err != nil {
			return fmt.Errorf("outputDir: %w", err)
		}
		if err := nodefs.WriteFile(file, indexFile(p.format, p.header, f.lines)); err != nil {
			return fmt.Errorf("writing round %d's data: %w", p.round, describe(m.cfg.Root.Dir, err))
		}
	}
	state := mem.state
	state.PreparedRound, state.Baseline = p.round, p.count
	err := m.appendReport(j, mem, ownReport{stage: edgeproto.StageTrain, status: edgeproto.WorkerReady, ownerInfo: info}, state, p.at)
	if err != nil {
		return err
	}
	klog.FromContext(ctx).V(2).Info("Train trigger fired; the round's data is ready", "round", p.round,
		"newSamples", len(p.fresh), "train", len(train), "test", len(test), "datasetSamples", p.count)
	return nil
}

// checkPeriod is the trigger's period.
func checkPeriod(t sednav1.Trigger) time.Duration {
	if t.CheckPeriodSeconds <= 0 {
		return DefaultCheckPeriod
	}
	return time.Duration(t.CheckPeriodSeconds) * time.Second
}

// inWindow says whether now, read in the LocalController's time zone, is in
// the daily window of timer: start <= now < end, wrapping past midnight when
// end is before start. No timer is always in.
func inWindow(timer *sednav1.Timer, now time.Time) (bool, error) {
	if timer == nil {
		return true, nil
	}
	start, err := minuteOfDay(timer.Start)
	if err != nil {
		return false, fmt.Errorf("timer start: %w", err)
	}
	end, err := minuteOfDay(timer.End)
	if err != nil {
		return false, fmt.Errorf("timer end: %w", err)
	}
	local := now.Local()
	minute := local.Hour()*60 + local.Minute()
	if start <= end {
		return start <= minute && minute < end, nil
	}
	return minute >= start || minute < end, nil
}

// minuteOfDay parses "HH:MM" (24:00 is the end of the day) into minutes since
// midnight.
func minuteOfDay(hhmm string) (int, error) {
	h, mm, ok := strings.Cut(hhmm, ":")
	hour, herr := strconv.Atoi(h)
	minute, merr := strconv.Atoi(mm)
	if !ok || len(h) != 2 || len(mm) != 2 || herr != nil || merr != nil ||
		hour < 0 || minute < 0 || minute > 59 || hour > 24 || (hour == 24 && minute != 0) {
		return 0, fmt.Errorf("%q is not HH:MM", hhmm)
	}
	return hour*60 + minute, nil
}

// split shuffles samples deterministically by round, so preparing a round
// again gives the same files, and cuts them into round(trainProb*n) train
// samples and the rest for test.
func split(samples []string, trainProb float64, round int32) (train, test []string) {
	shuffled := slices.Clone(samples)
	r := rand.New(rand.NewPCG(uint64(round), 0))
	r.Shuffle(len(shuffled), func(i, j int) { shuffled[i], shuffled[j] = shuffled[j], shuffled[i] })
	n := int(math.Round(min(max(trainProb, 0), 1) * float64(len(shuffled))))
	return shuffled[:n], shuffled[n:]
}

// indexFile is the content of an index file of the format holding lines.
func indexFile(format, header string, lines []string) []byte {
	var b strings.Builder
	if format == dataset.FormatCSV {
		b.WriteString(header)
		b.WriteByte('\n')
	}
	for _, l := range lines {
		b.WriteString(l)
		b.WriteByte('\n')
	}
	return []byte(b.String())
}
