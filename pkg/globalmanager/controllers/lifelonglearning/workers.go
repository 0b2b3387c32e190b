package lifelonglearning

import (
	"strconv"

	corev1 "k8s.io/api/core/v1"

	sednav1 "github.com/nereid-ml/nereid/pkg/apis/sedna/v1alpha1"
	"github.com/nereid-ml/nereid/pkg/globalmanager/controllers/common"
	"github.com/nereid-ml/nereid/pkg/globalmanager/controllers/learningcycle"
)

// KBIndex is the knowledge base index the train worker of round writes.
func KBIndex(outputDir string, round int32) string {
	return learningcycle.RoundDir(outputDir, round, learningcycle.RoleTrain) + "/index.pkl"
}

// Env gives each worker the knowledge base: the eval worker that of the
// round it evaluates, the inference worker that of the deployed round (none
// before the first deploy).
func (k *kind) Env(job *sednav1.LifelongLearningJob, st *learningcycle.Status, role learningcycle.Role, _ learningcycle.Refs) ([]corev1.EnvVar, []string) {
	env := []corev1.EnvVar{common.Env("HAS_COMPLETED_INITIAL_TRAINING", strconv.FormatBool(st.DeployedRound > 0))}
	if k.kbServer != "" {
		env = append(env, common.Env("KB_SERVER", k.kbServer))
	}
	var kbRound int32
	switch role {
	case learningcycle.RoleEval:
		kbRound = st.Round
	case learningcycle.RoleInference:
		kbRound = st.DeployedRound
	}
	if kbRound == 0 {
		return env, nil
	}
	index := KBIndex(job.Spec.OutputDir, kbRound)
	return append(env, common.Env("CLOUD_KB_INDEX", common.ContainerPath(index, k.dataPathPrefix))), []string{index}
}

// SednaEnv names what Sedna's GlobalManager sets of the worker's environment
// beyond the cycle's own (createPod and createInferPod of its
// lifelonglearningjob.go): the knowledge base to the train and eval workers,
// OUTPUT_URL to every worker. Nereid's others (HAS_COMPLETED_INITIAL_TRAINING
// and CLOUD_KB_INDEX to the eval and inference workers, KB_SERVER to the
// inference worker) are defaults a template overrides. A name here that
// Nereid does not set (the inference worker's OUTPUT_URL and MODEL_URLS, the
// eval worker's MODEL_URLS) is the template's, as docs/kinds.md says.
func (k *kind) SednaEnv(_ *sednav1.LifelongLearningJob, role learningcycle.Role) []string {
	switch role {
	case learningcycle.RoleTrain:
		return []string{"OUTPUT_URL", "HAS_COMPLETED_INITIAL_TRAINING", "KB_SERVER", "CLOUD_KB_INDEX"}
	case learningcycle.RoleEval:
		return []string{"OUTPUT_URL", "KB_SERVER", "MODEL_URLS"}
	}
	return []string{"OUTPUT_URL", "MODEL_URLS"}
}
