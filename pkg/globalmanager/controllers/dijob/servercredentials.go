package dijob

import (
	"path"

	corev1 "k8s.io/api/core/v1"

	"github.com/nereid-ml/nereid/pkg/globalmanager/controllers/common"
)

// What a DIJob pod reaches the replicas HTTP API with, besides
// DI_SERVER_URL: a token of its ServiceAccount for the API's own audience,
// bound to the pod (so the API knows it for a worker of its job and no
// other server would take it), and the CA the API's certificate verifies
// against, both files in ServerCredentialsDir, named by DI_SERVER_TOKEN_FILE
// and DI_SERVER_CA_FILE in every container.
const (
	// ServerCredentialsDir is where every container finds them.
	ServerCredentialsDir = "/var/run/secrets/nereid.io/di-server"
	// AnnotationServerCA carries the CA's PEM on the pod; the downward API
	// writes it into ServerCredentialsDir/ca.crt. A pod keeps the CA it
	// was made with (the GlobalManager's CA lives ten years).
	AnnotationServerCA = "nereid.io/di-server-ca"
	// ServerTokenLifetime is how long a projected token lives; the kubelet
	// renews it at 80 %.
	ServerTokenLifetime = 3600

	serverVolume = "nereid-di-server"
)

// addServerCredentials gives pod the token and CA its Config names, unless
// the template has a volume of the same name (then it is the author's).
func (c *Controller) addServerCredentials(pod *corev1.Pod) {
	aud, ca := c.config.ServerTokenAudience, c.config.ServerCA
	if c.config.ServerURL == "" || (aud == "" && len(ca) == 0) || hasVolume(pod.Spec.Volumes, serverVolume) {
		return
	}
	var sources []corev1.VolumeProjection
	var env []corev1.EnvVar
	if aud != "" {
		lifetime := int64(ServerTokenLifetime)
		sources = append(sources, corev1.VolumeProjection{ServiceAccountToken: &corev1.ServiceAccountTokenProjection{
			Audience: aud, ExpirationSeconds: &lifetime, Path: "token",
		}})
		env = append(env, common.Env("DI_SERVER_TOKEN_FILE", path.Join(ServerCredentialsDir, "token")))
	}
	if len(ca) > 0 {
		pod.Annotations = common.MergeLabels(pod.Annotations, map[string]string{AnnotationServerCA: string(ca)})
		sources = append(sources, corev1.VolumeProjection{DownwardAPI: &corev1.DownwardAPIProjection{
			Items: []corev1.DownwardAPIVolumeFile{{Path: "ca.crt",
				FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.annotations['" + AnnotationServerCA + "']"}}},
		}})
		env = append(env, common.Env("DI_SERVER_CA_FILE", path.Join(ServerCredentialsDir, "ca.crt")))
	}
	pod.Spec.Volumes = append(pod.Spec.Volumes, corev1.Volume{Name: serverVolume,
		VolumeSource: corev1.VolumeSource{Projected: &corev1.ProjectedVolumeSource{Sources: sources}}})
	mount := corev1.VolumeMount{Name: serverVolume, MountPath: ServerCredentialsDir, ReadOnly: true}
	for _, cs := range [][]corev1.Container{pod.Spec.InitContainers, pod.Spec.Containers} {
		for i := range cs {
			cs[i].VolumeMounts = append(cs[i].VolumeMounts, mount)
			cs[i].Env = common.MergeEnv(cs[i].Env, env)
		}
	}
}
