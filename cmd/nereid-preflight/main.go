// Command nereid-preflight says whether a cluster that runs KubeEdge Sedna can
// switch to Nereid in place without losing a job: it lists every sedna.io
// object of a kind or version Nereid does not serve (nothing would run it
// once Sedna's GlobalManager stops), counts the objects Nereid will serve,
// and checks that Sedna's GlobalManager and LocalControllers are stopped.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"sort"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/nereid-ml/nereid/internal/command"
	sednav1 "github.com/nereid-ml/nereid/pkg/apis/sedna/v1alpha1"
	"github.com/nereid-ml/nereid/pkg/globalmanager/kinds"
	_ "github.com/nereid-ml/nereid/pkg/globalmanager/kinds/all"
)

// Exit codes, as --help states them.
const (
	exitReady    = 0
	exitNotReady = 1
	exitUsage    = 2
	exitError    = 3
)

// serves says whether the GlobalManager serves kind in version gv: its
// table of kinds has it.
func serves(gv schema.GroupVersion, kind string) bool {
	for _, k := range kinds.All() {
		if k.GVK == gv.WithKind(kind) {
			return true
		}
	}
	return false
}

// servedKinds are, for --help, the kinds of table in sedna.io's served
// version, which the preflight counts, and a sentence naming the others
// the GlobalManager serves (none of them Sedna's), "" if there are none.
func servedKinds(table []*kinds.Kind) (sedna []string, others string) {
	var rest []string
	for _, k := range table {
		if k.GVK.GroupVersion() == sednav1.SchemeGroupVersion {
			sedna = append(sedna, k.GVK.Kind)
		} else {
			rest = append(rest, fmt.Sprintf("%s of %s", k.GVK.Kind, k.GVK.GroupVersion()))
		}
	}
	if len(rest) > 0 {
		others = "\n    Nereid also serves " + strings.Join(rest, ", ") + ",\n    which are not Sedna's kinds: the preflight does not check them."
	}
	return sedna, others
}

// wrap joins names with ", ", starting a new line indented by indent
// spaces before a line passes 76 characters.
func wrap(names []string, indent int) string {
	var b strings.Builder
	col := indent
	for i, n := range names {
		sep := ""
		if i > 0 {
			sep = ", "
		}
		if i > 0 && col+len(sep)+len(n) > 76 {
			b.WriteString(",\n" + strings.Repeat(" ", indent))
			col = indent
			sep = ""
		}
		b.WriteString(sep + n)
		col += len(sep) + len(n)
	}
	return b.String()
}

type options struct {
	kubeconfig     string
	namespace      string
	sednaNamespace string
	sednaGM        string
	sednaLC        string
	timeout        time.Duration
}

func main() {
	fs := flag.NewFlagSet("nereid-preflight", flag.ContinueOnError)
	sednaKinds, otherKinds := servedKinds(kinds.All())
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), `Usage: nereid-preflight [flags]

Checks, before switching a cluster from KubeEdge Sedna to Nereid in place,
that no job would be lost. Run it with Sedna still installed:

  - It lists every sedna.io object of a kind Nereid does not serve yet
    (ObjectSearchService, ObjectTrackingService, FeatureExtractionService,
    ReidJob, VideoAnalyticsJob, …) or served in a sedna.io version other than
    %s, with its kind, namespace and name: once Sedna's GlobalManager stops,
    nothing runs them.
  - It counts the objects of the kinds Nereid serves in %s, which
    Nereid's GlobalManager takes over:
      %s.%s
  - It checks that Sedna's GlobalManager Deployment is scaled to 0 and its
    LocalController DaemonSet runs no pod (or that neither exists): the two
    must not act beside Nereid's.

Exit status: %d ready to switch; %d not ready (the reasons are printed);
%d bad flags; %d the cluster could not be read.

Flags:
`, sednav1.SchemeGroupVersion, sednav1.SchemeGroupVersion, wrap(sednaKinds, 6), otherKinds, exitReady, exitNotReady, exitUsage, exitError)
		command.PrintFlags(fs)
	}
	var o options
	fs.StringVar(&o.kubeconfig, "kubeconfig", os.Getenv("KUBECONFIG"),
		"Path to the kubeconfig of the cluster to check; empty means in-cluster configuration. Defaults to $KUBECONFIG.")
	fs.StringVar(&o.namespace, "namespace", "",
		"Only check objects in this namespace; empty checks every namespace (as a GlobalManager without --namespace serves).")
	fs.StringVar(&o.sednaNamespace, "sedna-namespace", "sedna",
		"Namespace of Sedna's GlobalManager and LocalController.")
	fs.StringVar(&o.sednaGM, "sedna-globalmanager", "gm",
		"Name of Sedna's GlobalManager Deployment in --sedna-namespace; empty skips the check.")
	fs.StringVar(&o.sednaLC, "sedna-localcontroller", "lc",
		"Name of Sedna's LocalController DaemonSet in --sedna-namespace; empty skips the check.")
	fs.DurationVar(&o.timeout, "timeout", time.Minute,
		"Give up reading the cluster after this long.")
	if err := command.ParseFlags(fs, os.Args[1:]); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			os.Exit(exitReady)
		}
		os.Exit(exitUsage)
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(os.Stderr, "nereid-preflight: unexpected arguments %q\n", fs.Args())
		os.Exit(exitUsage)
	}
	ctx, cancel := context.WithTimeout(context.Background(), o.timeout)
	defer cancel()
	ready, err := run(ctx, o, os.Stdout)
	switch {
	case err != nil:
		fmt.Fprintf(os.Stderr, "nereid-preflight: %v\n", err)
		os.Exit(exitError)
	case !ready:
		os.Exit(exitNotReady)
	}
}

