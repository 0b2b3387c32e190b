package lifelonglearning

import (
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"

	sednav1 "github.com/nereid-ml/nereid/pkg/apis/sedna/v1alpha1"
	"github.com/nereid-ml/nereid/pkg/globalmanager/controllers/common"
	"github.com/nereid-ml/nereid/pkg/globalmanager/controllers/learningcycle"
)

// KBIndex is the knowledge base index the train worker of round writes.
func KBIndex(outputDir string, round int32) string {
	return learningcycle.RoundDir(outputDir, round, learningcycle.RoleTrain) + "/index.pkl"
}

// Env gives each worker the knowledge base as Sedna's library reads it:
//   - the train worker of a round after the first deploy
//     (HAS_COMPLETED_INITIAL_TRAINING=true) updates the deployed round's
//     index: CLOUD_KB_INDEX is its node path, to which Sedna's library adds
//     DATA_PATH_PREFIX itself (LifelongLearning.update), as Sedna sets it;
//   - the eval worker reads the round's index from MODEL_URLS;
//   - the inference worker reads the deployed round's index from MODEL_URLS
//     (none before the first deploy; deployedIndex) and writes under
//     OUTPUT_URL, <outputDir>/deploy.
//
// The eval and inference workers also get CLOUD_KB_INDEX, Nereid's own
// default from before it read Sedna's library, in container paths.
func (k *kind) Env(job *sednav1.LifelongLearningJob, st *learningcycle.Status, role learningcycle.Role, _ learningcycle.Refs) ([]corev1.EnvVar, []string) {
	local := func(p string) string { return common.ContainerPath(p, k.dataPathPrefix) }
	env := []corev1.EnvVar{common.Env("HAS_COMPLETED_INITIAL_TRAINING", strconv.FormatBool(st.DeployedRound > 0))}
	if k.kbServer != "" {
		env = append(env, common.Env("KB_SERVER", k.kbServer))
	}
	var paths []string
	switch role {
	case learningcycle.RoleTrain:
		if st.DeployedRound == 0 {
			return env, nil
		}
		index := KBIndex(job.Spec.OutputDir, st.DeployedRound)
		return append(env, common.Env("CLOUD_KB_INDEX", index)), []string{index}
	case learningcycle.RoleEval:
		index := KBIndex(job.Spec.OutputDir, st.Round)
		return append(env, common.Env("MODEL_URLS", local(index)), common.Env("CLOUD_KB_INDEX", local(index))), []string{index}
	case learningcycle.RoleInference:
		out := strings.TrimRight(job.Spec.OutputDir, "/") + "/deploy"
		env, paths = append(env, common.Env("OUTPUT_URL", local(out))), []string{out}
		if st.DeployedRound == 0 {
			return env, paths
		}
		index := deployedIndex(job, st)
		return append(env, common.Env("MODEL_URLS", local(index)), common.Env("CLOUD_KB_INDEX", local(index))), append(paths, index)
	}
	return env, nil
}

// deployedIndex is the knowledge base the deployed round serves: the index
// its eval worker kept of the round's tasks (Sedna's LocalController copies
// the evaluated index to <outputDir>/deploy/index.pkl for the inference
// worker), or, when the eval worker reported none of its own, the round's
// train index.
func deployedIndex(job *sednav1.LifelongLearningJob, st *learningcycle.Status) string {
	for _, r := range st.History {
		if r.Round == st.DeployedRound && r.EvaluatedModel != nil {
			return r.EvaluatedModel.URL
		}
	}
	return KBIndex(job.Spec.OutputDir, st.DeployedRound)
}

// SednaEnv names what Sedna's GlobalManager sets of the worker's environment
// beyond the cycle's own (createPod and createInferPod of its
// lifelonglearningjob.go): the knowledge base to each worker (the train
// worker's CLOUD_KB_INDEX, the others' MODEL_URLS) and OUTPUT_URL to the
// train and eval workers. Nereid's others (CLOUD_KB_INDEX to the eval and
// inference workers, the inference worker's OUTPUT_URL) are defaults a
// template overrides.
func (k *kind) SednaEnv(_ *sednav1.LifelongLearningJob, role learningcycle.Role) []string {
	switch role {
	case learningcycle.RoleTrain:
		return []string{"OUTPUT_URL", "HAS_COMPLETED_INITIAL_TRAINING", "KB_SERVER", "CLOUD_KB_INDEX"}
	case learningcycle.RoleEval:
		return []string{"OUTPUT_URL", "KB_SERVER", "MODEL_URLS"}
	}
	return []string{"MODEL_URLS"}
}
