package gateway

import (
	"context"
	"io"
	"net"
	"net/http"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/igw-dev/igw/internal/proc"
)

// The gateway as its command runs it: cmd/igw-gateway built once per test
// binary (proc.Build) and started as a subprocess, so signals, the exit code
// and the process's memory are the real ones.

// startGatewayProcess starts igw-gateway on a free port with args and
// returns once it serves /healthz; it is stopped when the test ends.
func startGatewayProcess(t *testing.T, args ...string) *proc.Proc {
	t.Helper()
	bin, err := proc.Build("igw-gateway")
	if err != nil {
		t.Fatal(err)
	}
	p, err := proc.Start(context.Background(), "igw-gateway", bin, append([]string{"--port", "0"}, args...), "/healthz")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Stop)
	return p
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
			if host, _, _ := net.SplitHostPort(p.Addr); host != "127.0.0.1" {
				t.Errorf("igw-gateway listens on %s by default, want loopback", p.Addr)
			}
			lines := openStream(t, p.URL)

			t0 := time.Now()
			if err := p.Signal(syscall.SIGTERM); err != nil {
				t.Fatal(err)
			}
			waitFor(t, "the port stops accepting", func() bool {
				c, err := net.DialTimeout("tcp", p.Addr, 100*time.Millisecond)
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
			if code, exited := p.ExitCode(tc.maxShutdown + 5*time.Second); !exited || code != 0 {
				t.Errorf("after SIGTERM: exited %v with code %d, want 0\n%s", exited, code, p.Stderr())
			}
			if took := time.Since(t0); took > tc.maxShutdown {
				t.Errorf("shutdown took %v, want under %v", took, tc.maxShutdown)
			}
			if !strings.Contains(p.Stderr(), "gateway draining") {
				t.Errorf("no drain in the log:\n%s", p.Stderr())
			}
		})
	}
}
