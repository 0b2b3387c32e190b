package auth

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nereid-ml/nereid/internal/cached"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	"k8s.io/utils/clock"

	"github.com/nereid-ml/nereid/pkg/edgeproto"
	"github.com/nereid-ml/nereid/pkg/globalmanager/tokenreview"
)

// The keys of user.extra that a TokenReview of a ServiceAccount token bound
// to a Pod returns: the Pod and the node it runs on.
const (
	NodeNameExtra = "authentication.kubernetes.io/node-name"
	PodNameExtra  = "authentication.kubernetes.io/pod-name"
	PodUIDExtra   = "authentication.kubernetes.io/pod-uid"
)

// serviceAccountPrefix starts the username of every ServiceAccount token.
const serviceAccountPrefix = "system:serviceaccount:"

// Identity is who an authenticated connection is: a LocalController Pod of
// one of the accepted ServiceAccounts, on an edge node.
type Identity struct {
	Node           string
	ServiceAccount string // namespace/name
	Pod            types.NamespacedName
	PodUID         types.UID
	// Expires is when the token stops being the one to use: the earlier of
	// its exp and the kubelet's rotation time (kubernetes.io warnafter);
	// zero when the token says neither.
	Expires time.Time
	// ByHub is set when the hub verified the token itself, without a
	// review: a review confirms it later (confirm.go).
	ByHub bool
	// ServiceAccountUID is the UID of the ServiceAccount when the token was
	// verified, DaemonSet the UID of the LocalControllers' DaemonSet that
	// controls the Pod (daemonset.go): either made again is another, and
	// ends the connection (revoke.go).
	ServiceAccountUID types.UID
	DaemonSet         types.UID
	// signature is what verified the token, when the hub did
	// (VerifyLocallyAgain).
	signature *tokenreview.Signature
}

// Refusal is why a connection is refused before the websocket upgrade.
type Refusal struct {
	Status int    // HTTP status
	Metric string // reason label of connections_refused_total (Refused…)
	Reason string // told to the client
	Err    error  // logged, when there is more to say than Reason
	// RetryAfter, when set, is sent as Retry-After (seconds).
	RetryAfter int
}

// Cacheable reports whether the refusal is the token's own fault, so that
// the same token is refused again without another TokenReview.
func (e *Refusal) Cacheable() bool {
	return e.Status == http.StatusUnauthorized || e.Status == http.StatusForbidden
}

// reviewResult is a cached outcome of authenticating one token.
type reviewResult struct {
	id      *Identity
	refusal *Refusal
}

// Authenticator turns bearer tokens into identities: a TokenReview with the
// hub's audience, the ServiceAccount checked against the accepted ones, and
// the bound Pod's node checked against the edge node selector. Outcomes are
// cached briefly by the token's hash and reviews run a bounded number at a
// time, so that a reconnect storm of every edge node costs the API server a
// bounded rate and a token retried in a loop costs it nothing.
type Authenticator struct {
	client          kubernetes.Interface
	audience        string
	serviceAccounts map[string]bool // namespace/name
	accounts        []string        // the same, in Config's order
	// The informers Watch makes: the Pods of the accepted ServiceAccounts,
	// so that a connection ends when its Pod is deleted; the accepted
	// ServiceAccounts, for the hub's own verification of tokens
	// (verifyLocally); the LocalControllers' DaemonSet alone, which must
	// control a LocalController's Pod (daemonset.go); the edge nodes, their
	// labels only: a connection's node is checked there, not with a read of
	// the API server each (a reconnect storm of every node would double its
	// load).
	lcPods       []cache.SharedIndexInformer
	lcAccounts   []cache.SharedIndexInformer
	lcDaemonSet  cache.SharedIndexInformer
	edgeNodes    cache.SharedIndexInformer
	nodeSelector labels.Selector
	// daemonSet is the LocalControllers' DaemonSet, which must control the
	// token's Pod; daemonSets caches it alone (daemonset.go).
	daemonSetName types.NamespacedName
	daemonSets    cache.Store
	// reviewEvery has every token reviewed before it is accepted, even one
	// the hub verified itself; the keys still refuse junk.
	reviewEvery bool
	// nodes caches the nodes nodeSelector picks (their labels), so that a
	// connection from one costs no read of the API server; nil reads each.
	nodes cache.Store
	// keys, when set, are the token issuer's, with which the hub verifies
	// a token itself (verifyLocally) from the caches of the accepted
	// ServiceAccounts and of their Pods, and refuses junk; nil reviews
	// every token.
	keys         *tokenreview.IssuerKeys
	accountCache stores
	podCache     stores
	// verified counts the tokens accepted, by who verified them ("hub",
	// "token_review"); reviewed counts the TokenReviews sent, by result;
	// nil counts nothing.
	verified func(by string)
	reviewed func(result string)
	// reviews are the outcomes of tokens lately authenticated, an
	// identity no longer than its token's expiry.
	reviews *tokenreview.Cache[reviewResult]
	// maxEntries bounds deleted and refusedAfter as it bounds reviews.
	maxEntries   int
	slots        chan struct{} // one per review in flight
	queueTimeout time.Duration
	clock        clock.Clock

	waiting atomic.Int64 // connections waiting for a slot

	// retry spreads the connections told to come back over the time the
	// reviews take to serve them, instead of all at once.
	retry retryPlanner

	// mu guards deleted and refusedAfter, and orders a store in reviews
	// after the check that its Pod is not deleted.
	mu sync.Mutex
	// deleted are the UIDs of LocalController Pods deleted lately, by when:
	// a review in flight as its Pod goes, or a connection that had not said
	// hello yet, must not outlive it.
	deleted map[types.UID]time.Time
	// refusedAfter are the UIDs of Pods whose token a review refused after
	// the hub had accepted it (confirm.go), by when: their tokens are
	// reviewed, not verified by the hub, for deletedMemory.
	refusedAfter map[types.UID]time.Time
}

