package incrementallearning

import (
	"path"
	"strconv"

	corev1 "k8s.io/api/core/v1"

	sednav1 "github.com/nereid-ml/nereid/pkg/apis/sedna/v1alpha1"
	"github.com/nereid-ml/nereid/pkg/edgeproto"
	"github.com/nereid-ml/nereid/pkg/globalmanager/controllers/common"
	"github.com/nereid-ml/nereid/pkg/globalmanager/controllers/learningcycle"
)

// Env gives each worker its models. Until a round is deployed, training
// starts from the initial model and evaluation compares with the initial
// eval model (the initial model when unset); afterwards both use the deploy
// Model, which then holds the last deployed round's model.
func (k *kind) Env(job *sednav1.IncrementalLearningJob, st *learningcycle.Status, role learningcycle.Role, refs learningcycle.Refs) ([]corev1.EnvVar, []string) {
	local := func(url string) string { return common.ContainerPath(url, k.dataPathPrefix) }
	spec := &job.Spec
	deploy := refs.Models[spec.DeploySpec.Model.Name]
	switch role {
	case learningcycle.RoleTrain:
		base := deploy
		if st.DeployedRound == 0 {
			base = refs.Models[spec.InitialModel.Name]
		}
		out := learningcycle.RoundDir(spec.OutputDir, st.Round, learningcycle.RoleTrain)
		// No MODEL_NAME, as Sedna sets none for the train worker: Sedna's
		// backend then names the model file with its format's extension
		// (model.pb), which its report's format is read from.
		return []corev1.EnvVar{
			common.Env("BASE_MODEL_URL", local(base.Spec.URL)),
			common.Env("MODEL_URL", local(out)),
		}, []string{base.Spec.URL}
	case learningcycle.RoleEval:
		current := deploy
		if st.DeployedRound == 0 {
			current = refs.Models[spec.InitialModel.Name]
			if spec.EvalSpec.InitialEvalModel != nil {
				current = refs.Models[spec.EvalSpec.InitialEvalModel.Name]
			}
		}
		var trained string
		if st.CurrentRound != nil && len(st.CurrentRound.Models) > 0 {
			trained = st.CurrentRound.Models[0].URL
		}
		return []corev1.EnvVar{
			common.Env("MODEL_URLS", local(trained)+";"+local(current.Spec.URL)),
			common.Env("MODEL_URL", local(trained)),
		}, []string{trained, current.Spec.URL}
	}
	env := []corev1.EnvVar{
		common.Env("MODEL_URL", local(deploy.Spec.URL)),
		common.Env("MODEL_NAME", deploy.Name),
		common.Env("MODEL_HOT_UPDATE", strconv.FormatBool(spec.DeploySpec.Model.HotUpdateEnabled)),
	}
	if spec.DeploySpec.Model.HotUpdateEnabled {
		env = append(env,
			common.Env("MODEL_POLL_PERIOD_SECONDS", strconv.FormatInt(pollPeriodSeconds(spec.DeploySpec.Model), 10)),
			common.Env("MODEL_HOT_UPDATE_CONFIG", path.Join(edgeproto.HotUpdateMountPath, edgeproto.HotUpdateConfigFile)))
	}
	if hem := spec.DeploySpec.HardExampleMining; hem != nil {
		env = append(env, common.Env("HEM_NAME", hem.Name), common.Env("HEM_PARAMETERS", common.HEMParameters(hem.Parameters)))
	}
	return env, []string{deploy.Spec.URL}
}

// SednaEnv names what Sedna's GlobalManager sets of Env's variables for each
// worker (createPod and createInferPod of its incrementallearningjob.go):
// the models' URLs of its mounts, the hard example mining, and
// MODEL_HOT_UPDATE only when hot update is on (setModelHotUpdateEnv).
// Nereid's others (MODEL_NAME, the eval worker's MODEL_URL, OUTPUT_URL) are
// defaults a template overrides.
func (k *kind) SednaEnv(job *sednav1.IncrementalLearningJob, role learningcycle.Role) []string {
	switch role {
	case learningcycle.RoleTrain:
		return []string{"BASE_MODEL_URL", "MODEL_URL"}
	case learningcycle.RoleEval:
		return []string{"MODEL_URLS"}
	}
	names := []string{"MODEL_URL", "HEM_NAME", "HEM_PARAMETERS"}
	if job.Spec.DeploySpec.Model.HotUpdateEnabled {
		names = append(names, "MODEL_HOT_UPDATE", "MODEL_POLL_PERIOD_SECONDS", "MODEL_HOT_UPDATE_CONFIG")
	}
	return names
}

// Mounts gives the inference worker of a job with hot update its folder on
// the node, where the LocalController that deploys a round puts the model
// and the file that says which it is (edgeproto.HotUpdateDir), as Sedna's
// injectModelHotUpdateMount does.
func (k *kind) Mounts(job *sednav1.IncrementalLearningJob, role learningcycle.Role) []common.NodeMount {
	if role != learningcycle.RoleInference || !job.Spec.DeploySpec.Model.HotUpdateEnabled {
		return nil
	}
	return []common.NodeMount{{
		Name:      "sedna-model-hot-update-volume",
		NodePath:  edgeproto.HotUpdateDir(sednav1.IncrementalLearningJobKind.Kind, job.Namespace, job.Name),
		MountPath: edgeproto.HotUpdateMountPath,
	}}
}

// pollPeriodSeconds is how often the inference worker reads the hot update
// file: the spec's, or Sedna's default of 60 (its CRD's default, which a
// job created before the field existed may lack).
func pollPeriodSeconds(m sednav1.DeployModel) int64 {
	if m.PollPeriodSeconds > 0 {
		return m.PollPeriodSeconds
	}
	return 60
}
