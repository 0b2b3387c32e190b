package learningcycle

import (
	"fmt"
	"strconv"

	corev1 "k8s.io/api/core/v1"

	sednav1 "github.com/nereid-ml/nereid/pkg/apis/sedna/v1alpha1"
	"github.com/nereid-ml/nereid/pkg/globalmanager/controllers/common"
)

// LabelRound is the round a stage pod works on; pods of rounds long over are
// deleted by it.
const LabelRound = "nereid.io/round"

// workerPod builds the pod of a worker of the round st describes, from the
// current spec's template for role.
func (c *Controller[J]) workerPod(job J, spec Spec, refs Refs, st *Status, role Role, name string) (*corev1.Pod, error) {
	prefix := c.deps.Worker.DataPathPrefix
	local := func(url string) string { return common.ContainerPath(url, prefix) }
	env := common.BaseEnv{
		Owner: job, Worker: name,
		LogLevel: c.deps.Worker.LogLevel, DataPathPrefix: prefix, LocalController: c.deps.Worker.LocalController,
	}.Env()
	var hostPaths []string
	var template *corev1.PodTemplateSpec
	// What Sedna's GlobalManager sets for the stage's worker of either kind
	// (createPod and createInferPod of its incremental and lifelong learning
	// controllers): LC_SERVER, and the datasets' URLs of its mounts.
	sednaEnv := []string{common.EnvLCServer}
	round := st.CurrentRound
	if round == nil {
		round = &sednav1.RoundStatus{}
	}
	dataset := refs.Dataset.Spec.URL
	switch role {
	case RoleTrain:
		template = spec.Train
		out := RoundDir(spec.OutputDir, st.Round, role)
		env = append(env,
			common.Env("ORIGINAL_DATASET_URL", local(dataset)),
			common.Env("TRAIN_DATASET_URL", local(round.TrainDatasetURL)),
			common.Env("OUTPUT_URL", local(out)))
		hostPaths = append(hostPaths, dataset, round.TrainDatasetURL, out)
		sednaEnv = append(sednaEnv, "ORIGINAL_DATASET_URL", "TRAIN_DATASET_URL")
	case RoleEval:
		template = spec.Eval
		out := RoundDir(spec.OutputDir, st.Round, role)
		env = append(env,
			common.Env("ORIGINAL_DATASET_URL", local(dataset)),
			common.Env("TEST_DATASET_URL", local(round.TestDatasetURL)),
			common.Env("OUTPUT_URL", local(out)))
		hostPaths = append(hostPaths, dataset, round.TestDatasetURL, out)
		sednaEnv = append(sednaEnv, "ORIGINAL_DATASET_URL", "TEST_DATASET_URL")
	case RoleInference:
		template = spec.Inference
	}
	kindEnv, kindPaths := c.kind.Env(job, st, role, refs)
	env = append(env, kindEnv...)
	env = append(env, common.CredentialEnv(spec.CredentialName)...)
	hostPaths = append(hostPaths, kindPaths...)

	w := common.Worker{
		Name: name, Role: string(role), Template: template, Env: env,
		SednaEnv:  append(sednaEnv, c.kind.SednaEnv(job, role)...),
		HostPaths: hostPaths, DataPathPrefix: prefix,
	}
	if m, ok := c.kind.(Mounter[J]); ok {
		w.Mounts = m.Mounts(job, role)
	}
	hash, err := common.Hash(w.Role, w.Template, w.Env, w.HostPaths, w.DataPathPrefix)
	if err != nil {
		return nil, fmt.Errorf("hashing %s worker: %w", role, err)
	}
	w.Hash = hash
	pod := common.NewWorkerPod(job, c.gvk, w)
	if role != RoleInference {
		pod.Labels[LabelRound] = strconv.Itoa(int(st.Round))
	}
	// The workers read the dataset's node paths and report to that node's
	// LocalController, so a template that places them nowhere else runs them there.
	s := &pod.Spec
	if s.NodeName == "" && len(s.NodeSelector) == 0 && s.Affinity == nil {
		s.NodeName = refs.Dataset.Spec.NodeName
	}
	return pod, nil
}
