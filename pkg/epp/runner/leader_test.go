package runner

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"google.golang.org/grpc/codes"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	infv1 "sigs.k8s.io/gateway-api-inference-extension/api/v1"

	"github.com/igw-dev/igw/internal/serve"
	"github.com/igw-dev/igw/internal/servetest"
	"github.com/igw-dev/igw/internal/testenv"
	"github.com/igw-dev/igw/pkg/epp/options"
	"github.com/igw-dev/igw/pkg/epp/source"
	"github.com/igw-dev/igw/pkg/extproctest"
	"github.com/igw-dev/igw/pkg/wire"
)

// Lease timings of the test: short, so that it runs in seconds, with a renew
// deadline long enough that a loaded two-core machine does not make the
// leader step down by itself (that would show as two leaders or none).
const (
	testLeaseDuration = 8 * time.Second
	testRenewDeadline = 3 * time.Second
	testRetryPeriod   = 500 * time.Millisecond
	// waitLong bounds what the control plane and two pickers do on a loaded machine.
	waitLong = 60 * time.Second
)

// pool is one InferencePool with one ready Pod, whose endpoint is a model
// server played by an HTTP test server on loopback.
type pool struct {
	ns, name, endpoint string
	c                  client.Client
	env                *testenv.Env
}

// controlPlane is started by the first test that needs it and stopped by TestMain.
var controlPlane struct {
	once sync.Once
	env  *testenv.Env
	err  error
}

func TestMain(m *testing.M) {
	code := m.Run()
	if controlPlane.env != nil {
		_ = controlPlane.env.Stop()
	}
	os.Exit(code)
}

// startPool creates, in a namespace of its own on the shared control plane,
// an InferencePool with one ready Pod.
func startPool(t *testing.T, ns string) *pool {
	t.Helper()
	controlPlane.once.Do(func() {
		controlPlane.env, controlPlane.err = testenv.Start(testenv.Options{ExtraCRDDirs: []string{"config/crd/external/inference-extension"}})
	})
	if controlPlane.err != nil {
		t.Fatal(controlPlane.err)
	}
	env := controlPlane.env
	server := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case wire.MetricsPath:
			w.Write([]byte("vllm:num_requests_waiting 0\nvllm:num_requests_running 0\nvllm:kv_cache_usage_perc 0.1\n"))
		case wire.ModelsPath:
			w.Write([]byte(`{"object":"list","data":[{"id":"m"}]}`))
		default:
			http.NotFound(w, r)
		}
	}))
	t.Cleanup(server.Close)
	_, portText, _ := net.SplitHostPort(strings.TrimPrefix(server.URL, "http://"))
	port, _ := strconv.Atoi(portText)

	scheme, err := source.Scheme()
	if err != nil {
		t.Fatal(err)
	}
	if err := coordinationv1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	c, err := client.New(env.Config, client.Options{Scheme: scheme})
	if err != nil {
		t.Fatal(err)
	}
	p := &pool{ns: ns, name: "llama", endpoint: "127.0.0.1:" + portText, c: c, env: env}
	ctx := context.Background()
	must(t, c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: p.ns}}))
	must(t, c.Create(ctx, &infv1.InferencePool{
		ObjectMeta: metav1.ObjectMeta{Namespace: p.ns, Name: p.name},
		Spec: infv1.InferencePoolSpec{
			Selector:          infv1.LabelSelector{MatchLabels: map[infv1.LabelKey]infv1.LabelValue{"app": "llama"}},
			TargetPorts:       []infv1.Port{{Number: infv1.PortNumber(port)}},
			EndpointPickerRef: &infv1.EndpointPickerRef{Name: "llama-epp", Port: &infv1.Port{Number: 9002}},
		},
	}))
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: p.ns, Name: "llama-0", Labels: map[string]string{"app": "llama"}},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "server", Image: "modelsim"}}},
	}
	must(t, c.Create(ctx, pod))
	pod.Status = corev1.PodStatus{Phase: corev1.PodRunning, PodIP: "127.0.0.1", PodIPs: []corev1.PodIP{{IP: "127.0.0.1"}},
		Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}}
	must(t, c.Status().Update(ctx, pod))
	return p
}

