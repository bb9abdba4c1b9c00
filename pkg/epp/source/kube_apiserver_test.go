package source

import (
	"context"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	infv1 "sigs.k8s.io/gateway-api-inference-extension/api/v1"

	"github.com/igw-dev/igw/internal/testenv"
	"github.com/igw-dev/igw/pkg/epp/datastore"
	"github.com/igw-dev/igw/pkg/epp/latency"
)

// inferencePoolCRDDir is where the InferencePool CRD is installed from: the
// copy under config/crd/external when the repository has it, else the
// pinned module's own file (found with `go list` at test time, since the
// module cache path depends on the machine).
func inferencePoolCRDDir(t *testing.T) string {
	t.Helper()
	const file = "inference.networking.k8s.io_inferencepools.yaml"
	vendored := filepath.Join(testenv.RepoRoot(), "config", "crd", "external", "inference-extension")
	if _, err := os.Stat(filepath.Join(vendored, file)); err == nil {
		return vendored
	}
	out, err := exec.Command("go", "list", "-m", "-f", "{{.Dir}}", "sigs.k8s.io/gateway-api-inference-extension").Output()
	if err != nil {
		t.Fatalf("locating the inference extension module: %v", err)
	}
	return filepath.Join(strings.TrimSpace(string(out)), "config", "crd", "bases")
}

// TestKubeSourceAgainstAPIServer runs the InferencePool source against a real
// kube-apiserver: only ready Pods with an IP become endpoints, one per target
// port, with the Pod's labels; readiness changes, deletion (immediate and
// graceful) and relabelling follow; a selector change re-selects; Pods of
// other namespaces and a deleted pool contribute nothing.
func TestKubeSourceAgainstAPIServer(t *testing.T) {
	env, err := testenv.Start(testenv.Options{ExtraCRDDirs: []string{inferencePoolCRDDir(t)}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = env.Stop() })
	c := env.ClientFor(t, Scheme)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	const ns = "epp-source"
	mustDo(t, c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}))

	k8s := &cluster{t: t, ctx: ctx, c: c}
	k8s.pod(ns, "a", "10.0.0.1", true, "app", "sim", "gpu", "h100")
	k8s.pod(ns, "b", "10.0.0.2", true, "app", "sim", "gpu", "a10g")
	k8s.pod(ns, "other-app", "10.0.0.3", true, "app", "other")
	k8s.pod(ns, "unready", "10.0.0.4", false, "app", "sim")
	k8s.pod(ns, "no-ip", "", true, "app", "sim")
	k8s.pod("default", "elsewhere", "10.0.0.9", true, "app", "sim")
	pool := &infv1.InferencePool{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "pool"},
		Spec: infv1.InferencePoolSpec{
			Selector:          infv1.LabelSelector{MatchLabels: map[infv1.LabelKey]infv1.LabelValue{"app": "sim"}},
			TargetPorts:       []infv1.Port{{Number: 8000}, {Number: 8001}},
			EndpointPickerRef: &infv1.EndpointPickerRef{Name: "epp", Port: &infv1.Port{Number: 9002}},
		},
	}
	mustDo(t, c.Create(ctx, pool))

	store := datastore.NewStore(latency.DefaultPriors)
	src := &Kube{Config: env.Config, Namespace: ns, PoolName: "pool", Store: store}
	done := make(chan error, 1)
	go func() { done <- src.Run(ctx) }()

	want := func(step string, eps map[string]map[string]string) {
		t.Helper()
		var got map[string]map[string]string
		deadline := time.Now().Add(30 * time.Second)
		for {
			got = map[string]map[string]string{}
			for _, st := range store.Endpoints(nil) {
				got[st.Key()] = st.Endpoint().Labels
			}
			if src.Synced() && maps.EqualFunc(got, eps, maps.Equal) {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s: endpoints %v, want %v", step, got, eps)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	h100 := map[string]string{"app": "sim", "gpu": "h100"}
	a10g := map[string]string{"app": "sim", "gpu": "a10g"}
	want("initial", map[string]map[string]string{
		"10.0.0.1:8000": h100, "10.0.0.1:8001": h100, "10.0.0.2:8000": a10g, "10.0.0.2:8001": a10g,
	})

	k8s.setReady(ns, "unready", true)
	k8s.setReady(ns, "b", false)
	sim := map[string]string{"app": "sim"}
	want("readiness changes", map[string]map[string]string{
		"10.0.0.1:8000": h100, "10.0.0.1:8001": h100, "10.0.0.4:8000": sim, "10.0.0.4:8001": sim,
	})

	k8s.update(ns, "a", func(p *corev1.Pod) { p.Labels["gpu"] = "h200" })
	h200 := map[string]string{"app": "sim", "gpu": "h200"}
	want("relabel", map[string]map[string]string{
		"10.0.0.1:8000": h200, "10.0.0.1:8001": h200, "10.0.0.4:8000": sim, "10.0.0.4:8001": sim,
	})

	// A Pod bound to a node is deleted gracefully: it stays, terminating,
	// since no kubelet confirms; one never scheduled goes at once.
	k8s.pod(ns, "bound", "10.0.0.5", true, "app", "sim")
	want("bound pod ready", map[string]map[string]string{
		"10.0.0.1:8000": h200, "10.0.0.1:8001": h200, "10.0.0.4:8000": sim, "10.0.0.4:8001": sim,
		"10.0.0.5:8000": sim, "10.0.0.5:8001": sim,
	})
	mustDo(t, c.Delete(ctx, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "bound"}}))
	mustDo(t, c.Delete(ctx, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "unready"}}))
	want("deletions", map[string]map[string]string{"10.0.0.1:8000": h200, "10.0.0.1:8001": h200})
	var bound corev1.Pod
	mustDo(t, c.Get(ctx, client.ObjectKey{Namespace: ns, Name: "bound"}, &bound))
	if bound.DeletionTimestamp == nil {
		t.Fatal("the bound Pod was not left terminating; the graceful path went untested")
	}

	mustDo(t, c.Get(ctx, client.ObjectKeyFromObject(pool), pool))
	pool.Spec.Selector.MatchLabels = map[infv1.LabelKey]infv1.LabelValue{"app": "other"}
	mustDo(t, c.Update(ctx, pool))
	other := map[string]string{"app": "other"}
	want("selector change", map[string]map[string]string{"10.0.0.3:8000": other, "10.0.0.3:8001": other})

	mustDo(t, c.Delete(ctx, pool))
	want("pool deleted", map[string]map[string]string{})

	cancel()
	if err := <-done; err != nil {
		t.Fatalf("source ended with %v", err)
	}
}

