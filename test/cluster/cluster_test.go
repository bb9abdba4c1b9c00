// Package cluster runs the operator and a gateway in a cluster whose
// workload machinery is the real thing: kube-controller-manager's
// Deployment, ReplicaSet, node-lifecycle and garbage-collection controllers,
// kube-scheduler, and kwok playing the nodes. No fixture writes a Pod's or a
// Deployment's status here; the test only plays the container runtime,
// starting a model server simulator on each Pod's IP (kwok gives Pods
// loopback IPs). The EndpointSlice controller is not run: the API rejects
// loopback addresses in EndpointSlices, and igw reads Pods, not slices.
package cluster

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	igwv1 "github.com/igw-dev/igw/api/v1alpha1"
	"github.com/igw-dev/igw/internal/proc"
	"github.com/igw-dev/igw/internal/testenv"
	"github.com/igw-dev/igw/internal/testenv/fixtures"
	"github.com/igw-dev/igw/pkg/manager"
	"github.com/igw-dev/igw/pkg/render"
	"github.com/igw-dev/igw/pkg/sim"
	"github.com/igw-dev/igw/pkg/sim/simproc"
	"github.com/igw-dev/igw/pkg/wire"
)

const (
	ns         = "inference"
	modelApp   = "llama"
	routeName  = "llama"
	configName = "igw"
	// podCIDR is where kwok takes Pod IPs from: loopback, so that the
	// simulators can listen on them.
	podCIDR = "127.0.90.0/24"
)

