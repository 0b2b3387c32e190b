package auth

import (
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/clock"

	"github.com/nereid-ml/nereid/pkg/globalmanager/edgehub/edgehubtest"
)

// testConfig is the hub's default authentication (edgehub.Config's
// defaults), of the tests' namespace, on clk.
func testConfig(t *testing.T, client kubernetes.Interface, clk clock.Clock) Config {
	t.Helper()
	selector, err := labels.Parse("node-role.kubernetes.io/edge")
	if err != nil {
		t.Fatal(err)
	}
	return Config{
		Client: client, Audience: edgehubtest.Audience,
		ServiceAccounts:      []string{edgehubtest.Namespace + "/nereid-localcontroller"},
		DaemonSet:            types.NamespacedName{Namespace: edgehubtest.Namespace, Name: edgehubtest.DaemonSetName},
		NodeSelector:         selector,
		ReviewCacheTTL:       10 * time.Second,
		MaxCachedReviews:     20000,
		MaxConcurrentReviews: 64,
		ReviewQueueTimeout:   10 * time.Second,
		Clock:                clk,
	}
}
