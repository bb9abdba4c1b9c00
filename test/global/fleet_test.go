package global

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	infv1 "sigs.k8s.io/gateway-api-inference-extension/api/v1"

	igwv1 "github.com/igw-dev/igw/api/v1alpha1"
	"github.com/igw-dev/igw/internal/proc"
	"github.com/igw-dev/igw/internal/servetest"
	"github.com/igw-dev/igw/internal/testenv"
	"github.com/igw-dev/igw/internal/testenv/fixtures"
	"github.com/igw-dev/igw/internal/testfile"
	"github.com/igw-dev/igw/pkg/global/hub"
	"github.com/igw-dev/igw/pkg/manager"
	"github.com/igw-dev/igw/pkg/sim"
	"github.com/igw-dev/igw/pkg/sim/simproc"
	"github.com/igw-dev/igw/pkg/wire"
)

// member is one member cluster on loopback: its own control plane (etcd
// and kube-apiserver, internal/testenv, with kube-controller-manager's
// workload controllers, kube-scheduler and a node kwok plays), its operator
// (cmd/manager) reconciling an InferenceGatewayConfig and a ModelRoute into
// an InferencePool, two Pods to which kwok gives loopback IPs where
// simulators listen, and its gateway front: igw-gateway following the InferencePool
// through the member's API server and exporting the member summary behind a
// token, which the hub reaches through a delay proxy.
type member struct {
	name, region string
	// index makes the range of the Pods' IPs, 127.0.(20+index).0/24.
	index int
	dir   string
	token string

	env *testenv.Env
	k8s client.Client
	// pool is the InferencePool the operator rendered for the route.
	pool string
	// simPort is the route's target port, where every simulator listens on its Pod's IP.
	simPort int
	// podIPs are the IPs kwok gave the Pods.
	podIPs [2]string

	operator *proc.Proc
	sims     [2]*proc.Proc
	gwPort   int
	gw       *proc.Proc
	// front is what the hub dials: a delay proxy before the gateway.
	front string
	delay *delayProxy
}

type binaries struct{ gateway, hub, operator string }

func buildBinaries(t *testing.T) binaries {
	t.Helper()
	var b binaries
	for _, x := range []struct {
		name string
		dst  *string
	}{{"igw-gateway", &b.gateway}, {"igw-global", &b.hub}, {"manager", &b.operator}} {
		p, err := proc.Build(x.name)
		if err != nil {
			t.Fatal(err)
		}
		*x.dst = p
	}
	return b
}

// models every simulator serves: llama, and llama-eu, which the hub pins
// to eu-west-1.
var servedModels = []string{"llama", "llama-eu"}

const (
	memberNamespace = "inference"
	routeName       = "llama"
	configName      = "igw"
	gatewayName     = "inference-gateway"
	podApp          = "llama-sim"
)

// newMember is a member whose gateway the hub reaches through a delay
// proxy (no delay until the test sets one).
func newMember(t *testing.T, name, region string, index int) *member {
	t.Helper()
	m := &member{name: name, region: region, index: index, dir: t.TempDir(), delay: &delayProxy{}}
	m.token = testfile.Write(t, m.dir, "token", "summary-token-of-"+name+"-0123456789\n")
	return m
}

func (m *member) podName(i int) string { return fmt.Sprintf("llama-%d", i) }

// setUp brings the member up the first time: its control plane, its
// operator, the route's objects, the Pods with their simulators, its gateway.
func (m *member) setUp(t *testing.T, b binaries) {
	t.Helper()
	env, err := testenv.Start(testenv.Options{ExtraCRDDirs: testenv.ExternalCRDDirs, Controllers: testenv.WorkloadControllers,
		Nodes: &testenv.Nodes{PodCIDR: fmt.Sprintf("127.0.%d.0/24", 20+m.index)}})
	if err != nil {
		t.Fatal(err)
	}
	m.env = env
	t.Cleanup(func() { _ = env.Stop() })
	scheme, err := manager.NewScheme()
	if err != nil {
		t.Fatal(err)
	}
	if m.k8s, err = client.New(env.Config, client.Options{Scheme: scheme}); err != nil {
		t.Fatal(err)
	}
	m.startOperator(t, b)
	ctx := context.Background()
	must(t, m.k8s.Create(ctx, testenv.NewNode(m.name+"-node", nil)))
	must(t, fixtures.Namespace(ctx, m.k8s, memberNamespace))
	_, err = fixtures.Gateway(ctx, m.k8s, memberNamespace, gatewayName)
	must(t, err)
	must(t, m.k8s.Create(ctx, &igwv1.InferenceGatewayConfig{ObjectMeta: metav1.ObjectMeta{Namespace: memberNamespace, Name: configName},
		Spec: igwv1.InferenceGatewayConfigSpec{Gateway: igwv1.GatewaySpec{Ref: &igwv1.GatewayRef{Name: gatewayName}}}}))
	m.simPort = testenv.PodPort(t)
	var models []igwv1.ModelName
	for _, name := range servedModels {
		models = append(models, igwv1.ModelName(name))
	}
	must(t, m.k8s.Create(ctx, &igwv1.ModelRoute{ObjectMeta: metav1.ObjectMeta{Namespace: memberNamespace, Name: routeName},
		Spec: igwv1.ModelRouteSpec{ConfigRef: igwv1.ObjectName{Name: configName}, Models: models,
			Selector:    igwv1.ModelServerSelector{MatchLabels: map[string]string{"app": podApp}},
			TargetPorts: []igwv1.TargetPort{{Number: int32(m.simPort)}}}}))
	// The gateway follows the pool the operator renders for the route.
	waitUntil(t, m.name+"'s operator rendering the route's InferencePool", time.Minute, func() bool {
		var mr igwv1.ModelRoute
		if m.k8s.Get(ctx, types.NamespacedName{Namespace: memberNamespace, Name: routeName}, &mr) != nil || mr.Status.InferencePool == "" {
			return false
		}
		var pool infv1.InferencePool
		m.pool = mr.Status.InferencePool
		return m.k8s.Get(ctx, types.NamespacedName{Namespace: memberNamespace, Name: m.pool}, &pool) == nil
	})
	for i := range m.sims {
		_, err := fixtures.ModelPod(ctx, m.k8s, memberNamespace, m.podName(i), map[string]string{"app": podApp}, "")
		must(t, err)
		p, err := testenv.StartSimulator(ctx, t, m.k8s, memberNamespace, m.podName(i), m.simPort, m.simOptions(i))
		must(t, err)
		m.sims[i] = p
		m.podIPs[i], _, _ = net.SplitHostPort(p.Addr)
	}
	m.startGateway(t, b)
}

