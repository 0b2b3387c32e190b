package tokenreview

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	authenticationv1 "k8s.io/api/authentication/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// MaxTokenBytes bounds a bearer token a server takes; a ServiceAccount
// token is about 1 KiB.
const MaxTokenBytes = 8 << 10

var (
	// ErrInvalidToken is wrapped by the error of a token that does not
	// authenticate.
	ErrInvalidToken = errors.New("the token is not valid")
	// ErrWrongAudience is wrapped, with ErrInvalidToken, by the error of a
	// token the review did not validate for the audiences asked.
	ErrWrongAudience = errors.New("the token was not validated for the audiences asked")
)

// audienceError refuses a token valid for other audiences than those asked.
type audienceError struct{ audiences []string }

func (e *audienceError) Error() string {
	return fmt.Sprintf("%v: it was not validated for the audiences %s", ErrInvalidToken, strings.Join(e.audiences, ", "))
}

func (e *audienceError) Unwrap() []error { return []error{ErrInvalidToken, ErrWrongAudience} }

// Review asks the API server who holds token, with a TokenReview naming
// audiences (the API server's own audience when empty). It returns the
// token's user; an error wrapping ErrInvalidToken when the token does not
// authenticate (the review's reason after a colon), and ErrWrongAudience
// too when it does but the review does not say it validated one of
// audiences; any other error when the review could not be made.
func Review(ctx context.Context, client kubernetes.Interface, token string, audiences []string) (*authenticationv1.UserInfo, error) {
	review, err := client.AuthenticationV1().TokenReviews().Create(ctx, &authenticationv1.TokenReview{
		Spec: authenticationv1.TokenReviewSpec{Token: token, Audiences: audiences},
	}, metav1.CreateOptions{})
	if err != nil {
		return nil, fmt.Errorf("creating token review: %w", err)
	}
	st := review.Status
	if !st.Authenticated {
		if st.Error != "" {
			return nil, fmt.Errorf("%w: %s", ErrInvalidToken, st.Error)
		}
		return nil, ErrInvalidToken
	}
	// An audience-aware review says which of the audiences asked for it
	// checked; one that answers none did not check them.
	if len(audiences) > 0 && !slices.ContainsFunc(st.Audiences, func(aud string) bool { return slices.Contains(audiences, aud) }) {
		return nil, &audienceError{audiences: audiences}
	}
	user := st.User
	return &user, nil
}