// cluster creates and edits Pods as the kubelet and the scheduler would.
type cluster struct {
	t   *testing.T
	ctx context.Context
	c   client.Client
}

// pod creates a running Pod; "bound" Pods name a node, so that deleting them
// is graceful.
func (k *cluster) pod(ns, name, ip string, ready bool, labels ...string) {
	k.t.Helper()
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: map[string]string{}},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "server", Image: "modelsim"}}},
	}
	for i := 0; i+1 < len(labels); i += 2 {
		p.Labels[labels[i]] = labels[i+1]
	}
	if name == "bound" {
		p.Spec.NodeName = "node-1"
	}
	mustDo(k.t, k.c.Create(k.ctx, p))
	p.Status = corev1.PodStatus{Phase: corev1.PodRunning, PodIP: ip, Conditions: []corev1.PodCondition{{Type: corev1.PodReady}}}
	if ip != "" {
		p.Status.PodIPs = []corev1.PodIP{{IP: ip}}
	}
	setReadyCondition(p, ready)
	mustDo(k.t, k.c.Status().Update(k.ctx, p))
}

func setReadyCondition(p *corev1.Pod, ready bool) {
	i := slices.IndexFunc(p.Status.Conditions, func(c corev1.PodCondition) bool { return c.Type == corev1.PodReady })
	p.Status.Conditions[i].Status = corev1.ConditionFalse
	if ready {
		p.Status.Conditions[i].Status = corev1.ConditionTrue
	}
}

func (k *cluster) setReady(ns, name string, ready bool) {
	k.t.Helper()
	var p corev1.Pod
	mustDo(k.t, k.c.Get(k.ctx, client.ObjectKey{Namespace: ns, Name: name}, &p))
	setReadyCondition(&p, ready)
	mustDo(k.t, k.c.Status().Update(k.ctx, &p))
}

func (k *cluster) update(ns, name string, edit func(*corev1.Pod)) {
	k.t.Helper()
	var p corev1.Pod
	mustDo(k.t, k.c.Get(k.ctx, client.ObjectKey{Namespace: ns, Name: name}, &p))
	edit(&p)
	mustDo(k.t, k.c.Update(k.ctx, &p))
}

func mustDo(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}
