package gateway

import (
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/igw-dev/igw/pkg/wire"
)

func TestRoutesByModelAcrossPools(t *testing.T) {
	a, b := startUpstream(t, "a"), startUpstream(t, "b")
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "a.yaml"), []byte("- "+a.endpoint()+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "b.yaml"), []byte("- "+b.endpoint()+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg := filepath.Join(dir, "gateway.yaml")
	if err := os.WriteFile(cfg, []byte(`
pools:
- {name: llama, models: [llama], endpointsFile: a.yaml}
- {name: qwen, models: [qwen, qwen-alias], adapters: {sql-lora: qwen}, endpointsFile: b.yaml}
`), 0o644); err != nil {
		t.Fatal(err)
	}
	g := startGateway(t, "--config", cfg)

	for _, tc := range []struct{ model, upstream, base string }{
		{"llama", "a", ""}, {"qwen", "b", ""}, {"qwen-alias", "b", ""}, {"sql-lora", "b", "qwen"},
	} {
		r := post(t, g, "/v1/completions", fmt.Sprintf(`{"model":%q,"prompt":"hi","max_tokens":3}`, tc.model))
		if r.status != http.StatusOK || r.header.Get("x-upstream") != tc.upstream {
			t.Errorf("model %s: status %d from %q, want 200 from %s: %s", tc.model, r.status, r.header.Get("x-upstream"), tc.upstream, r.body)
		}
	}
	last := b.got()[len(b.got())-1]
	if last["_model_header"] != "sql-lora" || last["_base_header"] != "qwen" || last["model"] != "sql-lora" {
		t.Errorf("adapter request reached the server as %v; want the body unchanged and the BBR's model and base-model headers", last)
	}

	r := post(t, g, "/v1/chat/completions", `{"model":"gpt-unknown","messages":[]}`)
	if typ, code, param := openAIError(t, r); r.status != http.StatusNotFound || typ != "invalid_request_error" || code != "model_not_found" || param != "model" {
		t.Errorf("unknown model: %d %s %s %s, want 404 invalid_request_error model_not_found model", r.status, typ, code, param)
	}
	if n := len(a.got()) + len(b.got()); n != 4 {
		t.Errorf("servers got %d requests, want 4: the unknown model must not reach one", n)
	}

	resp, err := http.Get("http://" + g.Addr() + "/v1/models")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var list struct {
		Object string
		Data   []struct {
			ID     string  `json:"id"`
			Object string  `json:"object"`
			Parent *string `json:"parent"`
		}
	}
	if err := json.NewDecoder(resp.Body).Decode(&list); err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, m := range list.Data {
		id := m.ID
		if m.Parent != nil {
			id += "<" + *m.Parent
		}
		ids = append(ids, id)
	}
	if got := strings.Join(ids, ","); list.Object != "list" || got != "llama,qwen,qwen-alias,sql-lora<qwen" {
		t.Errorf("/v1/models: object %q, models %s; want list of llama,qwen,qwen-alias,sql-lora<qwen", list.Object, got)
	}
	r = post(t, g, "/v1/models", `{"model":"llama"}`)
	if _, code, _ := openAIError(t, r); r.status != http.StatusMethodNotAllowed || code != "method_not_allowed" || r.header.Get("Allow") != "GET, HEAD" {
		t.Errorf("POST /v1/models: %d %s (Allow %q), want the OpenAI-style 405", r.status, code, r.header.Get("Allow"))
	}
}

func TestBadRequestsGetOpenAIErrors(t *testing.T) {
	u := startUpstream(t, "a")
	g := startGateway(t, "--endpoints-file", endpointsFile(t, u), "--served-model-name", "m", "--max-body-bytes", "1000")
	for _, tc := range []struct {
		name, body string
		status     int
		code       string
	}{
		{"malformed JSON", `{"model":"m",`, 400, "invalid_json"},
		{"no model", `{"prompt":"x"}`, 400, "missing_model"},
		{"model not a string", `{"model":7}`, 400, "invalid_type"},
		{"too large", `{"model":"m","prompt":"` + strings.Repeat("x", 2000) + `"}`, 413, "request_too_large"},
	} {
		r := post(t, g, "/v1/completions", tc.body)
		if _, code, _ := openAIError(t, r); r.status != tc.status || code != tc.code {
			t.Errorf("%s: %d %s, want %d %s", tc.name, r.status, code, tc.status, tc.code)
		}
	}
	if n := len(u.got()); n != 0 {
		t.Errorf("%d bad requests reached the server", n)
	}
}

