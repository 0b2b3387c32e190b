package localrun

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestParseNodesPicksTheNodesThatGetALocalController(t *testing.T) {
	for name, tc := range map[string]struct {
		localControllers string
		want             []string
		wantEveryNode    bool
		wantErr          string
	}{
		"default":             {localControllers: "", want: []string{"edge-0", "edge-1"}},
		"edge":                {localControllers: "edge", want: []string{"edge-0", "edge-1"}},
		"all, cloud first":    {localControllers: "all", want: []string{"cloud-0", "edge-0", "edge-1"}, wantEveryNode: true},
		"a list":              {localControllers: " edge-1  cloud-0 ", want: []string{"edge-1", "cloud-0"}, wantEveryNode: true},
		"the edge nodes":      {localControllers: "edge-0 edge-1", want: []string{"edge-0", "edge-1"}},
		"some edge nodes":     {localControllers: "edge-1", want: []string{"edge-1"}, wantEveryNode: true},
		"an unknown node":     {localControllers: "edge-0 edge-9", wantErr: "NEREID_LC_NODES names edge-9, which is not one of the local run's nodes (cloud-0 edge-0 edge-1)"},
		"more than the ports": {localControllers: "cloud-0 edge-0 edge-1 cloud-0 edge-0", wantErr: "at most 4 nodes get a LocalController"},
	} {
		t.Run(name, func(t *testing.T) {
			n, err := ParseNodes("cloud-0", "edge-0  edge-1", tc.localControllers)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("ParseNodes: %v, want an error saying %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, n.LocalControllers); diff != "" {
				t.Errorf("LocalControllers (-want,+got):\n%s", diff)
			}
			if got := n.EveryNode(); got != tc.wantEveryNode {
				t.Errorf("EveryNode = %v, want %v", got, tc.wantEveryNode)
			}
		})
	}
}

// TestTheLocalRunsCommandLines pins the flags that make the local run what it
// is: the GlobalManager under the chart's ServiceAccount, its Lease and edge
// hub in the local run's namespace, accepting only the local run's
// DaemonSet; every node accepted when LocalControllers run beyond the edge
// nodes; each LocalController on its reserved ports.
func TestTheLocalRunsCommandLines(t *testing.T) {
	edgeOnly, err := ParseNodes("cloud-0", "edge-0 edge-1", "edge")
	if err != nil {
		t.Fatal(err)
	}
	everyNode, err := ParseNodes("cloud-0", "edge-0 edge-1", "all")
	if err != nil {
		t.Fatal(err)
	}
	gmArgs := []string{
		"--kubeconfig=/out/kubeconfigs/globalmanager.kubeconfig", "--health-address=127.0.0.1:30010",
		"--leader-elect-namespace=nereid-local", "--edge-address=127.0.0.1:30011", "--edge-namespace=nereid-local",
		"--edge-ca-out=/out/edge/ca.crt", "--edge-service-accounts=nereid-local/nereid-localcontroller",
		"--edge-daemonset=nereid-local/nereid-localcontroller",
	}
	for name, tc := range map[string]struct {
		nodes         Nodes
		wantGM        []string
		wantSecondLC  []string
		wantDSOnNodes map[string]string
	}{
		"on the edge nodes": {
			nodes:  edgeOnly,
			wantGM: append(append([]string{}, gmArgs...), "--dijob-conversion-address=127.0.0.1:0"),
			wantSecondLC: []string{"--node-name=edge-1", "--gm-address=127.0.0.1:30011", "--ca-file=/out/edge/ca.crt",
				"--token-file=/out/edge/edge-1/token", "--worker-address=127.0.0.1:30014", "--health-address=127.0.0.1:30015",
				"--data-dir=/out/edge/edge-1/data", "--node-root=/out/edge/edge-1/root", "--dataset-poll-period=2s"},
			wantDSOnNodes: map[string]string{EdgeNodeLabel: "", KwokNodeLabel: KwokNodeLabelValue},
		},
		"on every node": {
			nodes:  everyNode,
			wantGM: append(append([]string{}, gmArgs...), "--edge-node-selector=", "--dijob-conversion-address=127.0.0.1:0"),
			wantSecondLC: []string{"--node-name=edge-0", "--gm-address=127.0.0.1:30011", "--ca-file=/out/edge/ca.crt",
				"--token-file=/out/edge/edge-0/token", "--worker-address=127.0.0.1:30014", "--health-address=127.0.0.1:30015",
				"--data-dir=/out/edge/edge-0/data", "--node-root=/out/edge/edge-0/root", "--dataset-poll-period=2s"},
			wantDSOnNodes: map[string]string{KwokNodeLabel: KwokNodeLabelValue},
		},
	} {
		t.Run(name, func(t *testing.T) {
			r := &Run{OutDir: "/out", Nodes: tc.nodes, FirstPort: 30010}
			if diff := cmp.Diff(tc.wantGM, r.GlobalManager().Args()); diff != "" {
				t.Errorf("the GlobalManager's command line (-want,+got):\n%s", diff)
			}
			if diff := cmp.Diff(tc.wantSecondLC, r.LocalController(1, tc.nodes.LocalControllers[1]).Args()); diff != "" {
				t.Errorf("the second LocalController's command line (-want,+got):\n%s", diff)
			}
			if diff := cmp.Diff(tc.wantDSOnNodes, r.localControllers().NodeSelector); diff != "" {
				t.Errorf("the DaemonSet's nodeSelector (-want,+got):\n%s", diff)
			}
		})
	}
}

