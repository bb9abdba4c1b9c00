package testenv

import (
	"context"
	_ "embed"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	admissionv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/utils/ptr"
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

// ReadinessProbeNamespaceLabel set to ReadinessProbeFailing on a namespace
// has every Pod created in it start with its readiness probe failing, as a
// server's does until it has started: an admission policy of the API server
// (a MutatingAdmissionPolicy that Nodes installs) sets
// ReadinessProbeAnnotation on the Pod as it is created. A Pod a ReplicaSet
// creates there (a Deployment's) then runs not Ready until the test lets its
// probe pass (SetReadinessProbe, PassReadinessProbes), so that a test can
// hold a Deployment it does not write, an operator's, unavailable for as
// long as it needs. StartPodsUnready labels a namespace so.
const ReadinessProbeNamespaceLabel = ReadinessProbeAnnotation

// readinessProbePolicy names the admission policy and its binding.
const readinessProbePolicy = "testenv.igw.dev-readiness-probe"

// installReadinessProbePolicy installs the admission policy behind
// ReadinessProbeNamespaceLabel.
func (e *Env) installReadinessProbePolicy(ctx context.Context) error {
	c, err := client.New(e.Config, client.Options{Scheme: clientgoscheme.Scheme})
	if err != nil {
		return err
	}
	annotations, err := json.Marshal(map[string]string{ReadinessProbeAnnotation: ReadinessProbeFailing})
	if err != nil {
		return err
	}
	policy := &admissionv1.MutatingAdmissionPolicy{ObjectMeta: metav1.ObjectMeta{Name: readinessProbePolicy},
		Spec: admissionv1.MutatingAdmissionPolicySpec{
			MatchConstraints: &admissionv1.MatchResources{ResourceRules: []admissionv1.NamedRuleWithOperations{{
				RuleWithOperations: admissionv1.RuleWithOperations{Operations: []admissionv1.OperationType{admissionv1.Create},
					Rule: admissionv1.Rule{APIGroups: []string{""}, APIVersions: []string{"v1"}, Resources: []string{"pods"}}}}}},
			Mutations: []admissionv1.Mutation{{PatchType: admissionv1.PatchTypeApplyConfiguration,
				ApplyConfiguration: &admissionv1.ApplyConfiguration{
					// A JSON object is a CEL map literal.
					Expression: "Object{metadata: Object.metadata{annotations: " + string(annotations) + "}}"}}},
			FailurePolicy:      ptr.To(admissionv1.Fail),
			ReinvocationPolicy: admissionv1.NeverReinvocationPolicy,
		}}
	binding := &admissionv1.MutatingAdmissionPolicyBinding{ObjectMeta: metav1.ObjectMeta{Name: readinessProbePolicy},
		Spec: admissionv1.MutatingAdmissionPolicyBindingSpec{PolicyName: readinessProbePolicy,
			MatchResources: &admissionv1.MatchResources{NamespaceSelector: &metav1.LabelSelector{
				MatchLabels: map[string]string{ReadinessProbeNamespaceLabel: ReadinessProbeFailing}}}}}
	for _, obj := range []client.Object{policy, binding} {
		if err := c.Create(ctx, obj); err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("installing the admission policy behind %s: %w", ReadinessProbeNamespaceLabel, err)
		}
	}
	return nil
}

