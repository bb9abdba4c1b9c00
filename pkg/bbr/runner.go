package bbr

import (
	"context"
	"log/slog"
	"net/http"
	"time"

	extprocv3 "github.com/envoyproxy/go-control-plane/envoy/service/ext_proc/v3"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"google.golang.org/grpc"

	"github.com/igw-dev/igw/internal/serve"
	"github.com/igw-dev/igw/internal/servingtls"
	"github.com/igw-dev/igw/pkg/apierror"
	"github.com/igw-dev/igw/pkg/filewatch"
	"github.com/igw-dev/igw/pkg/openaimodels"
	"github.com/igw-dev/igw/pkg/wire"
)

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
	// TLS is the ext_proc port's certificate; nil for plaintext.
	TLS *servingtls.Certificate

	health *serve.Health
	group  serve.Group
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
	r := &Runner{Options: o, Log: log, Registry: reg, Metrics: NewMetrics(reg), health: serve.NewHealth()}
	if r.TLS, err = servingtls.LoadIfSet(o.TLS, log); err != nil {
		return nil, err
	}
	r.group.Host = o.BindAddress
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
func (r *Runner) Addr(name string) string { return r.group.Addr(name) }

// Run serves until ctx ends or a server fails. ready, when not nil, is closed
// once every listener is open.
func (r *Runner) Run(ctx context.Context, ready chan<- struct{}) error {
	// A buffered body travels in one gRPC message.
	maxMsg := int(min(r.Options.MaxRequestBodyBytes, 1<<30)) + grpcMessageOverhead
	extSrv := grpc.NewServer(append(r.TLS.ServerOptions(), grpc.MaxRecvMsgSize(maxMsg), grpc.MaxSendMsgSize(maxMsg))...)
	extprocv3.RegisterExternalProcessorServer(extSrv, r.ExtProc)
	g := &r.group
	// Let in-flight streams finish, within reason.
	g.GRPC("grpc", r.Options.GRPCPort, extSrv, 5*time.Second)
	g.GRPC("health", r.Options.HealthPort, r.health.Server(), 0)
	g.HTTP("metrics", r.Options.MetricsPort, &http.Server{Handler: r.httpHandler(), ReadHeaderTimeout: 5 * time.Second}, time.Second)
	g.HTTP("models", r.Options.ModelsPort, &http.Server{Handler: r.modelsHandler(), ReadHeaderTimeout: 5 * time.Second}, time.Second)
	g.Go("serving certificate watch", r.TLS.Watch)
	if r.AdapterMapping != nil {
		g.Go("adapter mapping watch", func(ctx context.Context) error { r.AdapterMapping.Run(ctx); return nil })
	}
	if r.ModelList != nil {
		g.Go("model list watch", func(ctx context.Context) error { r.ModelList.Run(ctx); return nil })
	}
	g.Started = func() {
		r.health.Set(true)
		r.Log.Info("body-based router serving", "grpc", r.Addr("grpc"), "health", r.Addr("health"),
			"metrics", r.Addr("metrics"), "models", r.Addr("models"), "bodyMode", string(r.ExtProc.BodyMode), "tls", r.TLS != nil)
	}
	g.Stopping = r.health.Shutdown
	return g.Run(ctx, ready)
}

// httpHandler serves /metrics, /healthz and /readyz. The router is ready as soon
// as it serves: a missing adapter mapping only loses the base model header,
// which is better than refusing every request; /readyz says so in its detail.
func (r *Runner) httpHandler() http.Handler {
	return serve.ProbeMux(promhttp.HandlerFor(r.Registry, promhttp.HandlerOpts{Registry: r.Registry}), func() (bool, map[string]any) {
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
		r.TLS.AddStatus(detail)
		return true, detail
	})
}

// modelsHandler serves GET /v1/models (the OpenAI model list) and GET
// /v1/models/{id} (one model; other methods get 405) and an OpenAI-style 404
// for every other path. The gateway routes only those paths here.
func (r *Runner) modelsHandler() http.Handler {
	mux := http.NewServeMux()
	r.Models.Mount(mux)
	return apierror.Routes(mux, "The body-based router serves only GET "+wire.ModelsPath+" and "+wire.ModelsPath+"/{id} on this port.")
}