// deletedMemory is how long a deleted Pod's UID is remembered: well past
// any review in flight or hello awaited; later reviews of its token fail at
// the API server, which checks the bound Pod.
const deletedMemory = 10 * time.Minute

// Config is what an Authenticator needs. Every field but Verified and
// Reviewed must be set.
type Config struct {
	Client kubernetes.Interface
	// Audience is the audience a token must have.
	Audience string
	// ServiceAccounts are the accepted ServiceAccounts, namespace/name.
	ServiceAccounts []string
	// DaemonSet is the LocalControllers' DaemonSet, which must control the
	// token's Pod (daemonset.go).
	DaemonSet types.NamespacedName
	// NodeSelector picks the edge nodes.
	NodeSelector labels.Selector
	// ReviewEvery has every token reviewed before it is accepted, even one
	// the hub verified itself; the keys still refuse junk.
	ReviewEvery bool
	// ReviewCacheTTL and MaxCachedReviews bound the cache of outcomes;
	// MaxConcurrentReviews the reviews in flight, and ReviewQueueTimeout
	// how long a connection waits for one.
	ReviewCacheTTL       time.Duration
	MaxCachedReviews     int
	MaxConcurrentReviews int
	ReviewQueueTimeout   time.Duration
	Clock                clock.Clock
	// Verified counts the tokens accepted, by who verified them ("hub",
	// "token_review"); Reviewed counts the TokenReviews sent, by result;
	// nil counts nothing.
	Verified func(by string)
	Reviewed func(result string)
}

// New returns the Authenticator of cfg, with no cache yet: until Watch
// gives it its caches, it reads what it needs and reviews every token.
func New(cfg Config) *Authenticator {
	accounts := make(map[string]bool, len(cfg.ServiceAccounts))
	for _, sa := range cfg.ServiceAccounts {
		accounts[sa] = true
	}
	return &Authenticator{
		client:          cfg.Client,
		audience:        cfg.Audience,
		serviceAccounts: accounts,
		accounts:        cfg.ServiceAccounts,
		nodeSelector:    cfg.NodeSelector,
		daemonSetName:   cfg.DaemonSet,
		reviewEvery:     cfg.ReviewEvery,
		verified:        cfg.Verified,
		reviewed:        cfg.Reviewed,
		reviews:         tokenreview.NewCache[reviewResult](cfg.ReviewCacheTTL, cfg.MaxCachedReviews, cfg.Clock),
		maxEntries:      cfg.MaxCachedReviews,
		slots:           make(chan struct{}, cfg.MaxConcurrentReviews),
		queueTimeout:    cfg.ReviewQueueTimeout,
		clock:           cfg.Clock,
		deleted:         make(map[types.UID]time.Time),
		refusedAfter:    make(map[types.UID]time.Time),
	}
}

// DaemonSet is the LocalControllers' DaemonSet, namespace/name.
func (a *Authenticator) DaemonSet() types.NamespacedName { return a.daemonSetName }

