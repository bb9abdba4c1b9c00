package bbr

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"

	"github.com/igw-dev/igw/internal/serve"
	"github.com/igw-dev/igw/internal/servetest"
	"github.com/igw-dev/igw/internal/servingtls/servingtlstest"
	"github.com/igw-dev/igw/internal/testfile"
	"github.com/igw-dev/igw/pkg/extproctest"
	"github.com/igw-dev/igw/pkg/requestbody/bodytest"
	"github.com/igw-dev/igw/pkg/wire"
)

func startRunner(t *testing.T, o *Options) *Runner {
	t.Helper()
	o.GRPCPort, o.HealthPort, o.MetricsPort, o.ModelsPort, o.BindAddress = 0, 0, 0, 0, "127.0.0.1"
	r := servetest.Build(t, o, NewRunner)
	servetest.Serve(t, "Run", r.Run)
	return r
}

func httpGet(t *testing.T, url string) string {
	t.Helper()
	a := servetest.Get(t, url)
	if a.Status != http.StatusOK {
		t.Fatalf("GET %s: %d %s", url, a.Status, a.Body)
	}
	return string(a.Body)
}

func TestRunnerServesRoutingHealthAndMetrics(t *testing.T) {
	mapping := testfile.NewConfigMap(t, map[string]string{AdapterMappingFileName: "adapters: {sql-lora: llama-8b}"})
	o := NewOptions()
	o.AdapterMappingFile, o.AdapterMappingPollInterval = mapping.Path(AdapterMappingFileName), 5*time.Millisecond
	r := startRunner(t, o)

	for _, service := range []string{"", serve.ExtProcService} {
		if st := servetest.Health(t, r.Addr("health"), service); st != healthpb.HealthCheckResponse_SERVING {
			t.Fatalf("health of %q: %v", service, st)
		}
	}

	c, err := extproctest.Dial(r.Addr("grpc"), extproctest.Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	baseModel := func() string {
		res, err := c.Process(context.Background(), extproctest.PostJSON("/v1/chat/completions", []byte(`{"model":"sql-lora","messages":[]}`)))
		if err != nil || res.ImmediateResponse != nil || res.RequestHeaders.Get(wire.HeaderModelName) != "sql-lora" {
			t.Fatalf("request failed: %v %+v", err, res)
		}
		return res.RequestHeaders.Get(wire.HeaderBaseModelName)
	}
	if got := baseModel(); got != "llama-8b" {
		t.Fatalf("base model %q from the mapping at start", got)
	}

	// An update is picked up by the running watch; wait for it (the watch polls).
	mapping.Update(map[string]string{AdapterMappingFileName: "adapters: {sql-lora: llama-70b}"})
	waitFor(t, "the updated mapping", func() bool { return baseModel() == "llama-70b" })
	mapping.Update(map[string]string{AdapterMappingFileName: "adapters: [broken"})
	waitFor(t, "the broken mapping to be reported", func() bool {
		return r.AdapterMapping.Status().Error != ""
	})
	if got := baseModel(); got != "llama-70b" {
		t.Fatalf("a broken mapping file changed the base model to %q", got)
	}

	metrics := httpGet(t, "http://"+r.Addr("metrics")+"/metrics")
	for _, want := range []string{
		MetricRequests + `{model="sql-lora",outcome="routed"}`,
		MetricParseDuration + "_bucket",
		MetricAdapterReloads + `{result="failed"} 1`,
		MetricAdapters + " 1",
		"go_goroutines",
	} {
		if !strings.Contains(metrics, want) {
			t.Errorf("/metrics lacks %s", want)
		}
	}
	var ready struct {
		Ready  bool `json:"ready"`
		Detail struct {
			AdapterMapping struct {
				Loaded bool   `json:"loaded"`
				Error  string `json:"error"`
			} `json:"adapterMapping"`
		} `json:"detail"`
	}
	if err := json.Unmarshal([]byte(httpGet(t, "http://"+r.Addr("metrics")+"/readyz")), &ready); err != nil {
		t.Fatal(err)
	}
	if !ready.Ready || !ready.Detail.AdapterMapping.Loaded || !strings.Contains(ready.Detail.AdapterMapping.Error, "adapter mapping") {
		t.Fatalf("readyz %+v", ready)
	}
}

// TestRunnerTakesBufferedBodiesUpToTheLimit: a buffered body travels in one gRPC
// message, which must not hit gRPC's default 4 MiB cap below the body limit.
func TestRunnerTakesBufferedBodiesUpToTheLimit(t *testing.T) {
	o := NewOptions()
	o.MaxRequestBodyBytes, o.BodyMode = 8<<20, "buffered"
	r := startRunner(t, o)
	c, err := extproctest.Dial(r.Addr("grpc"), extproctest.Config{RequestBodyMode: extproctest.Buffered})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	body := bodytest.Chat(7<<20, "llama", true)
	res, err := c.Process(context.Background(), extproctest.PostJSON("/v1/chat/completions", body))
	if err != nil || res.ImmediateResponse != nil || res.RequestHeaders.Get(wire.HeaderModelName) != "llama" || len(res.RequestBody) != len(body) {
		t.Fatalf("%d-byte buffered body: %v", len(body), err)
	}
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	servetest.WaitFor(t, what, 10*time.Second, cond)
}

// TestRunnerServesTLS: with --tls-cert-file and --tls-key-file the ext_proc
// port speaks TLS only, and a rotated certificate is served to new
// connections without a restart; the health port stays plaintext (the
// kubelet's gRPC probe has no TLS).
func TestRunnerServesTLS(t *testing.T) {
	ca := servingtlstest.NewCA(t)
	o := NewOptions()
	o.TLS = ca.WriteFiles(t, 1)
	r := startRunner(t, o)
	req := extproctest.PostJSON("/v1/completions", []byte(`{"model":"m","prompt":"p"}`))
	ca.CheckServes(t, r.Addr("grpc"), o.TLS, func(transport grpc.DialOption) error {
		res, err := extproctest.ProcessOnce(r.Addr("grpc"), extproctest.Config{DialOptions: []grpc.DialOption{transport}}, req)
		if err == nil && res.RequestHeaders.Get(wire.HeaderModelName) != "m" {
			t.Fatalf("routed over TLS without the model header: %v", res.RequestHeaders)
		}
		return err
	})
	if st := servetest.Health(t, r.Addr("health"), serve.ExtProcService); st != healthpb.HealthCheckResponse_SERVING {
		t.Fatalf("plaintext health: %v", st)
	}
	if ready := httpGet(t, "http://"+r.Addr("metrics")+"/readyz"); !strings.Contains(ready, `"tls":{"loaded":true`) {
		t.Fatalf("readyz does not show the certificate: %s", ready)
	}
}

func TestTLSFlagsGoTogether(t *testing.T) {
	o := NewOptions()
	o.TLS.CertFile = "/tls/tls.crt"
	if err := o.Validate(); err == nil || !strings.Contains(err.Error(), "--tls-key-file") {
		t.Fatalf("a certificate without a key: %v", err)
	}
}
