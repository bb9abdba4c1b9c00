package runner

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/igw-dev/igw/internal/testfile"
	"github.com/igw-dev/igw/pkg/epp/options"
	"github.com/igw-dev/igw/pkg/wire"
)

// modelServer serves handler as one model server until the test ends and
// writes an endpoints file naming it; it returns the endpoint's key
// (host:port) and the file.
func modelServer(t *testing.T, handler http.HandlerFunc) (key, endpointsFile string) {
	t.Helper()
	server := httptest.NewServer(handler)
	t.Cleanup(server.Close)
	key = strings.TrimPrefix(server.URL, "http://")
	host, port, _ := strings.Cut(key, ":")
	return key, testfile.Write(t, "", "endpoints.yaml", "- {address: "+host+", port: "+port+"}\n")
}

// TestModelListReadsFollowTheFlag: with --models-interval the picker reads
// each endpoint's /v1/models into the store and counts the reads; with 0 it
// never asks, while the metrics scrapes go on.
func TestModelListReadsFollowTheFlag(t *testing.T) {
	addr, epPath := modelServer(t, func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case wire.ModelsPath:
			w.Write([]byte(`{"object":"list","data":[{"id":"m"},{"id":"sql","parent":"m"}]}`))
		case "/metrics":
			w.Write([]byte("vllm:num_requests_waiting 0\nvllm:num_requests_running 0\n"))
		default:
			http.NotFound(w, r)
		}
	})

	for _, interval := range []time.Duration{50 * time.Millisecond, 0} {
		r, stop := start(t, func(o *options.Options) { o.EndpointsFile, o.ModelsInterval = epPath, interval })
		deadline := time.Now().Add(5 * time.Second)
		for testutil.ToFloat64(r.Metrics.Scrapes.WithLabelValues("ok")) < 3 ||
			(interval > 0 && r.Store.Get(addr).ServedModels() == nil) {
			if time.Now().After(deadline) {
				t.Fatalf("interval %v: no model list or scrapes after 5s", interval)
			}
			time.Sleep(10 * time.Millisecond)
		}
		models := r.Store.Get(addr).ServedModels()
		reads := testutil.ToFloat64(r.Metrics.ModelListReads.WithLabelValues("ok"))
		if err := stop(); err != nil {
			t.Fatal(err)
		}
		if interval == 0 {
			if models != nil || reads != 0 {
				t.Fatalf("--models-interval 0 still read the list: %+v (%v reads)", models, reads)
			}
			continue
		}
		if !models.Serves("sql") || !models.Serves("m") || reads < 1 {
			t.Fatalf("list %+v after %v reads", models, reads)
		}
	}
}
