package runner

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/igw-dev/igw/internal/testfile"
	"github.com/igw-dev/igw/pkg/epp/options"
	"github.com/igw-dev/igw/pkg/globalsummary"
	"github.com/igw-dev/igw/pkg/globalsummary/summarytest"
	"github.com/igw-dev/igw/pkg/wire"
)

// TestGlobalSummaryServed: with --global-summary-token-file the picker serves
// its pool's summary to a bearer of a token of the file, with the pool's
// endpoints and queue as scraped, and refuses a request without one.
func TestGlobalSummaryServed(t *testing.T) {
	_, epPath := modelServer(t, func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/metrics" {
			http.NotFound(w, r)
			return
		}
		w.Write([]byte("vllm:num_requests_waiting 3\nvllm:num_requests_running 2\nvllm:kv_cache_usage_perc 0.25\n"))
	})
	const token = "hub-token-0123456789abcdef"
	tokens := testfile.Write(t, "", "tokens", token+"\n")

	r, stop := start(t, func(o *options.Options) {
		o.EndpointsFile, o.GlobalSummaryTokenFile, o.GlobalSummaryPort = epPath, tokens, 0
		o.GlobalSummaryModel, o.Cluster, o.Region = "llama", "use1", "us-east-1"
		o.MetricsStaleness = time.Minute
	})
	defer stop()
	url := "http://" + r.Addr("global-summary") + wire.GlobalSummaryPath

	summarytest.RefusesWithoutToken(t, url)

	// Ready once the scraped queue shows.
	m := summarytest.WaitForModel(t, url, tokens, "use1", "us-east-1", "llama", waitLong, func(m *globalsummary.Model) bool {
		return m.ReadyEndpoints == 1 && m.Waiting == 3
	})
	if m.Endpoints != 1 || m.Running != 2 {
		t.Fatalf("summary %+v", *m)
	}
}

// TestGlobalSummaryNeedsItsModelAndCluster: a token file without the model
// and cluster the summary names is a start-up error.
func TestGlobalSummaryNeedsItsModelAndCluster(t *testing.T) {
	o := options.New()
	o.EndpointsFile, o.GlobalSummaryTokenFile = "endpoints.yaml", "tokens"
	o.Complete()
	if err := o.Validate(); err == nil || !strings.Contains(err.Error(), "--global-summary-model") {
		t.Fatalf("Validate: %v", err)
	}
	o.GlobalSummaryModel, o.Cluster, o.GlobalSummaryPort = "llama", "use1", o.MetricsPort
	if err := o.Validate(); err == nil || !strings.Contains(err.Error(), "--global-summary-port") {
		t.Fatalf("Validate with the metrics port: %v", err)
	}
}