func (m *member) simOptions(i int) simproc.Options {
	return simproc.Options{Config: sim.Config{Model: "llama-3.1-8b", Seed: uint64(i + 1)}, ServedModelName: strings.Join(servedModels, ",")}
}

// startOperator runs the member's operator (cmd/manager) against its API
// server, with no listener of its own.
func (m *member) startOperator(t *testing.T, b binaries) {
	t.Helper()
	p, err := proc.StartQuiet(m.name+" operator", b.operator, []string{"--kubeconfig", m.env.KubeconfigPath,
		"--metrics-bind-address", "0", "--health-probe-bind-address", "0", "--extension-server-bind-address", "0",
		"--max-concurrent-reconciles", "1", "--zap-log-level", "error"})
	if err != nil {
		t.Fatal(err)
	}
	m.operator = p
}

// startGateway starts igw-gateway following the member's InferencePool: on
// a free port the first time, on the same port after a kill, as a cluster
// that comes back keeps its address.
func (m *member) startGateway(t *testing.T, b binaries) {
	t.Helper()
	gw, err := proc.Start(context.Background(), m.name+" igw-gateway", b.gateway, []string{"--port", strconv.Itoa(m.gwPort), "--bind-address", "127.0.0.1",
		"--kubeconfig", m.env.KubeconfigPath, "--pool-namespace", memberNamespace, "--pool-name", m.pool,
		"--served-model-name", strings.Join(servedModels, ","), "--global-summary-token-file", m.token,
		// Scrapes run late on a loaded machine; a member must not report its
		// simulators not ready (and lose its pinned model) for that.
		"--metrics-staleness", "2s",
		"--cluster", m.name, "--region", m.region}, "/readyz")
	if err != nil {
		t.Fatal(err)
	}
	m.gw, m.gwPort = gw, gw.Port
	if m.front == "" {
		m.front = m.delay.start(t, gw.Addr)
	}
}

// kill ends every process of the member: the gateway, the simulators and
// the operator at once, without a drain (SIGKILL), then the API server and
// etcd (etcd's data is kept, as a cluster's disks survive it). The control
// plane goes down in the background; the channel says when it is down.
// kube-controller-manager, kube-scheduler and kwok's node go on, and
// reconnect once the control plane is back, as a node's kubelet would.
func (m *member) kill() <-chan error {
	procs := m.processes()
	for _, p := range procs {
		_ = p.Signal(syscall.SIGKILL)
	}
	proc.StopAll(procs)
	down := make(chan error, 1)
	go func() { down <- m.env.StopControlPlane() }()
	return down
}

// restart brings a killed member back: its control plane with its data, its
// operator, the simulators on their Pods' addresses (the Pods are still
// ready, as the kubelet would report them), and its gateway on its port.
func (m *member) restart(t *testing.T, b binaries) {
	t.Helper()
	must(t, m.env.StartControlPlane())
	m.startOperator(t, b)
	for i := range m.sims {
		o := m.simOptions(i)
		o.Host, o.Port = m.podIPs[i], m.simPort
		m.sims[i] = simproc.Start(t, o)
	}
	m.startGateway(t, b)
}