func TestOperatorOnRealControllersAndKwokNodes(t *testing.T) {
	env := testenv.StartFor(t, "the operator runs against a real control plane", testenv.Options{
		ExtraCRDDirs: testenv.ExternalCRDDirs,
		Controllers:  testenv.WorkloadControllers,
		Nodes:        &testenv.Nodes{PodCIDR: podCIDR},
	})
	scheme, err := manager.NewScheme()
	must(t, err)
	k8s, err := client.New(env.Config, client.Options{Scheme: scheme})
	must(t, err)
	ctx := context.Background()

	t.Cleanup(func() {
		if t.Failed() {
			t.Log(clusterState(k8s))
		}
	})
	must(t, k8s.Create(ctx, testenv.NewNode("gpu-node-0", nil)))
	operator, err := proc.Build("manager")
	must(t, err)
	gatewayBin, err := proc.Build("igw-gateway")
	must(t, err)
	op, err := proc.StartQuiet("operator", operator, []string{"--kubeconfig", env.KubeconfigPath,
		"--metrics-bind-address", "0", "--health-probe-bind-address", "0", "--extension-server-bind-address", "0",
		"--zap-log-level", "error"})
	must(t, err)
	t.Cleanup(op.Stop)

	must(t, fixtures.Namespace(ctx, k8s, ns))
	// Envoy Gateway does not run here: the Gateway's status is the one
	// fixture left.
	_, err = fixtures.Gateway(ctx, k8s, ns, "inference-gateway")
	must(t, err)
	must(t, k8s.Create(ctx, &igwv1.InferenceGatewayConfig{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: configName},
		Spec: igwv1.InferenceGatewayConfigSpec{Gateway: igwv1.GatewaySpec{Ref: &igwv1.GatewayRef{Name: "inference-gateway"}}}}))
	simPort := testenv.PodPort(t)
	must(t, k8s.Create(ctx, &igwv1.ModelRoute{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: routeName},
		Spec: igwv1.ModelRouteSpec{ConfigRef: igwv1.ObjectName{Name: configName}, Models: []igwv1.ModelName{"llama"},
			Selector:    igwv1.ModelServerSelector{MatchLabels: map[string]string{"app": modelApp}},
			TargetPorts: []igwv1.TargetPort{{Number: int32(simPort)}}}}))
	// The container runtime kwok lacks: a simulator on each model Pod's IP.
	seed := uint64(0)
	testenv.RunSimulators(t, k8s, ns, map[string]string{"app": modelApp}, simPort, func(*corev1.Pod) simproc.Options {
		seed++
		return simproc.Options{Config: sim.Config{Model: "llama-3.1-8b", Seed: seed}, ServedModelName: "llama"}
	})

	model := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: modelApp},
		Spec: appsv1.DeploymentSpec{Replicas: ptr.To[int32](2),
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": modelApp}},
			// Each Pod is ready once its simulator answers, as with a readiness probe.
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": modelApp},
				Annotations: map[string]string{testenv.ReadinessProbeAnnotation: testenv.ReadinessProbeFailing}},
				Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "vllm", Image: "vllm/vllm-openai:latest",
					Ports: []corev1.ContainerPort{{ContainerPort: int32(simPort)}}}}}}}}
	must(t, k8s.Create(ctx, model))

	names := render.NamesForRoute(routeName)
	t.Run("the picker's Deployment rolls out through the real controllers and the route is Ready", func(t *testing.T) {
		waitUntil(t, "the route Ready with 2 endpoints and its picker available", 2*time.Minute, func() bool {
			var mr igwv1.ModelRoute
			if k8s.Get(ctx, types.NamespacedName{Namespace: ns, Name: routeName}, &mr) != nil {
				return false
			}
			c := meta.FindStatusCondition(mr.Status.Conditions, igwv1.ConditionReady)
			return c != nil && c.Status == metav1.ConditionTrue && c.ObservedGeneration == mr.Generation &&
				strings.HasPrefix(c.Message, "2 of 2 endpoints ready; endpoint picker 1/1 available")
		})
		var epp appsv1.Deployment
		must(t, k8s.Get(ctx, types.NamespacedName{Namespace: ns, Name: names.EPP}, &epp))
		pods := podsOf(t, k8s, epp.Spec.Selector.MatchLabels)
		if len(pods) != 1 || pods[0].Spec.NodeName != "gpu-node-0" || !metav1.IsControlledBy(&pods[0], replicaSetOf(t, k8s, &epp)) {
			t.Fatalf("the picker's Pods: %v, want one bound to gpu-node-0 by the scheduler and owned by the Deployment's ReplicaSet", podNames(pods))
		}
	})

	gw, err := proc.Start(ctx, "igw-gateway", gatewayBin, []string{"--port", "0", "--bind-address", "127.0.0.1",
		"--kubeconfig", env.KubeconfigPath, "--pool-namespace", ns, "--pool-name", names.Pool, "--served-model-name", "llama",
		"--trusted-cidrs", "127.0.0.1/32", "--allow-debug-header"}, "/readyz")
	must(t, err)
	t.Cleanup(gw.Stop)

	t.Run("a scaled Deployment's new Pod joins the pool and serves", func(t *testing.T) {
		waitForServers(t, k8s, gw.URL, 2)
		must(t, k8s.Get(ctx, client.ObjectKeyFromObject(model), model))
		model.Spec.Replicas = ptr.To[int32](3)
		must(t, k8s.Update(ctx, model))
		waitForServers(t, k8s, gw.URL, 3)
	})

	t.Run("a deleted Pod is replaced by its ReplicaSet and the replacement serves", func(t *testing.T) {
		pods := podsOf(t, k8s, map[string]string{"app": modelApp})
		victim := pods[0]
		must(t, k8s.Delete(ctx, &victim))
		waitUntil(t, "a replacement for "+victim.Name, time.Minute, func() bool {
			now := podsOf(t, k8s, map[string]string{"app": modelApp})
			return len(now) == 3 && !slices.ContainsFunc(now, func(p corev1.Pod) bool { return p.UID == victim.UID })
		})
		ips := waitForServers(t, k8s, gw.URL, 3)
		t.Logf("serving from %v after %s (%s) was replaced", ips, victim.Name, victim.Status.PodIP)
	})

	t.Run("deleting the route takes its picker's Deployment, ReplicaSet and Pod with it", func(t *testing.T) {
		var epp appsv1.Deployment
		must(t, k8s.Get(ctx, types.NamespacedName{Namespace: ns, Name: names.EPP}, &epp))
		selector := epp.Spec.Selector.MatchLabels
		must(t, k8s.Delete(ctx, &igwv1.ModelRoute{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: routeName}}))
		waitUntil(t, "the picker's Deployment, ReplicaSets and Pods gone", 2*time.Minute, func() bool {
			var rs appsv1.ReplicaSetList
			must(t, k8s.List(ctx, &rs, client.InNamespace(ns), client.MatchingLabels(selector)))
			err := k8s.Get(ctx, client.ObjectKeyFromObject(&epp), &appsv1.Deployment{})
			return apierrors.IsNotFound(err) && len(rs.Items) == 0 && len(podsOf(t, k8s, selector)) == 0
		})
	})
}

