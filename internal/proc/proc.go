// Package proc runs the repository's own commands (the simulator, the
// standalone gateway) as child processes for tests and benchmarks: it builds
// them from source once per process when needed, starts them on a port of
// their choosing, waits until they are ready, and stops them.
//
// A command announces its address by printing "listening on http://HOST:PORT"
// on stdout, as cmd/modelsim, cmd/igw-gateway and cmd/igw-bench-gateway do
// with --port 0.
package proc

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
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

// StartTimeout bounds how long Start waits for a process to listen and be ready.
const StartTimeout = 60 * time.Second

// InDir returns dir/name when it is an executable file.
func InDir(dir, name string) (string, error) {
	p := filepath.Join(dir, name)
	if st, err := os.Stat(p); err == nil && st.Mode().IsRegular() && st.Mode()&0o111 != 0 {
		return p, nil
	}
	return "", fmt.Errorf("%s: no executable %s in %s (build it with `go build -o %s ./cmd/%s`, or `make build` for bin/)",
		name, name, dir, dir, name)
}

var builds sync.Map // name → *buildResult

type buildResult struct {
	once sync.Once
	path string
	err  error
}

// Build builds ./cmd/NAME of the module the working directory is in, once per
// process (so it is never stale), into a cache directory keyed by the module
// root, and returns the binary's path.
func Build(name string) (string, error) {
	v, _ := builds.LoadOrStore(name, &buildResult{})
	b := v.(*buildResult)
	b.once.Do(func() { b.path, b.err = build(name) })
	return b.path, b.err
}

func build(name string) (string, error) {
	out, err := exec.Command("go", "env", "GOMOD").Output()
	gomod := strings.TrimSpace(string(out))
	if err != nil || gomod == "" || gomod == os.DevNull {
		return "", fmt.Errorf("%s: the working directory is not inside the igw module to build it from "+
			"(run from the repository, or `make build` and use the binaries in bin/)", name)
	}
	root := filepath.Dir(gomod)
	if _, err := os.Stat(filepath.Join(root, "cmd", name)); err != nil {
		return "", fmt.Errorf("%s: no cmd/%s in %s", name, name, root)
	}
	cache, err := os.UserCacheDir()
	if err != nil {
		cache = os.TempDir()
	}
	dir := filepath.Join(cache, "igw", "bin", strings.NewReplacer("/", "_", ":", "_").Replace(root))
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	// Build beside the target and rename, so that processes building
	// concurrently (test binaries of several packages) never run a partial file.
	tmp, err := os.CreateTemp(dir, "."+name+"-*")
	if err != nil {
		return "", err
	}
	tmp.Close()
	defer os.Remove(tmp.Name())
	cmd := exec.Command("go", "build", "-o", tmp.Name(), "./cmd/"+name)
	cmd.Dir = root
	if msg, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("building cmd/%s: %v\n%s", name, err, msg)
	}
	final := filepath.Join(dir, name)
	return final, os.Rename(tmp.Name(), final)
}

// Proc is a started command that announced "listening on http://ADDR".
type Proc struct {
	Name string
	// Addr is host:port, URL is http://Addr, Port the port.
	Addr string
	URL  string
	Port int

	cmd    *exec.Cmd
	stderr *tailBuffer
	exited chan struct{}
	once   sync.Once
}

