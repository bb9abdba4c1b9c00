package live

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
	"strings"
	"sync"
	"syscall"
	"time"
)

// binaries are the commands a live run starts.
type binaries struct {
	modelsim, gateway string
}

// findBinaries locates modelsim and igw-gateway: in dir when it is given,
// else as Binary finds them.
func findBinaries(dir string) (binaries, error) {
	find := Binary
	if dir != "" {
		find = func(name string) (string, error) { return inDir(dir, name) }
	}
	var b binaries
	var err error
	if b.modelsim, err = find("modelsim"); err != nil {
		return b, err
	}
	b.gateway, err = find("igw-gateway")
	return b, err
}

// inDir returns dir/name when it is an executable file.
func inDir(dir, name string) (string, error) {
	p := filepath.Join(dir, name)
	if st, err := os.Stat(p); err == nil && st.Mode().IsRegular() && st.Mode()&0o111 != 0 {
		return p, nil
	}
	return "", fmt.Errorf("%s: no executable %s in %s (build it with `go build -o %s ./cmd/%s`, or `make build` for bin/)",
		name, name, dir, dir, name)
}

// Binary returns the path of one of the repository's commands (modelsim,
// igw-gateway): the file beside the running executable when there is one
// (bin/ after `make build`), else a build of ./cmd/NAME from the module the
// working directory is in (built once per process, so never stale), else
// NAME on the PATH.
func Binary(name string) (string, error) {
	if exe, err := os.Executable(); err == nil {
		if p, err := inDir(filepath.Dir(exe), name); err == nil {
			return p, nil
		}
	}
	built, berr := buildCommand(name)
	if berr == nil {
		return built, nil
	}
	if p, err := exec.LookPath(name); err == nil {
		return p, nil
	}
	return "", berr
}

var builds sync.Map // name → *buildResult

type buildResult struct {
	once sync.Once
	path string
	err  error
}

// buildCommand builds ./cmd/NAME of the current module once per process,
// into a cache directory keyed by the module root.
func buildCommand(name string) (string, error) {
	v, _ := builds.LoadOrStore(name, &buildResult{})
	b := v.(*buildResult)
	b.once.Do(func() {
		out, err := exec.Command("go", "env", "GOMOD").Output()
		gomod := strings.TrimSpace(string(out))
		if err != nil || gomod == "" || gomod == os.DevNull {
			b.err = fmt.Errorf("%s: not beside this executable, not on the PATH, and the working directory is not "+
				"inside the igw module to build it from (run from the repository, or `make build` and use bin/igw-bench)", name)
			return
		}
		root := filepath.Dir(gomod)
		if _, err := os.Stat(filepath.Join(root, "cmd", name)); err != nil {
			b.err = fmt.Errorf("%s: no cmd/%s in %s", name, name, root)
			return
		}
		cache, err := os.UserCacheDir()
		if err != nil {
			cache = os.TempDir()
		}
		dir := filepath.Join(cache, "igw", "live-bin", strings.NewReplacer("/", "_", ":", "_").Replace(root))
		if err := os.MkdirAll(dir, 0o755); err != nil {
			b.err = err
			return
		}
		// Build beside the target and rename, so concurrent builders never run a partial file.
		tmp := filepath.Join(dir, fmt.Sprintf(".%s-%d", name, os.Getpid()))
		cmd := exec.Command("go", "build", "-o", tmp, "./cmd/"+name)
		cmd.Dir = root
		if msg, err := cmd.CombinedOutput(); err != nil {
			b.err = fmt.Errorf("building cmd/%s: %v\n%s", name, err, msg)
			return
		}
		b.path = filepath.Join(dir, name)
		b.err = os.Rename(tmp, b.path)
	})
	return b.path, b.err
}

// Proc is a started command that announced "listening on http://ADDR".
type Proc struct {
	Name string
	// Addr is host:port; URL is http://Addr.
	Addr string
	URL  string

	cmd    *exec.Cmd
	stderr *tailBuffer
	exited chan struct{}
	once   sync.Once
}

// StartProc starts bin with args and waits until it prints its address and
// then answers GET readyPath with 200.
func StartProc(ctx context.Context, name, bin string, args []string, readyPath string) (*Proc, error) {
	p := &Proc{Name: name, stderr: &tailBuffer{max: 16 << 10}, exited: make(chan struct{})}
	p.cmd = exec.Command(bin, args...)
	p.cmd.Stderr = p.stderr
	p.cmd.SysProcAttr = sysProcAttr()
	stdout, err := p.cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := p.cmd.Start(); err != nil {
		return nil, fmt.Errorf("starting %s: %w", name, err)
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
	go func() { _ = p.cmd.Wait(); close(p.exited) }()
	timeout := time.NewTimer(60 * time.Second)
	defer timeout.Stop()
	select {
	case p.Addr = <-addr:
	case <-p.exited:
		return nil, fmt.Errorf("%s exited: %s", name, p.stderr)
	case <-timeout.C:
		p.Stop()
		return nil, fmt.Errorf("%s did not start listening: %s", name, p.stderr)
	case <-ctx.Done():
		p.Stop()
		return nil, ctx.Err()
	}
	p.URL = "http://" + p.Addr
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
			return nil, fmt.Errorf("%s exited: %s", name, p.stderr)
		case <-timeout.C:
			p.Stop()
			return nil, fmt.Errorf("%s not ready at %s: %v %s", name, readyPath, err, p.stderr)
		case <-ctx.Done():
			p.Stop()
			return nil, ctx.Err()
		case <-time.After(10 * time.Millisecond):
		}
	}
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

// Stderr is the tail of what the process wrote to stderr.
func (p *Proc) Stderr() string { return p.stderr.String() }

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

// stopAll stops procs concurrently (each waits up to 5 s for its process).
func stopAll(procs []*Proc) {
	var wg sync.WaitGroup
	for _, p := range procs {
		if p != nil {
			wg.Go(p.Stop)
		}
	}
	wg.Wait()
}
