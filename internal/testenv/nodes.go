package testenv

import (
	"context"
	_ "embed"
	"encoding/json"
	"os"
	"path/filepath"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Nodes are the cluster's nodes, played by kwok: a Node carrying
// NodeAnnotation is marked ready, and a Pod kube-scheduler binds to it runs
// at once (Running with an IP from PodCIDR, Ready unless its readiness probe
// fails: ReadinessProbeAnnotation) without a container, and goes when
// deleted. A test plays the container runtime: it starts what the
// Pod would run on the Pod's IP (PodCIDR on loopback, 127.0.0.0/8, makes
// every Pod IP one a local process can listen on; StartSimulator,
// RunSimulators).
type Nodes struct {
	// PodCIDR is where Pod IPs come from (kwok allocates them in order).
	PodCIDR string
}

// WorkloadControllers are the kube-controller-manager controllers a cluster
// runs workloads with, for Options.Controllers beside Nodes: Deployments
// through ReplicaSets to Pods, each namespace's default ServiceAccount
// (without which no Pod is admitted), the lifting of a new Node's not-ready
// taint once kwok reports it ready, and garbage collection.
var WorkloadControllers = []string{"deployment-controller", "replicaset-controller",
	"serviceaccount-controller", "node-lifecycle-controller", GarbageCollector}

// NodeAnnotation marks the Nodes kwok plays; NewNode's Nodes carry it.
const NodeAnnotation = "kwok.x-k8s.io/node"

// NewNode is a Node for kwok to play, with labels.
func NewNode(name string, labels map[string]string) *corev1.Node {
	return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels,
		Annotations: map[string]string{NodeAnnotation: "fake"}}}
}

// ReadinessProbeAnnotation set to ReadinessProbeFailing on a Pod has kwok
// play a kubelet whose readiness probe of the Pod fails: the Pod runs with
// its IP but is not Ready (and turns not Ready if it was). Without it, kwok
// reports the Pod Ready, as once the probe passes again. A Pod created with
// it starts not ready, as a model server does until it answers its probe.
const (
	ReadinessProbeAnnotation = "testenv.igw.dev/readiness-probe"
	ReadinessProbeFailing    = "failing"
)

// SetReadinessProbe makes the readiness probe of Pod ns/name fail or pass;
// kwok then writes the Pod's Ready condition, as the kubelet would.
func SetReadinessProbe(ctx context.Context, c client.Client, ns, name string, passing bool) error {
	value := any(ReadinessProbeFailing)
	if passing {
		value = nil // a merge patch's null removes the annotation
	}
	patch, err := json.Marshal(map[string]any{"metadata": map[string]any{"annotations": map[string]any{ReadinessProbeAnnotation: value}}})
	if err != nil {
		return err
	}
	return c.Patch(ctx, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}, client.RawPatch(types.MergePatchType, patch))
}

// kwokStages are the lifecycle kwok gives Nodes and Pods: a node ready with
// room for every Pod; a Pod scheduled to it running with an IP, ready unless
// its readiness probe fails (ReadinessProbeAnnotation); a Pod being deleted
// removed.
//
//go:embed kwok-stages.yaml
var kwokStages []byte

// startNodes runs kube-scheduler and kwok.
func (e *Env) startNodes(n Nodes) error {
	if err := e.startComponent("kube-scheduler", "--leader-elect=false", "--secure-port=0", "--v=1"); err != nil {
		return err
	}
	stages := filepath.Join(e.tmp, "kwok-stages.yaml")
	if err := os.WriteFile(stages, kwokStages, 0o600); err != nil {
		return err
	}
	return e.startComponent("kwok", "--config="+stages, "--cidr="+n.PodCIDR,
		"--manage-nodes-with-annotation-selector="+NodeAnnotation+"=fake", "--node-ip=127.0.0.1",
		"--server-address=", "--node-lease-duration-seconds=40", "--v=WARN")
}
