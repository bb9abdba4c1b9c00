package bbr

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"strconv"
	"sync"
	"time"

	extprocv3 "github.com/envoyproxy/go-control-plane/envoy/service/ext_proc/v3"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"google.golang.org/grpc"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"

	"github.com/igw-dev/igw/pkg/apierror"
	"github.com/igw-dev/igw/pkg/filewatch"
	"github.com/igw-dev/igw/pkg/openaimodels"
	"github.com/igw-dev/igw/pkg/wire"
)

// ServiceName is the grpc.health.v1 service name the router reports (the empty
// name reports the same status).
const ServiceName = "envoy.service.ext_proc.v3.ExternalProcessor"

// grpcMessageOverhead is room for the rest of a ProcessingRequest beside a
// buffered body of the maximum size.
const grpcMessageOverhead = 1 << 20

// Runner is a configured router process, not yet serving: cmd/bbr is a thin main
// over it.
type Runner struct {
	Options  *Options
	Log      *slog.Logger
	Registry *prometheus.Registry
	Metrics  *Metrics
	Router   *Router
	ExtProc  *ExtProc
	// AdapterMapping follows --adapter-mapping-file; nil without one.
	AdapterMapping *filewatch.File
	// Models is the answer of GET /v1/models on --models-port: the list of
	// --model-list-file, empty without one.
	Models *openaimodels.Catalog
	// ModelList follows --model-list-file; nil without one.
	ModelList *filewatch.File

	health *health.Server
	mu     sync.Mutex
	addrs  map[string]string
}

// NewRunner builds a runner from completed, validated options. The adapter
// mapping and the model list are loaded once; a missing or invalid file does
// not stop the router (models route without a base model header, and GET
// /v1/models answers 503, until a good file appears).
func NewRunner(o *Options, log *slog.Logger) (*Runner, error) {
	mode, err := ParseBodyMode(o.BodyMode)
	if err != nil {
		return nil, err
	}
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	r := &Runner{Options: o, Log: log, Registry: reg, Metrics: NewMetrics(reg), health: health.NewServer(), addrs: map[string]string{}}
	r.Router = NewRouter(RouterConfig{MaxRequestBodyBytes: o.MaxRequestBodyBytes, DefaultModel: o.DefaultModel, Metrics: r.Metrics})
	r.ExtProc = &ExtProc{Router: r.Router, BodyMode: mode, Log: log}
	if o.AdapterMappingFile != "" {
		r.AdapterMapping = NewAdapterMappingFile(o.AdapterMappingFile, o.AdapterMappingPollInterval, r.Router, r.Metrics, log)
		_ = r.AdapterMapping.Load() // logged; the watch keeps trying
	}
	r.Models = &openaimodels.Catalog{}
	if o.ModelListFile != "" {
		r.ModelList = NewModelListFile(o.ModelListFile, o.AdapterMappingPollInterval, r.Models, r.Metrics, log)
		_ = r.ModelList.Load()
	} else {
		r.Models.Set(nil)
	}
	return r, nil
}

// Addr returns the address a server listens on once Run has started it:
// "grpc", "health", "metrics" or "models".
func (r *Runner) Addr(name string) string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.addrs[name]
}

func (r *Runner) listen(name string, port int) (net.Listener, error) {
	l, err := net.Listen("tcp", net.JoinHostPort(r.Options.BindAddress, strconv.Itoa(port)))
	if err != nil {
		return nil, fmt.Errorf("listen for %s: %w", name, err)
	}
	r.mu.Lock()
	r.addrs[name] = l.Addr().String()
	r.mu.Unlock()
	return l, nil
}

