package gateway

import (
	"context"
	"net"
	"net/http"
	"strconv"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	infv1 "sigs.k8s.io/gateway-api-inference-extension/api/v1"

	"github.com/igw-dev/igw/internal/logging/kubelog"
	"github.com/igw-dev/igw/internal/testenv"
	"github.com/igw-dev/igw/internal/testenv/fixtures"
	"github.com/igw-dev/igw/pkg/epp/source"
)

// TestEndpointsFromAnInferencePool runs the gateway in discovery mode
// against a real API server: the pool's ready Pods are its endpoints (each
// a loopback address where a model server listens), a Pod that stops being
// ready leaves, and with the API server stopped the gateway goes on serving
// the endpoints it last saw, then follows the pool again once it is back.
func TestEndpointsFromAnInferencePool(t *testing.T) {
	// kube-scheduler places the Pods on kwok's node, and kwok gives them
	// their IPs and readiness, as a kubelet would.
	env := testenv.StartFor(t, "the gateway follows an InferencePool through the API server",
		testenv.Options{ExtraCRDDirs: []string{"config/crd/external/inference-extension"},
			Controllers: testenv.WorkloadControllers, Nodes: &testenv.Nodes{PodCIDR: "127.0.92.0/24"}})
	c := env.ClientFor(t, source.Scheme)
	// client-go's and controller-runtime's logs (the informers' retries while
	// the API server is down) are expected here.
	kubelog.RouteSlog(discardLog())
	ctx := context.Background()
	const ns = "discovery"
	mustSucceed(t, fixtures.Namespace(ctx, c, ns))
	mustSucceed(t, c.Create(ctx, testenv.NewNode("node-0", nil)))

	// Pods a and b are the pool's; a Pod of another app is not.
	podIPs := map[string]string{}
	for _, p := range []struct{ name, app string }{{"a", "m"}, {"b", "m"}, {"other", "other"}} {
		_, err := fixtures.ModelPod(ctx, c, ns, p.name, map[string]string{"app": p.app}, "")
		mustSucceed(t, err)
	}
	for _, name := range []string{"a", "b", "other"} {
		ip, err := testenv.WaitForPodIP(ctx, c, ns, name)
		mustSucceed(t, err)
		podIPs[name] = ip
	}
	// Both model servers listen on the pool's one target port, each on its Pod's IP.
	a := startUpstreamAt(t, "a", podIPs["a"]+":0")
	_, port, _ := net.SplitHostPort(a.Listener.Addr().String())
	b := startUpstreamAt(t, "b", podIPs["b"]+":"+port)
	for _, u := range []*upstream{a, b} {
		u.metrics = "vllm:num_requests_waiting{model_name=\"m\"} 0\nvllm:num_requests_running{model_name=\"m\"} 0\n"
	}
	targetPort, _ := strconv.Atoi(port)
	mustSucceed(t, c.Create(ctx, &infv1.InferencePool{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "pool"},
		Spec: infv1.InferencePoolSpec{
			Selector:          infv1.LabelSelector{MatchLabels: map[infv1.LabelKey]infv1.LabelValue{"app": "m"}},
			TargetPorts:       []infv1.Port{{Number: infv1.PortNumber(targetPort)}},
			EndpointPickerRef: &infv1.EndpointPickerRef{Name: "epp", Port: &infv1.Port{Number: 9002}},
		}}))
	// The servers answer: every Pod's readiness probe passes.
	for _, name := range []string{"a", "b", "other"} {
		mustSucceed(t, testenv.SetReadinessProbe(ctx, c, ns, name, true))
	}

	g := startGateway(t, "--kubeconfig", env.KubeconfigPath, "--pool-namespace", ns, "--pool-name", "pool", "--served-model-name", "m")
	// served is who answered n requests.
	served := func(n int) map[string]int {
		out := map[string]int{}
		for range n {
			r := post(t, g, "/v1/completions", completion)
			if r.status != http.StatusOK {
				t.Fatalf("status %d: %s", r.status, r.body)
			}
			out[r.header.Get("x-upstream")]++
		}
		return out
	}
	waitFor(t, "the gateway ready with both Pods scraped", func() bool {
		ok, _ := g.Ready()
		return ok && g.pools[0].liveEndpoints(g.liveWindow()) == 2
	})
	if got := served(20); got["a"] == 0 || got["b"] == 0 || len(got) != 2 {
		t.Errorf("with both Pods ready: served by %v, want a and b", got)
	}

	// b's readiness probe fails: kwok, as the kubelet, turns it not ready.
	mustSucceed(t, testenv.SetReadinessProbe(ctx, c, ns, "b", false))
	waitFor(t, "b out of the pool", func() bool { return g.pools[0].store.Len() == 1 })
	if got := served(10); got["a"] != 10 {
		t.Errorf("with b not ready: served by %v, want a alone", got)
	}

	mustSucceed(t, env.StopAPIServer())
	// Longer than the informers' first retries: what the gateway knew still serves.
	deadline := time.Now().Add(3 * time.Second)
	for time.Now().Before(deadline) {
		if got := served(5); got["a"] != 5 {
			t.Fatalf("with the API server down: served by %v, want a alone", got)
		}
		time.Sleep(200 * time.Millisecond)
	}
	if ok, detail := g.Ready(); !ok {
		t.Errorf("with the API server down the gateway is not ready: %v", detail)
	}

	mustSucceed(t, env.StartAPIServer())
	back := time.Now()
	mustSucceed(t, testenv.SetReadinessProbe(ctx, c, ns, "b", true))
	// kwok's own watch comes back after its backoff; the gateway's clock
	// starts once b is ready in the API server.
	mustSucceed(t, testenv.WaitForPodReady(ctx, c, ns, "b", true))
	ready := time.Now()
	// The informers' relist backs off while the API server was down: up to
	// tens of seconds on a loaded machine.
	for deadline := time.Now().Add(60 * time.Second); g.pools[0].store.Len() != 2; time.Sleep(50 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("b did not rejoin the pool within 60 s of turning ready after the API server's return")
		}
	}
	t.Logf("b rejoined the pool %v after the API server answered again, %v after it turned ready",
		time.Since(back).Round(time.Millisecond), time.Since(ready).Round(time.Millisecond))
	// A new endpoint counts as saturated until its first scrape.
	waitFor(t, "b scraped", func() bool { return g.pools[0].liveEndpoints(g.liveWindow()) == 2 })
	if got := served(20); got["b"] == 0 {
		t.Errorf("with b ready again: served by %v, want b among them", got)
	}
}

