package des_test

import (
	"path/filepath"
	"runtime"
	"testing"
	"time"

	"github.com/igw-dev/igw/pkg/bench/policies"
	"github.com/igw-dev/igw/pkg/bench/scenario/scenariotest"
)

// On the public mixed H100/A10G fleet, igw keeps every pod in use: ranked by
// predicted latency alone the A10Gs got 0.03 of an equal share of the
// requests, with the fair-share floor of the default profile each gets
// more than 0.2, and what the floor sends them still meets the SLO (nothing
// fails, the P99 time to first token stays well inside it).
func TestIGWKeepsSlowPodsInUse(t *testing.T) {
	_, file, _, _ := runtime.Caller(0)
	sc := scenariotest.Load(t, filepath.Join(filepath.Dir(file), "..", "..", "..", "bench", "scenarios", "mixed-gpu.yaml"))
	sc.Duration, sc.Warmup = 150*time.Second, 30*time.Second
	m := run(t, sc, policies.IGW, 1).Metrics
	if m.MinPodShare < 0.2 || m.Failed != 0 || m.TTFTP99 > sc.SLO.TTFT.Seconds()/2 {
		t.Fatalf("min pod share %.3f (want >= 0.2), failed %v, P99 TTFT %.3f s", m.MinPodShare, m.Failed, m.TTFTP99)
	}
}
