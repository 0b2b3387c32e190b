package edgeproto

import (
	"path"
	"strings"
)

// Model hot update, as Sedna does it (its runtime.ModelHotUpdate* constants
// and setModelHotUpdateEnv): an inference worker with hot update on polls a
// JSON file, {"model_config": {"model_path", "model_update_time"}}, every
// MODEL_POLL_PERIOD_SECONDS and loads model_path whenever
// model_update_time changes (Sedna's ModelLoadingThread). The GlobalManager
// mounts the job's folder on the node, HotUpdateDir, at HotUpdateMountPath
// and points MODEL_HOT_UPDATE_CONFIG at the file in it; the LocalController
// that deploys a round copies the model into that folder and rewrites the
// file.
const (
	// HotUpdateMountPath is where the folder appears in the worker.
	HotUpdateMountPath = "/model-hot-update"
	// HotUpdateConfigFile is the file's name in the folder.
	HotUpdateConfigFile = "model_config.json"
	// hotUpdateHostPrefix is where the jobs' folders are on a node.
	hotUpdateHostPrefix = "/var/lib/sedna/model-hot-update"
)

// HotUpdateDir is the node folder of the hot update of the job of kind
// (IncrementalLearningJob) namespace/name: Sedna's, lower-cased as Sedna
// lower-cases it, so that a worker moved from Sedna finds its file.
func HotUpdateDir(kind, namespace, name string) string {
	return strings.ToLower(path.Join(hotUpdateHostPrefix, namespace, kind, name))
}

// HotUpdateConfig is the file's content.
type HotUpdateConfig struct {
	ModelConfig HotUpdateModel `json:"model_config"`
}

// HotUpdateModel says which model the worker is to serve.
type HotUpdateModel struct {
	// ModelPath is the model as the worker sees it (under
	// HotUpdateMountPath).
	ModelPath string `json:"model_path"`
	// ModelUpdateTime changes with every deploy; the worker loads the model
	// again when it does.
	ModelUpdateTime string `json:"model_update_time"`
}
