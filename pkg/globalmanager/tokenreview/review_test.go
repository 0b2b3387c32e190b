package tokenreview

import (
	"errors"
	"testing"

	"github.com/google/go-cmp/cmp"
	authenticationv1 "k8s.io/api/authentication/v1"
	"k8s.io/apimachinery/pkg/runtime"
	kubefake "k8s.io/client-go/kubernetes/fake"
	clienttesting "k8s.io/client-go/testing"
)

// reviewer is a fake clientset whose TokenReviews answer status and record
// their spec.
func reviewer(status authenticationv1.TokenReviewStatus, err error, specs *[]authenticationv1.TokenReviewSpec) *kubefake.Clientset {
	client := kubefake.NewClientset()
	client.PrependReactor("create", "tokenreviews", func(action clienttesting.Action) (bool, runtime.Object, error) {
		review := action.(clienttesting.CreateAction).GetObject().(*authenticationv1.TokenReview).DeepCopy()
		*specs = append(*specs, review.Spec)
		if err != nil {
			return true, nil, err
		}
		review.Status = status
		return true, review, nil
	})
	return client
}

func TestReview(t *testing.T) {
	alice := authenticationv1.UserInfo{Username: "alice", UID: "uid-alice"}
	cases := map[string]struct {
		audiences []string
		status    authenticationv1.TokenReviewStatus
		err       error

		wantUser          *authenticationv1.UserInfo
		wantError         string
		wantInvalid       bool
		wantWrongAudience bool
	}{
		"valid for the audience asked": {
			audiences: []string{"hub"},
			status:    authenticationv1.TokenReviewStatus{Authenticated: true, User: alice, Audiences: []string{"hub"}},
			wantUser:  &alice,
		},
		"valid for one of the audiences asked": {
			audiences: []string{"a", "b"},
			status:    authenticationv1.TokenReviewStatus{Authenticated: true, User: alice, Audiences: []string{"b"}},
			wantUser:  &alice,
		},
		"no audience asked: the API server's own, not checked": {
			status:   authenticationv1.TokenReviewStatus{Authenticated: true, User: alice},
			wantUser: &alice,
		},
		"valid, but the review names no audience asked": {
			audiences: []string{"hub"},
			status:    authenticationv1.TokenReviewStatus{Authenticated: true, User: alice, Audiences: []string{"https://kubernetes.default.svc"}},
			wantError: "the token is not valid: it was not validated for the audiences hub", wantInvalid: true, wantWrongAudience: true,
		},
		"an API server that does not check audiences": {
			audiences: []string{"hub", "api"},
			status:    authenticationv1.TokenReviewStatus{Authenticated: true, User: alice},
			wantError: "the token is not valid: it was not validated for the audiences hub, api", wantInvalid: true, wantWrongAudience: true,
		},
		"not valid, saying why": {
			audiences: []string{"hub"},
			status:    authenticationv1.TokenReviewStatus{Error: "token has expired"},
			wantError: "the token is not valid: token has expired", wantInvalid: true,
		},
		"not valid": {
			status:    authenticationv1.TokenReviewStatus{},
			wantError: "the token is not valid", wantInvalid: true,
		},
		"the review fails": {
			err:       errors.New("the server is on fire"),
			wantError: "creating token review: the server is on fire",
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			var specs []authenticationv1.TokenReviewSpec
			user, err := Review(t.Context(), reviewer(tc.status, tc.err, &specs), "the-token", tc.audiences)
			if diff := cmp.Diff([]authenticationv1.TokenReviewSpec{{Token: "the-token", Audiences: tc.audiences}}, specs); diff != "" {
				t.Errorf("reviews made (-want,+got):\n%s", diff)
			}
			if diff := cmp.Diff(tc.wantUser, user); diff != "" {
				t.Errorf("user (-want,+got):\n%s", diff)
			}
			gotError := ""
			if err != nil {
				gotError = err.Error()
			}
			if gotError != tc.wantError {
				t.Errorf("error %q, want %q", gotError, tc.wantError)
			}
			if got := errors.Is(err, ErrInvalidToken); got != tc.wantInvalid {
				t.Errorf("errors.Is(err, ErrInvalidToken) = %v, want %v", got, tc.wantInvalid)
			}
			if got := errors.Is(err, ErrWrongAudience); got != tc.wantWrongAudience {
				t.Errorf("errors.Is(err, ErrWrongAudience) = %v, want %v", got, tc.wantWrongAudience)
			}
		})
	}
}
