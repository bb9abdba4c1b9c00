package des_test

import (
	"testing"
	"time"

	"github.com/igw-dev/igw/pkg/bench/policies"
	"github.com/igw-dev/igw/pkg/bench/scenario"
	"github.com/igw-dev/igw/pkg/bench/scenario/scenariotest"
)

// withFault is the small scenario with one fault on its first pod.
func withFault(t *testing.T, kind string, at, span time.Duration) *scenario.Scenario {
	t.Helper()
	sc := scenariotest.Small(t)
	sc.Faults = []scenario.Fault{{Group: sc.Fleet[0].Name, Kind: kind, At: at, For: span}}
	if err := sc.Validate(); err != nil {
		t.Fatal(err)
	}
	return sc
}

// A fail-fast pod answers 500 to a router that keeps sending there
// (least-request sees it idle); igw retries before the first byte on another
// pod, so its clients see no 500.
func TestFailFastFailsRequestsWith500(t *testing.T) {
	sc := withFault(t, "fail-fast", 0, 0)
	lr := run(t, sc, policies.LeastRequest, 1).Metrics
	if lr.FailedByCode["500"] == 0 || lr.FailedByCode["500"] != lr.Failed {
		t.Errorf("least-request: failed %v by code %v, want all 500", lr.Failed, lr.FailedByCode)
	}
	igw := run(t, sc, policies.IGW, 1).Metrics
	if igw.Failed != 0 {
		t.Errorf("igw: failed %v by code %v", igw.Failed, igw.FailedByCode)
	}
}

// A crashed pod resets what it runs (502 to the client) and refuses new
// requests until it restarts.
func TestCrashResetsRequests(t *testing.T) {
	sc := withFault(t, "crash", sc0Mid(t), 5*time.Second)
	m := run(t, sc, policies.RoundRobin, 1).Metrics
	if m.FailedByCode["502"] == 0 || m.Completed == 0 {
		t.Errorf("round-robin over a crash: completed %v, failed by code %v", m.Completed, m.FailedByCode)
	}
}

// A pod hung past the client's timeout fails what it holds as 599.
func TestHangTimesOutClients(t *testing.T) {
	sc := withFault(t, "hang", sc0Mid(t), 0)
	m := run(t, sc, policies.RoundRobin, 1).Metrics
	if m.FailedByCode["599"] == 0 || m.FailedByCode["599"] != m.Failed {
		t.Errorf("round-robin over a hung pod: failed %v by code %v, want all 599", m.Failed, m.FailedByCode)
	}
}

// sc0Mid is a moment in the middle of the small scenario's measured window.
func sc0Mid(t *testing.T) time.Duration {
	sc := scenariotest.Small(t)
	return (sc.Warmup + sc.Duration) / 2
}
