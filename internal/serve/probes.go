package serve

import (
	"encoding/json"
	"net/http"

	"google.golang.org/grpc"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"

	"github.com/igw-dev/igw/pkg/apierror"
)

// ExtProcService is the grpc.health.v1 service name an ext_proc server
// reports its status under; the empty name reports the same status.
const ExtProcService = "envoy.service.ext_proc.v3.ExternalProcessor"

// Health is an ext_proc server's grpc.health.v1 service.
type Health struct{ srv *health.Server }

// NewHealth returns a health service that reports NOT_SERVING until Set.
func NewHealth() *Health {
	h := &Health{srv: health.NewServer()}
	h.Set(false)
	return h
}

// Set reports serving or not under both names.
func (h *Health) Set(serving bool) {
	st := healthpb.HealthCheckResponse_NOT_SERVING
	if serving {
		st = healthpb.HealthCheckResponse_SERVING
	}
	h.srv.SetServingStatus("", st)
	h.srv.SetServingStatus(ExtProcService, st)
}

// Shutdown reports NOT_SERVING for good: later Sets change nothing.
func (h *Health) Shutdown() { h.srv.Shutdown() }

// Server is a gRPC server with only the health service.
func (h *Health) Server() *grpc.Server {
	s := grpc.NewServer()
	healthpb.RegisterHealthServer(s, h.srv)
	return s
}

// ProbeMux serves metrics on /metrics, liveness on /healthz ("ok" while the
// process serves HTTP) and readiness on /readyz: {"ready": ok, "detail":
// detail} as JSON, with 503 while not ready. Other paths get an OpenAI-style
// 404.
func ProbeMux(metrics http.Handler, ready func() (bool, map[string]any)) http.Handler {
	mux := http.NewServeMux()
	mux.Handle("/metrics", metrics)
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("ok\n")) })
	mux.HandleFunc("/readyz", func(w http.ResponseWriter, _ *http.Request) {
		ok, detail := ready()
		w.Header().Set("Content-Type", "application/json")
		if !ok {
			w.WriteHeader(http.StatusServiceUnavailable)
		}
		_ = json.NewEncoder(w).Encode(map[string]any{"ready": ok, "detail": detail})
	})
	return apierror.Routes(mux, "This port serves /metrics, /healthz and /readyz.")
}
