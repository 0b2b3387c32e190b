package dijob

import (
	"context"
	"errors"
	"fmt"
	"sync"

	corev1 "k8s.io/api/core/v1"

	div2 "github.com/nereid-ml/nereid/pkg/apis/diengine/v2alpha1"
	"github.com/nereid-ml/nereid/pkg/globalmanager/admission"
	"github.com/nereid-ml/nereid/pkg/globalmanager/controllers/common"
)

// The steps of a satisfied sync that runs the job (reconcile): make the
// pods of the missing replicas, place them, bring the gang in step, admit
// them against the quotas, then create and delete. Each step may drop the
// new pods (no room, a gang that cannot be, quota): the phase says why.

// makePods builds the pods of the missing replicas, each new replica's rank
// and DI_NODES agreeing with every pod's (ranks.go). It returns how many
// names DI_NODES lists with them; past div2.MaxJobReplicas it builds none:
// the job is renumbered instead.
func (c *Controller) makePods(ctx context.Context, sc *syncCtx) (int, error) {
	if len(sc.missing) == 0 {
		return 0, nil
	}
	table, held, err := c.currentTable(ctx, sc.job, sc.pods)
	if err != nil {
		return 0, err
	}
	ranks := table.assign(sc.missing, func(r replica) string { return c.fqdn(sc.job, r) }, held)
	if len(table.nodes) > div2.MaxJobReplicas {
		return len(table.nodes), nil
	}
	shared := c.nodesEnv(table)
	for i, r := range sc.missing {
		sc.toCreate = append(sc.toCreate, c.newPod(sc.job, r, ranks[i], len(table.nodes), shared, sc.hashes[r.taskName]))
	}
	return len(table.nodes), nil
}

// place has the allocator place the new pods, all of them or none; a job
// that finds no room makes none and is placed again after allocationRetry.
func (c *Controller) place(sc *syncCtx) error {
	if len(sc.toCreate) == 0 || c.placer == nil {
		return nil
	}
	err := c.placer.place(sc.job, sc.wanted, sc.toCreate)
	if err == nil {
		return nil
	}
	if sc.noRoom = notFit(err); sc.noRoom == "" {
		return fmt.Errorf("placing the replicas of %s: %w", sc.key, err)
	}
	sc.toCreate = nil
	c.queue.AddAfter(sc.key, allocationRetry)
	return nil
}

// ensureGang brings the gang's objects in step with the replicas before a
// pod of it is made; a job whose annotations ask for what cannot be makes
// none.
func (c *Controller) ensureGang(ctx context.Context, sc *syncCtx) {
	members := membersOf(sc.job)
	sc.gangErr = sc.plan.Ensure(ctx, c.children, members, sc.current)
	if (sc.gangErr != nil || sc.plan.Problem != nil) && len(sc.toCreate) > 0 {
		c.placer.release(sc.toCreate)
		sc.toCreate = nil
	}
	for _, p := range sc.toCreate {
		sc.plan.Decorate(p, members)
	}
}

// admit has the quotas admit what is missing of the job (the new pods, its
// Service), all of it or none; a job that lacks nothing is told so.
func (c *Controller) admit(ctx context.Context, sc *syncCtx) error {
	sc.request = admission.Request{Kind: jobKind, Key: sc.key, Owner: sc.job, Charge: admission.Charge{Pods: sc.toCreate}}
	if len(sc.toCreate) == 0 {
		if len(sc.missing) == 0 {
			sc.quotaEvents = setAdmitted(sc.status, admission.Made, sc.now)
		}
		return nil
	}
	sc.request.PriorityClassName = sc.toCreate[0].Spec.PriorityClassName
	if !sc.haveService {
		sc.request.Charge.Objects = append(sc.request.Charge.Objects, admission.Service)
	}
	d, err := c.deps.Admission.Admit(ctx, sc.request)
	if err != nil {
		c.placer.release(sc.toCreate)
		return err
	}
	sc.quotaEvents = setAdmitted(sc.status, d, sc.now)
	if !d.Admitted {
		c.placer.release(sc.toCreate)
		sc.request.Charge.Pods, sc.haveService, sc.waiting = nil, true, d.Message
	}
	return nil
}

// act makes the Service and the admitted pods and deletes the stale and
// extra pods, at once; the pods made count as current, as the next sync
// will count them.
func (c *Controller) act(ctx context.Context, sc *syncCtx) {
	errs := make([]error, 5)
	errs[4] = sc.gangErr
	var wg sync.WaitGroup
	if !sc.haveService {
		wg.Go(func() { errs[0] = c.children.CreateService(ctx, sc.job, headlessService(sc.job)) })
	}
	wg.Go(func() { errs[1] = c.children.DeletePods(ctx, sc.key, sc.job, sc.extra, "the job has fewer replicas") })
	wg.Go(func() { errs[2] = c.children.DeletePods(ctx, sc.key, sc.job, sc.stale, "the task's template changed") })
	var made []*corev1.Pod
	var undone []common.Event
	wg.Go(func() {
		if made, undone, errs[3] = c.deps.Admission.CreatePods(ctx, c.children, sc.request); errs[3] != nil {
			// The room of pods that were not made is free again (those
			// that were are counted from the cache soon).
			c.placer.release(sc.request.Charge.Pods)
		}
	})
	wg.Wait()
	sc.quotaEvents = append(sc.quotaEvents, undone...)
	sc.actErr = errors.Join(errs...)
	sc.current = append(sc.current, made...)
}
