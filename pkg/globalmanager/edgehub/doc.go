// Package edgehub is the GlobalManager's end of the cloud–edge channel: an
// HTTPS server that LocalControllers connect to with a websocket, speaking
// package edgeproto.
//
// # What it guarantees
//
// Identity: a LocalController authenticates with a projected ServiceAccount
// token of its Pod with the hub's audience (Config.TokenAudience;
// "Authorization: Bearer"). Before it upgrades the connection the hub sends a
// TokenReview naming that audience and accepts only a token of one of
// Config.ServiceAccounts, bound to a Pod whose node matches
// Config.NodeSelector and whose controller is the LocalControllers'
// DaemonSet, Config.DaemonSet, by UID (auth/daemonset.go: a bare Pod of the
// ServiceAccount, or one of another controller, is refused with 403); the
// node is the one the review names
// (user.extra["authentication.kubernetes.io/node-name"]). Every refusal is an
// HTTP status with the reason, counted by reason; outcomes are cached briefly
// by the token's hash and reviews run a bounded number at a time (see
// auth.Authenticator). The hub verifies a token itself where it can, as the
// review would (auth/localtoken.go), and has the API server review such a token
// after the connection starts, paced (auth/confirm.go). While it holds the
// issuer's keys it also refuses itself every token they do not verify (a
// made-up key ID, after the keys are read again, paced; another key; wrong
// claims): junk never reaches a TokenReview. The keys and these checks are
// pkg/globalmanager/tokenreview's, which the DIJob replicas APIs use too. An
// address refused for its tokens Config.MaxRefusalsPerAddress times within a
// minute is blocked for a minute (tokenreview.AddressLimiter): only a token
// the hub verifies itself (a LocalController's) connects from it, any other
// gets 429 without a review, so junk sent from a LocalController's address
// (its node, a NAT) never keeps it out. Refusals are logged at a bounded
// rate (auth/refusallog.go). A Hello that claims
// another node is answered with a close frame (websocket.ClosePolicyViolation)
// and nothing else.
//
// Revocation: an open connection is closed (websocket.ClosePolicyViolation,
// counted by reason) within one minute (revocationBound) of what admitted it
// going. Its token expiring (or due for rotation) closes it then; the
// hub's watches close it as soon as their event comes when its Pod is
// deleted or released by the DaemonSet, its ServiceAccount or the DaemonSet
// is deleted or made again (another UID), or its node is deleted or no
// longer matches Config.NodeSelector (revoke.go). Every open connection is
// also checked again in full every 30 s (recheck.go): its token, verified
// here where the hub holds the issuer's keys, else by a TokenReview in the
// confirmer's turn; its node; its Pod's DaemonSet. So what a watch missed,
// and a token that stops verifying, close it within 35 s, and a review it
// needs comes in its turn, 20 a second across nodes: when the hub cannot
// read the keys at all, each connection's token is reviewed every
// connections ÷ 20 seconds, within the minute up to 1,200 connections.
//
// Downstream: for each connected node the hub computes which objects concern
// it (see desired.Sets.Of) from the informers' caches, each with its worker pods
// on the node and their addresses, a finished pod marked done (workers are
// found through the controllers Nereid made, common.WorkerChain, never by
// a label; see desired/kinds.go for what the hub knows of each kind),
// sends the difference from what the LocalController says it holds in its
// Hello (read whole, over as many frames as it takes, before anything is
// sent), then Synced, and after
// that only what changes: the latest version of an object (two edits before a
// send go out as one), or a Delete when an object leaves the node's set.
//
// Flow control (package window): at most Config.SendWindow (1,000) Upserts
// and Deletes are sent and unacknowledged at a time; the rest of a
// difference waits in order, planned afresh at every change so that it goes
// out at its latest version, and is sent as Acks make room. Between two sends the writer takes
// the Acks and report results ready, so the reader never waits on it for
// more than one frame, and a difference of 100,000 objects goes out at the
// pace the LocalController persists it. Synced follows the last Upsert or
// Delete of the difference once it is sent, without waiting for its Ack: the
// LocalController applies frames in order. What is not acknowledged is sent
// again once it has waited Config.ResendAfter and the LocalController has
// either acknowledged something sent after it or settled nothing for
// ResendAfter; waiting behind a full window on a slow disk is not a loss.
// Nothing relies on an informer resync.
//
// Upstream: each Report is checked (its body parses, the object it is about
// concerns the node, and its worker is a pod of that object bound to the node
// that the report came from, taken before the pod finished, or the
// LocalController itself for a learning cycle; its ID is at most the Hello's
// last ID plus the reports read on the connection) and handed to the
// ReportApplier of the object's kind, with its Source: the node and the
// identity of the LocalController's store, which the Hello proves with the
// store's key, since report IDs count per store (a wiped or replaced store
// starts again at 1). A session's reports
// go through one lane per object (package reports): a lane's reports are handed
// over in the order received, all that waited during the lane's last call
// in its next (one status write for a node's burst about one object), and
// the lanes of up to 16 objects run at once, so that no report waits for
// another object's write. A lane's call waits Config.ReportWindow for more
// of the node's reports, then for one of Config.ReportWrites turns shared by
// every session, and takes its reports only then: while the API server is
// slower than the reports, they gather in their lanes and each lane's go in
// one status write. Reports applied, and
// reports refused for good, are acknowledged: refused by the applier
// (Refuse), or failing with an error no retry can mend (common.IsPermanent: the
// status write is invalid, or too large for the API server or etcd), so that
// such a report never holds up the node's later ones. Any other error is
// tried again twice, then leaves the report unacknowledged and closes the
// connection with websocket.CloseTryAgainLater, so that the LocalController
// resends it, and the ones after it, in order on its next connection.
//
// A malformed, oversized or unknown-version frame closes that connection only,
// with the reason in the close frame (clipped to 123 bytes) and in full in the
// log.
//
// # Link state
//
// Every node that has connected has a Lease named nereid-edge-<node> in the
// hub's namespace, labelled nereid.io/edge-node=<node>, written by package
// links (which says how often):
//
//	kubectl get lease -n <namespace> -l nereid.io/edge-node
//	kubectl get lease -n <namespace> -l nereid.io/edge-node -o custom-columns=NODE:.spec.holderIdentity,LINK:.metadata.annotations.nereid\.io/link,LAST-HEARD:.spec.renewTime,UNACKED:.metadata.annotations.nereid\.io/unacked-objects
//
// spec.holderIdentity is the node, spec.acquireTime when its current (or
// last) connection was made, and spec.renewTime when the hub last heard from
// it; renewTime is written at most every Config.LeaseUpdatePeriod, and at once
// when the node connects or disconnects, so a renewTime older than
// spec.leaseDurationSeconds means the link is down even if the hub could not
// say so (it stopped, for instance). The annotations say:
//
//	nereid.io/link             connected or disconnected
//	nereid.io/last-report-id   the highest ID of a report from the node that was acknowledged,
//	                           an ID of the store nereid.io/report-store names
//	nereid.io/report-store     the identity of the LocalController's store of the current (or last)
//	                           connection; a new store's IDs start again from 1
//	nereid.io/stated-report-id the highest last report ID a hello of that store stated that the hub
//	                           took; with last-report-id it bounds the next hello's (twice
//	                           Config.MaxOutboxReports past it at most)
//	nereid.io/unacked-objects  how many objects sent to the node wait for its acknowledgement
//	nereid.io/outbox           how full the node's outbox is, from its LocalController's heartbeats
//
// # Where the parts are
//
// The hub is this package and its parts below it, a package for each job
// that does not need the connections:
//
//	edgehub          the Hub (hub.go), its configuration (config.go) and
//	                 serving label (serving.go); the ending of connections
//	                 whose identity went (revoke.go, recheck.go); the edge
//	                 conditions (conditions.go, reach.go); one connection
//	                 (session.go): its frames read and written, the Upserts
//	                 and Deletes its window decides (objects.go), and the
//	                 check of its reports against what its node runs
//	                 (reportcheck.go)
//	edgehub/auth     who may connect: tokens verified or reviewed (auth.go,
//	                 localtoken.go, confirm.go), the DaemonSet rule
//	                 (daemonset.go), what revokes an identity (revoke.go), the
//	                 watches of what admits one (watch.go), address limits and
//	                 the refusal log (addresslimit.go, refusallog.go)
//	edgehub/certs    the serving certificate: the operator's files, or one
//	                 generated and kept in a Secret (package selfcert), its CA
//	                 published in a ConfigMap and a file
//	edgehub/desired  each node's desired set (desired.go), what the hub knows of
//	                 each kind it sends (kinds.go), and how an object is encoded
//	                 for the edge, with its digest (encode.go): no connection
//	                 needed
//	edgehub/links    each node's link state, written to its Lease, and read back
//	                 (links.Reader) by the DIJob controller
//	edgehub/reports  the report pipeline: a connection's lanes, the write turns
//	                 shared by all, the bound on reports held, their acks, and
//	                 the appliers' interfaces (ReportApplier, DatasetApplier)
//	edgehub/window   a connection's downstream window: what is sent, in which
//	                 order, as Acks make room, and what is sent again; a
//	                 Sender sends it, so no connection is needed
//	edgehub/edgehubtest  what the parts' tests share: the tests' LocalController
//	                 Pods and DaemonSet, and an API server's answers for them
//
// The hub needs permission to create TokenReviews; to get, list and watch
// Nodes; to get, list and watch Pods in the namespaces of
// Config.ServiceAccounts, and the DaemonSet Config.DaemonSet; to list and
// watch the ServiceAccounts; to get, create and update Secrets, ConfigMaps
// and Leases (coordination.k8s.io) in its namespace.
package edgehub
