package common

import (
	"encoding/json"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	sednav1 "github.com/nereid-ml/nereid/pkg/apis/sedna/v1alpha1"
)

// BaseEnv is what the environment every Sedna worker gets, whatever its
// kind, is made of; each kind adds its own variables to Env's.
type BaseEnv struct {
	// Owner is the worker's job or service.
	Owner metav1.Object
	// Service says the owner is a service, named in SERVICE_NAME; a job is
	// named in JOB_NAME.
	Service bool
	// Worker is WORKER_NAME, the name the worker reports under. Empty, it is
	// the pod's own name, read through the downward API: each replica of a
	// Deployment has its own, which ties its reports to its node.
	Worker string
	// Model, when set, is the model the worker serves or starts from:
	// MODEL_NAME and MODEL_URL.
	Model *sednav1.Model
	// LogLevel is LOG_LEVEL.
	LogLevel string
	// DataPathPrefix is DATA_PATH_PREFIX, where node paths appear inside the
	// worker.
	DataPathPrefix string
	// LocalController is how the worker reaches its node's LocalController
	// (LC_SERVER).
	LocalController LCAddress
}

// Env is the environment, in this order: NAMESPACE, JOB_NAME or
// SERVICE_NAME, WORKER_NAME, LOG_LEVEL, DATA_PATH_PREFIX, MODEL_NAME and
// MODEL_URL when there is a model, and LC_SERVER (with what it is built
// from). The order is kept: a worker's template hash may cover its
// environment, and a new order would replace running workers.
func (b BaseEnv) Env() []corev1.EnvVar {
	owner := Env("JOB_NAME", b.Owner.GetName())
	if b.Service {
		owner.Name = "SERVICE_NAME"
	}
	worker := Env("WORKER_NAME", b.Worker)
	if b.Worker == "" {
		worker.ValueFrom = &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.name"}}
	}
	env := []corev1.EnvVar{
		Env("NAMESPACE", b.Owner.GetNamespace()),
		owner,
		worker,
		Env("LOG_LEVEL", b.LogLevel),
		Env(EnvDataPathPrefix, b.DataPathPrefix),
	}
	if b.Model != nil {
		env = append(env,
			Env("MODEL_NAME", b.Model.Name),
			Env("MODEL_URL", ContainerPath(b.Model.Spec.URL, b.DataPathPrefix)))
	}
	return append(env, b.LocalController.Env()...)
}

// SednaEveryWorker are the variables Sedna's GlobalManager sets for a worker
// of any type (NAMESPACE, WORKER_NAME, and JOB_NAME or SERVICE_NAME, in each
// kind's createPod/createOrUpdateWorker), with the S3 credentials of a URL
// the worker reads itself (runtime.buildS3SecretEnvs): Nereid's workers read
// every URL themselves, where Sedna's storage initializer downloads some.
var SednaEveryWorker = []string{"NAMESPACE", "JOB_NAME", "SERVICE_NAME", "WORKER_NAME", "ACCESS_KEY_ID", "SECRET_ACCESS_KEY"}

// EnvDataPathPrefix is where node paths appear inside a worker; Sedna sets it
// when it mounts one (runtime.injectHostPathMount).
const EnvDataPathPrefix = "DATA_PATH_PREFIX"

// The environment that tells a worker where its node's LocalController is.
const (
	// EnvLCServer is the LocalController's worker API, as Sedna's worker
	// library reads it.
	EnvLCServer = "LC_SERVER"
	// EnvNodeIP is the worker's node's address (the downward API's
	// status.hostIP), which LC_SERVER is built from.
	EnvNodeIP = "NEREID_NODE_IP"
)

// LCAddress is how workers reach their node's LocalController.
type LCAddress struct {
	// Server, when set, is put into LC_SERVER as is.
	Server string
	// Port of the LocalController's worker API on each node; without Server,
	// LC_SERVER is http://<the worker's node address>:Port, the node's address
	// coming from the downward API, so a worker finds the LocalController on
	// its own node (which listens on the host network) on any network.
	Port int32
}

// Env is the environment that says it: LC_SERVER, and the node address it is
// built from.
func (a LCAddress) Env() []corev1.EnvVar {
	if a.Server != "" {
		return []corev1.EnvVar{Env(EnvLCServer, a.Server)}
	}
	return []corev1.EnvVar{
		{Name: EnvNodeIP, ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "status.hostIP"}}},
		Env(EnvLCServer, fmt.Sprintf("http://$(%s):%d", EnvNodeIP, a.Port)),
	}
}

// Env is a shorthand for a literal environment variable.
func Env(name, value string) corev1.EnvVar {
	return corev1.EnvVar{Name: name, Value: value}
}

// CredentialEnv reads the S3 credentials of Sedna's credential Secret into the
// environment by reference, never as literal values in the pod spec.
func CredentialEnv(secretName string) []corev1.EnvVar {
	if secretName == "" {
		return nil
	}
	ref := func(key string) corev1.EnvVar {
		return corev1.EnvVar{Name: key, ValueFrom: &corev1.EnvVarSource{SecretKeyRef: &corev1.SecretKeySelector{
			LocalObjectReference: corev1.LocalObjectReference{Name: secretName}, Key: key,
		}}}
	}
	return []corev1.EnvVar{ref("ACCESS_KEY_ID"), ref("SECRET_ACCESS_KEY")}
}

// HEMParameters is HEM_PARAMETERS as Sedna writes it: a JSON object of the
// hard example mining parameters' keys and values, keys sorted; {} when there
// are none.
func HEMParameters(params []sednav1.ParaSpec) string {
	m := make(map[string]string, len(params))
	for _, p := range params {
		m[p.Key] = p.Value
	}
	// A map of strings always encodes.
	b, _ := json.Marshal(m)
	return string(b)
}