func TestNoEndpointIs503(t *testing.T) {
	g := startGateway(t, "--endpoints-file", endpointsFile(t), "--served-model-name", "m")
	r := post(t, g, "/v1/completions", completion)
	if typ, code, _ := openAIError(t, r); r.status != http.StatusServiceUnavailable || typ != "server_error" || code != "no_healthy_upstream" {
		t.Errorf("no endpoints: %d %s %s, want 503 server_error no_healthy_upstream", r.status, typ, code)
	}
}

// TestSaturatedFleetSheds429: when telemetry shows every server's queue over
// the admission threshold, low-priority requests are shed with a 429 and a
// Retry-After, while default-priority ones still go through.
func TestSaturatedFleetSheds429(t *testing.T) {
	u := startUpstream(t, "a")
	u.metrics = "vllm:num_requests_waiting{model_name=\"m\"} 50\nvllm:num_requests_running{model_name=\"m\"} 10\nvllm:kv_cache_usage_perc{model_name=\"m\"} 0.5\n"
	g := startGateway(t, "--endpoints-file", endpointsFile(t, u), "--served-model-name", "m", "--scrape-interval", "10ms",
		"--trusted-cidrs", "127.0.0.1")
	var r response
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); {
		if r = post(t, g, "/v1/completions", completion, wire.HeaderPriority, "-1"); r.status == http.StatusTooManyRequests {
			break
		}
		time.Sleep(10 * time.Millisecond) // until the first scrape lands
	}
	if typ, code, _ := openAIError(t, r); r.status != http.StatusTooManyRequests || typ != "rate_limit_exceeded" || code != "fleet_saturated" {
		t.Fatalf("saturated fleet, priority -1: %d %s %s, want 429 rate_limit_exceeded fleet_saturated", r.status, typ, code)
	}
	if s, err := strconv.Atoi(r.header.Get("Retry-After")); err != nil || s < 1 {
		t.Errorf("Retry-After %q, want a positive number of seconds", r.header.Get("Retry-After"))
	}
	if r := post(t, g, "/v1/completions", completion); r.status != http.StatusOK {
		t.Errorf("default priority on a saturated fleet: %d, want 200 (only priorities below 0 are shed)", r.status)
	}
}

// An adapter registered on one server only must not be sent to the other:
// the igw policy reads each server's model list and keeps adapter requests
// on the servers that list the adapter.
func TestAdapterGoesToServerThatListsIt(t *testing.T) {
	a, b := startUpstream(t, "a"), startUpstream(t, "b")
	a.models = `{"object":"list","data":[{"id":"m","object":"model"}]}`
	b.models = `{"object":"list","data":[{"id":"m","object":"model"},{"id":"sql","object":"model","parent":"m"}]}`
	g := startGateway(t, "--endpoints-file", endpointsFile(t, a, b), "--served-model-name", "m", "--adapter", "sql=m",
		"--models-interval", "20ms")
	// A second read of each list means the first one was stored.
	deadline := time.Now().Add(10 * time.Second)
	for a.modelReads.Load() < 2 || b.modelReads.Load() < 2 {
		if time.Now().After(deadline) {
			t.Fatalf("model lists read %d and %d times, want 2 each", a.modelReads.Load(), b.modelReads.Load())
		}
		time.Sleep(10 * time.Millisecond)
	}
	for i := range 8 {
		r := post(t, g, "/v1/completions", `{"model":"sql","prompt":"hello","max_tokens":3}`)
		if r.status != http.StatusOK || r.header.Get("x-upstream") != "b" {
			t.Fatalf("adapter request %d: status %d from %q, want 200 from b", i, r.status, r.header.Get("x-upstream"))
		}
	}
	// The base model still spreads over both servers.
	seen := map[string]bool{}
	for range 32 {
		seen[post(t, g, "/v1/completions", completion).header.Get("x-upstream")] = true
	}
	if !seen["a"] || !seen["b"] {
		t.Errorf("base model requests reached %v, want both servers", seen)
	}
}

func TestUnknownPathIsOpenAI404(t *testing.T) {
	g := startGateway(t, "--endpoints-file", endpointsFile(t), "--served-model-name", "m")
	r := post(t, g, "/v1/images/generations", completion)
	if _, code, _ := openAIError(t, r); r.status != 404 || code != "unknown_url" {
		t.Errorf("unknown path: %d %s", r.status, code)
	}
}
