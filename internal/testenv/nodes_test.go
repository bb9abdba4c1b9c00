package testenv_test

import (
	"context"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/igw-dev/igw/internal/testenv"
)

// kwokCluster starts a control plane with the workload controllers and one
// node kwok plays, its Pods on podCIDR, and returns a client of it.
func kwokCluster(t *testing.T, podCIDR string) (client.Client, context.Context) {
	t.Helper()
	env := testenv.StartFor(t, "kwok plays the nodes of the test cluster", testenv.Options{
		Controllers: testenv.WorkloadControllers, Nodes: &testenv.Nodes{PodCIDR: podCIDR}})
	c := env.ClientFor(t, func() (*runtime.Scheme, error) { return clientgoscheme.Scheme, nil })
	ctx := context.Background()
	if err := c.Create(ctx, testenv.NewNode("node-0", nil)); err != nil {
		t.Fatal(err)
	}
	return c, ctx
}

// TestKwokPlaysReadinessProbes: a Pod whose readiness probe fails runs with
// an IP and is not Ready; once the probe passes it is Ready; when it fails
// again the Pod is not Ready and keeps its IP.
func TestKwokPlaysReadinessProbes(t *testing.T) {
	c, ctx := kwokCluster(t, "127.0.95.0/24")
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "server",
		Annotations: map[string]string{testenv.ReadinessProbeAnnotation: testenv.ReadinessProbeFailing}},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "server", Image: "server"}}}}
	if err := c.Create(ctx, pod); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	ip, err := testenv.WaitForPodIP(ctx, c, "default", "server")
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("running with IP %s after %v", ip, time.Since(start).Round(time.Millisecond))
	mustBe(t, c, false, ip)
	for _, passing := range []bool{true, false, true} {
		start := time.Now()
		if err := testenv.SetReadinessProbe(ctx, c, "default", "server", passing); err != nil {
			t.Fatal(err)
		}
		if err := testenv.WaitForPodReady(ctx, c, "default", "server", passing); err != nil {
			t.Fatal(err)
		}
		t.Logf("ready %v after %v", passing, time.Since(start).Round(time.Millisecond))
		mustBe(t, c, passing, ip)
	}
}

// mustBe checks what the Pod's status says as a whole: running with ip,
// its Ready and ContainersReady conditions and its container's readiness
// all ready or all not.
func mustBe(t *testing.T, c client.Client, ready bool, ip string) {
	t.Helper()
	var p corev1.Pod
	if err := c.Get(context.Background(), types.NamespacedName{Namespace: "default", Name: "server"}, &p); err != nil {
		t.Fatal(err)
	}
	want := corev1.ConditionFalse
	if ready {
		want = corev1.ConditionTrue
	}
	conds := map[corev1.PodConditionType]corev1.ConditionStatus{}
	for _, c := range p.Status.Conditions {
		conds[c.Type] = c.Status
	}
	if p.Status.Phase != corev1.PodRunning || p.Status.PodIP != ip || conds[corev1.PodReady] != want || conds[corev1.ContainersReady] != want ||
		len(p.Status.ContainerStatuses) != 1 || p.Status.ContainerStatuses[0].Ready != ready || p.Status.ContainerStatuses[0].State.Running == nil {
		t.Errorf("want Running on %s with ready %v; status %+v", ip, ready, p.Status)
	}
}

// TestPodsStartUnready: in a namespace labelled so, the Pods a Deployment's
// ReplicaSet creates run with their IPs but not Ready, and the Deployment
// stays unavailable, until their readiness probes pass; elsewhere a
// Deployment's Pods are Ready at once.
func TestPodsStartUnready(t *testing.T) {
	c, ctx := kwokCluster(t, "127.0.96.0/24")
	if err := testenv.StartPodsUnready(ctx, c, "held"); err != nil {
		t.Fatal(err)
	}
	deployment := func(ns string) *appsv1.Deployment {
		labels := map[string]string{"app": "server"}
		d := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "server"}, Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To[int32](2), Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "server", Image: "server"}}}}}}
		if err := c.Create(ctx, d); err != nil {
			t.Fatal(err)
		}
		return d
	}
	held := deployment("held")
	deployment("default")

	start := time.Now()
	var pods corev1.PodList
	for {
		if err := c.List(ctx, &pods, client.InNamespace("held")); err != nil {
			t.Fatal(err)
		}
		running := 0
		for _, p := range pods.Items {
			if p.Status.PodIP != "" {
				running++
			}
		}
		if running == 2 {
			break
		}
		if time.Since(start) > time.Minute {
			t.Fatalf("%d of 2 Pods running after a minute", running)
		}
		time.Sleep(50 * time.Millisecond)
	}
	for _, p := range pods.Items {
		if testenv.IsPodReady(&p) || p.Annotations[testenv.ReadinessProbeAnnotation] != testenv.ReadinessProbeFailing {
			t.Errorf("pod %s: ready %v, annotations %v; want it running not Ready, its probe failing", p.Name, testenv.IsPodReady(&p), p.Annotations)
		}
	}
	if err := c.Get(ctx, client.ObjectKeyFromObject(held), held); err != nil {
		t.Fatal(err)
	}
	if held.Status.AvailableReplicas != 0 {
		t.Errorf("deployment held: %d replicas available, want none", held.Status.AvailableReplicas)
	}
	if err := waitAvailable(ctx, c, "default"); err != nil {
		t.Fatalf("a Deployment's Pods outside the labelled namespace: %v", err)
	}
	start = time.Now()
	if err := testenv.PassReadinessProbes(ctx, c, "held", "server"); err != nil {
		t.Fatal(err)
	}
	t.Logf("available %v after the probes passed", time.Since(start).Round(time.Millisecond))
}

// waitAvailable waits until deployment ns/server is rolled out and available.
func waitAvailable(ctx context.Context, c client.Client, ns string) error {
	for start := time.Now(); ; time.Sleep(50 * time.Millisecond) {
		var d appsv1.Deployment
		err := c.Get(ctx, types.NamespacedName{Namespace: ns, Name: "server"}, &d)
		if err == nil {
			err = testenv.DeploymentAvailable(&d)
		}
		if err == nil || time.Since(start) > time.Minute {
			return err
		}
	}
}
