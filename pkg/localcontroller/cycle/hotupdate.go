package cycle

import (
	"encoding/json"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"time"

	"github.com/nereid-ml/nereid/pkg/edgeproto"
	"github.com/nereid-ml/nereid/pkg/localcontroller/nodefs"
)

// hotUpdate tells the inference worker of j, whose hot update is on, to
// load the round's model, as Sedna's LocalController does
// (hotModelUpdateDeployTask): it copies the model into the job's hot update
// folder on the node, which the worker has at edgeproto.HotUpdateMountPath,
// then rewrites the folder's config file to name it with a new update time.
// Sedna's ModelLoadingThread polls that file and loads the model when the
// time changes. The file is written whole (renamed into place), so the
// worker never reads half of it.
func (m *Manager) hotUpdate(j *job) error {
	src, err := m.cfg.Root.Resolve(j.status.CurrentRound.Models[0].URL)
	if err != nil {
		return fmt.Errorf("trained model: %w", err)
	}
	dir := filepath.Join(m.cfg.Root.Dir, filepath.FromSlash(edgeproto.HotUpdateDir(j.key.Kind, j.key.Namespace, j.key.Name)))
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("making the hot update folder: %w", describe(m.cfg.Root.Dir, err))
	}
	name := filepath.Base(src)
	if err := copyTree(filepath.Join(dir, name), src); err != nil {
		return fmt.Errorf("copying the model into the hot update folder: %w", describe(m.cfg.Root.Dir, err))
	}
	config, err := json.MarshalIndent(edgeproto.HotUpdateConfig{ModelConfig: edgeproto.HotUpdateModel{
		ModelPath:       path.Join(edgeproto.HotUpdateMountPath, name),
		ModelUpdateTime: m.Wall.Now().UTC().Format(time.RFC3339Nano),
	}}, "", " ")
	if err != nil {
		return err
	}
	if err := nodefs.WriteFile(filepath.Join(dir, edgeproto.HotUpdateConfigFile), config); err != nil {
		return fmt.Errorf("writing the hot update file: %w", describe(m.cfg.Root.Dir, err))
	}
	return nil
}