// Authenticate returns who sent r, or why it is refused. blocked, when
// set, is the refusal of r's address, refused for its tokens too often
// (tokenreview.AddressLimiter): its token is still read, so that a
// LocalController sharing the address with a sender of junk (a NAT, any
// process on its node) still connects, but only a token the hub verifies
// itself goes on (to a review too, when every token or that Pod's must be
// reviewed); any other gets blocked, without a TokenReview.
func (a *Authenticator) Authenticate(ctx context.Context, r *http.Request, blocked *Refusal) (*Identity, *Refusal) {
	refuse := func(refusal *Refusal) (*Identity, *Refusal) {
		if blocked != nil && refusal.Cacheable() {
			return nil, blocked
		}
		return nil, refusal
	}
	token := BearerToken(r)
	if token == "" {
		return refuse(&Refusal{Status: http.StatusUnauthorized, Metric: RefusedNoToken,
			Reason: fmt.Sprintf("a bearer token is required: a ServiceAccount token of the LocalController with audience %q, projected into its Pod", a.audience)})
	}
	// What the token says of itself, unverified, is enough to refuse what
	// no review would accept without costing the API server one: anyone who
	// reaches the hub can send tokens.
	claims, refusal := a.precheck(token)
	if refusal != nil {
		return refuse(refusal)
	}
	if res, ok := a.reviews.Get(token); ok {
		if res.refusal != nil {
			return refuse(res.refusal)
		}
		return res.id, nil
	}
	// A token the hub can verify itself costs the API server nothing, and
	// one it can refuse itself never reaches it. Such a refusal is not
	// cached: a signature checked again costs less than the entries junk
	// would push out of the cache.
	id, refusal := a.VerifyLocally(ctx, token)
	if refusal != nil {
		return refuse(refusal)
	}
	if id == nil && blocked != nil {
		// Only a review could say: not for a blocked address.
		return nil, blocked
	}
	if id != nil && !a.reviewEvery && !a.MustReview(id.PodUID) {
		if a.PodDeleted(id.PodUID) {
			return refuse(podDeletedRefusal())
		}
		refusal := a.Admit(ctx, id)
		if refusal == nil {
			a.count("hub")
			a.store(token, reviewResult{id: id})
			return id, nil
		}
		if refusal.Cacheable() {
			a.store(token, reviewResult{refusal: refusal})
		}
		return refuse(refusal)
	}

	// Bounded concurrency: a storm waits here, not at the API server, and
	// past a bounded queue it is told at once when to come back.
	if a.waiting.Add(1) > int64(maxWaitingPerSlot*cap(a.slots)) {
		a.waiting.Add(-1)
		return nil, a.busy()
	}
	wait := a.clock.NewTimer(a.queueTimeout)
	defer wait.Stop()
	defer a.waiting.Add(-1)
	select {
	case a.slots <- struct{}{}:
	case <-wait.C():
		return nil, a.busy()
	case <-ctx.Done():
		return nil, &Refusal{Status: http.StatusServiceUnavailable, Metric: RefusedBusy, RetryAfter: 5,
			Reason: "the connection ended while waiting to be authenticated"}
	}
	defer func() { <-a.slots }()
	// Another connection with the same token may have been reviewed while
	// this one waited.
	if res, ok := a.reviews.Get(token); ok {
		return res.id, res.refusal
	}
	started := a.clock.Now()
	id, refusal = a.review(ctx, token, claims)
	a.retry.reviewed(a.clock.Now().Sub(started))
	if id != nil && a.PodDeleted(id.PodUID) {
		// Deleted while the review was in flight.
		id, refusal = nil, podDeletedRefusal()
	}
	if refusal == nil {
		if refusal = a.Admit(ctx, id); refusal != nil {
			id = nil
		}
	}
	if refusal == nil {
		a.count("token_review")
	}
	if refusal == nil || refusal.Cacheable() {
		a.store(token, reviewResult{id: id, refusal: refusal})
	}
	return id, refusal
}

// BearerToken is r's bearer token, "" if it has none.
func BearerToken(r *http.Request) string {
	scheme, token, _ := strings.Cut(r.Header.Get("Authorization"), " ")
	if !strings.EqualFold(scheme, "Bearer") {
		return ""
	}
	return strings.TrimSpace(token)
}

// podDeletedRefusal refuses the token of a Pod deleted lately.
func podDeletedRefusal() *Refusal {
	return &Refusal{Status: http.StatusUnauthorized, Metric: RefusedInvalidToken,
		Reason: "the token is not valid: its Pod was deleted"}
}

