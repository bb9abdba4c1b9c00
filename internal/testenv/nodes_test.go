package testenv_test

import (
	"context"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/igw-dev/igw/internal/testenv"
)

// TestKwokPlaysReadinessProbes: a Pod whose readiness probe fails runs with
// an IP and is not Ready; once the probe passes it is Ready; when it fails
// again the Pod is not Ready and keeps its IP.
func TestKwokPlaysReadinessProbes(t *testing.T) {
	env := testenv.StartFor(t, "kwok plays the nodes of the test cluster", testenv.Options{
		Controllers: testenv.WorkloadControllers, Nodes: &testenv.Nodes{PodCIDR: "127.0.95.0/24"}})
	c := env.ClientFor(t, func() (*runtime.Scheme, error) { return clientgoscheme.Scheme, nil })
	ctx := context.Background()
	if err := c.Create(ctx, testenv.NewNode("node-0", nil)); err != nil {
		t.Fatal(err)
	}
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
