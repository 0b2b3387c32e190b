package auth

// Reasons a connection is refused, the label of connections_refused_total.
const (
	RefusedNoToken            = "no_token"
	RefusedInvalidToken       = "invalid_token"
	RefusedWrongAudience      = "wrong_audience"
	RefusedNotLocalController = "not_localcontroller"
	RefusedNoNode             = "no_node_identity"
	RefusedNotEdgeNode        = "not_edge_node"
	RefusedNotDaemonSetPod    = "not_daemonset_pod"
	RefusedReviewError        = "token_review_error"
	RefusedBusy               = "busy"
	RefusedNoHello            = "no_hello"
	RefusedNodeMismatch       = "node_mismatch"
	RefusedReportIDAhead      = "report_id_ahead"
	RefusedShuttingDown       = "shutting_down"
	RefusedTooOften           = "too_often"
	RefusedTooManyRefusals    = "too_many_refusals"
)

// Reasons an open connection is closed because its identity no longer holds,
// the label of connections_revoked_total.
const (
	RevokedTokenExpired          = "token_expired"
	RevokedPodDeleted            = "pod_deleted"
	RevokedTokenRefused          = "token_review_refused"
	RevokedTokenInvalid          = "token_invalid"
	RevokedServiceAccountDeleted = "serviceaccount_deleted"
	RevokedDaemonSetDeleted      = "daemonset_deleted"
	RevokedNotDaemonSetPod       = "not_daemonset_pod"
	RevokedNotEdgeNode           = "not_edge_node"
)
