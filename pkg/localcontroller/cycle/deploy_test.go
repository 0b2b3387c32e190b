package cycle

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	sednav1 "github.com/nereid-ml/nereid/pkg/apis/sedna/v1alpha1"
)

// deployStatus is the cloud asking for round's model (at url) to be deployed.
func deployStatus(round, attempt int32, url string) sednav1.CycleStatus {
	return sednav1.CycleStatus{
		Stage: sednav1.StageDeploy, State: sednav1.StageReady, Round: round, Attempt: attempt,
		CurrentRound: &sednav1.RoundStatus{Round: round, Models: []sednav1.RoundModel{{URL: url, Format: "pb"}}},
	}
}

// deployReport is the body of the deploy report of an il job, as generic JSON.
func deployReport(status string, ownerInfo map[string]any, results ...any) any {
	r := map[string]any{
		"name": "nereid-localcontroller", "namespace": "ns", "ownerName": "il", "ownerKind": "incrementallearningjob",
		"kind": "deploy", "status": status, "ownerInfo": ownerInfo,
	}
	if len(results) > 0 {
		r["results"] = results
	}
	return r
}

func deployCompleted(round float64, url string) any {
	return deployReport("completed", map[string]any{"round": round}, map[string]any{"url": url, "format": "pb"})
}

func deployFailed(round float64, reason string) any {
	return deployReport("failed", map[string]any{"round": round, "reason": reason})
}

func TestDeployCopiesTheRoundsModelOnce(t *testing.T) {
	cases := map[string]struct {
		// files are the round's model: one file at /output/round-2/model.pb, or
		// files under /output/round-2/model.
		files    map[string]string
		modelURL string
		// existing is a directory created at the target beforehand.
		existing string
		want     map[string]string
	}{
		"a file over a file": {
			files: map[string]string{"/output/round-2/model.pb": "new"}, modelURL: "/models/deploy/saved_model.pb",
			want: map[string]string{"/models/deploy/saved_model.pb": "new"},
		},
		"a file into a directory": {
			files: map[string]string{"/output/round-2/model.pb": "new"}, modelURL: "/models/deploy", existing: "/models/deploy",
			want: map[string]string{"/models/deploy/model.pb": "new"},
		},
		"a directory": {
			files:    map[string]string{"/output/round-2/model/saved_model.pb": "graph", "/output/round-2/model/variables/v.index": "vars"},
			modelURL: "/models/deploy",
			want:     map[string]string{"/models/deploy/saved_model.pb": "graph", "/models/deploy/variables/v.index": "vars"},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			f := newFixture(t)
			f.putDataset(t, "/data/index.txt", "txt", "edge-0")
			f.putModel(t, "deploy-model", tc.modelURL)
			f.writeFile(t, "/models/deploy/saved_model.pb", "old")
			if tc.existing != "" {
				if err := os.MkdirAll(filepath.Join(f.root, tc.existing), 0o755); err != nil {
					t.Fatal(err)
				}
			}
			for url, content := range tc.files {
				f.writeFile(t, url, content)
			}
			source := "/output/round-2/model"
			if len(tc.files) == 1 {
				source = "/output/round-2/model.pb"
			}
			f.putIL(t, trainTrigger, deployStatus(2, 1, source))
			m := f.manager()
			tick(t, m)
			tick(t, m)
			if diff := cmp.Diff([]any{deployCompleted(2, tc.modelURL)}, f.take(t)); diff != "" {
				t.Errorf("reports (-want,+got):\n%s", diff)
			}
			for url, want := range tc.want {
				if got := f.readFile(t, url); got != want {
					t.Errorf("%s holds %q, want %q", url, got, want)
				}
			}

			// A restarted LocalController does not deploy the round again.
			tick(t, f.manager())
			if got := f.take(t); len(got) != 0 {
				t.Errorf("deployed again after a restart: %v", got)
			}
		})
	}
}

func TestDeployFailureIsReportedOnce(t *testing.T) {
	cases := map[string]struct {
		status     sednav1.CycleStatus
		noModel    bool
		wantReason string
	}{
		"missing source": {status: deployStatus(3, 1, "/output/round-3/model.pb"),
			wantReason: "copying /output/round-3/model.pb to /models/deploy.pb: stat /output/round-3/model.pb: no such file or directory"},
		"no model in the store": {status: deployStatus(3, 1, "/output/round-3/model.pb"), noModel: true,
			wantReason: "the deploy Model ns/deploy-model is not in the LocalController's store"},
		"no trained model": {status: sednav1.CycleStatus{Stage: sednav1.StageDeploy, State: sednav1.StageReady, Round: 3},
			wantReason: "round 3 has no trained model in status.currentRound.models"},
		"an s3 model": {status: deployStatus(3, 1, "s3://bucket/model.pb"),
			wantReason: `trained model: URL "s3://bucket/model.pb" is not a node path: the LocalController reads only paths on its node, starting with /`},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			f := newFixture(t)
			f.putDataset(t, "/data/index.txt", "txt", "edge-0")
			if !tc.noModel {
				f.putModel(t, "deploy-model", "/models/deploy.pb")
			}
			f.putIL(t, trainTrigger, tc.status)
			m := f.manager()
			tick(t, m)
			if got := f.take(t); len(got) != 0 {
				t.Fatalf("a first failed copy reported %v, want it tried again first", got)
			}
			f.mono.Step(DefaultDeployRetryFor)
			tick(t, m)
			tick(t, m)
			if diff := cmp.Diff([]any{deployFailed(3, tc.wantReason+" (2 tries over 2m0s)")}, f.take(t)); diff != "" {
				t.Errorf("reports (-want,+got):\n%s", diff)
			}
		})
	}
}

