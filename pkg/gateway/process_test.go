package gateway

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// The gateway as its command runs it: cmd/igw-gateway built once per test
// binary and started as a subprocess, so signals, the exit code and the
// process's memory are the real ones.

var gatewayBinary struct {
	once sync.Once
	dir  string
	path string
	err  error
}

func TestMain(m *testing.M) {
	code := m.Run()
	if gatewayBinary.dir != "" {
		os.RemoveAll(gatewayBinary.dir)
	}
	os.Exit(code)
}

// buildGateway builds cmd/igw-gateway into a temporary directory, once.
func buildGateway(t *testing.T) string {
	t.Helper()
	b := &gatewayBinary
	b.once.Do(func() {
		if b.dir, b.err = os.MkdirTemp("", "igw-gateway-test-"); b.err != nil {
			return
		}
		b.path = filepath.Join(b.dir, "igw-gateway")
		out, err := exec.Command("go", "build", "-o", b.path, "github.com/igw-dev/igw/cmd/igw-gateway").CombinedOutput()
		if err != nil {
			b.err = fmt.Errorf("go build: %v\n%s", err, out)
		}
	})
	if b.err != nil {
		t.Fatal(b.err)
	}
	return b.path
}

// gatewayProcess is a running igw-gateway.
type gatewayProcess struct {
	cmd    *exec.Cmd
	addr   string
	stderr *strings.Builder
	exited chan error
}

// startGatewayProcess starts igw-gateway with args and waits for its address.
func startGatewayProcess(t *testing.T, args ...string) *gatewayProcess {
	t.Helper()
	p := &gatewayProcess{cmd: exec.Command(buildGateway(t), append([]string{"--port", "0"}, args...)...),
		stderr: &strings.Builder{}, exited: make(chan error, 1)}
	p.cmd.Stderr = &lockedWriter{w: p.stderr}
	stdout, err := p.cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = p.cmd.Process.Kill()
		<-p.exited
	})
	addr := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			if rest, ok := strings.CutPrefix(sc.Text(), "listening on http://"); ok {
				addr <- rest
			}
		}
	}()
	go func() { p.exited <- p.cmd.Wait() }()
	select {
	case p.addr = <-addr:
	case err := <-p.exited:
		p.exited <- err
		t.Fatalf("igw-gateway exited at start: %v\n%s", err, p.stderr)
	case <-time.After(30 * time.Second):
		t.Fatal("igw-gateway did not start listening")
	}
	return p
}

// wait returns the process's exit code once it exits within timeout.
func (p *gatewayProcess) wait(t *testing.T, timeout time.Duration) int {
	t.Helper()
	select {
	case err := <-p.exited:
		p.exited <- err
		var exit *exec.ExitError
		if errors.As(err, &exit) {
			return exit.ExitCode()
		}
		if err != nil {
			t.Fatal(err)
		}
		return 0
	case <-time.After(timeout):
		t.Fatalf("igw-gateway still running after %v", timeout)
		return -1
	}
}

type lockedWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (l *lockedWriter) Write(b []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(b)
}

// TestSIGTERMDrainsStreamsAndExitsZero: on SIGTERM the gateway stops
// accepting connections, lets a stream in flight finish, and exits 0; a
// stream that outlasts --shutdown-grace is cut, and the exit is still 0.
func TestSIGTERMDrainsStreamsAndExitsZero(t *testing.T) {
	for _, tc := range []struct {
		name        string
		grace       time.Duration
		hold        time.Duration // how long the server holds the stream after SIGTERM
		wantWhole   bool
		maxShutdown time.Duration
	}{
		{"stream within the grace", 20 * time.Second, 500 * time.Millisecond, true, 10 * time.Second},
		{"stream past the grace", 300 * time.Millisecond, 5 * time.Second, false, 4 * time.Second},
	} {
		t.Run(tc.name, func(t *testing.T) {
			u := startUpstream(t, "a")
			release := make(chan struct{})
			u.hold = func(r *http.Request) {
				select {
				case <-release:
				case <-r.Context().Done(): // the gateway cut the stream
				}
			}
			p := startGatewayProcess(t, "--endpoints-file", endpointsFile(t, u), "--served-model-name", "m",
				"--shutdown-grace", tc.grace.String())
			if host, _, _ := net.SplitHostPort(p.addr); host != "127.0.0.1" {
				t.Errorf("igw-gateway listens on %s by default, want loopback", p.addr)
			}
			req, _ := http.NewRequestWithContext(context.Background(), http.MethodPost, "http://"+p.addr+"/v1/completions",
				strings.NewReader(`{"model":"m","prompt":"hello","max_tokens":3,"stream":true}`))
			req.Header.Set("Content-Type", "application/json")
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			lines := bufio.NewReader(resp.Body)
			if first, _ := lines.ReadString('\n'); !strings.Contains(first, `"text":"a"`) {
				t.Fatalf("first line %q", first)
			}

			t0 := time.Now()
			if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
				t.Fatal(err)
			}
			waitFor(t, "the port stops accepting", func() bool {
				c, err := net.DialTimeout("tcp", p.addr, 100*time.Millisecond)
				if err == nil {
					c.Close()
				}
				return err != nil
			})
			go func() { time.Sleep(tc.hold); close(release) }()
			rest, _ := io.ReadAll(lines)
			whole := strings.HasSuffix(string(rest), "data: [DONE]\n\n")
			if whole != tc.wantWhole {
				t.Errorf("stream whole: %v, want %v (rest %q)", whole, tc.wantWhole, rest)
			}
			if code := p.wait(t, tc.maxShutdown+5*time.Second); code != 0 {
				t.Errorf("exit code %d after SIGTERM, want 0\n%s", code, p.stderr)
			}
			if took := time.Since(t0); took > tc.maxShutdown {
				t.Errorf("shutdown took %v, want under %v", took, tc.maxShutdown)
			}
			if !strings.Contains(p.stderr.String(), "gateway draining") {
				t.Errorf("no drain in the log:\n%s", p.stderr)
			}
		})
	}
}
