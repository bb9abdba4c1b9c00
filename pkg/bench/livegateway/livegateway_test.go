package livegateway

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/igw-dev/igw/internal/proc"
	"github.com/igw-dev/igw/pkg/bench/policies"
	"github.com/igw-dev/igw/pkg/epp/datastore"
	"github.com/igw-dev/igw/pkg/epp/director"
	"github.com/igw-dev/igw/pkg/epp/latency"
	"github.com/igw-dev/igw/pkg/epp/scheduling"
	"github.com/igw-dev/igw/pkg/gateway"
)

// Every benchmark policy but igw (the gateway's own) and the oracle runs in
// the gateway.
func TestRegistryHoldsEveryLiveBaseline(t *testing.T) {
	reg, err := Registry()
	if err != nil {
		t.Fatal(err)
	}
	var want []string
	for _, p := range policies.Names {
		if p != policies.Oracle {
			want = append(want, p)
		}
	}
	got := reg.Names()
	slices.Sort(got)
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Fatalf("registered %v, want %v", got, want)
	}
}

// A failed pick ends the baseline's own accounting, as a completion does:
// least-request counts a failed request's pod free again.
func TestFailureFreesTheBaselinesAccounting(t *testing.T) {
	store := datastore.NewStore(latency.DefaultPriors)
	store.SetEndpoints([]datastore.Endpoint{{Address: "10.0.0.1", Port: 8000}, {Address: "10.0.0.2", Port: 8000}})
	p := &picker{name: policies.LeastRequest, seed: 1, store: store, scrape: time.Second}
	now := time.Unix(1000, 0)
	pick := func() *gateway.Pick {
		t.Helper()
		pk, err := p.Pick(context.Background(), &scheduling.Request{Model: "m", Prompt: "hello"}, false, now)
		if err != nil {
			t.Fatal(err)
		}
		return pk
	}
	first, second := pick(), pick()
	if first.Endpoint == second.Endpoint {
		t.Fatal("least-request sent two requests to one of two idle pods")
	}
	// Were failures not freeing the pod, the counts would tie and each pick
	// would go either way.
	for i := range 10 {
		p.ObserveFailure(first, director.Failure{}, now)
		if first = pick(); first.Endpoint == second.Endpoint {
			t.Fatalf("after failure %d, picked %s, which has a request in flight, over the freed pod", i+1, first.Endpoint)
		}
	}
}

// The live benchmark's gateway command runs a baseline against real
// servers: round-robin alternates whatever else happens.
func TestBenchGatewayRunsBaselines(t *testing.T) {
	bin, err := proc.Build("igw-bench-gateway")
	if err != nil {
		t.Fatal(err)
	}
	var lines []string
	for _, name := range []string{"a", "b"} {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			_, _ = io.Copy(io.Discard, r.Body)
			w.Header().Set("x-upstream", name)
			w.Header().Set("Content-Type", "application/json")
			fmt.Fprint(w, `{"id":"c","object":"text_completion","choices":[{"index":0,"text":"x"}],"usage":{"prompt_tokens":1,"completion_tokens":1,"total_tokens":2}}`)
		}))
		t.Cleanup(srv.Close)
		_, port, _ := net.SplitHostPort(srv.Listener.Addr().String())
		lines = append(lines, "- {address: 127.0.0.1, port: "+port+"}\n")
	}
	eps := filepath.Join(t.TempDir(), "endpoints.yaml")
	if err := os.WriteFile(eps, []byte(strings.Join(lines, "")), 0o644); err != nil {
		t.Fatal(err)
	}
	g, err := proc.Start(context.Background(), "igw-bench-gateway", bin, []string{"--port", "0", "--bind-address", "127.0.0.1",
		"--endpoints-file", eps, "--served-model-name", "m", "--policy", policies.RoundRobin}, "/readyz")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(g.Stop)
	var order []string
	for range 4 {
		resp, err := http.Post(g.URL+"/v1/completions", "application/json", strings.NewReader(`{"model":"m","prompt":"hi","max_tokens":1}`))
		if err != nil {
			t.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		order = append(order, resp.Header.Get("x-upstream"))
	}
	if order[0] == order[1] || order[0] != order[2] || order[1] != order[3] {
		t.Errorf("round-robin order %q, want the two servers alternating", order)
	}
}
