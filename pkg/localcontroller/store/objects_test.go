package store

import (
	"path/filepath"
	"runtime"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	bolt "go.etcd.io/bbolt"

	"github.com/nereid-ml/nereid/pkg/edgeproto"
)

func openTestStore(t *testing.T, path string, opts Options) *Store {
	t.Helper()
	s, err := Open(path, opts)
	if err != nil {
		t.Fatalf("Open(%s): %v", path, err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

func TestKeyString(t *testing.T) {
	k := Key{Kind: "FederatedLearningJob", Namespace: "default", Name: "fl"}
	if got, want := k.String(), "FederatedLearningJob/default/fl"; got != want {
		t.Errorf("String() = %q, want %q", got, want)
	}
}

// objectPut is one PutObject.
type objectPut struct {
	key  Key
	rv   string
	data string
}

// objectsCase is puts and deletes, and what the store lists and holds
// after them.
type objectsCase struct {
	puts          []objectPut
	deletes       []Key
	listKind      string
	wantList      []Object
	wantInventory []Version
}

func objectsCases() map[string]objectsCase {
	var (
		dsA   = Key{Kind: "Dataset", Namespace: "a", Name: "d1"}
		dsB   = Key{Kind: "Dataset", Namespace: "b", Name: "d1"}
		dsA2  = Key{Kind: "Dataset", Namespace: "a", Name: "d2"}
		model = Key{Kind: "Model", Namespace: "a", Name: "m"}
		// "Dataset" is a prefix of "DatasetX": listing Dataset must not return it.
		prefixKind = Key{Kind: "DatasetX", Namespace: "a", Name: "x"}
	)
	obj := func(k Key, rv, data string) Object { return Object{Key: k, ResourceVersion: rv, Data: []byte(data)} }

	return map[string]objectsCase{
		"empty store": {
			listKind: "",
		},
		"ordered by kind, namespace, name": {
			puts: []objectPut{
				{model, "7", "m"}, {dsB, "3", "b"}, {dsA2, "2", "a2"}, {dsA, "1", "a1"}, {prefixKind, "9", "x"},
			},
			listKind: "",
			wantList: []Object{
				obj(dsA, "1", "a1"), obj(dsA2, "2", "a2"), obj(dsB, "3", "b"), obj(prefixKind, "9", "x"), obj(model, "7", "m"),
			},
			wantInventory: []Version{
				{Key: dsA, ResourceVersion: "1"}, {Key: dsA2, ResourceVersion: "2"}, {Key: dsB, ResourceVersion: "3"}, {Key: prefixKind, ResourceVersion: "9"}, {Key: model, ResourceVersion: "7"},
			},
		},
		"list one kind": {
			puts:     []objectPut{{model, "7", "m"}, {dsA, "1", "a1"}, {prefixKind, "9", "x"}},
			listKind: "Dataset",
			wantList: []Object{obj(dsA, "1", "a1")},
			wantInventory: []Version{
				{Key: dsA, ResourceVersion: "1"}, {Key: prefixKind, ResourceVersion: "9"}, {Key: model, ResourceVersion: "7"},
			},
		},
		"put replaces data and resourceVersion": {
			puts:          []objectPut{{dsA, "1", "old"}, {dsA, "5", "new"}},
			listKind:      "Dataset",
			wantList:      []Object{obj(dsA, "5", "new")},
			wantInventory: []Version{{Key: dsA, ResourceVersion: "5"}},
		},
		"delete, and delete of an absent key": {
			puts:          []objectPut{{dsA, "1", "a1"}, {model, "7", "m"}},
			deletes:       []Key{dsA, dsA, dsB},
			listKind:      "",
			wantList:      []Object{obj(model, "7", "m")},
			wantInventory: []Version{{Key: model, ResourceVersion: "7"}},
		},
		"empty data and resourceVersion": {
			puts:          []objectPut{{dsA, "", ""}},
			listKind:      "",
			wantList:      []Object{{Key: dsA, Data: []byte{}}},
			wantInventory: []Version{{Key: dsA}},
		},
	}
}

func TestObjectsPutGetListDeleteInventory(t *testing.T) {
	cases := objectsCases()
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			s := openTestStore(t, filepath.Join(t.TempDir(), "lc.db"), Options{})
			for _, p := range tc.puts {
				if err := s.PutObject(p.key, p.rv, nil, []byte(p.data)); err != nil {
					t.Fatalf("PutObject(%s): %v", p.key, err)
				}
			}
			for _, k := range tc.deletes {
				if err := s.DeleteObject(k); err != nil {
					t.Fatalf("DeleteObject(%s): %v", k, err)
				}
			}
			gotList, err := s.ListObjects(tc.listKind)
			if err != nil {
				t.Fatalf("ListObjects: %v", err)
			}
			if diff := cmp.Diff(tc.wantList, gotList); diff != "" {
				t.Errorf("ListObjects(%q) (-want,+got):\n%s", tc.listKind, diff)
			}
			gotInv, err := s.Inventory()
			if err != nil {
				t.Fatalf("Inventory: %v", err)
			}
			if diff := cmp.Diff(tc.wantInventory, gotInv, cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("Inventory (-want,+got):\n%s", diff)
			}
			for _, want := range tc.wantList {
				got, found, err := s.GetObject(want.Key)
				if err != nil || !found {
					t.Fatalf("GetObject(%s) = found %t, %v; want found", want.Key, found, err)
				}
				if diff := cmp.Diff(want, got); diff != "" {
					t.Errorf("GetObject(%s) (-want,+got):\n%s", want.Key, diff)
				}
			}
			for _, k := range tc.deletes {
				if _, found, err := s.GetObject(k); err != nil || found {
					t.Errorf("GetObject(%s) after delete = found %t, %v; want not found", k, found, err)
				}
			}
		})
	}
}

