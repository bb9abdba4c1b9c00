package livegateway

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/igw-dev/igw/internal/proc"
	"github.com/igw-dev/igw/pkg/bench/policies"
	"github.com/igw-dev/igw/pkg/sim"
	"github.com/igw-dev/igw/pkg/sim/simproc"
	"github.com/igw-dev/igw/pkg/wire"
)

// The live benchmark's gateway command runs a baseline in front of real
// simulators: round-robin alternates whatever else happens.
func TestBenchGatewayRunsBaselines(t *testing.T) {
	bin, err := proc.Build("igw-bench-gateway")
	if err != nil {
		t.Fatal(err)
	}
	sims := simproc.StartN(t, 2, simproc.Options{Config: sim.Config{GPU: "A10G", Model: "llama-3.1-8b"}, ServedModelName: "m"})
	var eps strings.Builder
	for _, s := range sims {
		fmt.Fprintf(&eps, "- {address: 127.0.0.1, port: %d}\n", s.Port)
	}
	file := filepath.Join(t.TempDir(), "endpoints.yaml")
	if err := os.WriteFile(file, []byte(eps.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	g, err := proc.Start(context.Background(), "igw-bench-gateway", bin, []string{"--port", "0", "--bind-address", "127.0.0.1",
		"--endpoints-file", file, "--served-model-name", "m", "--policy", policies.RoundRobin,
		"--trusted-cidrs", "127.0.0.1/32", "--allow-debug-header"}, "/readyz")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(g.Stop)
	var order []string
	for range 4 {
		req, _ := http.NewRequest(http.MethodPost, g.URL+"/v1/completions", strings.NewReader(`{"model":"m","prompt":"hi","max_tokens":1}`))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set(wire.HeaderDebug, "1")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("status %d", resp.StatusCode)
		}
		endpoint, _, _ := strings.Cut(strings.TrimPrefix(resp.Header.Get(wire.HeaderScoreBreakdown), "endpoint="), ";")
		order = append(order, endpoint)
	}
	if order[0] == "" || order[0] == order[1] || order[0] != order[2] || order[1] != order[3] {
		t.Errorf("round-robin order %q, want the two simulators alternating", order)
	}
}