// gatewayEndpoints is how many endpoints the member's gateway has in its
// pool, by its /readyz.
func (m *member) gatewayEndpoints(t *testing.T) int {
	t.Helper()
	resp, err := http.Get(m.gw.URL + "/readyz")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var ready struct {
		Pools map[string]struct {
			Endpoints int `json:"endpoints"`
		} `json:"pools"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&ready); err != nil {
		t.Fatal(err)
	}
	return ready.Pools["default"].Endpoints
}

func (m *member) processes() []*proc.Proc {
	return []*proc.Proc{m.gw, m.sims[0], m.sims[1], m.operator}
}

func (m *member) stop() { proc.StopAll(m.processes()) }

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func (m *member) configYAML() string {
	return fmt.Sprintf("- {name: %s, region: %s, address: %q, summaryURLs: [%q], tokenFile: %q}\n",
		m.name, m.region, m.front, "http://"+m.front+wire.GlobalSummaryPath, m.token)
}

// startHub runs igw-global with its standalone front over the members.
func startHub(t *testing.T, b binaries, members []*member) (front, metrics string, p *proc.Proc) {
	t.Helper()
	config := "region: us-east-1\nmodels: [{name: llama-eu, regions: [eu-west-1]}, {name: llama}]\nmembers:\n"
	for _, m := range members {
		config += m.configYAML()
	}
	path := testfile.Write(t, "", "hub.yaml", config)
	metricsPort := servetest.FreePort(t)
	p, err := proc.Start(context.Background(), "igw-global", b.hub, []string{"--config", path, "--bind-address", "127.0.0.1",
		"--log-level", "warn", "--grpc-port", "0", "--http-port", strconv.Itoa(servetest.FreePort(t)), "--metrics-port", strconv.Itoa(metricsPort)}, "/healthz")
	if err != nil {
		t.Fatal(err)
	}
	return p.URL, fmt.Sprintf("http://127.0.0.1:%d", metricsPort), p
}

// status reads the hub's GET /status.
func status(t *testing.T, metrics string) map[string]hub.MemberStatus {
	t.Helper()
	resp, err := http.Get(metrics + wire.GlobalStatusPath)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var st hub.Status
	if err := json.NewDecoder(resp.Body).Decode(&st); err != nil {
		t.Fatal(err)
	}
	out := map[string]hub.MemberStatus{}
	for _, m := range st.Members {
		out[m.Name] = m
	}
	return out
}

// counter reads an unlabelled counter from the hub's metrics.
func counter(t *testing.T, metrics, name string) int {
	t.Helper()
	return sumMetric(t, metrics, name+" ")
}

// attempts is how many requests the hub sent to member, by its metrics
// (every outcome, failures that were retried included).
func attempts(t *testing.T, metrics, member string) int {
	t.Helper()
	return sumMetric(t, metrics, wire.GlobalRequests+`{member="`+member+`"`)
}

// sumMetric sums the samples of the hub's metrics whose line starts with prefix.
func sumMetric(t *testing.T, metrics, prefix string) int {
	t.Helper()
	resp, err := http.Get(metrics + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	n := 0
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		if line := sc.Text(); strings.HasPrefix(line, prefix) {
			f := strings.Fields(line)
			v, _ := strconv.ParseFloat(f[len(f)-1], 64)
			n += int(v)
		}
	}
	return n
}

// delayProxy forwards TCP connections to a target, holding every chunk
// for the current delay in each direction: a slow network link.
type delayProxy struct {
	delayNanos atomic.Int64
	l          net.Listener
}

func (d *delayProxy) set(delay time.Duration) { d.delayNanos.Store(int64(delay)) }

func (d *delayProxy) start(t *testing.T, target string) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	d.l = l
	t.Cleanup(func() { l.Close() })
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			go d.serve(c, target)
		}
	}()
	return l.Addr().String()
}

func (d *delayProxy) serve(client net.Conn, target string) {
	defer client.Close()
	upstream, err := net.Dial("tcp", target)
	if err != nil {
		return
	}
	defer upstream.Close()
	var wg sync.WaitGroup
	wg.Go(func() { d.pipe(upstream, client) })
	wg.Go(func() { d.pipe(client, upstream) })
	wg.Wait()
}

type stamped struct {
	at   time.Time
	data []byte
}

// pipe copies src to dst, each chunk written the delay after it was read;
// reading goes on meanwhile, so the delay is latency, not a bandwidth cap.
func (d *delayProxy) pipe(dst, src net.Conn) {
	q := make(chan stamped, 1024)
	go func() {
		defer close(q)
		buf := make([]byte, 32<<10)
		for {
			n, err := src.Read(buf)
			if n > 0 {
				q <- stamped{time.Now(), append([]byte(nil), buf[:n]...)}
			}
			if err != nil {
				return
			}
		}
	}()
	for c := range q {
		time.Sleep(time.Until(c.at.Add(time.Duration(d.delayNanos.Load()))))
		if _, err := dst.Write(c.data); err != nil {
			break
		}
	}
	if tc, ok := dst.(*net.TCPConn); ok {
		_ = tc.CloseWrite()
	}
	for range q { // drain the reader
	}
	_, _ = io.Copy(io.Discard, src)
}