func TestApplyObjectsAppliesAllInOrderOrNothing(t *testing.T) {
	var (
		dsA   = Key{Kind: "Dataset", Namespace: "a", Name: "d1"}
		model = Key{Kind: "Model", Namespace: "a", Name: "m"}
		held  = Key{Kind: "Model", Namespace: "a", Name: "held"}
	)
	put := func(k Key, rv string) ObjectChange {
		return ObjectChange{Key: k, ResourceVersion: rv, Data: []byte(k.Name + "@" + rv)}
	}
	del := func(k Key) ObjectChange { return ObjectChange{Key: k, Delete: true} }
	cases := map[string]struct {
		changes []ObjectChange
		wantErr bool
		want    []Object
	}{
		"puts and deletes, in order": {
			changes: []ObjectChange{put(dsA, "1"), put(model, "2"), del(held), del(dsA), put(dsA, "3"), put(model, "4")},
			want: []Object{{Key: dsA, ResourceVersion: "3", Data: []byte("d1@3")},
				{Key: model, ResourceVersion: "4", Data: []byte("m@4")}},
		},
		"a delete of an absent key": {
			changes: []ObjectChange{del(dsA)},
			want:    []Object{{Key: held, ResourceVersion: "1", Data: []byte("held")}},
		},
		"an invalid key, and nothing is applied": {
			changes: []ObjectChange{put(dsA, "1"), del(held), put(Key{Kind: "Model", Namespace: "a"}, "2")},
			wantErr: true,
			want:    []Object{{Key: held, ResourceVersion: "1", Data: []byte("held")}},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			s := openTestStore(t, filepath.Join(t.TempDir(), "lc.db"), Options{})
			if err := s.PutObject(held, "1", nil, []byte("held")); err != nil {
				t.Fatal(err)
			}
			if err := s.ApplyObjects(tc.changes); (err != nil) != tc.wantErr {
				t.Errorf("ApplyObjects = %v, want an error %t", err, tc.wantErr)
			}
			got, err := s.ListObjects("")
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("objects after ApplyObjects (-want,+got):\n%s", diff)
			}
		})
	}
}

