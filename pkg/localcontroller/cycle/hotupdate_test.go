package cycle

import (
	"encoding/json"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/nereid-ml/nereid/pkg/edgeproto"
)

// With hot update on, a deploy also puts the round's model in the job's hot
// update folder and says so in its file, which Sedna's inference worker
// polls; each deploy gives the file a new update time.
func TestDeployWithHotUpdateTellsTheInferenceWorker(t *testing.T) {
	f := newFixture(t)
	f.putDataset(t, "/data/index.txt", "txt", "edge-0")
	f.putModel(t, "deploy-model", "/models/deploy.pb")
	f.writeFile(t, "/output/round-2/model.pb", "round 2")
	job := ilJob("uid-1", trainTrigger, deployStatus(2, 1, "/output/round-2/model.pb"))
	job.Spec.DeploySpec.Model.HotUpdateEnabled = true
	f.put(t, "IncrementalLearningJob", "il", job)
	m := f.manager()
	tick(t, m)
	tick(t, m)
	if diff := cmp.Diff([]any{deployCompleted(2, "/models/deploy.pb")}, f.take(t)); diff != "" {
		t.Errorf("reports (-want,+got):\n%s", diff)
	}
	dir := "/var/lib/sedna/model-hot-update/ns/incrementallearningjob/il"
	if got := f.readFile(t, dir+"/model.pb"); got != "round 2" {
		t.Errorf("the hot update folder's model holds %q, want the round's", got)
	}
	var config edgeproto.HotUpdateConfig
	if err := json.Unmarshal([]byte(f.readFile(t, dir+"/model_config.json")), &config); err != nil {
		t.Fatal(err)
	}
	if config.ModelConfig.ModelPath != "/model-hot-update/model.pb" || config.ModelConfig.ModelUpdateTime == "" {
		t.Errorf("hot update file %+v, want model_path /model-hot-update/model.pb and an update time", config)
	}
	if got := f.readFile(t, "/models/deploy.pb"); got != "round 2" {
		t.Errorf("the deploy Model's file holds %q, want the round's", got)
	}
}