// count counts a token accepted, verified by by.
func (a *Authenticator) count(by string) {
	if a.verified != nil {
		a.verified(by)
	}
}

// countReview counts a TokenReview sent, by its result.
func (a *Authenticator) countReview(result string) {
	if a.reviewed != nil {
		a.reviewed(result)
	}
}

// busy is the refusal of a connection the reviews cannot take now, with a
// Retry-After from the retry planner.
func (a *Authenticator) busy() *Refusal {
	return &Refusal{Status: http.StatusServiceUnavailable, Metric: RefusedBusy,
		RetryAfter: a.retry.after(a.clock.Now(), int(a.waiting.Load()), cap(a.slots)),
		Reason:     "too many connections are being authenticated, try again later"}
}

// retryPlanner gives each connection told to come back its own turn: the
// reviews serve about slots ÷ (a review's duration) connections a second,
// so the next turn is after those waiting now and those told before. Ten
// thousand nodes reconnecting at once then come back spread over the time
// their reviews take, not in waves that are mostly refused again (each
// refusal costs a TLS handshake).
type retryPlanner struct {
	mu      sync.Mutex
	latency time.Duration // moving average of a review's duration
	next    time.Time     // the last turn given
}

// Retry-After bounds, in seconds: a LocalController waits at most
// BackoffMax (30s) whatever it is told.
const (
	minRetryAfter = 1
	maxRetryAfter = 30
	// initialReviewLatency is assumed until a review has been timed.
	initialReviewLatency = 100 * time.Millisecond
)

// reviewed records how long a review took.
func (p *retryPlanner) reviewed(d time.Duration) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.latency == 0 {
		p.latency = d
		return
	}
	p.latency = (9*p.latency + d) / 10
}

// share is one connection's share of the reviews' time, slots at a time;
// p.mu is held.
func (p *retryPlanner) share(slots int) time.Duration {
	latency := p.latency
	if latency <= 0 {
		latency = initialReviewLatency
	}
	return latency / time.Duration(max(1, slots))
}

// after gives a refused connection its turn, waiting connections ahead of
// it and slots reviews at a time, in whole seconds from now.
func (p *retryPlanner) after(now time.Time, waiting, slots int) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	each := p.share(slots)
	turn := now.Add(time.Duration(waiting) * each)
	if p.next.After(turn) {
		turn = p.next
	}
	turn = turn.Add(each)
	if limit := now.Add(maxRetryAfter * time.Second); turn.After(limit) {
		turn = limit
	}
	p.next = turn
	secs := int((turn.Sub(now) + time.Second - 1) / time.Second)
	return min(max(secs, minRetryAfter), maxRetryAfter)
}

// maxWaitingPerSlot bounds the connections waiting for a review slot: a
// thousand nodes reconnecting at once wait their turn; ten thousand are told
// to come back.
const maxWaitingPerSlot = 16

// precheck refuses, from the token's own unverified claims, a token that no
// review would accept: not a JWT, too long, for another audience, or
// expired. Otherwise it returns the claims.
func (a *Authenticator) precheck(token string) (*tokenreview.Claims, *Refusal) {
	if len(token) > tokenreview.MaxTokenBytes {
		return nil, invalidToken(fmt.Sprintf("longer than %d bytes", tokenreview.MaxTokenBytes))
	}
	claims := tokenreview.ReadClaims(token)
	switch {
	case claims == nil:
		return nil, invalidToken("not a ServiceAccount token (a JWT)")
	case len(claims.Audience) > 0 && !slices.Contains(claims.Audience, a.audience):
		return nil, &Refusal{Status: http.StatusUnauthorized, Metric: RefusedWrongAudience,
			Reason: fmt.Sprintf("the token is not for the edge hub: its audience is %q, the hub takes only tokens with audience %q (a projected ServiceAccount token)",
				edgeproto.Clip(strings.Join(claims.Audience, ","), 256, "…"), a.audience)}
	case claims.Expiry > 0 && !a.clock.Now().Before(time.Unix(claims.Expiry, 0)):
		return nil, invalidToken("expired")
	}
	return claims, nil
}

