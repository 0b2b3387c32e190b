package edgehub

import (
	"context"
	"net/http"
	"time"

	"github.com/nereid-ml/nereid/pkg/globalmanager/edgehub/auth"
)

// Every open connection's identity is checked again in full every
// recheckPeriod, as if it connected anew, so that what the watches miss
// (revoke.go) still ends it within revocationBound: its token, locally where
// the hub can verify it (a signing key the API server no longer publishes,
// its ServiceAccount or Pod gone from the caches), else by a TokenReview
// in the confirmer's turn, paced at ConfirmRate across nodes; then its node
// and its Pod's DaemonSet, from the caches. A local check of a token the
// hub verified itself does not check its signature again while the key that
// verified it is the issuer's (auth.Authenticator.VerifyLocallyAgain): at
// 9,800 connections, checking each signature and decoding each token again
// had taken a sixth of the idle hub's CPU (0.07 of a core). Only when the
// hub cannot read the issuer's keys is each token reviewed again, and then
// 20 a second take longer than recheckPeriod past 600 connections: each is
// reviewed every connections ÷ 20 seconds (10,000: about 8 minutes).

// recheckPeriod is how often each open connection is checked again;
// recheckTick how often the due ones are looked for.
const (
	recheckPeriod = 30 * time.Second
	recheckTick   = 5 * time.Second
)

// revocationBound is the most time, after what admitted a connection goes,
// before the connection is closed, while the hub holds the issuer's keys:
// a watch's event closes it at once; the recheck within recheckPeriod and a
// tick; a TokenReview it needs comes in its turn after that.
const revocationBound = time.Minute

// runRechecks checks the due connections again every recheckTick until ctx
// ends.
func (h *Hub) runRechecks(ctx context.Context) {
	t := h.clock.NewTicker(recheckTick)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C():
			h.recheckDue(ctx)
		}
	}
}

// recheckDue checks again the connections last checked recheckPeriod ago
// or more.
func (h *Hub) recheckDue(ctx context.Context) {
	now := h.clock.Now()
	var due []*session
	h.mu.RLock()
	for _, s := range h.sessions {
		if now.Sub(time.Unix(0, s.checkedAt.Load())) >= recheckPeriod {
			due = append(due, s)
		}
	}
	h.mu.RUnlock()
	for _, s := range due {
		if ctx.Err() != nil {
			return
		}
		s.checkedAt.Store(now.UnixNano())
		h.recheck(ctx, s)
	}
}

// recheck checks s's identity again, and ends s if it no longer holds.
func (h *Hub) recheck(ctx context.Context, s *session) {
	if s.ctx.Err() != nil {
		return
	}
	id, refusal := h.auth.VerifyLocallyAgain(ctx, s.token, s.id)
	switch {
	case refusal != nil:
		s.revoke(auth.RevokedTokenInvalid, "the LocalController's token is no longer valid: "+refusal.Reason)
		return
	case id == nil || h.auth.MustReview(s.id.PodUID):
		// The hub cannot say: a review does, in its turn.
		h.confirmer.Add(s, s.token)
	case id.Node != s.id.Node || id.Pod != s.id.Pod || id.PodUID != s.id.PodUID || id.ServiceAccount != s.id.ServiceAccount:
		s.revoke(auth.RevokedTokenInvalid, "the LocalController's token now names another Pod or node")
		return
	}
	if h.auth.PodDeleted(s.id.PodUID) {
		s.revokePodDeleted()
		return
	}
	check := *s.id
	refusal = h.auth.Admit(ctx, &check)
	if refusal == nil && check.DaemonSet != s.id.DaemonSet {
		refusal = auth.NotDaemonSetPod("the LocalControllers' DaemonSet %s was deleted and made again", h.auth.DaemonSet())
	}
	if refusal == nil || refusal.Status == http.StatusServiceUnavailable {
		return // admitted still, or not known now: the next recheck
	}
	reason := auth.RevokedNotDaemonSetPod
	switch refusal.Metric {
	case auth.RefusedNotEdgeNode:
		reason = auth.RevokedNotEdgeNode
	case auth.RefusedInvalidToken:
		reason = auth.RevokedPodDeleted
	}
	s.revoke(reason, refusal.Reason)
}
