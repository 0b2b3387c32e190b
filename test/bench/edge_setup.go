package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/nereid-ml/nereid/hack/localrun"
	sednav1 "github.com/nereid-ml/nereid/pkg/apis/sedna/v1alpha1"
	sednaclient "github.com/nereid-ml/nereid/pkg/client/clientset/versioned"
	"github.com/nereid-ml/nereid/pkg/globalmanager/controllers/common"
	"github.com/nereid-ml/nereid/pkg/globalmanager/edgehub"
	"github.com/nereid-ml/nereid/test/framework"
)

// The names of the edge section's objects, in namespace edgeNamespace.
const (
	edgeNamespace      = "bench-edge"
	edgeServiceAccount = "localcontroller"
	// edgeDaemonSet is the LocalControllers' DaemonSet: a Pod on each bench
	// node, which the controller-manager makes at its own pace (its
	// --kube-api-qps, 20 by default: 1,000 nodes take about a minute,
	// 9,800 about 8). It has the chart's name, which the chart's Role (the
	// GlobalManager's, in edgeNamespace) grants.
	edgeDaemonSet = localrun.LocalControllerDaemonSet
	// edgeAggregatorNode is where the jobs' aggregation workers run: the
	// local control plane's cloud node.
	edgeAggregatorNode = "cloud-0"
	// setupWorkers is how many objects the bench creates at once.
	setupWorkers = 16
)

func edgeNodeName(i int) string { return fmt.Sprintf("bench-edge-%d", i) }
func edgeDataset(i int) string  { return fmt.Sprintf("ds-%d", i) }
func edgeJob(i int) string      { return fmt.Sprintf("fl-%d", i) }

// trainingWorkers are the names of the training worker pods of the n jobs,
// by job index: the only workers the hub takes reports of.
func trainingWorkers(ctx context.Context, kube kubernetes.Interface, n int) ([]string, error) {
	pods, err := kube.CoreV1().Pods(edgeNamespace).List(ctx, metav1.ListOptions{LabelSelector: common.LabelWorkerRole + "=training"})
	if err != nil {
		return nil, fmt.Errorf("listing the training workers: %w", err)
	}
	byJob := make(map[string]string, len(pods.Items))
	for _, p := range pods.Items {
		byJob[p.Labels[common.LabelOwnerName]] = p.Name
	}
	workers := make([]string, n)
	for i := range workers {
		if workers[i] = byJob[edgeJob(i)]; workers[i] == "" {
			return nil, fmt.Errorf("job %s has no training worker pod", edgeJob(i))
		}
	}
	return workers, nil
}

// edgeObjects are what the setup created, by node index.
type edgeObjects struct {
	tokenFiles []string
	datasets   []*sednav1.Dataset
}

// createEdgeObjects creates, for each of n edge nodes, what a real edge node
// has: a kwok Node labelled as an edge node, the Pod of the LocalControllers'
// DaemonSet on it with a token bound to that Pod (written to a file in dir),
// and something that concerns it: a Dataset on the node and, on the first
// jobs nodes, a FederatedLearningJob whose training worker runs there (its
// aggregator runs on the cloud node; all the jobs share one Model).
func createEdgeObjects(ctx context.Context, kube kubernetes.Interface, sedna sednaclient.Interface, n, jobs int, dir string) (*edgeObjects, error) {
	ns := edgeNamespace
	if _, err := kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		return nil, fmt.Errorf("creating namespace %s: %w", ns, err)
	}
	if err := waitForServiceAccount(ctx, kube, ns); err != nil {
		return nil, fmt.Errorf("waiting for the default ServiceAccount of %s: %w", ns, err)
	}
	if _, err := sedna.SednaV1alpha1().Models(ns).Create(ctx, benchModel(), metav1.CreateOptions{}); err != nil {
		return nil, fmt.Errorf("creating the model: %w", err)
	}
	nodes := make([]string, n)
	err := framework.ForEach(ctx, n, setupWorkers, func(ctx context.Context, i int) error {
		nodes[i] = edgeNodeName(i)
		return createKwokNode(ctx, kube, nodes[i])
	})
	if err != nil {
		return nil, err
	}
	// The bench's nodes alone: not the control plane's own edge nodes.
	ds, err := framework.EnsureEdgeDaemonSet(ctx, kube, ns, edgeDaemonSet, edgeServiceAccount,
		map[string]string{framework.EdgeNodeLabel: "", benchNodeLabel: benchNodeValue})
	if err != nil {
		return nil, err
	}
	pods, err := framework.DaemonSetPods(ctx, kube, ds, nodes, max(5*time.Minute, time.Duration(n)*time.Second/10))
	if err != nil {
		return nil, err
	}
	objs := &edgeObjects{tokenFiles: make([]string, n), datasets: make([]*sednav1.Dataset, n)}
	var mu sync.Mutex
	err = framework.ForEach(ctx, n, setupWorkers, func(ctx context.Context, i int) error {
		node := nodes[i]
		token, err := framework.NewBoundToken(ctx, kube, pods[node], edgehub.DefaultTokenAudience)
		if err != nil {
			return err
		}
		tokenFile := filepath.Join(dir, node+".token")
		if err := os.WriteFile(tokenFile, []byte(token), 0o600); err != nil {
			return err
		}
		ds, err := sedna.SednaV1alpha1().Datasets(ns).Create(ctx, &sednav1.Dataset{
			ObjectMeta: metav1.ObjectMeta{Name: edgeDataset(i)},
			Spec:       sednav1.DatasetSpec{URL: fmt.Sprintf("/data/%d.txt", i), Format: "txt", NodeName: node},
		}, metav1.CreateOptions{})
		if err != nil {
			return fmt.Errorf("creating dataset %s: %w", edgeDataset(i), err)
		}
		if i < jobs {
			if _, err := sedna.SednaV1alpha1().FederatedLearningJobs(ns).Create(ctx, edgeFederatedJob(i), metav1.CreateOptions{}); err != nil {
				return fmt.Errorf("creating job %s: %w", edgeJob(i), err)
			}
		}
		mu.Lock()
		objs.tokenFiles[i], objs.datasets[i] = tokenFile, ds
		mu.Unlock()
		return nil
	})
	return objs, err
}

