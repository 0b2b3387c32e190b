package replicasapi

import (
	"context"
	"crypto/sha256"
	"fmt"
	"sync"
	"time"

	"golang.org/x/time/rate"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/clock"
)

// expectationTTL bounds how long a pod this server created (or deleted) is
// counted as such while the pod cache does not show it yet (or still
// does): the cache follows within moments; a pod someone else deleted in
// between stops being counted after this.
const expectationTTL = 2 * time.Minute

// v1Jobs is what the v1 server keeps of each job it changes, by UID, at
// most max jobs.
type v1Jobs struct {
	mu        sync.Mutex
	byUID     map[types.UID]*v1Job
	max       int
	perSecond float64
	clock     clock.PassiveClock
}

// v1Job is one job's state. Its turn is held while a change to the job is
// decided and made, so that two requests never both count the same room
// under a bound.
type v1Job struct {
	turn  chan struct{}
	limit *rate.Limiter
	// created are the pods made and not yet seen in the pod cache, by name;
	// deleted those deleted and still seen live there.
	created map[string]expectation
	deleted map[string]expectation
	// users counts the requests between get and done (under v1Jobs.mu).
	users int
}

// expectation is a pod's replica type and when it was created or deleted.
type expectation struct {
	replicaType string
	at          time.Time
}

func newV1Jobs(max int, perSecond float64, clk clock.PassiveClock) *v1Jobs {
	return &v1Jobs{byUID: map[types.UID]*v1Job{}, max: max, perSecond: perSecond, clock: clk}
}

// get is the state of the job uid, made when new, for a request that
// calls done with it when it ends; false when max jobs are kept and none
// is at rest (pruneLocked).
func (j *v1Jobs) get(uid types.UID) (*v1Job, bool) {
	j.mu.Lock()
	defer j.mu.Unlock()
	now := j.clock.Now()
	if st, ok := j.byUID[uid]; ok {
		st.users++
		return st, true
	}
	if len(j.byUID) >= j.max {
		j.pruneLocked(now)
	}
	if len(j.byUID) >= j.max {
		return nil, false
	}
	st := &v1Job{
		turn:    make(chan struct{}, 1),
		limit:   rate.NewLimiter(rate.Limit(j.perSecond), burstOf(j.perSecond)),
		created: map[string]expectation{}, deleted: map[string]expectation{}, users: 1,
	}
	j.byUID[uid] = st
	return st, true
}

// done ends a request's use of st.
func (j *v1Jobs) done(st *v1Job) {
	j.mu.Lock()
	defer j.mu.Unlock()
	st.users--
}

// take waits for the job's turn until ctx ends; give gives it back.
func (st *v1Job) take(ctx context.Context) error {
	select {
	case st.turn <- struct{}{}:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("waiting for the DIJob's other changes: %w", ctx.Err())
	}
}

func (st *v1Job) give() { <-st.turn }

// pruneLocked forgets the jobs at rest: no request uses them, no pod they
// made or deleted is awaited, and their rate is back to a whole burst, so
// that a new state would decide as theirs does. Forgetting only the jobs
// idle for minutes would let a tenant with max jobs of its own, each
// changed (with nothing) once in a while, refuse every other job's
// changes.
func (j *v1Jobs) pruneLocked(now time.Time) {
	for uid, st := range j.byUID {
		if st.users == 0 && len(st.created) == 0 && len(st.deleted) == 0 && st.limit.TokensAt(now) >= float64(st.limit.Burst()) {
			delete(j.byUID, uid)
		}
	}
}

// v1Answers keeps the successful answers to requests that carried an
// Idempotency-Key, for ttl, at most max of them (the oldest goes first).
type v1Answers struct {
	mu    sync.Mutex
	byKey map[answerKey]*keptAnswer
	order []answerKey
	ttl   time.Duration
	max   int
}

// answerKey is a key as given for one route of one job: a key is never
// shared between jobs, so that a caller of one job cannot read another's
// answers.
type answerKey struct {
	job   types.UID
	route action
	key   string
}

// keptAnswer is a kept answer and the hash of the body it answered.
type keptAnswer struct {
	body [sha256.Size]byte
	rep  reply
	at   time.Time
}

func newV1Answers(ttl time.Duration, max int) *v1Answers {
	return &v1Answers{byKey: map[answerKey]*keptAnswer{}, ttl: ttl, max: max}
}

// get is the answer kept for k, and whether the request it answered had
// the same body.
func (a *v1Answers) get(k answerKey, body [sha256.Size]byte, now time.Time) (*reply, bool, bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	kept, ok := a.byKey[k]
	if !ok || now.Sub(kept.at) >= a.ttl {
		return nil, false, false
	}
	rep := kept.rep
	return &rep, true, kept.body == body
}

// put keeps rep as k's answer.
func (a *v1Answers) put(k answerKey, body [sha256.Size]byte, rep *reply, now time.Time) {
	a.mu.Lock()
	defer a.mu.Unlock()
	// Expired keys, and the oldest while full, leave the front of order.
	for len(a.order) > 0 {
		front, ok := a.byKey[a.order[0]]
		if ok && now.Sub(front.at) < a.ttl && len(a.byKey) < a.max {
			break
		}
		delete(a.byKey, a.order[0])
		a.order = a.order[1:]
	}
	if _, ok := a.byKey[k]; !ok {
		a.order = append(a.order, k)
	}
	a.byKey[k] = &keptAnswer{body: body, rep: *rep, at: now}
}