// review asks the API server who token is and checks it is an accepted
// LocalController on an edge node.
func (a *Authenticator) review(ctx context.Context, token string, claims *tokenreview.Claims) (*Identity, *Refusal) {
	user, err := tokenreview.Review(ctx, a.client, token, []string{a.audience})
	switch {
	case errors.Is(err, tokenreview.ErrWrongAudience):
		// The token authenticated, for another audience.
		a.countReview("authenticated")
		return nil, &Refusal{Status: http.StatusUnauthorized, Metric: RefusedWrongAudience,
			Reason: fmt.Sprintf("the token was not validated for the audience %q", a.audience)}
	case errors.Is(err, tokenreview.ErrInvalidToken):
		a.countReview("unauthenticated")
		return nil, &Refusal{Status: http.StatusUnauthorized, Metric: RefusedInvalidToken, Reason: err.Error()}
	case err != nil:
		a.countReview("error")
		return nil, &Refusal{Status: http.StatusServiceUnavailable, Metric: RefusedReviewError, RetryAfter: 5,
			Reason: "the token could not be reviewed, try again later", Err: err}
	}
	a.countReview("authenticated")
	sa, isSA := strings.CutPrefix(user.Username, serviceAccountPrefix)
	sa = strings.Replace(sa, ":", "/", 1)
	if !isSA || !a.serviceAccounts[sa] {
		return nil, a.notLocalController(user.Username)
	}
	node, podName, podUID := oneExtra(*user, NodeNameExtra), oneExtra(*user, PodNameExtra), oneExtra(*user, PodUIDExtra)
	if node == "" || podName == "" || podUID == "" {
		return nil, notBoundToPod(user.Username)
	}
	saNamespace, _, _ := strings.Cut(sa, "/")
	id := &Identity{
		Node: node, ServiceAccount: sa,
		Pod:               types.NamespacedName{Namespace: saNamespace, Name: podName},
		PodUID:            types.UID(podUID),
		ServiceAccountUID: types.UID(user.UID),
	}
	id.Expires = claims.Expires()
	return id, nil
}

// notLocalController refuses the token of user, which is not of an accepted
// ServiceAccount.
func (a *Authenticator) notLocalController(user string) *Refusal {
	return &Refusal{Status: http.StatusForbidden, Metric: RefusedNotLocalController,
		Reason: fmt.Sprintf("user %q is not a LocalController: only the ServiceAccounts %s may connect", user, a.accepted())}
}

// notBoundToPod refuses the token of user, which is bound to no Pod on a
// node.
func notBoundToPod(user string) *Refusal {
	return &Refusal{Status: http.StatusForbidden, Metric: RefusedNoNode,
		Reason: fmt.Sprintf("the token of %q is not bound to a Pod on a node: use a token projected into the LocalController's Pod", user)}
}

// invalidToken refuses a token that is not valid, saying why.
func invalidToken(why string) *Refusal {
	return &Refusal{Status: http.StatusUnauthorized, Metric: RefusedInvalidToken, Reason: "the token is not valid: " + why}
}

// Admit checks what makes the Pod of a verified token a LocalController on
// an edge node, beyond the token: its node is an edge node, and its
// controller is the LocalControllers' DaemonSet, whose UID it records in id.
func (a *Authenticator) Admit(ctx context.Context, id *Identity) *Refusal {
	if refusal := a.checkNode(ctx, id.Node); refusal != nil {
		return refusal
	}
	ds, refusal := a.checkController(ctx, id.Pod, id.PodUID)
	if refusal != nil {
		return refusal
	}
	id.DaemonSet = ds
	return nil
}

// checkNode refuses a node that does not exist or is not an edge node. An
// edge node in the cache is one; any other is read, since the cache may lag
// a node just made or labelled.
func (a *Authenticator) checkNode(ctx context.Context, node string) *Refusal {
	l, err := a.nodeLabels(ctx, node)
	switch {
	case apierrors.IsNotFound(err):
		return &Refusal{Status: http.StatusForbidden, Metric: RefusedNotEdgeNode,
			Reason: fmt.Sprintf("node %s does not exist", node)}
	case err != nil:
		return &Refusal{Status: http.StatusServiceUnavailable, Metric: RefusedReviewError, RetryAfter: 5,
			Reason: "the node could not be read, try again later", Err: fmt.Errorf("reading node %s: %w", node, err)}
	case !a.nodeSelector.Matches(l):
		return &Refusal{Status: http.StatusForbidden, Metric: RefusedNotEdgeNode,
			Reason: fmt.Sprintf("node %s is not an edge node: its labels do not match %q", node, a.nodeSelector.String())}
	}
	return nil
}