// object is one sedna.io object Nereid does not serve.
type object struct {
	kind, version, namespace, name string
}

// count is how many objects of a served kind there are.
type count struct {
	kind string
	n    int
}

// run reads the cluster, prints what it found to out, and says whether the
// cluster is ready to switch.
func run(ctx context.Context, o options, out io.Writer) (bool, error) {
	cfg, err := clientcmd.BuildConfigFromFlags("", o.kubeconfig)
	if err != nil {
		return false, fmt.Errorf("loading kubeconfig %q: %w", o.kubeconfig, err)
	}
	cfg.UserAgent = "nereid-preflight"
	disco, err := discovery.NewDiscoveryClientForConfig(cfg)
	if err != nil {
		return false, fmt.Errorf("building the discovery client: %w", err)
	}
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return false, fmt.Errorf("building the dynamic client: %w", err)
	}
	kube, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return false, fmt.Errorf("building the kubernetes client: %w", err)
	}

	served, unserved, err := sednaObjects(ctx, disco, dyn, o.namespace)
	if err != nil {
		return false, err
	}
	where := "in every namespace"
	if o.namespace != "" {
		where = "in namespace " + o.namespace
	}
	fmt.Fprintf(out, "sedna.io objects Nereid serves (%s), %s:\n", sednav1.SchemeGroupVersion, where)
	if len(served) == 0 {
		fmt.Fprintln(out, "  none (no sedna.io API of these kinds on this cluster)")
	}
	for _, c := range served {
		fmt.Fprintf(out, "  %-24s %d\n", c.kind, c.n)
	}
	fmt.Fprintf(out, "sedna.io objects Nereid does not serve, %s:\n", where)
	if len(unserved) == 0 {
		fmt.Fprintln(out, "  none")
	}
	for _, u := range unserved {
		fmt.Fprintf(out, "  %-24s %s/%s (sedna.io/%s)\n", u.kind, u.namespace, u.name, u.version)
	}

	running, err := sednaRunning(ctx, kube, o, out)
	if err != nil {
		return false, err
	}

	var reasons []string
	if len(unserved) > 0 {
		reasons = append(reasons, fmt.Sprintf(
			"%d sedna.io object(s) of a kind or version Nereid does not serve (listed above): once Sedna's GlobalManager stops nothing runs them, though they stay in the cluster; delete them, or keep Sedna for them, before switching",
			len(unserved)))
	}
	reasons = append(reasons, running...)
	if len(reasons) > 0 {
		fmt.Fprintln(out, "\nNot ready to switch to Nereid:")
		for _, r := range reasons {
			fmt.Fprintf(out, "  - %s\n", r)
		}
		return false, nil
	}
	fmt.Fprintln(out, "\nReady to switch to Nereid: every sedna.io object is of a kind Nereid serves, and Sedna's controllers are stopped.")
	return true, nil
}