// replica starts one picker of the pool with leader election.
func (p *pool) replica(t *testing.T, identity string) (*Runner, func() error) {
	t.Helper()
	return start(t, func(o *options.Options) {
		o.PoolName, o.PoolNamespace, o.Kubeconfig = p.name, p.ns, p.env.KubeconfigPath
		o.LeaderElect, o.Identity = true, identity
		o.LeaseDuration, o.RenewDeadline, o.RetryPeriod = testLeaseDuration, testRenewDeadline, testRetryPeriod
		o.ModelsInterval = time.Second
	})
}

// lease returns the Lease the pickers elect through.
func (p *pool) lease(t *testing.T) *coordinationv1.Lease {
	t.Helper()
	var l coordinationv1.Lease
	must(t, p.c.Get(context.Background(), client.ObjectKey{Namespace: p.ns, Name: options.DefaultLeaseName(p.name)}, &l))
	return &l
}

// healthOf asks a replica's gRPC health service, as the kubelet's probe does.
func healthOf(t *testing.T, r *Runner) healthpb.HealthCheckResponse_ServingStatus {
	t.Helper()
	return servetest.Health(t, r.Addr("health"), serve.ExtProcService)
}

// readyz is a replica's /readyz: the status code and the detail.
func readyz(t *testing.T, r *Runner) (int, map[string]any) {
	t.Helper()
	resp, err := http.Get("http://" + r.Addr("metrics") + "/readyz")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var body struct {
		Detail map[string]any `json:"detail"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&body); err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, body.Detail
}

// pick sends one request through a replica's ext_proc server.
func pick(r *Runner) (string, error) {
	c, err := extproctest.Dial(r.Addr("grpc"), extproctest.Config{})
	if err != nil {
		return "", err
	}
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	res, err := c.Process(ctx, extproctest.PostJSON("/v1/completions", []byte(`{"model":"m","prompt":"hello"}`)))
	if err != nil {
		return "", err
	}
	if res.ImmediateResponse != nil {
		return "", fmt.Errorf("immediate response %d", res.ImmediateResponse.Status)
	}
	return res.RequestHeaders.Get(wire.HeaderDestinationEndpoint), nil
}

// waitFor polls cond until it holds or waitLong passes, and returns how long it took.
func waitFor(t *testing.T, what string, cond func() bool) time.Duration {
	t.Helper()
	return servetest.WaitFor(t, what, waitLong, cond)
}

// checkActivePassive asserts that leader serves and standby refuses, with
// the standby's view of the pool and telemetry kept warm.
func checkActivePassive(t *testing.T, p *pool, leader, standby *Runner) {
	t.Helper()
	lid, sid := leader.Options.Identity, standby.Options.Identity
	if got, err := pick(leader); err != nil || got != p.endpoint {
		t.Fatalf("the leader %s picked %q (%v), want %s", lid, got, err, p.endpoint)
	}
	if st := healthOf(t, leader); st != healthpb.HealthCheckResponse_SERVING {
		t.Fatalf("the leader's health is %s", st)
	}
	if code, detail := readyz(t, leader); code != http.StatusOK || detail["leaderElection"] != "leader" || detail["identity"] != lid {
		t.Fatalf("the leader's /readyz: %d %v", code, detail)
	}

	if st := healthOf(t, standby); st != healthpb.HealthCheckResponse_NOT_SERVING {
		t.Fatalf("the standby's health is %s, want NOT_SERVING", st)
	}
	// The standby learns the holder on its next acquire attempt (one retry
	// period, longer when the API server is slow under load); until then it
	// reports "none known", which is also true.
	want := "standby (leader: " + lid + ")"
	var code int
	var detail map[string]any
	servetest.WaitFor(t, "the standby names the leader", waitLong, func() bool {
		code, detail = readyz(t, standby)
		return detail["leaderElection"] == want
	})
	if code != http.StatusServiceUnavailable || detail["identity"] != sid {
		t.Fatalf("the standby's /readyz: %d %v, want 503 with %q", code, detail, want)
	}
	refused := testutil.ToFloat64(standby.Metrics.StandbyRefusals)
	_, err := pick(standby)
	if s, _ := status.FromError(unwrapStatus(err)); s.Code() != codes.Unavailable || !strings.Contains(s.Message(), "standby (leader: "+lid+")") {
		t.Fatalf("the standby answered ext_proc with %v, want UNAVAILABLE naming the leader", err)
	}
	if testutil.ToFloat64(standby.Metrics.StandbyRefusals) != refused+1 {
		t.Fatal("the refusal was not counted")
	}
	if testutil.ToFloat64(leader.Metrics.Leader) != 1 || testutil.ToFloat64(standby.Metrics.Leader) != 0 {
		t.Fatalf("%s: leader %v, standby %v", "igw_epp_leader", testutil.ToFloat64(leader.Metrics.Leader), testutil.ToFloat64(standby.Metrics.Leader))
	}
	// Warm: the standby follows the pool and scrapes, so a failover starts
	// from current telemetry.
	if standby.Store.Get(p.endpoint) == nil {
		t.Fatal("the standby does not know the pool's endpoint")
	}
	scrapes := testutil.ToFloat64(standby.Metrics.Scrapes.WithLabelValues("ok"))
	waitFor(t, "the standby scrapes", func() bool { return testutil.ToFloat64(standby.Metrics.Scrapes.WithLabelValues("ok")) > scrapes })
	if h := p.lease(t).Spec.HolderIdentity; h == nil || *h != lid {
		t.Fatalf("the Lease's holder is %v, want %s", h, lid)
	}
}

// unwrapStatus finds the gRPC status error extproctest wrapped.
func unwrapStatus(err error) error {
	for e := err; e != nil; {
		if _, ok := status.FromError(e); ok {
			return e
		}
		u, ok := e.(interface{ Unwrap() error })
		if !ok {
			break
		}
		e = u.Unwrap()
	}
	return err
}

// TestLeaderElectionFailover runs two pickers of one pool on a real API
// server: exactly one leads and serves; the standby reports not ready,
// refuses ext_proc with UNAVAILABLE and keeps its endpoints and telemetry
// warm. The leader stopping hands over within a retry period (it releases the
// lease), far inside a lease duration; a lease taken away makes the leader a
// standby without ending the process, and it leads again once the lease
// expires.
func TestLeaderElectionFailover(t *testing.T) {
	p := startPool(t, "failover")
	a, stopA := p.replica(t, "epp-a")
	b, stopB := p.replica(t, "epp-b")
	stopA, stopB = once(stopA), once(stopB)
	defer stopA()
	defer stopB()

	took := waitFor(t, "a leader", func() bool {
		return healthOf(t, a) == healthpb.HealthCheckResponse_SERVING || healthOf(t, b) == healthpb.HealthCheckResponse_SERVING
	})
	t.Logf("first leader after %v", took)
	leader, standby, stopLeader := a, b, stopA
	if healthOf(t, b) == healthpb.HealthCheckResponse_SERVING {
		leader, standby, stopLeader = b, a, stopB
	}
	// Exactly one, and it stays so: no flapping, no second leader.
	for range 10 {
		sa, sb := healthOf(t, a), healthOf(t, b)
		if (sa == healthpb.HealthCheckResponse_SERVING) == (sb == healthpb.HealthCheckResponse_SERVING) {
			t.Fatalf("health a=%s b=%s: want exactly one SERVING", sa, sb)
		}
		time.Sleep(100 * time.Millisecond)
	}
	checkActivePassive(t, p, leader, standby)

	// The leader goes away (its context ends, as on SIGTERM): it releases the
	// lease, and the standby takes over within about one retry period.
	t0 := time.Now()
	done := make(chan error, 1)
	go func() { done <- stopLeader() }()
	ready := waitFor(t, "the standby takes over", func() bool { return healthOf(t, standby) == healthpb.HealthCheckResponse_SERVING })
	var picked string
	waitFor(t, "the new leader picks", func() bool { picked, _ = pick(standby); return picked == p.endpoint })
	failover := time.Since(t0)
	t.Logf("failover after the leader stopped: health SERVING after %v, first pick after %v (lease duration %v, retry period %v)",
		ready, failover, testLeaseDuration, testRetryPeriod)
	if err := <-done; err != nil {
		t.Fatalf("the old leader stopped with %v", err)
	}
	// Without the release the standby waits out the lease duration from the
	// last renewal it saw, at least testLeaseDuration - testRetryPeriod.
	if failover >= testLeaseDuration/2 {
		t.Fatalf("failover took %v, not under half the lease duration %v: the lease was not released", failover, testLeaseDuration)
	}
	if h := p.lease(t).Spec.HolderIdentity; h == nil || *h != standby.Options.Identity {
		t.Fatalf("the Lease's holder is %v, want %s", h, standby.Options.Identity)
	}

	// Someone else takes the lease for longer than the renew deadline: the
	// leader steps down to standby at once and keeps running, then leads
	// again when that lease expires.
	must(t, retry.RetryOnConflict(retry.DefaultRetry, func() error {
		l := p.lease(t)
		now := metav1.NewMicroTime(time.Now())
		l.Spec.HolderIdentity, l.Spec.LeaseDurationSeconds = ptr.To("thief"), ptr.To[int32](8)
		l.Spec.AcquireTime, l.Spec.RenewTime = &now, &now
		return p.c.Update(context.Background(), l)
	}))
	lost := waitFor(t, "the leader steps down", func() bool { return healthOf(t, standby) == healthpb.HealthCheckResponse_NOT_SERVING })
	code, detail := readyz(t, standby)
	if code != http.StatusServiceUnavailable || detail["leaderElection"] != "standby (leader: thief)" {
		t.Fatalf("after the lease was taken: /readyz %d %v", code, detail)
	}
	if _, err := pick(standby); status.Code(unwrapStatus(err)) != codes.Unavailable {
		t.Fatalf("a stepped-down leader answered ext_proc with %v", err)
	}
	again := waitFor(t, "the replica leads again", func() bool { return healthOf(t, standby) == healthpb.HealthCheckResponse_SERVING })
	t.Logf("stepped down %v after the lease was taken, led again %v later", lost, again)
	if lost > testRenewDeadline+5*time.Second {
		t.Fatalf("stepping down took %v, renew deadline %v", lost, testRenewDeadline)
	}
	if picked, err := pick(standby); err != nil || picked != p.endpoint {
		t.Fatalf("after leading again: %q, %v", picked, err)
	}
}

// TestStandbyWaitsOutALiveLease: a lease held by another replica that
// stopped renewing without releasing it (a crashed pod) is taken over only
// once it expires, and until then /readyz names the holder.
func TestStandbyWaitsOutALiveLease(t *testing.T) {
	p := startPool(t, "expiry")
	now := metav1.NewMicroTime(time.Now())
	const held = 4 // seconds
	must(t, p.c.Create(context.Background(), &coordinationv1.Lease{
		ObjectMeta: metav1.ObjectMeta{Namespace: p.ns, Name: options.DefaultLeaseName(p.name)},
		Spec: coordinationv1.LeaseSpec{HolderIdentity: ptr.To("crashed-pod"), LeaseDurationSeconds: ptr.To[int32](held),
			AcquireTime: &now, RenewTime: &now},
	}))
	created := time.Now()
	r, stop := p.replica(t, "epp-a")
	defer stop()
	waitFor(t, "the replica is warm and has seen the lease", func() bool {
		code, detail := readyz(t, r)
		return code == http.StatusServiceUnavailable && detail["leaderElection"] == "standby (leader: crashed-pod)" && detail["sourceSynced"] == true
	})
	if _, err := pick(r); status.Code(unwrapStatus(err)) != codes.Unavailable {
		t.Fatalf("a standby answered ext_proc with %v", err)
	}
	waitFor(t, "the replica takes the expired lease", func() bool { return healthOf(t, r) == healthpb.HealthCheckResponse_SERVING })
	took := time.Since(created)
	t.Logf("took over %v after the dead holder's last renewal (lease %ds)", took, held)
	if took < held*time.Second {
		t.Fatalf("took over after %v, before the %ds lease expired", took, held)
	}
	if picked, err := pick(r); err != nil || picked != p.endpoint {
		t.Fatalf("the new leader picked %q, %v", picked, err)
	}
}

// once makes a stop function safe to call again; later calls return nil.
func once(stop func() error) func() error {
	var o sync.Once
	return func() (err error) {
		o.Do(func() { err = stop() })
		return err
	}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// TestWithoutLeaderElectionTheReplicaServes: without --leader-elect nothing
// changes: the replica reports itself the active picker and /readyz says
// nothing of leadership.
func TestWithoutLeaderElectionTheReplicaServes(t *testing.T) {
	ep := filepath.Join(t.TempDir(), "endpoints.yaml")
	must(t, os.WriteFile(ep, []byte("- {address: 10.3.0.1, port: 8000}\n"), 0o644))
	r, stop := start(t, func(o *options.Options) { o.EndpointsFile = ep })
	defer stop()
	waitFor(t, "ready", func() bool { return healthOf(t, r) == healthpb.HealthCheckResponse_SERVING })
	code, detail := readyz(t, r)
	if _, ok := detail["leaderElection"]; code != http.StatusOK || ok || testutil.ToFloat64(r.Metrics.Leader) != 1 {
		t.Fatalf("/readyz %d %v, %s %v", code, detail, "igw_epp_leader", testutil.ToFloat64(r.Metrics.Leader))
	}
}

// TestLeaderHoldsOverAnAPIServerOutage stops the API server under two
// pickers: the leader cannot renew its lease and sees no other holder, so it
// keeps picking for the whole outage, well past its renew deadline and lease
// duration, while the standby stays a standby. Once the API server is back,
// exactly one replica leads on a renewed lease and picks.
func TestLeaderHoldsOverAnAPIServerOutage(t *testing.T) {
	p := startPool(t, "outage")
	a, stopA := p.replica(t, "epp-a")
	defer stopA()
	b, stopB := p.replica(t, "epp-b")
	defer stopB()
	serving := func(r *Runner) bool { return healthOf(t, r) == healthpb.HealthCheckResponse_SERVING }
	waitFor(t, "a leader", func() bool { return serving(a) || serving(b) })
	leader, standby := a, b
	if serving(b) {
		leader, standby = b, a
	}
	waitFor(t, "the standby sees the leader", func() bool {
		_, detail := readyz(t, standby)
		return detail["leaderElection"] == "standby (leader: "+leader.Options.Identity+")"
	})
	checkActivePassive(t, p, leader, standby)

	// Outage: picks go on through the renew deadline and the lease duration.
	must(t, p.env.StopAPIServer())
	down := time.Now()
	restarted := false
	defer func() {
		if !restarted {
			_ = p.env.StartAPIServer() // the next test needs it
		}
	}()
	picks, holding := 0, ""
	for time.Since(down) < testRenewDeadline+testLeaseDuration || holding == "" {
		if time.Since(down) > waitLong {
			t.Fatalf("after %v of outage the leader does not say it holds over (%d picks)", time.Since(down), picks)
		}
		if got, err := pick(leader); err != nil || got != p.endpoint {
			t.Fatalf("%v into the outage the leader picked %q (%v) after %d picks, want %s", time.Since(down), got, err, picks, p.endpoint)
		}
		picks++
		if !serving(leader) || serving(standby) {
			t.Fatalf("%v into the outage: leader SERVING %v, standby SERVING %v", time.Since(down), serving(leader), serving(standby))
		}
		code, detail := readyz(t, leader)
		if code != http.StatusOK {
			t.Fatalf("%v into the outage the leader's /readyz is %d %v", time.Since(down), code, detail)
		}
		if s, _ := detail["leaderElection"].(string); strings.Contains(s, "holding over") {
			holding = s
		}
		time.Sleep(100 * time.Millisecond) // pacing, not synchronisation
	}
	outage := time.Since(down)
	t.Logf("%d picks in %v of API-server outage (renew deadline %v, lease %v); /readyz: %s",
		picks, outage.Round(time.Millisecond), testRenewDeadline, testLeaseDuration, holding)

	must(t, p.env.StartAPIServer())
	restarted = true
	back := time.Now()
	var now *Runner
	waitFor(t, "one replica leads on a renewed lease", func() bool {
		for _, r := range []*Runner{a, b} {
			if code, detail := readyz(t, r); code == http.StatusOK && detail["leaderElection"] == "leader" {
				now = r
				return true
			}
		}
		return false
	})
	t.Logf("%s leads on a renewed lease %v after the API server came back", now.Options.Identity, time.Since(back).Round(time.Millisecond))
	other := a
	if now == a {
		other = b
	}
	waitFor(t, "the other replica is a standby that sees the leader", func() bool {
		_, detail := readyz(t, other)
		return !serving(other) && detail["leaderElection"] == "standby (leader: "+now.Options.Identity+")"
	})
	checkActivePassive(t, p, now, other)
}
