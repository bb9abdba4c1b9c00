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

	"github.com/igw-dev/igw/internal/proc"
	"github.com/igw-dev/igw/internal/servetest"
	"github.com/igw-dev/igw/internal/testfile"
	"github.com/igw-dev/igw/pkg/global/hub"
	"github.com/igw-dev/igw/pkg/wire"
)

// member is one member "cluster" on loopback: its standalone gateway (the
// stand-in for a cluster's inference gateway, exporting the member summary
// behind a token) over two simulators. A member with its own kube control
// plane is too heavy for CI's two cores; the gateway front is what the hub
// talks to either way.
type member struct {
	name, region string
	dir          string
	token        string
	simPorts     [2]int
	gwPort       int
	sims         [2]*proc.Proc
	gw           *proc.Proc
	// front is what the hub dials: a delay proxy before the gateway.
	front string
	delay *delayProxy
}

type binaries struct{ sim, gateway, hub string }

func buildBinaries(t *testing.T) binaries {
	t.Helper()
	var b binaries
	for _, x := range []struct {
		name string
		dst  *string
	}{{"modelsim", &b.sim}, {"igw-gateway", &b.gateway}, {"igw-global", &b.hub}} {
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
const servedModels = "llama,llama-eu"

// newMember is a member whose gateway the hub reaches through a delay
// proxy (no delay until the test sets one).
func newMember(t *testing.T, name, region string) *member {
	t.Helper()
	m := &member{name: name, region: region, dir: t.TempDir(), delay: &delayProxy{}}
	m.token = testfile.Write(t, m.dir, "token", "summary-token-of-"+name+"-0123456789\n")
	return m
}

// start starts the member's processes: on free ports the first time, on the
// same ports after a kill, as a cluster that comes back keeps its address.
func (m *member) start(t *testing.T, b binaries) {
	t.Helper()
	ctx := context.Background()
	for i := range m.sims {
		p, err := proc.Start(ctx, m.name+" modelsim", b.sim, []string{"--host", "127.0.0.1", "--port", strconv.Itoa(m.simPorts[i]),
			"--model", "llama-3.1-8b", "--served-model-name", servedModels, "--seed", strconv.Itoa(i + 1)}, "/health")
		if err != nil {
			t.Fatal(err)
		}
		m.sims[i], m.simPorts[i] = p, p.Port
	}
	endpoints := testfile.Write(t, m.dir, "endpoints.yaml", fmt.Sprintf("- {address: 127.0.0.1, port: %d}\n- {address: 127.0.0.1, port: %d}\n", m.simPorts[0], m.simPorts[1]))
	gw, err := proc.Start(ctx, m.name+" igw-gateway", b.gateway, []string{"--port", strconv.Itoa(m.gwPort), "--bind-address", "127.0.0.1",
		"--endpoints-file", endpoints, "--served-model-name", servedModels, "--global-summary-token-file", m.token,
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

// kill ends every process of the member at once, without a drain (SIGKILL).
func (m *member) kill() {
	for _, p := range []*proc.Proc{m.gw, m.sims[0], m.sims[1]} {
		_ = p.Signal(syscall.SIGKILL)
	}
	proc.StopAll([]*proc.Proc{m.gw, m.sims[0], m.sims[1]})
}

func (m *member) stop() { proc.StopAll([]*proc.Proc{m.gw, m.sims[0], m.sims[1]}) }

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
