package gateway

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/igw-dev/igw/internal/testfile"
	"github.com/igw-dev/igw/pkg/globalsummary"
	"github.com/igw-dev/igw/pkg/globalsummary/summarytest"
	"github.com/igw-dev/igw/pkg/wire"
)

// The gateway serves its member summary to the hub's client behind the
// token: the model with its ready endpoint, the load from telemetry, the
// digest of the prompts it routed, and failed requests in the error rate.
func TestGatewayServesMemberSummary(t *testing.T) {
	u := startUpstream(t, "a")
	u.metrics = "vllm:num_requests_waiting{model_name=\"m\"} 2\nvllm:num_requests_running{model_name=\"m\"} 3\nvllm:kv_cache_usage_perc{model_name=\"m\"} 0.25\n"
	tokens := testfile.Write(t, "", "token", "0123456789abcdef-member-a\n")
	g := startGateway(t, "--endpoints-file", endpointsFile(t, u), "--served-model-name", "m",
		"--global-summary-token-file", tokens, "--cluster", "use1", "--region", "us-east-1")
	url := "http://" + g.Addr() + wire.GlobalSummaryPath

	summarytest.RefusesWithoutToken(t, url)
	// Four blocks of 128 tokens at 4 bytes a token.
	long := `{"model":"m","prompt":"` + strings.Repeat("a conversation's shared prefix ", 70) + `","max_tokens":3}`
	if r := post(t, g, "/v1/completions", long); r.status != http.StatusOK {
		t.Fatalf("completion: %d %s", r.status, r.body)
	}
	u.mu.Lock()
	u.status = http.StatusInternalServerError
	u.mu.Unlock()
	if r := post(t, g, "/v1/completions", completion); r.status != http.StatusInternalServerError {
		t.Fatalf("failing completion: %d %s", r.status, r.body)
	}

	// Ready once m lists a ready endpoint and both requests, and a scrape
	// since they ended: until then the queue is an estimate from the last
	// sample and the picks and first tokens after it (under load the summary
	// was read with Waiting 1 from a sample taken before the requests).
	m := summarytest.WaitForModel(t, url, tokens, "use1", "us-east-1", "m", 10*time.Second, func(m *globalsummary.Model) bool {
		return m.ReadyEndpoints == 1 && m.Requests == 2 && m.Waiting >= 2
	})
	if m.Endpoints != 1 || m.Waiting < 2 || m.KVHeadroom == nil || *m.KVHeadroom != 0.75 {
		t.Errorf("summary of m: %+v", m)
	}
	if m.ErrorRate != 0.5 {
		t.Errorf("error rate %v, want 0.5 (one of two requests failed)", m.ErrorRate)
	}
	if m.Digest == nil || m.Digest.Blocks < 4 {
		t.Errorf("digest %+v, want the routed prompt's blocks", m.Digest)
	}
}

func TestSummaryNeedsCluster(t *testing.T) {
	o := NewOptions()
	o.EndpointsFile, o.GlobalSummaryTokenFile = "e.yaml", "token"
	if err := o.Complete(); err != nil {
		t.Fatal(err)
	}
	if err := o.Validate(); err == nil || !strings.Contains(err.Error(), "--cluster is required") {
		t.Errorf("Validate() = %v, want --cluster required", err)
	}
}