// nodeLabels are node's labels, from the cache of edge nodes when it has
// the node, else read.
func (a *Authenticator) nodeLabels(ctx context.Context, node string) (labels.Set, error) {
	if a.nodes != nil {
		if n, ok := cached.Get[*corev1.Node](a.nodes, node); ok {
			return n.Labels, nil
		}
	}
	n, err := a.client.CoreV1().Nodes().Get(ctx, node, metav1.GetOptions{})
	if err != nil {
		return nil, err
	}
	return n.Labels, nil
}

func (a *Authenticator) accepted() string {
	list := make([]string, 0, len(a.serviceAccounts))
	for sa := range a.serviceAccounts {
		list = append(list, sa)
	}
	slices.Sort(list)
	return strings.Join(list, ", ")
}

// oneExtra is the single value of user.extra[key], or "".
func oneExtra(user authenticationv1.UserInfo, key string) string {
	if v := user.Extra[key]; len(v) == 1 {
		return v[0]
	}
	return ""
}

// store caches res, an identity no longer than its token's expiry, unless
// its Pod was deleted meanwhile.
func (a *Authenticator) store(token string, res reviewResult) {
	var expires time.Time
	a.mu.Lock()
	defer a.mu.Unlock()
	if res.id != nil {
		if _, gone := a.deleted[res.id.PodUID]; gone {
			return
		}
		expires = res.id.Expires
	}
	a.reviews.Put(token, res, expires)
}

// ForgetPod drops the cached identities of a Pod, once it is deleted, so its
// token is reviewed again (and refused) at its next connection, and
// remembers the Pod as deleted for deletedMemory.
func (a *Authenticator) ForgetPod(uid types.UID) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.dropPod(uid)
	remember(a.deleted, uid, a.clock.Now(), a.maxEntries)
}

// reviewFirst drops the cached identities of a Pod whose token a review
// refused after the hub had accepted it, and has the Pod's tokens reviewed
// before they are accepted, rather than verified by the hub, for
// deletedMemory: the hub's caches said yes where the API server said no.
func (a *Authenticator) reviewFirst(uid types.UID) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.dropPod(uid)
	remember(a.refusedAfter, uid, a.clock.Now(), a.maxEntries)
}

// MustReview reports whether the Pod uid's tokens must be reviewed.
func (a *Authenticator) MustReview(uid types.UID) bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	at, ok := a.refusedAfter[uid]
	return ok && a.clock.Now().Sub(at) <= deletedMemory
}

// ForgetPodIdentities drops the cached identities of the Pod uid, whose
// controller changed.
func (a *Authenticator) ForgetPodIdentities(uid types.UID) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.dropPod(uid)
}

// dropPod drops the cached identities of the Pod uid; a.mu is held.
func (a *Authenticator) dropPod(uid types.UID) {
	a.reviews.DeleteFunc(func(v reviewResult) bool { return v.id != nil && v.id.PodUID == uid })
}

// remember records uid in m at now, first dropping the entries older than
// deletedMemory when m holds limit.
func remember(m map[types.UID]time.Time, uid types.UID, now time.Time, limit int) {
	if len(m) >= limit {
		for u, at := range m {
			if now.Sub(at) > deletedMemory {
				delete(m, u)
			}
		}
	}
	m[uid] = now
}

// ForgetServiceAccount drops the cached identities of sa (namespace/name),
// once it is deleted or made again: its tokens are verified again.
func (a *Authenticator) ForgetServiceAccount(sa string) {
	a.forgetWhere(func(id *Identity) bool { return id.ServiceAccount == sa })
}

// ForgetNode drops the cached identities on node, once it is no longer an
// edge node.
func (a *Authenticator) ForgetNode(node string) {
	a.forgetWhere(func(id *Identity) bool { return id.Node == node })
}

// ForgetDaemonSet drops every cached outcome once the LocalControllers'
// DaemonSet is made, deleted or made again: acceptances named its old UID,
// refusals may have said it did not exist.
func (a *Authenticator) ForgetDaemonSet() {
	a.reviews.Clear()
}

// forgetWhere drops the cached identities for which drop says so.
func (a *Authenticator) forgetWhere(drop func(*Identity) bool) {
	a.reviews.DeleteFunc(func(v reviewResult) bool { return v.id != nil && drop(v.id) })
}

// PodDeleted reports whether the Pod uid was deleted lately.
func (a *Authenticator) PodDeleted(uid types.UID) bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	at, ok := a.deleted[uid]
	return ok && a.clock.Now().Sub(at) <= deletedMemory
}
