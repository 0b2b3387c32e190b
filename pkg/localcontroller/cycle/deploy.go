package cycle

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"

	"k8s.io/klog/v2"

	sednav1 "github.com/nereid-ml/nereid/pkg/apis/sedna/v1alpha1"
	"github.com/nereid-ml/nereid/pkg/edgeproto"
	"github.com/nereid-ml/nereid/pkg/localcontroller/nodefs"
	"github.com/nereid-ml/nereid/pkg/localcontroller/store"
)

// deployRetryDelay holds back a deploy copy whose report could not be
// appended (a full outbox), rather than copying the model every tick.
const deployRetryDelay = 10 * time.Second

// A deploy copy that fails (the round's model not there yet, a full disk)
// is tried again on this node, after DeployBackoffInitial, then twice as
// long each time up to DeployBackoffMax, and reported failed only once it
// has failed for Config.DeployRetryFor (DefaultDeployRetryFor): one bad
// moment does not cost the round its deploy. The tries are kept in memory
// only; a restarted LocalController starts the bound again.
const (
	DeployBackoffInitial  = time.Second
	DeployBackoffMax      = 30 * time.Second
	DefaultDeployRetryFor = 2 * time.Minute
)

// deployRetry is the failing copy of one deploy attempt.
type deployRetry struct {
	round, attempt int32
	first, next    time.Time // on the monotonic clock
	tries          int
}

// deployBackoff is the wait after the tries-th failed copy.
func deployBackoff(tries int) time.Duration {
	d := DeployBackoffInitial
	for i := 1; i < tries && d < DeployBackoffMax; i++ {
		d *= 2
	}
	return min(d, DeployBackoffMax)
}

// retryLater says whether the failed copy of the current deploy attempt
// waits for another try, and records the try; when it does not, reason
// says how long it failed.
func (m *Manager) retryLater(mem *jobMemory, st *sednav1.CycleStatus, err error) (bool, string) {
	now := m.clock.Now()
	r := mem.deployRetry
	if r == nil || r.round != st.Round || r.attempt != st.Attempt {
		r = &deployRetry{round: st.Round, attempt: st.Attempt, first: now}
		mem.deployRetry = r
	}
	r.tries++
	if now.Sub(r.first) < m.cfg.DeployRetryFor {
		r.next = now.Add(deployBackoff(r.tries))
		return true, ""
	}
	mem.deployRetry = nil
	return false, fmt.Sprintf("%v (%d tries over %s)", err, r.tries, now.Sub(r.first).Round(time.Second))
}

// deployInfo is the ownerInfo of the deploy report.
type deployInfo struct {
	Round int32 `json:"round"`
	// Reason says why the copy failed; empty when it completed.
	Reason string `json:"reason,omitempty"`
}

// deployResult is the one result of a completed deploy report: the Model
// that now holds the round's model.
type deployResult struct {
	URL    string `json:"url"`
	Format string `json:"format"`
}

// deploy copies the round's model over the deploy Model's file when the cloud
// says the round is to be deployed (stage Deploy, state Ready) and this node
// has not answered that round (or that attempt) yet, and reports how it went.
func (m *Manager) deploy(ctx context.Context, j *job, mem *jobMemory) error {
	st := j.status
	if j.deployModel == "" || st.Stage != sednav1.StageDeploy || st.State != sednav1.StageReady || st.Round < 1 {
		return nil
	}
	// A new attempt of the round is the GlobalManager retrying a failed
	// deploy: that is answered again.
	if st.Round < mem.state.DeployedRound ||
		(st.Round == mem.state.DeployedRound && st.Attempt <= mem.state.DeployedAttempt) {
		return nil
	}
	if m.clock.Now().Before(mem.nextDeploy) {
		return nil
	}
	if r := mem.deployRetry; r != nil && r.round == st.Round && r.attempt == st.Attempt && m.clock.Now().Before(r.next) {
		return nil
	}
	logger := klog.FromContext(ctx)

	report := ownReport{stage: edgeproto.StageDeploy, status: edgeproto.WorkerCompleted}
	info := deployInfo{Round: st.Round}
	model, err := m.copyModel(j)
	if err == nil && j.hotUpdate {
		err = m.hotUpdate(j)
	}
	if err != nil {
		later, reason := m.retryLater(mem, &st, err)
		if later {
			logger.V(2).Info("Deploy copy failed; trying again", "round", st.Round, "attempt", st.Attempt, "err", err,
				"in", mem.deployRetry.next.Sub(m.clock.Now()))
			return nil
		}
		report.status = edgeproto.WorkerFailed
		info.Reason = reason
	} else {
		mem.deployRetry = nil
		report.results = []any{deployResult{URL: model.Spec.URL, Format: model.Spec.Format}}
	}
	report.ownerInfo = info
	state := mem.state
	state.DeployedRound, state.DeployedAttempt = st.Round, st.Attempt
	if err := m.appendReport(j, mem, report, state, m.Wall.Now()); err != nil {
		mem.nextDeploy = m.clock.Now().Add(deployRetryDelay)
		return err
	}
	if info.Reason != "" {
		logger.V(2).Info("Deploy copy failed", "round", st.Round, "attempt", st.Attempt, "reason", info.Reason)
	} else {
		logger.V(2).Info("Deployed the round's model", "round", st.Round, "attempt", st.Attempt,
			"model", j.deployModel, "url", model.Spec.URL)
	}
	return nil
}

