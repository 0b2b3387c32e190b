package owner

import (
	"context"
	"fmt"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	kubefake "k8s.io/client-go/kubernetes/fake"

	"github.com/nereid-ml/nereid/internal/testwait"
)

// The owner is the GlobalManager's Deployment as it is when an object is
// made: none while it is not there, and the new UID once it is made again.
func TestTheOwnerFollowsTheGlobalManagersDeployment(t *testing.T) {
	kube := kubefake.NewClientset()
	own, err := Follow(t.Context(), kube, "nereid-system", "nereid-globalmanager")
	if err != nil {
		t.Fatal(err)
	}
	if ref := own(); ref != nil {
		t.Fatalf("owner with no Deployment: %+v, want none", ref)
	}
	uidIs := func(want types.UID) {
		t.Helper()
		testwait.Eventually(t, 10*time.Second, fmt.Sprintf("the owner's UID to be %q", want), func(context.Context) (bool, error) {
			ref := own()
			return ref != nil && ref.UID == want || ref == nil && want == "", nil
		})
	}
	deploy := func(name string, uid types.UID) *appsv1.Deployment {
		return &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "nereid-system", UID: uid}}
	}
	deployments := kube.AppsV1().Deployments("nereid-system")
	if _, err := deployments.Create(t.Context(), deploy("another", "uid-other"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := deployments.Create(t.Context(), deploy("nereid-globalmanager", "uid-1"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	uidIs("uid-1")
	if err := deployments.Delete(t.Context(), "nereid-globalmanager", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	uidIs("")
	if _, err := deployments.Create(t.Context(), deploy("nereid-globalmanager", "uid-2"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	uidIs("uid-2")
	if ref := own(); ref.Kind != "Deployment" || ref.APIVersion != "apps/v1" || ref.Name != "nereid-globalmanager" {
		t.Errorf("owner %+v, want the Deployment nereid-globalmanager", ref)
	}
	none, err := Follow(t.Context(), kube, "nereid-system", "")
	if err != nil || none() != nil {
		t.Errorf("an empty name: %v, %v; want no owner", none(), err)
	}
}
