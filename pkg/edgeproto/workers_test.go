package edgeproto

import (
	"math"
	"net/netip"
	"strings"
	"testing"
)

func TestAdmitsOnlyAWorkerFromItsAddresses(t *testing.T) {
	workers := []Worker{
		{Name: "a", IPs: []string{"127.64.0.5", "fd00::5"}},
		{Name: "b"}, // starting: no address yet
		{Name: "c", IPs: []string{"127.64.0.7"}},
	}
	cases := map[string]struct {
		worker string
		addr   string
		want   bool
	}{
		"its IPv4 address":              {"a", "127.64.0.5", true},
		"its IPv6 address":              {"a", "fd00::5", true},
		"its IPv4 address mapped in v6": {"a", "::ffff:127.64.0.5", true},
		"another worker's address":      {"a", "127.64.0.7", false},
		"the node's loopback":           {"a", "127.0.0.1", false},
		"a worker with no address yet":  {"b", "127.64.0.5", false},
		"a name that is no worker":      {"d", "127.64.0.7", false},
		"the last worker from its own":  {"c", "127.64.0.7", true},
		"a name before every worker":    {"0", "127.64.0.5", false},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if got := Admits(workers, tc.worker, netip.MustParseAddr(tc.addr)); got != tc.want {
				t.Errorf("Admits(%q from %s) = %v, want %v", tc.worker, tc.addr, got, tc.want)
			}
		})
	}
}

func TestWorkersDigestCoversAddresses(t *testing.T) {
	named := WorkersDigest([]Worker{{Name: "a"}})
	addressed := WorkersDigest([]Worker{{Name: "a", IPs: []string{"127.64.0.5"}}})
	moved := WorkersDigest([]Worker{{Name: "a", IPs: []string{"127.64.0.6"}}})
	if named == addressed || addressed == moved {
		t.Errorf("digests of a worker without an address, with one and with another: %q, %q, %q; want all different", named, addressed, moved)
	}
	if done := WorkersDigest([]Worker{{Name: "a", Done: true}}); done == named {
		t.Errorf("a worker done and one starting have the same digest")
	}
	if split := WorkersDigest([]Worker{{Name: "a", IPs: []string{"1"}}}); split == WorkersDigest([]Worker{{Name: "a1"}}) {
		t.Errorf("a name and an address hash as a longer name")
	}
}

// A Hello may claim only the store whose key it holds.
func TestAHelloClaimsOnlyTheStoreOfItsKey(t *testing.T) {
	key := NewStoreKey()
	other := NewStoreKey()
	if key == other || StoreIdentity(key) == StoreIdentity(other) {
		t.Fatalf("two new keys, or their identities, are the same")
	}
	cases := map[string]struct {
		hello   Hello
		wantErr string
	}{
		"its own store":             {hello: Hello{Node: "n", Store: StoreIdentity(key), StoreKey: key}},
		"another store's identity":  {hello: Hello{Node: "n", Store: StoreIdentity(other), StoreKey: key}, wantErr: "is not the identity of its storeKey"},
		"an identity without a key": {hello: Hello{Node: "n", Store: StoreIdentity(key)}, wantErr: "storeKey is required: is the LocalController older"},
		"a key in upper case":       {hello: Hello{Node: "n", Store: StoreIdentity(key), StoreKey: strings.ToUpper(key)}, wantErr: "storeKey is not 64"},
		"a last report ID past int64": {hello: Hello{Node: "n", Store: StoreIdentity(key), StoreKey: key, LastReportID: math.MaxInt64 + 1},
			wantErr: "lastReportID"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			_, err := Encode(&tc.hello)
			if (err == nil) != (tc.wantErr == "") || (err != nil && !strings.Contains(err.Error(), tc.wantErr)) {
				t.Errorf("Encode = %v, want an error with %q", err, tc.wantErr)
			}
		})
	}
}