// The label that tells the bench's kwok nodes from the control plane's own.
const (
	benchNodeLabel = "nereid.io/bench"
	benchNodeValue = "edge"
)

// createKwokNode registers a node for kwok to manage, as hack/local-up.sh's
// node_manifest does for an edge node.
func createKwokNode(ctx context.Context, kube kubernetes.Interface, name string) error {
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{
		Name: name,
		Annotations: map[string]string{
			"kwok.x-k8s.io/node":           "fake",
			"node.alpha.kubernetes.io/ttl": "0",
		},
		Labels: map[string]string{
			"kubernetes.io/hostname":       name,
			"kubernetes.io/os":             "linux",
			"kubernetes.io/arch":           "amd64",
			"type":                         "kwok",
			"node-role.kubernetes.io/edge": "",
			benchNodeLabel:                 benchNodeValue,
		},
	}}
	if _, err := kube.CoreV1().Nodes().Create(ctx, node, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("creating node %s: %w", name, err)
	}
	return nil
}

// edgeFederatedJob is job i: its training worker on edge node i, reading
// Dataset i; its aggregator on the cloud node.
func edgeFederatedJob(i int) *sednav1.FederatedLearningJob {
	tmpl := func(node string) corev1.PodTemplateSpec {
		return corev1.PodTemplateSpec{Spec: corev1.PodSpec{NodeName: node, Containers: []corev1.Container{{
			Name: "worker", Image: "worker:v1",
		}}}}
	}
	return &sednav1.FederatedLearningJob{
		ObjectMeta: metav1.ObjectMeta{Name: edgeJob(i)},
		Spec: sednav1.FederatedLearningJobSpec{
			AggregationWorker: sednav1.AggregationWorker{Model: sednav1.ModelRef{Name: benchModelName}, Template: tmpl(edgeAggregatorNode)},
			TrainingWorkers: []sednav1.TrainingWorker{
				{Dataset: sednav1.DatasetRef{Name: edgeDataset(i)}, Template: tmpl(edgeNodeName(i))},
			},
		},
	}
}

// deleteEdgeObjects removes what createEdgeObjects made, for a cluster that
// outlives the bench (-kubeconfig); a fresh control plane is torn down whole.
func deleteEdgeObjects(ctx context.Context, kube kubernetes.Interface, n int) error {
	err := kube.CoreV1().Namespaces().Delete(ctx, edgeNamespace, metav1.DeleteOptions{})
	if err != nil && !apierrors.IsNotFound(err) {
		return err
	}
	return framework.ForEach(ctx, n, setupWorkers, func(ctx context.Context, i int) error {
		err := kube.CoreV1().Nodes().Delete(ctx, edgeNodeName(i), metav1.DeleteOptions{})
		if apierrors.IsNotFound(err) {
			return nil
		}
		return err
	})
}
