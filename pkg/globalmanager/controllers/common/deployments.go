package common

import (
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// NewWorkerDeployment builds the Deployment of a long-running worker (a
// service's, not a job's): named w.Name, with owner's controller reference and
// labels, and pods from NewWorkerTemplate. It selects its pods by owner UID and
// role, which never change, because a Deployment's selector is immutable; the
// template-hash label (on the Deployment and its pods) says which spec the
// template was built from, so a controller compares hashes rather than
// templates the API server has defaulted.
func NewWorkerDeployment(owner metav1.Object, ownerKind schema.GroupVersionKind, w Worker, replicas int32) *appsv1.Deployment {
	template := NewWorkerTemplate(owner, ownerKind, w)
	// The Deployment keeps a serving worker up; it admits no other policy.
	template.Spec.RestartPolicy = corev1.RestartPolicyAlways
	return &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{
			Name:      w.Name,
			Namespace: owner.GetNamespace(),
			Labels: MergeLabels(OwnerLabels(owner, LowerKind(ownerKind)), map[string]string{
				LabelWorkerRole:   w.Role,
				LabelTemplateHash: w.Hash,
			}),
			OwnerReferences: []metav1.OwnerReference{*metav1.NewControllerRef(owner, ownerKind)},
		},
		Spec: appsv1.DeploymentSpec{
			Replicas: &replicas,
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{
				LabelOwnerUID:   string(owner.GetUID()),
				LabelWorkerRole: w.Role,
			}},
			Template: template,
		},
	}
}

// DeploymentReplicas is how many replicas a Deployment asks for (the API's
// default of 1 when unset).
func DeploymentReplicas(d *appsv1.Deployment) int32 {
	if d.Spec.Replicas == nil {
		return 1
	}
	return *d.Spec.Replicas
}

// DeploymentAvailable says whether a Deployment has rolled out its current
// spec: the deployment controller has seen this generation, and every replica
// asked for runs the current template and is available.
func DeploymentAvailable(d *appsv1.Deployment) bool {
	want := DeploymentReplicas(d)
	return d.Status.ObservedGeneration >= d.Generation &&
		d.Status.UpdatedReplicas >= want &&
		d.Status.AvailableReplicas >= want
}

// DeploymentFailure says whether the deployment controller reports that a
// Deployment cannot reach its spec: its rollout passed the progress deadline
// (Progressing False, ProgressDeadlineExceeded), or it cannot create pods
// (ReplicaFailure True, e.g. a quota). It returns the condition's reason and
// message.
func DeploymentFailure(d *appsv1.Deployment) (reason, message string, failed bool) {
	for _, c := range d.Status.Conditions {
		switch {
		case c.Type == appsv1.DeploymentReplicaFailure && c.Status == corev1.ConditionTrue:
			return c.Reason, c.Message, true
		case c.Type == appsv1.DeploymentProgressing && c.Status == corev1.ConditionFalse && c.Reason == "ProgressDeadlineExceeded":
			return c.Reason, c.Message, true
		}
	}
	return "", "", false
}
