// Package edgehubtest holds what the edge hub's packages share in their
// tests: the LocalController Pods and DaemonSet of the tests, and an API
// server's answers to TokenReviews and Node reads for them.
package edgehubtest

import (
	"encoding/base64"
	"encoding/json"
	"slices"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	clienttesting "k8s.io/client-go/testing"

	"github.com/nereid-ml/nereid/pkg/globalmanager/tokenreview"
)

// ReviewTokens answers TokenReviews as the API server would for projected
// ServiceAccount tokens bound to Pods. A token is "<name>" or, to carry
// claims, "<name>.<base64url JSON payload>.sig"; by name:
//
//	token-<node>        the LocalController's (edgehub.DefaultServiceAccount) Pod
//	                    lc-<node> (uid uid-<node>) on node, hub audience
//	token-other-<node>  a Pod of another ServiceAccount on node
//	token-unbound       the LocalController's ServiceAccount, no Pod
//	anything else       invalid
//
// A token's audience is its payload's aud, Audience when it has
// none; it is valid only for Audience.
func ReviewTokens(action clienttesting.Action) (bool, runtime.Object, error) {
	review := action.(clienttesting.CreateAction).GetObject().(*authenticationv1.TokenReview).DeepCopy()
	name, _, _ := strings.Cut(review.Spec.Token, ".")
	const lcUser = "system:serviceaccount:nereid-system:nereid-localcontroller"
	bound := func(user, node string) authenticationv1.UserInfo {
		return authenticationv1.UserInfo{Username: user, Extra: map[string]authenticationv1.ExtraValue{
			// auth.NodeNameExtra, PodNameExtra, PodUIDExtra: the API server's
			// keys (this package cannot import auth, whose tests use it).
			"authentication.kubernetes.io/node-name": {node}, "authentication.kubernetes.io/pod-name": {"lc-" + node},
			"authentication.kubernetes.io/pod-uid": {"uid-" + node},
		}}
	}
	tokenAudiences := []string{Audience}
	if c := tokenreview.ReadClaims(review.Spec.Token); c != nil && len(c.Audience) > 0 {
		tokenAudiences = c.Audience
	}
	if !slices.Contains(review.Spec.Audiences, Audience) || !slices.Contains(tokenAudiences, Audience) {
		review.Status = authenticationv1.TokenReviewStatus{Error: "token audiences are invalid for the target audiences"}
		return true, review, nil
	}
	ok := authenticationv1.TokenReviewStatus{Authenticated: true, Audiences: []string{Audience}}
	switch {
	case name == "token-unbound":
		ok.User = authenticationv1.UserInfo{Username: lcUser}
	case strings.HasPrefix(name, "token-other-"):
		ok.User = bound("system:serviceaccount:default:default", strings.TrimPrefix(name, "token-other-"))
	case strings.HasPrefix(name, "token-"):
		ok.User = bound(lcUser, strings.TrimPrefix(name, "token-"))
	default:
		review.Status = authenticationv1.TokenReviewStatus{Error: "invalid bearer token"}
		return true, review, nil
	}
	review.Status = ok
	return true, review, nil
}

// The tests' namespace of the hub, the LocalControllers' DaemonSet
// (edgehub.DefaultDaemonSet) and the tokens' audience
// (edgehub.DefaultTokenAudience).
const (
	Namespace     = "nereid-system"
	DaemonSetName = "nereid-localcontroller"
	DaemonSetUID  = "ds-uid"
	// AccountUID is the UID of the LocalControllers' ServiceAccount.
	AccountUID = "sa-uid"
	Audience   = "nereid-edgehub"
)

// LCDaemonSet is the LocalControllers' DaemonSet, of UID uid.
func LCDaemonSet(uid types.UID) *appsv1.DaemonSet {
	return &appsv1.DaemonSet{ObjectMeta: metav1.ObjectMeta{Namespace: Namespace, Name: DaemonSetName, UID: uid}}
}

// LCPod is the LocalController Pod of node as ReviewTokens binds its token:
// lc-<node> (uid uid-<node>), controlled by the DaemonSet of UID
// DaemonSetUID.
func LCPod(node string) *corev1.Pod {
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: Namespace, Name: "lc-" + node, UID: types.UID("uid-" + node)},
		Spec: corev1.PodSpec{ServiceAccountName: "nereid-localcontroller", NodeName: node}}
	pod.OwnerReferences = []metav1.OwnerReference{*metav1.NewControllerRef(LCDaemonSet(DaemonSetUID), appsv1.SchemeGroupVersion.WithKind("DaemonSet"))}
	return pod
}

// GetNodes answers Node reads: edge-* nodes are edge nodes, cloud-* nodes
// exist without the edge role, no other node exists.
func GetNodes(action clienttesting.Action) (bool, runtime.Object, error) {
	name := action.(clienttesting.GetAction).GetName()
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}}
	switch {
	case strings.HasPrefix(name, "edge-"):
		node.Labels = map[string]string{"node-role.kubernetes.io/edge": ""}
	case strings.HasPrefix(name, "cloud-"):
	default:
		return true, nil, apierrors.NewNotFound(corev1.Resource("nodes"), name)
	}
	return true, node, nil
}

// JWT is a token named name whose payload holds claims.
func JWT(name string, claims map[string]any) string {
	payload, _ := json.Marshal(claims)
	return name + "." + base64.RawURLEncoding.EncodeToString(payload) + ".sig"
}
