package edgehub

import (
	"context"
	"fmt"
	"net/http"
	"strings"

	authenticationv1 "k8s.io/api/authentication/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// NodeNameExtra is the key of the node's name in the user.extra of a
// ServiceAccount token bound to a Pod, as a TokenReview returns it.
const NodeNameExtra = "authentication.kubernetes.io/node-name"

// authError is why a connection is refused before the websocket upgrade.
type authError struct {
	status int    // HTTP status
	metric string // reason label of connections_refused_total
	reason string // told to the client
	err    error  // logged, when there is more to say than reason
}

// authenticate returns the node whose LocalController sent r: the node the
// bearer token's Pod is bound to, as a TokenReview says.
func (h *Hub) authenticate(ctx context.Context, r *http.Request) (string, *authError) {
	scheme, token, _ := strings.Cut(r.Header.Get("Authorization"), " ")
	token = strings.TrimSpace(token)
	if !strings.EqualFold(scheme, "Bearer") || token == "" {
		return "", &authError{status: http.StatusUnauthorized, metric: refusedNoToken,
			reason: "a bearer token (a ServiceAccount token bound to the LocalController's Pod) is required"}
	}
	review, err := h.client.AuthenticationV1().TokenReviews().Create(ctx, &authenticationv1.TokenReview{
		Spec: authenticationv1.TokenReviewSpec{Token: token},
	}, metav1.CreateOptions{})
	if err != nil {
		return "", &authError{status: http.StatusServiceUnavailable, metric: refusedReviewError,
			reason: "the token could not be reviewed, try again later", err: fmt.Errorf("creating token review: %w", err)}
	}
	st := review.Status
	if !st.Authenticated {
		reason := "the token is not valid"
		if st.Error != "" {
			reason += ": " + st.Error
		}
		return "", &authError{status: http.StatusUnauthorized, metric: refusedInvalidToken, reason: reason}
	}
	nodes := st.User.Extra[NodeNameExtra]
	if len(nodes) != 1 || nodes[0] == "" {
		return "", &authError{status: http.StatusForbidden, metric: refusedNoNode,
			reason: fmt.Sprintf("user %q is not bound to a node: use a ServiceAccount token bound to the LocalController's Pod", st.User.Username)}
	}
	return nodes[0], nil
}
