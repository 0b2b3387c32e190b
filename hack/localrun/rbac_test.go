package localrun

import (
	"slices"
	"testing"

	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/runtime"
)

// TestTheChartGrantsWhatTheLocalRunsReplicasAPINeeds reads the plain
// manifests the local run takes the GlobalManager's identity from: its
// ClusterRole lets the replicas API review tokens and access, read the
// callers' pods and change the DIJobs (whose pods the controller then makes
// and deletes), and the Role the local run copies into Namespace lets it
// keep its certificate in DIServerTLSSecret. A rule the chart drops, or puts
// behind a value off by default, fails here before make local-up.
func TestTheChartGrantsWhatTheLocalRunsReplicasAPINeeds(t *testing.T) {
	rendered, err := ReadManifests("../../build/deploy/nereid.yaml")
	if err != nil {
		t.Fatal(err)
	}
	id := NewGlobalManagerIdentity(rendered)
	var clusterRules, roleRules []rbacv1.PolicyRule
	for _, obj := range append(id.Objects, id.RoleIn(Namespace)...) {
		switch {
		case obj.GetKind() == "ClusterRole":
			clusterRules = append(clusterRules, rulesOf(t, obj.Object)...)
		case obj.GetKind() == "Role" && obj.GetNamespace() == Namespace:
			roleRules = append(roleRules, rulesOf(t, obj.Object)...)
		}
	}
	for name, tc := range map[string]struct {
		rules                      []rbacv1.PolicyRule
		group, resource, verb, obj string
	}{
		"token reviews":            {clusterRules, "authentication.k8s.io", "tokenreviews", "create", ""},
		"access reviews":           {clusterRules, "authorization.k8s.io", "subjectaccessreviews", "create", ""},
		"a caller's pod":           {clusterRules, "", "pods", "get", ""},
		"pods made":                {clusterRules, "", "pods", "create", ""},
		"pods deleted":             {clusterRules, "", "pods", "delete", ""},
		"a job's replicas changed": {clusterRules, "diengine.opendilab.org", "dijobs", "update", ""},
		"a job's profilings":       {clusterRules, "diengine.opendilab.org", "dijobs/status", "update", ""},
		"a v1 replica's Service":   {clusterRules, "", "services", "create", ""},
		"a v1 Service gone":        {clusterRules, "", "services", "delete", ""},
		"aggregator templates":     {clusterRules, "diengine.opendilab.org", "aggregatorconfigs", "watch", ""},
		"its certificate made":     {roleRules, "", "secrets", "create", ""},
		"its certificate read":     {roleRules, "", "secrets", "get", DIServerTLSSecret},
		"its certificate reissued": {roleRules, "", "secrets", "update", DIServerTLSSecret},
	} {
		t.Run(name, func(t *testing.T) {
			if !slices.ContainsFunc(tc.rules, func(r rbacv1.PolicyRule) bool { return grants(r, tc.group, tc.resource, tc.verb, tc.obj) }) {
				t.Errorf("no rule lets the GlobalManager %s %s.%s %s", tc.verb, tc.resource, tc.group, tc.obj)
			}
		})
	}
}

func rulesOf(t *testing.T, obj map[string]any) []rbacv1.PolicyRule {
	t.Helper()
	var role rbacv1.ClusterRole // a Role's rules read the same
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(obj, &role); err != nil {
		t.Fatal(err)
	}
	return role.Rules
}

// grants says whether rule lets verb on resource of group, on the object
// named name ("" for any object, or one not named yet, as a create).
func grants(rule rbacv1.PolicyRule, group, resource, verb, name string) bool {
	has := func(list []string, s string) bool { return slices.Contains(list, s) || slices.Contains(list, "*") }
	return has(rule.APIGroups, group) && has(rule.Resources, resource) && has(rule.Verbs, verb) &&
		(len(rule.ResourceNames) == 0 || (name != "" && slices.Contains(rule.ResourceNames, name)))
}