// copyModel copies the round's first model to the deploy Model's URL and
// returns that Model. Its error is the reason the report gives, in node
// paths.
func (m *Manager) copyModel(j *job) (*sednav1.Model, error) {
	cur := j.status.CurrentRound
	if cur == nil || len(cur.Models) == 0 || cur.Models[0].URL == "" {
		return nil, fmt.Errorf("round %d has no trained model in status.currentRound.models", j.status.Round)
	}
	srcURL := cur.Models[0].URL
	obj, found, err := m.store.GetObject(store.Key{Kind: "Model", Namespace: j.key.Namespace, Name: j.deployModel})
	if err != nil {
		return nil, err
	}
	if !found {
		return nil, fmt.Errorf("the deploy Model %s/%s is not in the LocalController's store", j.key.Namespace, j.deployModel)
	}
	var model sednav1.Model
	if err := json.Unmarshal(obj.Data, &model); err != nil {
		return nil, fmt.Errorf("decoding the deploy Model %s: %w", j.deployModel, err)
	}
	src, err := m.cfg.Root.Resolve(srcURL)
	if err != nil {
		return nil, fmt.Errorf("trained model: %w", err)
	}
	dst, err := m.cfg.Root.Resolve(model.Spec.URL)
	if err != nil {
		return nil, fmt.Errorf("deploy Model %s: %w", j.deployModel, err)
	}
	if err := copyTree(dst, src); err != nil {
		return nil, fmt.Errorf("copying %s to %s: %w", srcURL, model.Spec.URL, describe(m.cfg.Root.Dir, err))
	}
	return &model, nil
}

// copyTree copies the file src to dst (into dst, under src's name, when dst
// is a directory), or the files under the directory src into the directory
// dst. Every file is renamed into place whole, so a worker hot-updating from
// dst never reads half a model.
func copyTree(dst, src string) error {
	fi, err := os.Stat(src)
	if err != nil {
		return err
	}
	if !fi.IsDir() {
		if dfi, err := os.Stat(dst); err == nil && dfi.IsDir() {
			dst = filepath.Join(dst, filepath.Base(src))
		}
		return nodefs.CopyFile(dst, src)
	}
	if rel, err := filepath.Rel(src, dst); err == nil && rel != ".." && !strings.HasPrefix(rel, "../") {
		return errors.New("the target is inside the source directory")
	}
	if err := os.MkdirAll(dst, 0o755); err != nil {
		return err
	}
	return filepath.WalkDir(src, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		fi, err := os.Stat(p) // through a symbolic link
		if err != nil {
			return err
		}
		if !fi.Mode().IsRegular() {
			return nil
		}
		rel, err := filepath.Rel(src, p)
		if err != nil {
			return err
		}
		return nodefs.CopyFile(filepath.Join(dst, rel), p)
	})
}

// describe rewrites the paths in a file system error as node paths, as the
// user wrote them in the specs.
func describe(root string, err error) error {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return fmt.Errorf("%s %s: %w", pe.Op, nodefs.NodePath(root, pe.Path), pe.Err)
	}
	var le *os.LinkError
	if errors.As(err, &le) {
		return fmt.Errorf("%s %s %s: %w", le.Op, nodefs.NodePath(root, le.Old), nodefs.NodePath(root, le.New), le.Err)
	}
	return err
}
