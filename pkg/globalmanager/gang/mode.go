package gang

import (
	"fmt"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/discovery"
)

// Mode is a gang scheduler a job's pods are handed to.
type Mode string

// The modes, as --gang-scheduler and the job annotation name them.
const (
	// Auto picks the first the API server serves: Kubernetes, Volcano,
	// coscheduling; none when it serves none of them.
	Auto Mode = "auto"
	// Kubernetes is Kubernetes' own gang scheduling: a Workload and a
	// PodGroup of scheduling.k8s.io/v1beta1 (1.37, GenericWorkload gate).
	Kubernetes Mode = "kubernetes"
	// Volcano is a PodGroup of scheduling.volcano.sh/v1beta1, scheduled by
	// the scheduler named volcano.
	Volcano Mode = "volcano"
	// Coscheduling is a PodGroup of scheduling.x-k8s.io/v1alpha1, for the
	// scheduler-plugins coscheduling plugin.
	Coscheduling Mode = "coscheduling"
	// None hands pods to the scheduler one by one, as before gangs.
	None Mode = "none"
)

// Modes lists every mode, for flag help and messages.
var Modes = []Mode{Auto, Kubernetes, Volcano, Coscheduling, None}

// schedulers are the modes that are a gang scheduler, in the order auto
// prefers them.
var schedulers = []Mode{Kubernetes, Volcano, Coscheduling}

// ParseMode reads a mode, naming the valid ones when s is none of them.
func ParseMode(s string) (Mode, error) {
	for _, m := range Modes {
		if string(m) == s {
			return m, nil
		}
	}
	names := make([]string, len(Modes))
	for i, m := range Modes {
		names[i] = string(m)
	}
	return "", fmt.Errorf("%q is not a gang scheduler (one of %s)", s, strings.Join(names, ", "))
}

// The APIs of the gang schedulers, as the API server serves them.
var (
	workloadsResource             = schema.GroupVersionResource{Group: "scheduling.k8s.io", Version: "v1beta1", Resource: "workloads"}
	podGroupsResource             = schema.GroupVersionResource{Group: "scheduling.k8s.io", Version: "v1beta1", Resource: "podgroups"}
	volcanoPodGroupsResource      = schema.GroupVersionResource{Group: "scheduling.volcano.sh", Version: "v1beta1", Resource: "podgroups"}
	coschedulingPodGroupsResource = schema.GroupVersionResource{Group: "scheduling.x-k8s.io", Version: "v1alpha1", Resource: "podgroups"}
)

// resources are what the API server must serve for a mode to work.
func resources(m Mode) []schema.GroupVersionResource {
	switch m {
	case Kubernetes:
		return []schema.GroupVersionResource{workloadsResource, podGroupsResource}
	case Volcano:
		return []schema.GroupVersionResource{volcanoPodGroupsResource}
	case Coscheduling:
		return []schema.GroupVersionResource{coschedulingPodGroupsResource}
	}
	return nil
}

// API names what a mode needs the API server to serve, for messages.
func API(m Mode) string {
	var names []string
	for _, r := range resources(m) {
		names = append(names, r.Resource+"."+r.GroupVersion().String())
	}
	return strings.Join(names, " and ")
}

// Served is which gang modes the API server serves.
type Served map[Mode]bool

// Discover asks the API server which gang scheduling APIs it serves.
func Discover(d discovery.DiscoveryInterface) (Served, error) {
	served := Served{None: true}
	byGV := map[schema.GroupVersion]map[string]bool{}
	for _, m := range schedulers {
		ok := true
		for _, r := range resources(m) {
			names, seen := byGV[r.GroupVersion()]
			if !seen {
				list, err := d.ServerResourcesForGroupVersion(r.GroupVersion().String())
				if err != nil && !apierrors.IsNotFound(err) {
					return nil, fmt.Errorf("discovering %s: %w", r.GroupVersion(), err)
				}
				names = map[string]bool{}
				if list != nil {
					for _, res := range list.APIResources {
						names[res.Name] = true
					}
				}
				byGV[r.GroupVersion()] = names
			}
			ok = ok && names[r.Resource]
		}
		served[m] = ok
	}
	return served, nil
}

// Auto is the mode auto stands for: the first served of Kubernetes,
// Volcano and coscheduling, else None.
func (s Served) Auto() Mode {
	for _, m := range schedulers {
		if s[m] {
			return m
		}
	}
	return None
}
