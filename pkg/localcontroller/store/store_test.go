package store

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/uuid"
	bolt "go.etcd.io/bbolt"
)

func TestOpenOfALockedFileFailsWithinTimeout(t *testing.T) {
	path := filepath.Join(t.TempDir(), "lc.db")
	first, err := Open(path, Options{})
	if err != nil {
		t.Fatalf("Open: %v", err)
	}

	const timeout = 200 * time.Millisecond
	start := time.Now()
	second, err := Open(path, Options{LockTimeout: timeout})
	elapsed := time.Since(start)
	if err == nil {
		_ = second.Close()
		t.Fatal("second Open of a locked file succeeded")
	}
	if !errors.Is(err, ErrLocked) {
		t.Errorf("second Open: %v, want ErrLocked", err)
	}
	if !strings.Contains(err.Error(), path) {
		t.Errorf("error %q does not name the file", err)
	}
	t.Logf("second Open after %s: %v", elapsed, err)
	// bbolt retries the lock every 50ms and may give up one retry early.
	if elapsed > timeout+5*time.Second {
		t.Errorf("second Open gave up after %s, want about %s", elapsed, timeout)
	}

	// Once the first holder is gone, the file opens again.
	if err := first.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	openTestStore(t, path, Options{LockTimeout: timeout})
}

func TestOpenCreatesTheDirectory(t *testing.T) {
	path := filepath.Join(t.TempDir(), "var", "lib", "nereid", "lc.db")
	openTestStore(t, path, Options{})
	if _, err := os.Stat(path); err != nil {
		t.Errorf("store file: %v", err)
	}
}

// killChildEnv makes the test binary, run again as a child, write to the store
// at the given path until it is killed.
const killChildEnv = "NEREID_STORE_TEST_KILL_CHILD"

// TestKilledProcessLosesNothingItAcknowledged kills a process that writes
// objects and reports with SIGKILL, then checks that every write it had
// returned from (and so would have acknowledged, to the GlobalManager or to a
// worker) is in the file.
func TestKilledProcessLosesNothingItAcknowledged(t *testing.T) {
	if path := os.Getenv(killChildEnv); path != "" {
		runKillChild(path)
		return
	}
	path := filepath.Join(t.TempDir(), "lc.db")
	cmd := exec.Command(os.Args[0], "-test.run=^TestKilledProcessLosesNothingItAcknowledged$")
	cmd.Env = append(os.Environ(), killChildEnv+"="+path)
	cmd.Stderr = os.Stderr
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}

	// Each line is "i id": object i and report id were both returned from.
	const acknowledged = 200
	wantIDs := map[uint64]int{}
	lastObject := -1
	sc := bufio.NewScanner(stdout)
	for len(wantIDs) < acknowledged && sc.Scan() {
		var (
			i  int
			id uint64
		)
		if _, err := fmt.Sscanf(sc.Text(), "%d %d", &i, &id); err != nil {
			t.Fatalf("child output %q: %v", sc.Text(), err)
		}
		wantIDs[id] = i
		lastObject = i
	}
	if err := cmd.Process.Kill(); err != nil {
		t.Fatalf("killing the child: %v", err)
	}
	_ = cmd.Wait()
	if len(wantIDs) < acknowledged {
		t.Fatalf("child acknowledged %d writes before it stopped, want %d (%v)", len(wantIDs), acknowledged, sc.Err())
	}

	s := openTestStore(t, path, Options{LockTimeout: 5 * time.Second})
	gotIDs := map[uint64]int{}
	pending := mustPending(t, s, 0, 0)
	for _, r := range pending {
		i, err := strconv.Atoi(string(r.Data))
		if err != nil {
			t.Fatalf("report %d data %q: %v", r.ID, r.Data, err)
		}
		gotIDs[r.ID] = i
	}
	for id, i := range wantIDs {
		if got, ok := gotIDs[id]; !ok || got != i {
			t.Errorf("report %d (%d) acknowledged but not in the outbox after the kill", id, i)
		}
	}
	for i := 0; i <= lastObject; i++ {
		k := Key{Kind: "Model", Namespace: "default", Name: fmt.Sprintf("m%05d", i)}
		o, found, err := s.GetObject(k)
		if err != nil || !found {
			t.Errorf("object %s acknowledged but not found after the kill (%v)", k, err)
			continue
		}
		if diff := cmp.Diff(strconv.Itoa(i), o.ResourceVersion); diff != "" {
			t.Errorf("object %s resourceVersion (-want,+got):\n%s", k, diff)
		}
	}
	t.Logf("after SIGKILL: %d acknowledged reports and %d objects all present; %d reports in the outbox",
		len(wantIDs), lastObject+1, len(pending))
}

func runKillChild(path string) {
	s, err := Open(path, Options{})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	w := bufio.NewWriter(os.Stdout)
	for i := 0; ; i++ {
		k := Key{Kind: "Model", Namespace: "default", Name: fmt.Sprintf("m%05d", i)}
		if err := s.PutObject(k, strconv.Itoa(i), nil, []byte(`{"spec":{}}`)); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(2)
		}
		id, err := s.AppendReport([]byte(strconv.Itoa(i)))
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(2)
		}
		fmt.Fprintf(w, "%d %d\n", i, id)
		_ = w.Flush()
	}
}

func TestIdentityIsMadeWithTheFileAndKeptWithIt(t *testing.T) {
	tests := map[string]struct {
		// after changes the file between the first Open and the second.
		after    func(t *testing.T, path string)
		wantSame bool
	}{
		"reopened": {after: func(*testing.T, string) {}, wantSame: true},
		"wiped": {after: func(t *testing.T, path string) {
			if err := os.RemoveAll(filepath.Dir(path)); err != nil {
				t.Fatal(err)
			}
		}},
		"replaced by a file made before stores had identities": {after: func(t *testing.T, path string) {
			if err := os.Remove(path); err != nil {
				t.Fatal(err)
			}
			db, err := bolt.Open(path, 0o600, nil)
			if err != nil {
				t.Fatal(err)
			}
			err = db.Update(func(tx *bolt.Tx) error {
				_, err := tx.CreateBucket(outboxBucket)
				return err
			})
			if err := errors.Join(err, db.Close()); err != nil {
				t.Fatal(err)
			}
		}},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "data", "lc.db")
			s, err := Open(path, Options{})
			if err != nil {
				t.Fatal(err)
			}
			first := s.Identity()
			if err := uuid.Validate(first); err != nil {
				t.Errorf("identity %q: %v", first, err)
			}
			if err := s.Close(); err != nil {
				t.Fatal(err)
			}
			tc.after(t, path)

			again := openTestStore(t, path, Options{})
			if got := again.Identity(); (got == first) != tc.wantSame || got == "" {
				t.Errorf("identity %q after the first %q; want the same: %v", got, first, tc.wantSame)
			}
			// Read from the file, not made up at every Open.
			id := again.Identity()
			if err := again.Close(); err != nil {
				t.Fatal(err)
			}
			if got := openTestStore(t, path, Options{}).Identity(); got != id {
				t.Errorf("identity %q on the next Open, want %q again", got, id)
			}
		})
	}
}