// Start starts bin with args and returns once it has printed its address and
// answered GET readyPath with 200 (within StartTimeout). The process is killed
// if this one dies without stopping it.
func Start(ctx context.Context, name, bin string, args []string, readyPath string) (*Proc, error) {
	p := newProc(name, bin, args)
	stdout, err := p.cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := p.begin(); err != nil {
		return nil, err
	}
	addr := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			if rest, ok := strings.CutPrefix(sc.Text(), "listening on http://"); ok {
				addr <- rest
			}
		}
	}()
	timeout := time.NewTimer(StartTimeout)
	defer timeout.Stop()
	fail := func(format string, a ...any) (*Proc, error) {
		p.Stop()
		return nil, fmt.Errorf(format, a...)
	}
	select {
	case p.Addr = <-addr:
	case <-p.exited:
		return fail("%s exited: %s(started as %s %s)", name, p.stderr, bin, strings.Join(args, " "))
	case <-timeout.C:
		return fail("%s did not start listening: %s", name, p.stderr)
	case <-ctx.Done():
		return fail("%s: %w", name, ctx.Err())
	}
	p.URL = "http://" + p.Addr
	if i := strings.LastIndexByte(p.Addr, ':'); i >= 0 {
		p.Port, _ = strconv.Atoi(p.Addr[i+1:])
	}
	for {
		resp, err := http.Get(p.URL + readyPath)
		if err == nil {
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return p, nil
			}
		}
		select {
		case <-p.exited:
			return fail("%s exited: %s", name, p.stderr)
		case <-timeout.C:
			return fail("%s not ready at %s: %v %s", name, readyPath, err, p.stderr)
		case <-ctx.Done():
			return fail("%s: %w", name, ctx.Err())
		case <-time.After(10 * time.Millisecond):
		}
	}
}

// StartQuiet starts bin with args for a process that announces no address
// (a control-plane component) and returns once it runs; its stdout and stderr
// go to the tail that Stderr returns.
func StartQuiet(name, bin string, args []string) (*Proc, error) {
	p := newProc(name, bin, args)
	p.cmd.Stdout = p.stderr
	if err := p.begin(); err != nil {
		return nil, err
	}
	return p, nil
}

func newProc(name, bin string, args []string) *Proc {
	p := &Proc{Name: name, stderr: &tailBuffer{max: 16 << 10}, exited: make(chan struct{})}
	p.cmd = exec.Command(bin, args...)
	p.cmd.Stderr = p.stderr
	p.cmd.SysProcAttr = sysProcAttr()
	// A grandchild holding stderr open must not keep Wait (and Stop) waiting.
	p.cmd.WaitDelay = time.Second
	return p
}

// begin starts the command and notes when it exits.
func (p *Proc) begin() error {
	if err := p.cmd.Start(); err != nil {
		return fmt.Errorf("starting %s: %w", p.Name, err)
	}
	go func() { _ = p.cmd.Wait(); close(p.exited) }()
	return nil
}

// Stop ends the process: SIGTERM, then SIGKILL after 5 s. Safe to repeat.
func (p *Proc) Stop() {
	p.once.Do(func() {
		_ = p.cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-p.exited:
		case <-time.After(5 * time.Second):
			_ = p.cmd.Process.Kill()
			<-p.exited
		}
	})
}

// Exited reports whether the process has ended.
func (p *Proc) Exited() bool {
	select {
	case <-p.exited:
		return true
	default:
		return false
	}
}

// Signal sends sig to the process.
func (p *Proc) Signal(sig os.Signal) error { return p.cmd.Process.Signal(sig) }

// Pid is the process's id.
func (p *Proc) Pid() int { return p.cmd.Process.Pid }

// ExitCode waits up to timeout for the process to end and returns its exit
// code; false when it is still running.
func (p *Proc) ExitCode(timeout time.Duration) (int, bool) {
	select {
	case <-p.exited:
		return p.cmd.ProcessState.ExitCode(), true
	case <-time.After(timeout):
		return 0, false
	}
}

// Stderr is the tail of what the process wrote to stderr.
func (p *Proc) Stderr() string { return p.stderr.String() }

// StopAll stops procs concurrently (each waits up to 5 s for its process).
func StopAll(procs []*Proc) {
	var wg sync.WaitGroup
	for _, p := range procs {
		if p != nil {
			wg.Go(p.Stop)
		}
	}
	wg.Wait()
}

// tailBuffer keeps the last max bytes written to it.
type tailBuffer struct {
	mu  sync.Mutex
	b   bytes.Buffer
	max int
}

func (t *tailBuffer) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.b.Write(p)
	if over := t.b.Len() - t.max; over > 0 {
		t.b.Next(over)
	}
	return len(p), nil
}

func (t *tailBuffer) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.b.String()
}
