// Package simproc starts simulated model servers (cmd/modelsim) as processes for
// tests: the binary is built once per test binary, each process listens on a
// free loopback port, and every process is stopped when its test ends.
//
//	pods := simproc.StartN(t, 3, simproc.Options{GPU: "H100", Model: "llama-3.1-8b", Speedup: 10})
//	resp, _ := http.Get(pods[0].URL + "/metrics")
package simproc

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// TB is the part of testing.TB the helpers need; Ginkgo's GinkgoT() satisfies it too.
type TB interface {
	Helper()
	Fatal(args ...any)
	Fatalf(format string, args ...any)
	Cleanup(func())
}

// Options are the simulator flags; zero values leave the simulator's defaults.
type Options struct {
	// Host is the address to listen on (default 127.0.0.1): another loopback
	// address such as 127.0.0.12 lets a test give each simulator the IP of a pod.
	Host string
	// Port to listen on (default 0: a free port).
	Port int

	GPU                 string
	Model               string
	TensorParallel      int
	MaxNumSeqs          int
	MaxNumBatchedTokens int
	// KVCacheTokens is the KV cache size in tokens; 0 is auto.
	KVCacheTokens int
	MaxLoras      int
	LoRALoadTime  time.Duration
	SpeedJitter   float64
	// Seed of the jitter; StartN gives process i Seed+i.
	Seed uint64
	// Speedup runs the simulator this many times faster than real time.
	Speedup float64
	// Engine is "vllm" (default) or "sglang" metric names.
	Engine          string
	ServedModelName string
	// LoRAModules are adapters registered at start, as "name=path".
	LoRAModules []string
	// Extra are further flags passed verbatim.
	Extra []string
}

// Proc is one running simulator.
type Proc struct {
	// URL is the base URL, e.g. http://127.0.0.1:41234.
	URL string
	// Addr is host:port.
	Addr string
	Port int

	cmd     *exec.Cmd
	stderr  *lockedBuffer
	stopped sync.Once
	exited  chan struct{}
}

// Start builds (once) and starts one simulator; it has answered /health when
// Start returns, and is stopped at the test's cleanup.
func Start(t TB, opts Options) *Proc {
	t.Helper()
	bin := Binary(t)
	p := &Proc{stderr: &lockedBuffer{}, exited: make(chan struct{})}
	host := opts.Host
	if host == "" {
		host = "127.0.0.1"
	}
	args := append([]string{"--host", host, "--port", strconv.Itoa(opts.Port)}, opts.args()...)
	p.cmd = exec.Command(bin, args...)
	p.cmd.Stderr = p.stderr
	p.cmd.SysProcAttr = sysProcAttr()
	stdout, err := p.cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := p.cmd.Start(); err != nil {
		t.Fatalf("simproc: starting %s: %v", bin, err)
	}
	t.Cleanup(p.Stop)
	addr := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			if rest, ok := strings.CutPrefix(sc.Text(), "listening on http://"); ok {
				addr <- rest
			}
		}
	}()
	go func() { _ = p.cmd.Wait(); close(p.exited) }()
	select {
	case p.Addr = <-addr:
	case <-p.exited:
		t.Fatalf("simproc: modelsim %s exited: %s", strings.Join(args, " "), p.stderr)
	case <-time.After(30 * time.Second):
		t.Fatalf("simproc: modelsim did not start listening: %s", p.stderr)
	}
	p.URL = "http://" + p.Addr
	_, port, _ := strings.Cut(p.Addr, ":")
	p.Port, _ = strconv.Atoi(port)
	p.waitHealthy(t)
	return p
}

// StartN starts n simulators with the same options and seeds Seed, Seed+1, ...
func StartN(t TB, n int, opts Options) []*Proc {
	t.Helper()
	procs := make([]*Proc, n)
	for i := range procs {
		o := opts
		o.Seed = opts.Seed + uint64(i)
		procs[i] = Start(t, o)
	}
	return procs
}

func (p *Proc) waitHealthy(t TB) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		resp, err := http.Get(p.URL + "/health")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("simproc: %s not healthy: %v %s", p.URL, err, p.stderr)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// Stop ends the process (SIGTERM, then SIGKILL after 5 s). It is safe to call
// more than once; tests may call it early to take a pod away.
func (p *Proc) Stop() {
	p.stopped.Do(func() {
		_ = p.cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-p.exited:
		case <-time.After(5 * time.Second):
			_ = p.cmd.Process.Kill()
			<-p.exited
		}
	})
}

// Stderr returns what the process wrote to stderr so far.
func (p *Proc) Stderr() string { return p.stderr.String() }

func (o Options) args() []string {
	var a []string
	add := func(flag, v string) { a = append(a, "--"+flag, v) }
	if o.GPU != "" {
		add("gpu", o.GPU)
	}
	if o.Model != "" {
		add("model", o.Model)
	}
	for flag, v := range map[string]int{"tensor-parallel": o.TensorParallel, "max-num-seqs": o.MaxNumSeqs,
		"max-num-batched-tokens": o.MaxNumBatchedTokens, "kv-cache-tokens": o.KVCacheTokens, "max-loras": o.MaxLoras} {
		if v != 0 {
			add(flag, strconv.Itoa(v))
		}
	}
	if o.LoRALoadTime != 0 {
		add("lora-load-time", o.LoRALoadTime.String())
	}
	if o.SpeedJitter != 0 {
		add("speed-jitter", strconv.FormatFloat(o.SpeedJitter, 'g', -1, 64))
	}
	add("seed", strconv.FormatUint(o.Seed, 10))
	if o.Speedup != 0 {
		add("speedup", strconv.FormatFloat(o.Speedup, 'g', -1, 64))
	}
	if o.Engine != "" {
		add("engine", o.Engine)
	}
	if o.ServedModelName != "" {
		add("served-model-name", o.ServedModelName)
	}
	for _, m := range o.LoRAModules {
		add("lora-modules", m)
	}
	return append(a, o.Extra...)
}

var build struct {
	once sync.Once
	path string
	err  error
}

// Binary returns the path of the modelsim binary, building it on first use.
// The build goes to a directory keyed by the module root, through a rename so
// that test binaries building concurrently never see a partial file.
func Binary(t TB) string {
	t.Helper()
	build.once.Do(func() { build.path, build.err = buildModelsim() })
	if build.err != nil {
		t.Fatalf("simproc: %v", build.err)
	}
	return build.path
}

func buildModelsim() (string, error) {
	goTool, err := exec.LookPath("go")
	if err != nil {
		return "", fmt.Errorf("go tool not found: %w", err)
	}
	out, err := exec.Command(goTool, "env", "GOMOD").Output()
	if err != nil {
		return "", fmt.Errorf("go env GOMOD: %w", err)
	}
	root := filepath.Dir(strings.TrimSpace(string(out)))
	sum := sha256.Sum256([]byte(root))
	dir := filepath.Join(os.TempDir(), "igw-simproc-"+hex.EncodeToString(sum[:6]))
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	tmp, err := os.CreateTemp(dir, "modelsim-*.tmp")
	if err != nil {
		return "", err
	}
	tmp.Close()
	defer os.Remove(tmp.Name())
	cmd := exec.Command(goTool, "build", "-o", tmp.Name(), "./cmd/modelsim")
	cmd.Dir = root
	if msg, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("building cmd/modelsim: %v\n%s", err, msg)
	}
	final := filepath.Join(dir, "modelsim")
	if err := os.Rename(tmp.Name(), final); err != nil {
		return "", err
	}
	return final, nil
}

// lockedBuffer collects a process's stderr while tests read it.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}
