package gang

import (
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	kubefake "k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
)

func TestParseModeAcceptsEveryMode(t *testing.T) {
	for name, want := range map[string]Mode{
		"auto": Auto, "kubernetes": Kubernetes, "volcano": Volcano, "coscheduling": Coscheduling, "none": None,
	} {
		t.Run(name, func(t *testing.T) {
			got, err := ParseMode(name)
			if err != nil || got != want {
				t.Errorf("ParseMode(%q) = %q, %v; want %q", name, got, err, want)
			}
		})
	}
}

func TestParseModeRejectsOthersNamingTheValidOnes(t *testing.T) {
	for name, s := range map[string]string{
		"unknown":    "yunikorn",
		"empty":      "",
		"wrong case": "Volcano",
	} {
		t.Run(name, func(t *testing.T) {
			got, err := ParseMode(s)
			if err == nil {
				t.Fatalf("ParseMode(%q) = %q, want an error", s, got)
			}
			const valid = "(one of auto, kubernetes, volcano, coscheduling, none)"
			if !strings.Contains(err.Error(), valid) || !strings.Contains(err.Error(), `"`+s+`"`) {
				t.Errorf("ParseMode(%q) error %q; want it to quote the value and list %s", s, err, valid)
			}
		})
	}
}

func TestDiscoverFindsTheServedGangAPIs(t *testing.T) {
	for name, tc := range map[string]struct {
		apis     []*metav1.APIResourceList
		want     Served
		wantAuto Mode
	}{
		"kubernetes' workloads and podgroups": {
			apis:     []*metav1.APIResourceList{kubernetesAPI},
			want:     Served{None: true, Kubernetes: true, Volcano: false, Coscheduling: false},
			wantAuto: Kubernetes,
		},
		"kubernetes' podgroups without workloads": {
			apis:     []*metav1.APIResourceList{podGroupsOnlyAPI},
			want:     Served{None: true, Kubernetes: false, Volcano: false, Coscheduling: false},
			wantAuto: None,
		},
		"volcano only": {
			apis:     []*metav1.APIResourceList{volcanoAPI},
			want:     Served{None: true, Kubernetes: false, Volcano: true, Coscheduling: false},
			wantAuto: Volcano,
		},
		"coscheduling only": {
			apis:     []*metav1.APIResourceList{coschedulingAPI},
			want:     Served{None: true, Kubernetes: false, Volcano: false, Coscheduling: true},
			wantAuto: Coscheduling,
		},
		"nothing": {
			want:     Served{None: true, Kubernetes: false, Volcano: false, Coscheduling: false},
			wantAuto: None,
		},
		"all three: kubernetes first": {
			apis:     []*metav1.APIResourceList{coschedulingAPI, volcanoAPI, kubernetesAPI},
			want:     Served{None: true, Kubernetes: true, Volcano: true, Coscheduling: true},
			wantAuto: Kubernetes,
		},
		"volcano and coscheduling: volcano first": {
			apis:     []*metav1.APIResourceList{coschedulingAPI, volcanoAPI},
			want:     Served{None: true, Kubernetes: false, Volcano: true, Coscheduling: true},
			wantAuto: Volcano,
		},
		"podgroups only and coscheduling": {
			apis:     []*metav1.APIResourceList{podGroupsOnlyAPI, coschedulingAPI},
			want:     Served{None: true, Kubernetes: false, Volcano: false, Coscheduling: true},
			wantAuto: Coscheduling,
		},
	} {
		t.Run(name, func(t *testing.T) {
			kube := kubefake.NewClientset()
			kube.Resources = tc.apis
			got, err := Discover(kube.Discovery())
			if err != nil {
				t.Fatalf("Discover: %v", err)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("Discover (-want,+got):\n%s", diff)
			}
			if auto := got.Auto(); auto != tc.wantAuto {
				t.Errorf("Auto() = %q, want %q", auto, tc.wantAuto)
			}
		})
	}
}

func TestDiscoverReturnsErrorsOtherThanNotFound(t *testing.T) {
	for name, tc := range map[string]struct {
		err     error
		wantErr bool
	}{
		"unavailable":       {err: apierrors.NewServiceUnavailable("etcd is down"), wantErr: true},
		"forbidden":         {err: apierrors.NewForbidden(schema.GroupResource{}, "", errors.New("no RBAC")), wantErr: true},
		"connection":        {err: errors.New("connection refused"), wantErr: true},
		"not found: absent": {err: apierrors.NewNotFound(schema.GroupResource{}, "scheduling.k8s.io/v1beta1")},
	} {
		t.Run(name, func(t *testing.T) {
			kube := kubefake.NewClientset()
			kube.Resources = []*metav1.APIResourceList{volcanoAPI}
			kube.PrependReactor("get", "resource", func(k8stesting.Action) (bool, runtime.Object, error) {
				return true, nil, tc.err
			})
			served, err := Discover(kube.Discovery())
			if !tc.wantErr {
				if err != nil {
					t.Fatalf("Discover: %v, want NotFound to mean not served", err)
				}
				if served.Auto() != None {
					t.Errorf("Discover = %v, want nothing served when every group version is NotFound", served)
				}
				return
			}
			if err == nil {
				t.Fatalf("Discover = %v, nil; want the error", served)
			}
			if !errors.Is(err, tc.err) {
				t.Errorf("Discover error %q does not wrap %q", err, tc.err)
			}
			if !strings.Contains(err.Error(), "scheduling.k8s.io/v1beta1") {
				t.Errorf("Discover error %q does not name the group version it asked for", err)
			}
		})
	}
}

func TestAPINamesWhatAModeNeeds(t *testing.T) {
	for mode, want := range map[Mode]string{
		Kubernetes:   "workloads.scheduling.k8s.io/v1beta1 and podgroups.scheduling.k8s.io/v1beta1",
		Volcano:      "podgroups.scheduling.volcano.sh/v1beta1",
		Coscheduling: "podgroups.scheduling.x-k8s.io/v1alpha1",
		None:         "",
		Auto:         "",
	} {
		if got := API(mode); got != want {
			t.Errorf("API(%s) = %q, want %q", mode, got, want)
		}
	}
}
