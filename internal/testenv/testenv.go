// Package testenv starts the real local control plane (etcd and kube-apiserver,
// and kube-controller-manager's controllers, kube-scheduler and kwok's nodes
// where a suite asks for them) that every operator test runs against, with
// igw's CRDs installed.
//
// The binaries come from hack/control-plane.sh, which installs or builds them on
// first use and caches them outside the clone; Start runs it when they are missing,
// so `go test` works on a fresh machine without `make`.
package testenv

import (
	"bytes"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	apiruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/igw-dev/igw/internal/proc"
)

// startTimeout is generous because etcd and the API server share two cores with the tests.
const startTimeout = 60 * time.Second

// stopGrace bounds a graceful stop of etcd or the API server; past it, it is
// killed. The API server's graceful shutdown can outlast a minute on a loaded
// machine, and nothing in a test needs it.
const stopGrace = 5 * time.Second

// ExternalCRDDirs are the third-party CRDs the operator works with (Gateway
// API, the inference extension, Envoy Gateway), for Options.ExtraCRDDirs.
var ExternalCRDDirs = []string{
	"config/crd/external/gateway-api",
	"config/crd/external/inference-extension",
	"config/crd/external/envoy-gateway",
}

// Options adds to the default control plane.
type Options struct {
	// ExtraCRDDirs are installed beside igw's own CRDs (paths relative to the repository root or absolute).
	ExtraCRDDirs []string
	// Controllers, when set, are run by a kube-controller-manager built from
	// the same release as the API server (its --controllers names, such as
	// GarbageCollector), so that what they do is the real thing.
	Controllers []string
	// Nodes, when set, gives the cluster nodes: kube-scheduler places Pods
	// and kwok plays each Node's kubelet (Nodes.Start).
	Nodes *Nodes
}

// GarbageCollector is kube-controller-manager's garbage collector: children
// whose owners are gone are deleted, as in a cluster.
const GarbageCollector = "garbage-collector-controller"

// Env is a running control plane.
type Env struct {
	// Config reaches the API server as a cluster administrator.
	Config *rest.Config
	// KubeconfigPath is a kubeconfig file for the same administrator.
	KubeconfigPath string
	// AssetsDir holds etcd, kube-apiserver and kubectl.
	AssetsDir string

	env *envtest.Environment
	tmp string
	// components are the running kube-controller-manager, kube-scheduler and
	// kwok, those the options asked for.
	components []*proc.Proc
}

// RepoRoot is the root of the igw checkout this package was compiled from.
func RepoRoot() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Clean(filepath.Join(filepath.Dir(file), "..", ".."))
}

