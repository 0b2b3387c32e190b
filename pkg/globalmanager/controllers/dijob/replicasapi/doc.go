// Package replicasapi is DI-orchestrator's replicas HTTP API for DIJobs
// (diengine.opendilab.org/v2alpha1), made to act: where DI-orchestrator
// v1.1.3's di-server answers "success" and changes nothing, this one scales
// the job's tasks and stores its profilings, and it lets in only those who may
// edit the job.
//
// # Routes and shapes
//
// The routes, the job id format, the request and the response body are
// DI-orchestrator's (github.com/opendilab/DI-orchestrator: pkg/server/server.go
// for the routes, pkg/server/utils.go for the id, pkg/server/processor.go for
// what each route reads and returns, pkg/server/handlers.go and
// pkg/server/types for the response and its codes):
//
//	GET    /v2alpha1/job/{namespace}.{name}/replicas
//	POST   /v2alpha1/job/{namespace}.{name}/replicas    {"replicas": n, "task": "<task name>"}
//	DELETE /v2alpha1/job/{namespace}.{name}/replicas    {"replicas": n, "task": "<task name>"}
//	POST   /v2alpha1/job/{namespace}.{name}/profilings  {"data": {...}}
//
// Every answer is DI's Response, {"success": bool, "code": int, "message":
// string, "data": ...}, with code 0 on success and 1 on failure (DI's
// CodeSuccess and CodeFailed), and DI's HTTP statuses: 200, 400 for a
// malformed id or body, 404 for a job that does not exist, 409 (DI's code
// for AlreadyExists) for a change the job's state refuses, 500 for what went
// wrong here. Nereid adds 401 (no
// or an invalid token, with WWW-Authenticate: Bearer), 403 (not allowed, with
// the reason), 405 (another method, with Allow; DI's gin answered 404), 413
// (a body over Config.MaxBodyBytes) and 503 (the API server's reviews are
// saturated, with Retry-After). Where DI answered 400 for an unknown job on
// DELETE and profilings (it wrapped every error of that lookup as a bad
// request), every route here answers 404.
//
// The id is DI's: namespace and name joined by one dot; each must be a DNS
// label (a DIJob's name is one: its pods and Service are named from it), so
// ids like "..", ".", upper case or more than one dot are refused with 400
// before anything else is read; a "/" in an id, even escaped as %2F, leaves
// no route (404).
//
// GET: data is the job's replicas as "ip:port" in global rank order (each
// pod's own diengine/rank, its DI_RANK, which it keeps for life), one entry per live pod of
// the job (labelled as its child and controlled by it, by UID, not being
// deleted, not Failed or Succeeded; found by the controllers' owner index,
// so a GET costs the same however many pods share the namespace); the port is the
// container port named "di-port" (DI's DefaultPortName) or Config.Port
// (22270). A pod that has no IP yet is given as its DNS name behind the job's
// headless Service, "<pod>.di-<job>.<namespace>.svc:port" (its spec.hostname
// and spec.subdomain when set; Config.ServiceDomain for "svc"), rather than
// left out as DI did: no live replica goes missing, and DI-engine's workers
// already resolve these names (DI_NODES is made of them); the name resolves
// once the pod has an address. A job without such pods answers [] (DI
// answered null). An IPv6 address is bracketed, "[fd00::5]:22270" (DI wrote
// "fd00::5:22270").
//
// POST and DELETE add or remove n replicas (1 ≤ n ≤ Config.MaxReplicasPerTask)
// of one task: the task named "task", or the job's collector task when "task"
// is absent (400 if the job has none). They update spec.tasks[i].replicas of
// the DIJob, retrying on conflicts, and the DIJob controller does the rest. A
// task never goes below 1 replica nor above Config.MaxReplicasPerTask (1024):
// a change past either bound is refused whole with 409, the message naming
// the bound and the current count; so is one that would take the job past
// 1024 replicas in all (v2alpha1.MaxJobReplicas, the CRD's bound). So is a change to a job that is finished,
// being deleted, or preemptible (the allocator owns a preemptible job's
// replicas; DI silently did nothing for one), or a v1alpha1 job (its
// coordinator asks the v1 replicas server). data is the task's replica set
// after the change, its pod names "<job>-<task>-<rank>" in rank order; the
// pods appear as the controller creates them. DI answered null.
//
// POST profilings stores the JSON object "data" in the DIJob's
// status.profilings (UpdateStatus, retrying on conflicts); data is null.
//
// Bodies are read through http.MaxBytesReader (Config.MaxBodyBytes, 64 KiB by
// default: 413 past it), which also bounds the depth and size of the JSON;
// unknown fields and anything after the JSON value are refused with 400.
//
// # Who may call
//
// Every request carries "Authorization: Bearer <token>", a ServiceAccount
// token. It is first checked against the API server's published keys
// (Config.Keys, else read through Config.Kube while serving;
// tokenreview.IssuerKeys.Verify, the edge hub's check): a token they do not
// verify (not a JWT, a made-up key ID, another key's signature, another
// audience than Config.Audiences, expired) is refused with 401 without a
// TokenReview, so junk costs the API server nothing; only while the keys
// cannot be read is every token reviewed. An address refused for its
// tokens (401) Config.MaxRefusalsPerAddress times (60) within a minute is
// answered 429 with Retry-After for a minute, but for a token the keys
// verify, which goes on (tokenreview.AddressLimiter). Tokens of other
// authenticators than the API server's ServiceAccounts (OIDC, static
// tokens) are not taken while the keys are held. A token the keys verify is
// checked with a TokenReview naming Config.Audiences (when set, the review must say it
// validated one of them, else 401: a token for another audience, such as a
// Pod's default token for the API server, is refused). Without Audiences the
// review checks the API server's own audience, so a worker may send the token
// every pod has; with them, workers send a projected token of that audience,
// and this server never receives a token the API server would take.
//
// The caller may then act on the job as if editing the DIJob: a
// SubjectAccessReview with the caller's user, groups, uid and extra, for verb
// "get" (GET) or "update" (POST, DELETE, profilings) on
// dijobs.diengine.opendilab.org, in the job's namespace, with the job's name.
// A worker of the job needs no such grant: a ServiceAccount token bound to a
// pod (user.extra authentication.kubernetes.io/pod-name and pod-uid) whose
// pod (read from the pod lister, or from the API server when the lister does
// not have it yet) has that UID, is in the job's namespace, is not being
// deleted, and is controlled by the DIJob (controller ownerReference with the
// job's UID) may use every route of its own job. The authorization is decided
// before the job's existence is told, so that a caller who may not read a job
// learns nothing of it (403 either way).
//
// Successful TokenReviews and refused tokens are cached by the SHA-256 of the
// token for Config.ReviewCacheTTL (10s; at most Config.MaxCachedReviews
// entries), so a token revoked by the API server is let in for at most that
// long, and an accepted token never past its own expiry (its exp, or its
// warnafter once the kubelet has rotated it; the cache is
// pkg/globalmanager/tokenreview's, which the edge hub uses too); a worker's
// pod is read afresh at every request, so a deleted worker is refused as
// soon as the pod lister sees it go. SubjectAccessReviews are not
// cached. The API calls made for a caller not yet authorized (TokenReviews,
// SubjectAccessReviews, and reads from the API server of a token's pod that
// the lister does not have) run at most Config.MaxConcurrentReviews at a time
// and at most Config.MaxReviewsPerSecond (200): they go through the
// GlobalManager's client, whose rate limit every controller shares, and anyone
// who reaches the server can send made-up tokens. Requests that write a DIJob
// (scaling, profilings) are bounded by Config.MaxWritesPerSecond (20), every
// job's together: each is a write to etcd made as the GlobalManager. A
// request that cannot get a turn within a few seconds is answered 503 with
// Retry-After (logged at V(2), not as an error: a flood must not flood the
// log).
//
// # Serving
//
// Serve sets read-header, read, write and idle timeouts and a header size
// bound (slow clients are cut off), accepts at most Config.MaxConnections
// connections at a time (1024), handles at most Config.MaxRequestsInFlight
// requests at a time (1024; past it 503 at once: over TLS, HTTP/2 carries up
// to 8 requests at once on each connection), serves TLS 1.2 or later when
// given a tls.Config, and shuts down gracefully when its context ends. Each request's
// work, API calls included, is bounded by Config.RequestTimeout. Each request
// is logged with its method, path, user, status and duration (changes and
// refusals at V(2), successful reads at V(4), failures of this server at
// error level) and, when Config.Registerer is set, counted by route and status
// (nereid_diserver_requests_total).
//
// The server needs permission to create tokenreviews and subjectaccessreviews,
// to get pods, and to get, update and update the status of dijobs.
//
// # The v1 replicas server
//
// V1Handler (ServeV1, plain HTTP) is DI-orchestrator v0.2.2's di-server for
// diengine.opendilab.org/v1alpha1 jobs, which DI-engine's v1 coordinator and
// aggregators call: GET, POST and DELETE /v1alpha1/replicas, POST
// /v1alpha1/replicas/failed, GET /healthz. It creates and deletes the jobs'
// collectors, learners and aggregators itself (pods: create, delete) and
// reads AggregatorConfigs from a cache. A request without a token is taken
// only from the address of the coordinator or aggregator pod it names; one
// with a token is authorized as here. docs/dijob-v1alpha1.md ("The v1
// replicas server") states its routes, bodies, access rule, bounds and
// idempotency; v1*.go hold it.
package replicasapi