// StartPodsUnready creates namespace ns, or labels it if it exists, with
// ReadinessProbeNamespaceLabel, so that every Pod created in it from then
// on starts with its readiness probe failing; it returns once the API
// server's admission policy applies there (a dry-run Pod says so).
func StartPodsUnready(ctx context.Context, c client.Client, ns string) error {
	label := map[string]string{ReadinessProbeNamespaceLabel: ReadinessProbeFailing}
	err := c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns, Labels: label}})
	if apierrors.IsAlreadyExists(err) {
		patch, perr := json.Marshal(map[string]any{"metadata": map[string]any{"labels": label}})
		if perr != nil {
			return perr
		}
		err = c.Patch(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, client.RawPatch(types.MergePatchType, patch))
	}
	if err != nil {
		return err
	}
	// The policy and its binding reach the admission plugin through its
	// informers, a moment after they are created.
	ctx, cancel := context.WithTimeout(ctx, podStartTimeout)
	defer cancel()
	for i := 0; ; i++ {
		probe := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "testenv-admission-check-" + strconv.Itoa(i)},
			Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "check", Image: "check"}}}}
		err := c.Create(ctx, probe, client.DryRunAll)
		if err == nil && probe.Annotations[ReadinessProbeAnnotation] == ReadinessProbeFailing {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("pods created in namespace %s do not start with a failing readiness probe (the admission policy %s; last error %v)",
				ns, readinessProbePolicy, err)
		case <-time.After(50 * time.Millisecond):
		}
	}
}

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

// PassReadinessProbes lets the readiness probe of every Pod of Deployment
// ns/name pass, of those its ReplicaSets create meanwhile too, and returns
// once the deployment controller reports the Deployment rolled out and
// available (DeploymentAvailable): the way to let a Deployment whose Pods
// start unready (ReadinessProbeNamespaceLabel) come up.
func PassReadinessProbes(ctx context.Context, c client.Client, ns, name string) error {
	ctx, cancel := context.WithTimeout(ctx, podStartTimeout)
	defer cancel()
	for {
		var d appsv1.Deployment
		err := c.Get(ctx, types.NamespacedName{Namespace: ns, Name: name}, &d)
		if err == nil {
			if err = DeploymentAvailable(&d); err == nil {
				return nil
			}
			if perr := passProbes(ctx, c, &d); perr != nil {
				err = perr
			}
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("waited %v for the Pods of deployment %s/%s to pass their readiness probes: %w", podStartTimeout, ns, name, err)
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// passProbes lets the readiness probe of each Pod of d pass whose probe
// fails now.
func passProbes(ctx context.Context, c client.Client, d *appsv1.Deployment) error {
	pods, err := DeploymentPods(ctx, c, d)
	if err != nil {
		return err
	}
	for _, p := range pods {
		if p.Annotations[ReadinessProbeAnnotation] != ReadinessProbeFailing {
			continue
		}
		if err := SetReadinessProbe(ctx, c, p.Namespace, p.Name, true); err != nil && !apierrors.IsNotFound(err) {
			return err
		}
	}
	return nil
}

// DeploymentPods are the Pods of Deployment d not being deleted, by name.
func DeploymentPods(ctx context.Context, c client.Client, d *appsv1.Deployment) ([]corev1.Pod, error) {
	selector, err := metav1.LabelSelectorAsSelector(d.Spec.Selector)
	if err != nil {
		return nil, err
	}
	var pods corev1.PodList
	if err := c.List(ctx, &pods, client.InNamespace(d.Namespace), client.MatchingLabelsSelector{Selector: selector}); err != nil {
		return nil, err
	}
	live := slices.DeleteFunc(pods.Items, func(p corev1.Pod) bool { return p.DeletionTimestamp != nil })
	slices.SortFunc(live, func(a, b corev1.Pod) int { return strings.Compare(a.Name, b.Name) })
	return live, nil
}

// kwokStages are the lifecycle kwok gives Nodes and Pods: a node ready with
// room for every Pod; a Pod scheduled to it running with an IP, ready unless
// its readiness probe fails (ReadinessProbeAnnotation); a Pod being deleted
// removed.
//
//go:embed kwok-stages.yaml
var kwokStages []byte

// startNodes runs kube-scheduler and kwok, and installs the admission
// policy behind ReadinessProbeNamespaceLabel.
func (e *Env) startNodes(n Nodes) error {
	ctx, cancel := context.WithTimeout(context.Background(), startTimeout)
	defer cancel()
	if err := e.installReadinessProbePolicy(ctx); err != nil {
		return err
	}
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
