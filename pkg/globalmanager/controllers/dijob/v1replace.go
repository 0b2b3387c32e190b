package dijob

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/nereid-ml/nereid/pkg/globalmanager/controllers/common"
	"github.com/nereid-ml/nereid/pkg/globalmanager/controllers/dijob/coordinated"
)

// A v1 job's collectors, learners and DDP learners whose pod failed are
// replaced: a new pod from the job's template and a new name
// (coordinated.Rebuild), then the failed one deleted, the job's phase
// unchanged. DI-orchestrator v0.2 replaced none (the coordinator asked
// for new ones, or the job stalled); Nereid does, within bounds:
//
//   - one replica (a pod and the pods that replaced it) is replaced at
//     most backoffLimit times (the job's spec.backoffLimit as v2alpha1
//     shows it: 3, the default every v1 job gets) within
//     replacementWindow, counted on its pods (AnnotationReplacement,
//     AnnotationReplacementWindow); its pod failing once more within the
//     window is left Failed, marked AnnotationReplacementsSpent, and told
//     in one Warning event;
//   - one sync replaces at most maxReplacementsPerSync pods; the rest wait
//     for the next sync, which the replacements' own events bring.
const (
	// AnnotationReplacement is, on a replacement pod, how many times its
	// replica was replaced within the window.
	AnnotationReplacement = "nereid.io/replacement"
	// AnnotationReplacementWindow is, on a replacement pod, when its
	// replica's window of replacements began (RFC 3339).
	AnnotationReplacementWindow = "nereid.io/replacement-window"
	// AnnotationReplacementsSpent marks a failed pod left as it is, its
	// replica's replacements spent: the number spent.
	AnnotationReplacementsSpent = "nereid.io/replacements-spent"

	replacementWindow      = 10 * time.Minute
	maxReplacementsPerSync = 8

	reasonReplicaReplaced  = "ReplicaReplaced"
	reasonReplacementSpent = "ReplacementsSpent"
)

// replaceable says whether a pod of a v1 job's replica type is replaced
// when it fails: collectors, learners and DDP learners, each made again
// from the job's template (coordinated.Rebuild). Not the coordinator, whose
// end is the job's; nor an aggregator, made from an AggregatorConfig this
// controller does not read and whose DDP learners go with it: the
// coordinator's replicas/failed replaces it with new ones.
func replaceable(p *corev1.Pod) bool {
	switch coordinated.TypeOf(p) {
	case coordinated.Collector, coordinated.Learner, coordinated.DDPLearner:
		return true
	}
	return false
}

// replacementOf is the replacement of a failed pod: its number within its
// replica's window and when that window began; ok is false when the
// replica spent its limit in the window.
func replacementOf(old *corev1.Pod, now time.Time, limit int32) (n int32, since time.Time, ok bool) {
	since, err := time.Parse(time.RFC3339, old.Annotations[AnnotationReplacementWindow])
	if err != nil || now.Sub(since) >= replacementWindow {
		return 1, now, limit >= 1
	}
	n, _ = markOf(old, AnnotationReplacement)
	return n + 1, since, n < limit
}

// replaceFailed replaces, in a satisfied sync, the failed pods of the
// replaceable types (at most maxReplacementsPerSync), and marks those
// whose replica spent its replacements.
func (c *Controller) replaceFailed(ctx context.Context, sc *v1SyncCtx) error {
	if !sc.satisfied {
		return nil
	}
	limit := backoffLimit(sc.job)
	var olds, news []*corev1.Pod
	var errs []error
	for _, p := range sc.pods {
		if p.Status.Phase != corev1.PodFailed || common.PodTerminating(p) || !replaceable(p) || p.Annotations[AnnotationReplacementsSpent] != "" {
			continue
		}
		template := coordinated.TemplateOf(sc.v1, coordinated.TypeOf(p))
		if template == nil {
			continue
		}
		n, since, ok := replacementOf(p, sc.now.Time, limit)
		if !ok {
			errs = append(errs, c.spendReplacements(ctx, sc, p, n-1))
			continue
		}
		if len(olds) == maxReplacementsPerSync {
			break
		}
		full, err := c.podAsStored(ctx, p)
		if full == nil {
			errs = append(errs, err)
			continue
		}
		pod := coordinated.Rebuild(full, coordinated.Replica{Job: sc.v1, Template: template, ServerURL: c.config.V1ServerURL}, c.config.EdgeLinkGrace)
		pod.Annotations = common.MergeLabels(pod.Annotations, map[string]string{
			AnnotationReplacement: strconv.Itoa(int(n)), AnnotationReplacementWindow: since.UTC().Format(time.RFC3339),
		})
		olds, news = append(olds, p), append(news, pod)
	}
	return errors.Join(append(errs, c.replace(ctx, sc, olds, news, limit))...)
}

// podAsStored is p as the API server has it: the cache holds pods without
// most of their spec (common.SlimPod), of which a replacement keeps the
// resources and a DDP learner's ranks (coordinated.Rebuild). It is
// nil when the pod is gone, another pod has its name by now, or its
// replica type is no longer the one decided on.
func (c *Controller) podAsStored(ctx context.Context, p *corev1.Pod) (*corev1.Pod, error) {
	full, err := coordinated.AsStored(ctx, c.children.Client.CoreV1(), p)
	if err != nil {
		return nil, fmt.Errorf("reading pod %s/%s to replace it: %w", p.Namespace, p.Name, err)
	}
	return full, nil
}

// replace creates news and then deletes each of olds whose new pod was
// made, with a Normal event naming both.
func (c *Controller) replace(ctx context.Context, sc *v1SyncCtx, olds, news []*corev1.Pod, limit int32) error {
	made, err := c.children.CreatePods(ctx, sc.key, sc.job, news)
	sc.made = append(sc.made, made...)
	if err != nil {
		sc.failedCreate = fmt.Sprintf("replacements of failed pods were not made: %v", err)
	}
	isMade := common.ByName(made)
	var doomed []*corev1.Pod
	for i, old := range olds {
		if isMade[news[i].Name] == nil {
			continue
		}
		doomed = append(doomed, old)
		sc.deleted[old.Name] = true
		c.children.Recorder.Eventf(sc.job, corev1.EventTypeNormal, reasonReplicaReplaced,
			"Replaced failed %s pod %s with %s (replacement %s of at most %d within %v): %s",
			coordinated.TypeOf(old), old.Name, news[i].Name, news[i].Annotations[AnnotationReplacement], limit, replacementWindow, podFailure(old))
	}
	return errors.Join(err, c.children.DeletePods(ctx, sc.key, sc.job, doomed, "replaced after it failed"))
}

// spendReplacements marks a failed pod whose replica spent its n
// replacements and says so in a Warning event, once: the mark keeps later
// syncs from deciding it again.
func (c *Controller) spendReplacements(ctx context.Context, sc *v1SyncCtx, p *corev1.Pod, n int32) error {
	if err := c.children.MarkPod(ctx, sc.key, p, AnnotationReplacementsSpent, strconv.Itoa(int(n))); err != nil {
		return err
	}
	c.children.Recorder.Eventf(sc.job, corev1.EventTypeWarning, reasonReplacementSpent,
		"%s pod %s failed after its replica was replaced %d times within %v (the job's backoffLimit); it is left Failed: %s",
		coordinated.TypeOf(p), p.Name, n, replacementWindow, podFailure(p))
	return nil
}
