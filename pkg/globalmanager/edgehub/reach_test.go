package edgehub

import (
	"fmt"
	"testing"
	"time"

	"k8s.io/client-go/kubernetes/fake"
	testingclock "k8s.io/utils/clock/testing"
)

// TestReachReadsABoundedNumberOfNodesAScan: node names come from objects
// anyone who may create a Dataset writes; a scan reads at most
// nodeReadsPerScan of them, and a read is reused for nodeCacheTTL.
func TestReachReadsABoundedNumberOfNodesAScan(t *testing.T) {
	kube := fake.NewClientset()
	r := &reach{hub: &Hub{client: kube, clock: testingclock.NewFakeClock(time.Unix(1000, 0))}, nodes: map[string]readNode{}}
	r.reads = nodeReadsPerScan
	for i := range 3 * nodeReadsPerScan {
		r.nodeExists(t.Context(), fmt.Sprintf("node-%d", i))
	}
	if got := len(kube.Actions()); got != nodeReadsPerScan {
		t.Errorf("%d node reads in a scan of %d names, want %d", got, 3*nodeReadsPerScan, nodeReadsPerScan)
	}
	if r.nodeExists(t.Context(), "node-0") {
		t.Errorf("node-0, read as missing, is said to exist")
	}
	r.reads = nodeReadsPerScan
	r.nodeExists(t.Context(), "node-0")
	if got := len(kube.Actions()); got != nodeReadsPerScan {
		t.Errorf("node-0 read again within %s (%d reads)", nodeCacheTTL, got)
	}
}