// TestDiscoveryFlags: a pool comes from exactly one of --config,
// --endpoints-file and --pool-name, and its namespace defaults to the pod's.
func TestDiscoveryFlags(t *testing.T) {
	t.Setenv("POD_NAMESPACE", "inference")
	o := NewOptions()
	o.PoolName = "llama-pool"
	mustSucceed(t, o.Complete())
	mustSucceed(t, o.Validate())
	if ref := o.Resolved.Pools[0].InferencePool; ref == nil || *ref != (PoolRef{Namespace: "inference", Name: "llama-pool"}) {
		t.Errorf("--pool-name llama-pool: pool %+v, want inference/llama-pool", ref)
	}
	o = NewOptions()
	o.PoolName, o.EndpointsFile = "llama-pool", "endpoints.yaml"
	mustSucceed(t, o.Complete())
	if err := o.Validate(); err == nil {
		t.Error("--pool-name with --endpoints-file: accepted")
	}
	for _, pc := range []PoolConfig{{Name: "p"}, {Name: "p", EndpointsFile: "e.yaml", InferencePool: &PoolRef{Name: "x"}}, {Name: "p", InferencePool: &PoolRef{}}} {
		if err := (&Config{Pools: []PoolConfig{pc}}).Validate(); err == nil {
			t.Errorf("pool %+v: accepted", pc)
		}
	}
}

func mustSucceed(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}