// sednaObjects finds, through discovery, every resource of the sedna.io group
// in every version the API server serves, counts the objects of the kinds
// Nereid serves in its version, and lists the others one by one.
func sednaObjects(ctx context.Context, disco discovery.DiscoveryInterface, dyn dynamic.Interface, namespace string) ([]count, []object, error) {
	groups, err := disco.ServerGroups()
	if err != nil {
		return nil, nil, fmt.Errorf("discovering API groups: %w", err)
	}
	var versions []string
	for _, g := range groups.Groups {
		if g.Name == sednav1.GroupName {
			for _, v := range g.Versions {
				versions = append(versions, v.Version)
			}
		}
	}
	sort.Strings(versions)
	var served []count
	var unserved []object
	for _, version := range versions {
		gv := schema.GroupVersion{Group: sednav1.GroupName, Version: version}
		list, err := disco.ServerResourcesForGroupVersion(gv.String())
		if err != nil {
			return nil, nil, fmt.Errorf("discovering the resources of %s: %w", gv, err)
		}
		resources := list.APIResources
		sort.Slice(resources, func(i, j int) bool { return resources[i].Kind < resources[j].Kind })
		for _, r := range resources {
			if strings.Contains(r.Name, "/") {
				continue // a subresource (status)
			}
			items, err := listNames(ctx, dyn, gv.WithResource(r.Name), r.Namespaced, namespace)
			if err != nil {
				return nil, nil, err
			}
			if serves(gv, r.Kind) {
				served = append(served, count{kind: r.Kind, n: len(items)})
				continue
			}
			for _, it := range items {
				unserved = append(unserved, object{kind: r.Kind, version: version, namespace: it.GetNamespace(), name: it.GetName()})
			}
		}
	}
	return served, unserved, nil
}

// listNames lists a resource's objects (metadata only is needed, but a CRD's
// objects come whole through the dynamic client), page by page.
func listNames(ctx context.Context, dyn dynamic.Interface, gvr schema.GroupVersionResource, namespaced bool, namespace string) ([]metav1.Object, error) {
	var out []metav1.Object
	opts := metav1.ListOptions{Limit: 500}
	for {
		var res dynamic.ResourceInterface = dyn.Resource(gvr)
		if namespaced && namespace != "" {
			res = dyn.Resource(gvr).Namespace(namespace)
		}
		list, err := res.List(ctx, opts)
		if err != nil {
			return nil, fmt.Errorf("listing %s: %w", gvr.GroupResource(), err)
		}
		for i := range list.Items {
			out = append(out, &list.Items[i])
		}
		if list.GetContinue() == "" {
			return out, nil
		}
		opts.Continue = list.GetContinue()
	}
}

// sednaRunning prints the state of Sedna's GlobalManager and LocalController
// and returns a reason for each that still runs.
func sednaRunning(ctx context.Context, kube kubernetes.Interface, o options, out io.Writer) ([]string, error) {
	var reasons []string
	if o.sednaGM != "" {
		ref := o.sednaNamespace + "/" + o.sednaGM
		d, err := kube.AppsV1().Deployments(o.sednaNamespace).Get(ctx, o.sednaGM, metav1.GetOptions{})
		switch {
		case apierrors.IsNotFound(err):
			fmt.Fprintf(out, "Sedna's GlobalManager: no Deployment %s\n", ref)
		case err != nil:
			return nil, fmt.Errorf("reading Sedna's GlobalManager Deployment %s: %w", ref, err)
		default:
			want := int32(1)
			if d.Spec.Replicas != nil {
				want = *d.Spec.Replicas
			}
			fmt.Fprintf(out, "Sedna's GlobalManager: Deployment %s, %d replica(s) asked for, %d running\n", ref, want, d.Status.Replicas)
			if want > 0 || d.Status.Replicas > 0 {
				reasons = append(reasons, fmt.Sprintf("Sedna's GlobalManager still runs: kubectl -n %s scale deployment %s --replicas=0", o.sednaNamespace, o.sednaGM))
			}
		}
	}
	if o.sednaLC != "" {
		ref := o.sednaNamespace + "/" + o.sednaLC
		ds, err := kube.AppsV1().DaemonSets(o.sednaNamespace).Get(ctx, o.sednaLC, metav1.GetOptions{})
		switch {
		case apierrors.IsNotFound(err):
			fmt.Fprintf(out, "Sedna's LocalController: no DaemonSet %s\n", ref)
		case err != nil:
			return nil, fmt.Errorf("reading Sedna's LocalController DaemonSet %s: %w", ref, err)
		default:
			fmt.Fprintf(out, "Sedna's LocalController: DaemonSet %s, %d pod(s) scheduled\n", ref, ds.Status.CurrentNumberScheduled)
			if ds.Status.CurrentNumberScheduled > 0 {
				reasons = append(reasons, fmt.Sprintf("Sedna's LocalController still runs (it holds port 9100 on the edge nodes that Nereid's needs): kubectl -n %s delete daemonset %s", o.sednaNamespace, o.sednaLC))
			}
		}
	}
	return reasons, nil
}