// Start starts etcd and kube-apiserver and installs the CRDs.
func Start(opts Options) (*Env, error) {
	// Debian's etcd 3.4 has no watch-progress support, which the WatchList client
	// feature needs; clients fall back to LIST+WATCH.
	if os.Getenv("KUBE_FEATURE_WatchListClient") == "" {
		_ = os.Setenv("KUBE_FEATURE_WatchListClient", "false")
	}
	assets, err := assetsDir()
	if err != nil {
		return nil, err
	}
	crdDirs := repoPaths(append([]string{filepath.Join("config", "crd", "bases")}, opts.ExtraCRDDirs...))
	tmp, err := os.MkdirTemp("", "igw-testenv-")
	if err != nil {
		return nil, err
	}
	// The API server's certificates live in a directory of ours rather than
	// one envtest allocates: envtest forgets its own on Stop, so a restarted
	// API server would serve new certificates on a new port, and every
	// client's kubeconfig would stop working.
	apiCerts := filepath.Join(tmp, "apiserver")
	if err := os.Mkdir(apiCerts, 0o700); err != nil {
		_ = os.RemoveAll(tmp)
		return nil, err
	}
	apiServer := &envtest.APIServer{CertDir: apiCerts}
	// The server side of WatchList off too: with it on, the API server takes
	// a watch from resourceVersion 0 (kwok's every watch) for a watch-list
	// stream, which etcd 3.4 cannot serve, and the watch fails; the client
	// then sees changes only on its relists, further apart each time.
	apiServer.Configure().Set("feature-gates", "WatchList=false")
	e := &Env{AssetsDir: assets, tmp: tmp, env: &envtest.Environment{
		BinaryAssetsDirectory:    assets,
		CRDDirectoryPaths:        crdDirs,
		ErrorIfCRDPathMissing:    true,
		ControlPlaneStartTimeout: startTimeout,
		ControlPlaneStopTimeout:  stopGrace,
		// etcd's data lives in a directory of ours for the same reason:
		// envtest removes the one it allocates when etcd stops, so a
		// restarted control plane would come back empty.
		ControlPlane: envtest.ControlPlane{APIServer: apiServer,
			Etcd: &envtest.Etcd{DataDir: filepath.Join(tmp, "etcd")}},
	}}
	cfg, err := e.env.Start()
	if err != nil {
		_ = os.RemoveAll(tmp)
		return nil, fmt.Errorf("starting the control plane from %s: %w", assets, err)
	}
	e.Config = cfg
	e.KubeconfigPath = filepath.Join(e.tmp, "kubeconfig")
	if err := os.WriteFile(e.KubeconfigPath, e.env.KubeConfig, 0o600); err != nil {
		_ = e.Stop()
		return nil, err
	}
	if len(opts.Controllers) > 0 {
		// A test's outage of the control plane (StopControlPlane) also stops
		// kwok's node heartbeats; the grace period is long enough that the
		// node-lifecycle controller does not take the outage for a failure
		// of every node and mark their Pods not ready.
		if err := e.startComponent("kube-controller-manager", "--controllers="+strings.Join(opts.Controllers, ","),
			"--leader-elect=false", "--secure-port=0", "--node-monitor-grace-period=3m", "--v=1"); err != nil {
			_ = e.Stop()
			return nil, err
		}
	}
	if opts.Nodes != nil {
		if err := e.startNodes(*opts.Nodes); err != nil {
			_ = e.Stop()
			return nil, err
		}
	}
	return e, nil
}

// StartFor starts a control plane for the test t and stops it at t's
// cleanup. Without KUBEBUILDER_ASSETS (KUBEBUILDER_ASSETS=$(hack/control-plane.sh)
// sets it) t is skipped, saying why it needs the control plane.
func StartFor(t testing.TB, why string, opts Options) *Env {
	t.Helper()
	if os.Getenv("KUBEBUILDER_ASSETS") == "" {
		t.Skipf("KUBEBUILDER_ASSETS is not set (KUBEBUILDER_ASSETS=$(hack/control-plane.sh)): %s", why)
	}
	env, err := Start(opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		// A component that died early (kube-controller-manager, kwok) says so here.
		if err := env.Stop(); err != nil {
			t.Logf("stopping the control plane: %v", err)
		}
	})
	return env
}

