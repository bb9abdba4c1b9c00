package runner

import (
	"context"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"

	"github.com/igw-dev/igw/internal/servetest"
	"github.com/igw-dev/igw/internal/servingtls/servingtlstest"
	"github.com/igw-dev/igw/pkg/epp/options"
	"github.com/igw-dev/igw/pkg/extproctest"
	"github.com/igw-dev/igw/pkg/wire"
)

func pinTo(gpu string) string {
	return "plugins:\n- {name: pin, type: label-selector-filter, parameters: {matchLabels: {gpu: " + gpu + "}}}\n" +
		"filters: [pin]\nscorers: [{plugin: running-requests, weight: 1}]\nfallbacks: 0\n" +
		// No response ever ends here, so the picker's own accounting would
		// soon call the pinned endpoint overloaded and shed.
		"admission: {maxWaitSeconds: 0, maxInterTokenSeconds: 0}\n"
}

// start runs a picker listening on free loopback ports, with the options
// configure sets, until stop, which returns Run's error.
func start(t *testing.T, configure func(*options.Options)) (r *Runner, stop func() error) {
	t.Helper()
	o := options.New()
	o.GRPCPort, o.HealthPort, o.MetricsPort, o.BindAddress = 0, 0, 0, "127.0.0.1"
	configure(o)
	r = servetest.Build(t, o, New)
	return r, servetest.Start(t, "the picker", r.Run)
}

// TestHotReloadUnderLoad swaps the configuration file while requests flow and
// checks that picks follow within a second and that no request fails.
func TestHotReloadUnderLoad(t *testing.T) {
	dir := t.TempDir()
	cfgPath, epPath := filepath.Join(dir, "config.yaml"), filepath.Join(dir, "endpoints.yaml")
	os.WriteFile(cfgPath, []byte(pinTo("a")), 0o644)
	os.WriteFile(epPath, []byte("- {address: 10.2.0.1, port: 8000, labels: {gpu: a}}\n- {address: 10.2.0.2, port: 8000, labels: {gpu: b}}\n"), 0o644)
	r, stopPicker := start(t, func(o *options.Options) {
		o.ConfigFile, o.EndpointsFile = cfgPath, epPath
		o.ConfigPollInterval = 50 * time.Millisecond
		o.MetricsStaleness = 0
	})
	defer stopPicker()
	ctx := context.Background()
	c, err := extproctest.Dial(r.Addr("grpc"), extproctest.Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()

	var failed, sent atomic.Int64
	var mu sync.Mutex
	var lastB time.Time // when the last pick went to b
	var firstB time.Time
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				res, err := c.Process(ctx, extproctest.PostJSON("/v1/completions", []byte(`{"model":"m","prompt":"hello there"}`)))
				sent.Add(1)
				if err != nil || res.ImmediateResponse != nil {
					failed.Add(1)
					continue
				}
				if res.RequestHeaders.Get(wire.HeaderDestinationEndpoint) == "10.2.0.2:8000" {
					mu.Lock()
					lastB = time.Now()
					if firstB.IsZero() {
						firstB = lastB
					}
					mu.Unlock()
				}
			}
		}()
	}
	time.Sleep(200 * time.Millisecond)
	mu.Lock()
	if !firstB.IsZero() {
		mu.Unlock()
		t.Fatal("picks went to b before the reload")
	}
	mu.Unlock()
	// An invalid file in between keeps the last good configuration.
	os.WriteFile(cfgPath, []byte("scorers: [{plugin: nope, weight: 1}]"), 0o644)
	time.Sleep(200 * time.Millisecond)
	if st := r.Watcher.Status(); st.Error == "" || !st.Loaded {
		t.Fatalf("invalid file not reported: %+v", st)
	}
	swapped := time.Now()
	os.WriteFile(cfgPath, []byte(pinTo("b")), 0o644)
	time.Sleep(1500 * time.Millisecond)
	close(stop)
	wg.Wait()
	mu.Lock()
	defer mu.Unlock()
	if firstB.IsZero() {
		t.Fatal("picks never followed the new configuration")
	}
	took := firstB.Sub(swapped)
	t.Logf("picks changed %v after the file; %d requests, %d failed", took, sent.Load(), failed.Load())
	if took > time.Second {
		t.Fatalf("picks changed %v after the reload, want under 1s", took)
	}
	if failed.Load() != 0 {
		t.Fatalf("%d of %d requests failed during the reloads", failed.Load(), sent.Load())
	}
	if ok, detail := r.Ready(); !ok {
		t.Fatalf("not ready: %v", detail)
	}
}

// TestServesTLS: with --tls-cert-file and --tls-key-file the ext_proc port
// speaks TLS only, and a rotated certificate is served to new connections
// without a restart.
func TestServesTLS(t *testing.T) {
	ca := servingtlstest.NewCA(t)
	files := ca.WriteFiles(t, 1)
	epPath := filepath.Join(t.TempDir(), "endpoints.yaml")
	if err := os.WriteFile(epPath, []byte("- {address: 10.2.0.1, port: 8000}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	r, stop := start(t, func(o *options.Options) {
		o.EndpointsFile, o.TLS, o.MetricsStaleness = epPath, files, 0
	})
	defer stop()
	req := extproctest.PostJSON("/v1/completions", []byte(`{"model":"m","prompt":"p"}`))
	ca.CheckServes(t, r.Addr("grpc"), files, func(transport grpc.DialOption) error {
		res, err := extproctest.ProcessOnce(r.Addr("grpc"), extproctest.Config{DialOptions: []grpc.DialOption{transport}}, req)
		if err == nil && res.RequestHeaders.Get(wire.HeaderDestinationEndpoint) != "10.2.0.1:8000" {
			t.Fatalf("no pick over TLS: %v %+v", res.RequestHeaders, res.ImmediateResponse)
		}
		return err
	})
}