func TestObjectsRejectInvalidKeys(t *testing.T) {
	cases := map[string]Key{
		"no kind":  {Namespace: "a", Name: "n"},
		"no name":  {Kind: "Model", Namespace: "a"},
		"NUL byte": {Kind: "Model", Namespace: "a\x00b", Name: "n"},
	}
	for name, k := range cases {
		t.Run(name, func(t *testing.T) {
			s := openTestStore(t, filepath.Join(t.TempDir(), "lc.db"), Options{})
			if err := s.PutObject(k, "1", nil, []byte("x")); err == nil {
				t.Errorf("PutObject(%q) succeeded, want an error", k)
			}
			if _, _, err := s.GetObject(k); err == nil {
				t.Errorf("GetObject(%q) succeeded, want an error", k)
			}
		})
	}
}

func TestObjectsSurviveReopen(t *testing.T) {
	path := filepath.Join(t.TempDir(), "lc.db")
	k1 := Key{Kind: "JointInferenceService", Namespace: "default", Name: "helmet"}
	k2 := Key{Kind: "Model", Namespace: "default", Name: "big"}
	gone := Key{Kind: "Dataset", Namespace: "default", Name: "old"}

	s, err := Open(path, Options{})
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	for _, p := range []struct {
		k    Key
		rv   string
		data string
	}{{k1, "10", `{"spec":1}`}, {k2, "11", `{"spec":2}`}, {gone, "12", `{}`}} {
		if err := s.PutObject(p.k, p.rv, nil, []byte(p.data)); err != nil {
			t.Fatalf("PutObject(%s): %v", p.k, err)
		}
	}
	if err := s.DeleteObject(gone); err != nil {
		t.Fatalf("DeleteObject: %v", err)
	}
	if err := s.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}

	s = openTestStore(t, path, Options{})
	got, err := s.ListObjects("")
	if err != nil {
		t.Fatalf("ListObjects: %v", err)
	}
	want := []Object{
		{Key: k1, ResourceVersion: "10", Data: []byte(`{"spec":1}`)},
		{Key: k2, ResourceVersion: "11", Data: []byte(`{"spec":2}`)},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("ListObjects after reopen (-want,+got):\n%s", diff)
	}
}

func TestObjectKeepsItsWorkersAndOldValuesStillRead(t *testing.T) {
	s, err := Open(filepath.Join(t.TempDir(), "lc.db"), Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	job := Key{Kind: "FederatedLearningJob", Namespace: "ns", Name: "job"}
	old := Key{Kind: "FederatedLearningJob", Namespace: "ns", Name: "old"}
	if err := s.PutObject(job, "5", []edgeproto.Worker{{Name: "job-a", IPs: []string{"10.0.0.1", "fd00::1"}}, {Name: "job-b"}}, []byte(`{"spec":{}}`)); err != nil {
		t.Fatal(err)
	}
	// A value of the first format, as an earlier LocalController wrote it.
	v1 := append([]byte{objectFormatV1, 1, '3'}, `{"old":true}`...)
	if err := s.db.Update(func(tx *bolt.Tx) error { return tx.Bucket(objectsBucket).Put(old.encode(), v1) }); err != nil {
		t.Fatal(err)
	}
	got, _, err := s.GetObject(job)
	if err != nil {
		t.Fatal(err)
	}
	want := Object{Key: job, ResourceVersion: "5", Workers: []edgeproto.Worker{{Name: "job-a", IPs: []string{"10.0.0.1", "fd00::1"}}, {Name: "job-b"}}, Data: []byte(`{"spec":{}}`)}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("GetObject (-want,+got):\n%s", diff)
	}
	inv, err := s.Inventory()
	if err != nil {
		t.Fatal(err)
	}
	wantInv := []Version{{Key: job, ResourceVersion: "5", Workers: want.Workers}, {Key: old, ResourceVersion: "3"}}
	if diff := cmp.Diff(wantInv, inv); diff != "" {
		t.Errorf("Inventory (-want,+got):\n%s", diff)
	}
	gotOld, _, err := s.GetObject(old)
	if err != nil || string(gotOld.Data) != `{"old":true}` || gotOld.Workers != nil {
		t.Errorf("reading a first-format value: %+v, %v", gotOld, err)
	}
}