func TestDeployAnswersANewAttemptOfTheRound(t *testing.T) {
	f := newFixture(t)
	f.putDataset(t, "/data/index.txt", "txt", "edge-0")
	f.putModel(t, "deploy-model", "/models/deploy.pb")
	f.putIL(t, trainTrigger, deployStatus(2, 1, "/output/round-2/model.pb"))
	m := f.manager()
	tick(t, m)
	f.mono.Step(DefaultDeployRetryFor)
	tick(t, m)
	if got := f.take(t); len(got) != 1 {
		t.Fatalf("%d reports, want the failure", len(got))
	}
	f.writeFile(t, "/output/round-2/model.pb", "new")
	f.putIL(t, trainTrigger, deployStatus(2, 2, "/output/round-2/model.pb"))
	tick(t, m)
	if diff := cmp.Diff([]any{deployCompleted(2, "/models/deploy.pb")}, f.take(t)); diff != "" {
		t.Errorf("attempt 2 (-want,+got):\n%s", diff)
	}
}

func TestDeployWaitsForTheCloud(t *testing.T) {
	cases := map[string]sednav1.CycleStatus{
		"deploy waiting": {Stage: sednav1.StageDeploy, State: sednav1.StageWaiting, Round: 2,
			CurrentRound: &sednav1.RoundStatus{Models: []sednav1.RoundModel{{URL: "/output/model.pb"}}}},
		"evaluating": {Stage: sednav1.StageEval, State: sednav1.StageReady, Round: 2,
			CurrentRound: &sednav1.RoundStatus{Models: []sednav1.RoundModel{{URL: "/output/model.pb"}}}},
	}
	for name, status := range cases {
		t.Run(name, func(t *testing.T) {
			f := newFixture(t)
			f.putDataset(t, "/data/index.txt", "txt", "edge-0")
			f.putModel(t, "deploy-model", "/models/deploy.pb")
			f.writeFile(t, "/output/model.pb", "new")
			f.putIL(t, trainTrigger, status)
			tick(t, f.manager())
			if got := f.take(t); len(got) != 0 {
				t.Errorf("reports: %v", got)
			}
			if _, err := os.Stat(filepath.Join(f.root, "models/deploy.pb")); !os.IsNotExist(err) {
				t.Errorf("the model was copied: %v", err)
			}
		})
	}
}

// A failing copy is tried again after 1 s, 2 s, 4 s … at most 30 s apart,
// and reported failed only once it has failed for DeployRetryFor; a copy
// that works meanwhile deploys.
func TestDeployCopyIsRetriedWithBackoffBeforeItFails(t *testing.T) {
	f := newFixture(t)
	f.putDataset(t, "/data/index.txt", "txt", "edge-0")
	f.putModel(t, "deploy-model", "/models/deploy.pb")
	f.putIL(t, trainTrigger, deployStatus(2, 1, "/output/round-2/model.pb"))
	m := f.manager()
	const step = 500 * time.Millisecond
	var got []any
	var elapsed time.Duration
	for ; elapsed <= 3*time.Minute && len(got) == 0; elapsed += step {
		tick(t, m)
		got = f.take(t)
		f.mono.Step(step)
	}
	// Tries at 0, 1, 3, 7, 15, 31, 61, 91 and 121 s: the last is past 2 min.
	want := "copying /output/round-2/model.pb to /models/deploy.pb: stat /output/round-2/model.pb: no such file or directory (9 tries over 2m1s)"
	if diff := cmp.Diff([]any{deployFailed(2, want)}, got); diff != "" {
		t.Errorf("after %s (-want,+got):\n%s", elapsed, diff)
	}

	// The next attempt: the model comes between two tries and deploys.
	f.putIL(t, trainTrigger, deployStatus(2, 2, "/output/round-2/model.pb"))
	tick(t, m)
	f.mono.Step(step)
	tick(t, m) // within the first backoff: no try
	f.writeFile(t, "/output/round-2/model.pb", "new")
	if got := f.take(t); len(got) != 0 {
		t.Fatalf("reports before the model came: %v", got)
	}
	f.mono.Step(step)
	tick(t, m)
	if diff := cmp.Diff([]any{deployCompleted(2, "/models/deploy.pb")}, f.take(t)); diff != "" {
		t.Errorf("attempt 2 (-want,+got):\n%s", diff)
	}
}