// ClientFor returns a client of the API server, as cluster administrator,
// that knows the kinds of the scheme newScheme makes (manager.NewScheme,
// source.Scheme); it fails t when either cannot be made.
func (e *Env) ClientFor(t testing.TB, newScheme func() (*apiruntime.Scheme, error)) client.Client {
	t.Helper()
	scheme, err := newScheme()
	if err != nil {
		t.Fatal(err)
	}
	c, err := client.New(e.Config, client.Options{Scheme: scheme})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// startComponent runs one of the control plane's binaries (from AssetsDir)
// as the administrator.
func (e *Env) startComponent(name string, args ...string) error {
	p, err := proc.StartQuiet(name, filepath.Join(e.AssetsDir, name), append([]string{"--kubeconfig=" + e.KubeconfigPath}, args...))
	if err != nil {
		return fmt.Errorf("%w (hack/control-plane.sh builds it into %s)", err, e.AssetsDir)
	}
	e.components = append(e.components, p)
	return nil
}

// stopComponents stops them, and says which had stopped by itself.
func (e *Env) stopComponents() error {
	var errs []error
	for _, p := range e.components {
		if p.Exited() {
			errs = append(errs, fmt.Errorf("%s exited early; its output ends:\n%s", p.Name, p.Stderr()))
			continue
		}
		p.Stop()
	}
	e.components = nil
	return errors.Join(errs...)
}

// repoPaths resolves paths relative to the repository root.
func repoPaths(paths []string) []string {
	out := make([]string, len(paths))
	for i, p := range paths {
		if !filepath.IsAbs(p) {
			p = filepath.Join(RepoRoot(), p)
		}
		out[i] = p
	}
	return out
}

// InstallCRDs installs the CRDs of dirs (relative to the repository root or
// absolute) into the running control plane and waits until they are served.
func (e *Env) InstallCRDs(dirs ...string) error {
	_, err := envtest.InstallCRDs(e.Config, envtest.CRDInstallOptions{Paths: repoPaths(dirs), ErrorIfPathMissing: true})
	return err
}

// StopAPIServer stops the API server and leaves etcd running, as in an
// outage of the API server alone; StartAPIServer brings it back. It returns
// once the API server's port is closed.
func (e *Env) StopAPIServer() error {
	s := e.env.ControlPlane.APIServer
	// A stop that outlasts stopGrace ends with SIGKILL and an error: an
	// outage all the same, once the port is closed.
	stopErr := s.Stop()
	addr := net.JoinHostPort(s.SecureServing.Address, s.SecureServing.Port)
	for deadline := time.Now().Add(startTimeout); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		c, err := net.DialTimeout("tcp", addr, time.Second)
		if err != nil {
			return nil
		}
		_ = c.Close()
	}
	return fmt.Errorf("the API server still listens on %s: %w", addr, stopErr)
}

// StartAPIServer starts the API server StopAPIServer stopped, on the same
// address with the same certificates and data, and waits until it is healthy.
func (e *Env) StartAPIServer() error {
	return e.env.ControlPlane.APIServer.Start()
}

// StopControlPlane stops the API server and then etcd, keeping etcd's data,
// as in the loss of a cluster's whole control plane; StartControlPlane
// brings it back.
func (e *Env) StopControlPlane() error {
	return errors.Join(e.StopAPIServer(), e.env.ControlPlane.Etcd.Stop())
}

// StartControlPlane starts etcd and the API server StopControlPlane stopped,
// on the same addresses with the same data and certificates, and waits until
// the API server is healthy.
func (e *Env) StartControlPlane() error {
	if err := e.env.ControlPlane.Etcd.Start(); err != nil {
		return fmt.Errorf("restarting etcd: %w", err)
	}
	return e.StartAPIServer()
}

// Stop stops the control plane and removes its files.
func (e *Env) Stop() error {
	// The API server first, through StopAPIServer: a graceful stop that
	// outlasts stopGrace and ends in SIGKILL is still a stop.
	err := errors.Join(e.stopComponents(), e.StopAPIServer(), e.env.Stop())
	if e.tmp != "" {
		_ = os.RemoveAll(e.tmp)
	}
	return err
}

// Kubectl runs the control plane's kubectl against it and returns stdout; the
// error carries stderr.
func (e *Env) Kubectl(args ...string) (string, error) {
	cmd := exec.Command(filepath.Join(e.AssetsDir, "kubectl"), append([]string{"--kubeconfig", e.KubeconfigPath}, args...)...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return stdout.String(), fmt.Errorf("kubectl %s: %w: %s", strings.Join(args, " "), err, stderr.String())
	}
	return stdout.String(), nil
}

// assetsDir finds the control plane binaries, running hack/control-plane.sh when
// KUBEBUILDER_ASSETS is not set.
func assetsDir() (string, error) {
	if dir := os.Getenv("KUBEBUILDER_ASSETS"); dir != "" {
		return dir, nil
	}
	cmd := exec.Command(filepath.Join(RepoRoot(), "hack", "control-plane.sh"))
	cmd.Stderr = os.Stderr
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("preparing the control plane binaries (hack/control-plane.sh): %w", err)
	}
	return strings.TrimSpace(string(out)), nil
}