// The digest the GlobalManager sends goes back in the Inventory; a value of
// the second format (an earlier LocalController's) reads with none.
func TestObjectKeepsItsDigestAndSecondFormatValuesStillRead(t *testing.T) {
	s, err := Open(filepath.Join(t.TempDir(), "lc.db"), Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	job := Key{Kind: "FederatedLearningJob", Namespace: "ns", Name: "job"}
	old := Key{Kind: "FederatedLearningJob", Namespace: "ns", Name: "old"}
	err = s.ApplyObjects([]ObjectChange{{Key: job, ResourceVersion: "9", Digest: "0123456789abcdef", Workers: []edgeproto.Worker{{Name: "w", IPs: []string{"10.0.0.9"}}}, Data: []byte(`{}`)}})
	if err != nil {
		t.Fatal(err)
	}
	v2 := append([]byte{objectFormatV2, 1, '4', 1, 1, 'x'}, `{"old":true}`...)
	if err := s.db.Update(func(tx *bolt.Tx) error { return tx.Bucket(objectsBucket).Put(old.encode(), v2) }); err != nil {
		t.Fatal(err)
	}
	inv, err := s.Inventory()
	if err != nil {
		t.Fatal(err)
	}
	want := []Version{{Key: job, ResourceVersion: "9", Digest: "0123456789abcdef", Workers: []edgeproto.Worker{{Name: "w", IPs: []string{"10.0.0.9"}}}},
		{Key: old, ResourceVersion: "4", Workers: []edgeproto.Worker{{Name: "x"}}}}
	if diff := cmp.Diff(want, inv); diff != "" {
		t.Errorf("Inventory (-want,+got):\n%s", diff)
	}
	got, _, err := s.GetObject(job)
	if err != nil || got.Digest != "0123456789abcdef" || string(got.Data) != `{}` {
		t.Errorf("GetObject: %+v, %v", got, err)
	}
}

// The worker API asks, for every report, which pods of an object are on the
// node: the answer does not copy the object, however large.
func TestGetWorkersCopiesNoData(t *testing.T) {
	s := openTestStore(t, filepath.Join(t.TempDir(), "lc.db"), Options{})
	job := Key{Kind: "FederatedLearningJob", Namespace: "ns", Name: "job"}
	if err := s.PutObject(job, "7", []edgeproto.Worker{{Name: "job-training-0", IPs: []string{"10.0.0.1"}}}, make([]byte, 1<<20)); err != nil {
		t.Fatal(err)
	}
	workers, found, err := s.GetWorkers(job)
	if err != nil || !found || !cmp.Equal(workers, []edgeproto.Worker{{Name: "job-training-0", IPs: []string{"10.0.0.1"}}}) {
		t.Fatalf("GetWorkers = %v, %v, %v; want [job-training-0], found", workers, found, err)
	}
	if _, found, err := s.GetWorkers(Key{Kind: "FederatedLearningJob", Namespace: "ns", Name: "other"}); found || err != nil {
		t.Errorf("GetWorkers of an absent object: found %v, %v", found, err)
	}
	perCall := testing.AllocsPerRun(10, func() { _, _, _ = s.GetWorkers(job) })
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	for range 10 {
		_, _, _ = s.GetWorkers(job)
	}
	runtime.ReadMemStats(&after)
	if bytes := (after.TotalAlloc - before.TotalAlloc) / 10; bytes > 64<<10 {
		t.Errorf("GetWorkers allocates %d bytes a call (%v allocations), want well under the object's 1 MiB", bytes, perCall)
	}
}