// Run serves until ctx ends or a server fails. ready, when not nil, is closed
// once every listener is open.
func (r *Runner) Run(ctx context.Context, ready chan<- struct{}) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var listeners []net.Listener
	for _, l := range []struct {
		name string
		port int
	}{{"grpc", r.Options.GRPCPort}, {"health", r.Options.HealthPort}, {"metrics", r.Options.MetricsPort}, {"models", r.Options.ModelsPort}} {
		lis, err := r.listen(l.name, l.port)
		if err != nil {
			for _, open := range listeners {
				open.Close()
			}
			return err
		}
		listeners = append(listeners, lis)
	}

	// A buffered body travels in one gRPC message.
	maxMsg := int(min(r.Options.MaxRequestBodyBytes, 1<<30)) + grpcMessageOverhead
	extSrv := grpc.NewServer(grpc.MaxRecvMsgSize(maxMsg), grpc.MaxSendMsgSize(maxMsg))
	extprocv3.RegisterExternalProcessorServer(extSrv, r.ExtProc)
	healthSrv := grpc.NewServer()
	healthpb.RegisterHealthServer(healthSrv, r.health)
	httpSrv := &http.Server{Handler: r.httpHandler(), ReadHeaderTimeout: 5 * time.Second}
	modelsSrv := &http.Server{Handler: r.modelsHandler(), ReadHeaderTimeout: 5 * time.Second}

	errc := make(chan error, 6)
	var wg sync.WaitGroup
	start := func(name string, f func() error) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := f(); err != nil && !errors.Is(err, http.ErrServerClosed) && !errors.Is(err, grpc.ErrServerStopped) {
				errc <- fmt.Errorf("%s: %w", name, err)
			}
		}()
	}
	start("ext_proc server", func() error { return extSrv.Serve(listeners[0]) })
	start("health server", func() error { return healthSrv.Serve(listeners[1]) })
	start("metrics server", func() error { return httpSrv.Serve(listeners[2]) })
	start("models server", func() error { return modelsSrv.Serve(listeners[3]) })
	if r.AdapterMapping != nil {
		start("adapter mapping watch", func() error { r.AdapterMapping.Run(ctx); return nil })
	}
	if r.ModelList != nil {
		start("model list watch", func() error { r.ModelList.Run(ctx); return nil })
	}
	r.health.SetServingStatus("", healthpb.HealthCheckResponse_SERVING)
	r.health.SetServingStatus(ServiceName, healthpb.HealthCheckResponse_SERVING)
	if ready != nil {
		close(ready)
	}
	r.Log.Info("body-based router serving", "grpc", r.Addr("grpc"), "health", r.Addr("health"),
		"metrics", r.Addr("metrics"), "models", r.Addr("models"), "bodyMode", string(r.ExtProc.BodyMode))

	var runErr error
	select {
	case <-ctx.Done():
	case runErr = <-errc:
	}
	cancel()
	r.health.Shutdown()
	// Let in-flight streams finish, within reason.
	stopped := make(chan struct{})
	go func() { extSrv.GracefulStop(); close(stopped) }()
	select {
	case <-stopped:
	case <-time.After(5 * time.Second):
		extSrv.Stop()
	}
	healthSrv.Stop()
	sctx, scancel := context.WithTimeout(context.Background(), time.Second)
	_ = httpSrv.Shutdown(sctx)
	_ = modelsSrv.Shutdown(sctx)
	scancel()
	wg.Wait()
	return runErr
}

// httpHandler serves /metrics, /healthz and /readyz. The router is ready as soon
// as it serves: a missing adapter mapping only loses the base model header,
// which is better than refusing every request; /readyz says so in its detail.
func (r *Runner) httpHandler() http.Handler {
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(r.Registry, promhttp.HandlerOpts{Registry: r.Registry}))
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("ok\n")) })
	mux.HandleFunc("/readyz", func(w http.ResponseWriter, _ *http.Request) {
		detail := map[string]any{"adapters": len(r.Router.Adapters())}
		if r.AdapterMapping != nil {
			detail["adapterMapping"] = r.AdapterMapping.Status()
		}
		if entries, ok := r.Models.Entries(); ok {
			detail["models"] = len(entries)
		}
		if r.ModelList != nil {
			detail["modelList"] = r.ModelList.Status()
		}
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(map[string]any{"ready": true, "detail": detail})
	})
	return mux
}

// modelsHandler serves GET /v1/models (the OpenAI model list; other methods
// get 405) and an OpenAI-style 404 for every other path. The gateway routes
// only that path here.
func (r *Runner) modelsHandler() http.Handler {
	mux := http.NewServeMux()
	mux.Handle(wire.ModelsPath, r.Models)
	mux.HandleFunc("/", func(w http.ResponseWriter, req *http.Request) {
		apierror.UnknownURL(req.Method, req.URL.Path, "The body-based router serves only GET "+wire.ModelsPath+" on this port.").Write(w)
	})
	return mux
}
