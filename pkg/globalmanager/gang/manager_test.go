package gang

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	kubefake "k8s.io/client-go/kubernetes/fake"
	testingclock "k8s.io/utils/clock/testing"

	"github.com/nereid-ml/nereid/internal/testwait"
)

func TestNewManagerResolvesTheFlag(t *testing.T) {
	for name, tc := range map[string]struct {
		flag     Mode
		apis     []*metav1.APIResourceList
		wantMode Mode
		wantErr  []string
	}{
		"auto picks kubernetes first": {flag: Auto, apis: []*metav1.APIResourceList{volcanoAPI, kubernetesAPI}, wantMode: Kubernetes},
		"auto on a bare cluster":      {flag: Auto, wantMode: None},
		"none":                        {flag: None, apis: []*metav1.APIResourceList{kubernetesAPI}, wantMode: None},
		"a served mode":               {flag: Coscheduling, apis: []*metav1.APIResourceList{kubernetesAPI, coschedulingAPI}, wantMode: Coscheduling},
		"a mode not served stops the GlobalManager": {
			flag: Kubernetes, apis: []*metav1.APIResourceList{podGroupsOnlyAPI, volcanoAPI},
			wantErr: []string{"--gang-scheduler=kubernetes", "workloads.scheduling.k8s.io/v1beta1 and podgroups.scheduling.k8s.io/v1beta1"},
		},
	} {
		t.Run(name, func(t *testing.T) {
			kube := kubefake.NewClientset()
			kube.Resources = tc.apis
			m, err := NewManager(testContext(t), Config{Mode: tc.flag, Kube: kube, Dynamic: dynamicfake.NewSimpleDynamicClient(runtime.NewScheme()), Discovery: kube.Discovery()})
			if len(tc.wantErr) > 0 {
				if err == nil {
					t.Fatalf("NewManager = mode %q, want an error", m.Mode())
				}
				for _, w := range tc.wantErr {
					if !strings.Contains(err.Error(), w) {
						t.Errorf("NewManager error %q does not contain %q", err, w)
					}
				}
				return
			}
			if err != nil {
				t.Fatalf("NewManager: %v", err)
			}
			if m.Mode() != tc.wantMode {
				t.Errorf("Mode() = %q, want %q", m.Mode(), tc.wantMode)
			}
		})
	}
}

// TestPlanFindsASchedulerInstalledLater: a job asking for a scheduler the
// API server did not serve waits; once the API is served (and the
// rediscovery period passed) the same job gets it, without a restart.
func TestPlanFindsASchedulerInstalledLater(t *testing.T) {
	clk := testingclock.NewFakePassiveClock(time.Now())
	c := startCluster(t, clusterConfig{flag: Auto, rediscover: time.Hour, clock: clk})
	job := newJob(map[string]string{AnnotationScheduler: "volcano"}, nil)
	p := c.m.Plan(job, testKind, false)
	if p.Problem == nil || p.Problem.Reason != ReasonGangSchedulerUnavailable {
		t.Fatalf("Plan before Volcano is installed: mode %q, problem %+v; want %s", p.Mode, p.Problem, ReasonGangSchedulerUnavailable)
	}

	c.setAPIs(volcanoAPI)
	clk.SetTime(clk.Now().Add(time.Hour - time.Second))
	if p := c.m.Plan(job, testKind, false); p.Problem == nil {
		t.Errorf("Plan within the rediscovery period: mode %q; want the API server not asked again yet", p.Mode)
	}

	clk.SetTime(clk.Now().Add(time.Second)) // the period has passed
	p = c.m.Plan(job, testKind, false)
	if p.Problem != nil || p.Mode != Volcano {
		t.Fatalf("Plan after Volcano is installed: mode %q, problem %+v; want volcano", p.Mode, p.Problem)
	}
	testwait.Eventually(t, 10*time.Second, "the Volcano cache to fill", func(context.Context) (bool, error) { return c.m.HasSynced(), nil })
	if err := p.Ensure(t.Context(), c.children, members(2), nil); err != nil {
		t.Fatalf("Ensure: %v", err)
	}
	c.getUnstructured(t, volcanoGVR, testGroupName)
}

// TestRediscoveryStartsEveryNewlyServedMode: two schedulers installed
// while the GlobalManager runs are both usable, whichever a job asks for
// first.
func TestRediscoveryStartsEveryNewlyServedMode(t *testing.T) {
	clk := testingclock.NewFakePassiveClock(time.Now())
	c := startCluster(t, clusterConfig{flag: Auto, rediscover: time.Hour, clock: clk})
	c.setAPIs(volcanoAPI, coschedulingAPI)
	clk.SetTime(clk.Now().Add(time.Hour)) // past the rediscovery period

	volcanoJob := newJob(map[string]string{AnnotationScheduler: "volcano"}, nil)
	if p := c.m.Plan(volcanoJob, testKind, false); p.Mode != Volcano {
		t.Fatalf("Plan of a Volcano job: mode %q, problem %+v", p.Mode, p.Problem)
	}
	coschedulingJob := newJob(map[string]string{AnnotationScheduler: "coscheduling"}, nil)
	p := c.m.Plan(coschedulingJob, testKind, false)
	if p.Mode != Coscheduling {
		t.Fatalf("Plan of a coscheduling job: mode %q, problem %+v", p.Mode, p.Problem)
	}
	testwait.Eventually(t, 10*time.Second, "the gang caches to fill", func(context.Context) (bool, error) { return c.m.HasSynced(), nil })
	// The coscheduling cache fills too, so its Ensure does not wait forever.
	testwait.Eventually(t, 10*time.Second, "the coscheduling PodGroup", func(context.Context) (bool, error) {
		err := p.Ensure(t.Context(), c.children, members(2), nil)
		return err == nil, nil
	})
	c.getUnstructured(t, coschedulingGVR, testGroupName)
}

// TestWatchEnqueuesTheOwnerOfAChangedGroup: a change of a group object
// wakes its job, of the kind watched.
func TestWatchEnqueuesTheOwnerOfAChangedGroup(t *testing.T) {
	for _, mode := range []Mode{Kubernetes, Volcano} {
		t.Run(string(mode), func(t *testing.T) {
			c := newCluster(t, clusterConfig{flag: mode, apis: []*metav1.APIResourceList{kubernetesAPI, volcanoAPI}})
			var mu sync.Mutex
			keys := map[string]bool{}
			synced := c.m.Watch(testKind, func(key string) {
				mu.Lock()
				defer mu.Unlock()
				keys[key] = true
			})
			otherKind := testKind
			otherKind.Kind = "DIJob"
			c.m.Watch(otherKind, func(key string) {
				mu.Lock()
				defer mu.Unlock()
				keys["DIJob "+key] = true
			})
			c.m.Start(t.Context())
			t.Cleanup(c.m.Shutdown)
			testwait.Eventually(t, 10*time.Second, "the gang caches to fill", func(context.Context) (bool, error) { return synced(), nil })

			if err := c.m.Plan(newJob(nil, nil), testKind, false).Ensure(t.Context(), c.children, members(2), nil); err != nil {
				t.Fatalf("Ensure: %v", err)
			}
			testwait.Eventually(t, 10*time.Second, "the job's key", func(context.Context) (bool, error) {
				mu.Lock()
				defer mu.Unlock()
				return keys[testNamespace+"/"+testJobName], nil
			})
			mu.Lock()
			defer mu.Unlock()
			for k := range keys {
				if k != testNamespace+"/"+testJobName {
					t.Errorf("enqueued %q, want only the job's key for its kind", k)
				}
			}
		})
	}
}