// TestTheLocalRunServesTheReplicasAPIAsTheChartDoes: HTTPS with the
// GlobalManager's own certificate, in the chart's Secret, for the chart's
// token audience, on the loopback port it is given; the v1 server in plain
// HTTP, its host:port the coordinators' KUBERNETES_SERVER_URL; and both
// addresses are among those local-up prints.
func TestTheLocalRunServesTheReplicasAPIAsTheChartDoes(t *testing.T) {
	nodes, err := ParseNodes("cloud-0", "edge-0 edge-1", "edge")
	if err != nil {
		t.Fatal(err)
	}
	r := &Run{OutDir: "/out", Nodes: nodes, FirstPort: 30010, DIServerPort: 30006, DIV1ServerPort: 30007}
	gm := r.GlobalManager()
	args := gm.Args()
	want := []string{"--di-server-address=127.0.0.1:30006", "--di-server-url=https://127.0.0.1:30006",
		"--di-server-tls-secret=nereid-di-server-tls", "--di-server-token-audiences=nereid-di-server",
		"--di-v1-server-address=127.0.0.1:30007", "--di-v1-server-url=127.0.0.1:30007"}
	if diff := cmp.Diff(want, args[len(args)-len(want):]); diff != "" {
		t.Errorf("the replicas API's flags (-want,+got):\n%s", diff)
	}
	wantEndpoints := []string{"metrics: http://127.0.0.1:30010/metrics", "edge hub: wss://127.0.0.1:30011",
		"DIJob replicas API (v2alpha1): https://127.0.0.1:30006", "v1 replicas server: http://127.0.0.1:30007"}
	if diff := cmp.Diff(wantEndpoints, gm.Endpoints()); diff != "" {
		t.Errorf("what local-up prints (-want,+got):\n%s", diff)
	}
}

// TestWithRealNodesTheEndpointsAreTheHostsForwardedPorts: with real nodes the
// GlobalManager listens on the cluster network's gateway address; what
// local-up prints is the host's loopback port the gateway forwards there,
// and where pods reach it.
func TestWithRealNodesTheEndpointsAreTheHostsForwardedPorts(t *testing.T) {
	nodes, err := ParseNodes("cloud-0", "edge-0", "edge")
	if err != nil {
		t.Fatal(err)
	}
	r := &Run{OutDir: "/out", Nodes: nodes, FirstPort: 30010, DIServerPort: 30006, DIV1ServerPort: 30007,
		Real: &RealCluster{GatewayIP: "10.201.0.1", ReversePorts: []int{30010, 30011, 30007}}}
	want := []string{"metrics: http://127.0.0.1:30010/metrics", "edge hub: wss://127.0.0.1:30011",
		// not forwarded: as the GlobalManager listens
		"DIJob replicas API (v2alpha1): https://10.201.0.1:30006",
		"v1 replicas server: http://127.0.0.1:30007",
		"(pods and the real nodes reach them at 10.201.0.1, on the same ports)"}
	if diff := cmp.Diff(want, r.Endpoints()); diff != "" {
		t.Errorf("what local-up prints (-want,+got):\n%s", diff)
	}
}

func TestAGlobalManagerWithoutLeaseNamespaceRunsWithoutLeaderElection(t *testing.T) {
	got := GlobalManager{Kubeconfig: "kc", Namespace: "ns", HealthAddress: "127.0.0.1:0", Verbosity: 2, Extra: []string{"--x=1"}}.Args()
	want := []string{"--kubeconfig=kc", "--health-address=127.0.0.1:0", "--namespace=ns", "--leader-elect=false", "--dijob-conversion-address=", "-v=2", "--x=1"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("(-want,+got):\n%s", diff)
	}
}