// waitForServers waits until n model Pods are ready with an IP, and
// requests through the gateway have reached every one of them; it returns
// their IPs.
func waitForServers(t *testing.T, k8s client.Client, gateway string, n int) []string {
	t.Helper()
	var ips []string
	waitUntil(t, fmt.Sprintf("%d model Pods ready with an IP", n), 2*time.Minute, func() bool {
		ips = ips[:0]
		for _, p := range podsOf(t, k8s, map[string]string{"app": modelApp}) {
			if p.Status.PodIP != "" && p.DeletionTimestamp == nil && slices.ContainsFunc(p.Status.Conditions, func(c corev1.PodCondition) bool {
				return c.Type == corev1.PodReady && c.Status == corev1.ConditionTrue
			}) {
				ips = append(ips, p.Status.PodIP)
			}
		}
		return len(ips) == n
	})
	served := map[string]bool{}
	waitUntil(t, fmt.Sprintf("requests through the gateway answered by each of %v", ips), 2*time.Minute, func() bool {
		if ip := servedBy(t, gateway); ip != "" {
			served[ip] = true
		}
		return !slices.ContainsFunc(ips, func(ip string) bool { return !served[ip] })
	})
	return ips
}

// servedBy sends one chat completion through the gateway and says which
// Pod IP answered it (the pick the gateway explains to a trusted client),
// or "" when it failed.
func servedBy(t *testing.T, gateway string) string {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, gateway+"/v1/chat/completions",
		strings.NewReader(`{"model":"llama","max_tokens":4,"messages":[{"role":"user","content":"hello"}]}`))
	must(t, err)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set(wire.HeaderDebug, "1")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return ""
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return ""
	}
	first, _, _ := strings.Cut(strings.TrimPrefix(resp.Header.Get(wire.HeaderScoreBreakdown), "endpoint="), ";")
	host, _, _ := strings.Cut(first, ":")
	return host
}

// clusterState is what a failure needs to be understood: the Nodes, the
// Deployments, the Pods and the route's conditions.
func clusterState(k8s client.Client) string {
	ctx := context.Background()
	var b strings.Builder
	var nodes corev1.NodeList
	_ = k8s.List(ctx, &nodes)
	for _, n := range nodes.Items {
		fmt.Fprintf(&b, "\nnode %s: %v", n.Name, n.Status.Conditions)
	}
	var deps appsv1.DeploymentList
	_ = k8s.List(ctx, &deps, client.InNamespace(ns))
	for _, d := range deps.Items {
		fmt.Fprintf(&b, "\ndeployment %s: %d/%d available, %v", d.Name, d.Status.AvailableReplicas, ptr.Deref(d.Spec.Replicas, 1), d.Status.Conditions)
	}
	var pods corev1.PodList
	_ = k8s.List(ctx, &pods, client.InNamespace(ns))
	for _, p := range pods.Items {
		fmt.Fprintf(&b, "\npod %s on %q: %s %s %v", p.Name, p.Spec.NodeName, p.Status.Phase, p.Status.PodIP, p.Status.Conditions)
	}
	var mr igwv1.ModelRoute
	if k8s.Get(ctx, types.NamespacedName{Namespace: ns, Name: routeName}, &mr) == nil {
		fmt.Fprintf(&b, "\nroute %s: %v", mr.Name, mr.Status.Conditions)
	}
	return b.String()
}

func podsOf(t *testing.T, k8s client.Client, selector map[string]string) []corev1.Pod {
	t.Helper()
	var pods corev1.PodList
	must(t, k8s.List(context.Background(), &pods, client.InNamespace(ns), client.MatchingLabels(selector)))
	return pods.Items
}

func podNames(pods []corev1.Pod) []string {
	var names []string
	for _, p := range pods {
		names = append(names, p.Name+"@"+p.Spec.NodeName)
	}
	return names
}

// replicaSetOf is the Deployment's current ReplicaSet.
func replicaSetOf(t *testing.T, k8s client.Client, d *appsv1.Deployment) *appsv1.ReplicaSet {
	t.Helper()
	var list appsv1.ReplicaSetList
	must(t, k8s.List(context.Background(), &list, client.InNamespace(d.Namespace), client.MatchingLabels(d.Spec.Selector.MatchLabels)))
	for i := range list.Items {
		if metav1.IsControlledBy(&list.Items[i], d) {
			return &list.Items[i]
		}
	}
	t.Fatalf("no ReplicaSet of Deployment %s", d.Name)
	return nil
}

func waitUntil(t *testing.T, what string, timeout time.Duration, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(timeout); !cond(); time.Sleep(100 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting until %s", timeout, what)
		}
	}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}
