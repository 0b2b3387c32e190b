package realnode

import (
	"strings"
	"testing"
)

func TestLayoutNamesAndAddresses(t *testing.T) {
	l, err := NewLayout("/work/out/", []string{"real-0", "real-1"})
	if err != nil {
		t.Fatal(err)
	}
	other, _ := NewLayout("/work/other", nil)
	if l.ID == other.ID || len(l.ID) != 8 {
		t.Errorf("IDs %q and %q: want 8 hex digits, one per out dir", l.ID, other.ID)
	}
	for name, tc := range map[string]struct{ got, want string }{
		"node IP":        {l.NodeIP(1).String(), "10.201.0.12"},
		"pod range":      {l.PodCIDR(1).String(), "10.201.2.0/24"},
		"gateway":        {prefixOf(l.GatewayIP(), l.NodeNet()), "10.201.0.1/24"},
		"node netns":     {l.NodeNetns(1), "nereid-" + l.ID + "-1"},
		"node cgroup":    {l.NodeCgroup(0), "/nereid-" + l.ID + "/real-0"},
		"mount ns file":  {l.MountNS(0), "/run/nereid-" + l.ID + "/ns/real-0"},
		"node folder":    {l.NodeDir(1), "/work/out/real/nodes/real-1"},
		"egress socket":  {l.EgressSocket(), "/run/nereid-" + l.ID + "/egress.sock"},
		"cluster netns":  {l.ClusterNetns(), "nereid-" + l.ID},
		"cluster cgroup": {l.ClusterCgroup(), "/nereid-" + l.ID + "/cluster"},
	} {
		if tc.got != tc.want {
			t.Errorf("%s: %s, want %s", name, tc.got, tc.want)
		}
	}
	if !l.ClusterCIDR().Contains(l.PodCIDR(MaxNodes-1).Addr()) || !l.ClusterCIDR().Contains(l.NodeIP(MaxNodes-1)) {
		t.Errorf("the last node's addresses are outside %s", l.ClusterCIDR())
	}
}

func TestLayoutRefusesBadNodeNames(t *testing.T) {
	for name, tc := range map[string]struct {
		outDir  string
		nodes   []string
		wantErr string
	}{
		"relative out dir": {outDir: "out", wantErr: "absolute"},
		"upper case":       {outDir: "/o", nodes: []string{"Real-0"}, wantErr: `"Real-0"`},
		"twice":            {outDir: "/o", nodes: []string{"a", "a"}, wantErr: "twice"},
		"too long":         {outDir: "/o", nodes: []string{strings.Repeat("a", 33)}, wantErr: "at most 32"},
		"too many":         {outDir: "/o", nodes: make([]string, MaxNodes+1), wantErr: "at most 20"},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := NewLayout(tc.outDir, tc.nodes)
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Errorf("NewLayout: %v, want an error saying %q", err, tc.wantErr)
			}
		})
	}
}
