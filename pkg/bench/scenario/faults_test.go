package scenario

import (
	"testing"
	"time"

	"github.com/igw-dev/igw/pkg/sim"
)

const withFaults = everyKey + `faults:
  - {group: h100, replica: 0, kind: fail-fast, at: 120s, for: 60s}
  - {group: a10g, replica: 1, kind: slow, at: 0s, for: 0s, factor: 3}
  - {group: a10g, replica: 1, kind: events-lost, at: 10s, for: 5s}
`

func TestFaultsKeysAndPods(t *testing.T) {
	s, err := Parse([]byte(withFaults), "faults.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if len(s.Faults) != 3 || s.Faults[1] != (Fault{Group: "a10g", Replica: 1, Kind: "slow", Factor: 3}) {
		t.Fatalf("faults: %+v", s.Faults)
	}
	pods := s.PodFaults()
	if len(pods) != 6 {
		t.Fatalf("%d schedules for 6 pods", len(pods))
	}
	want := sim.Faults{{Kind: sim.FaultFailFast, At: 2 * time.Minute, For: time.Minute}}
	if len(pods[0]) != 1 || pods[0][0] != want[0] {
		t.Errorf("pod 0 (h100 replica 0): %+v", pods[0])
	}
	if len(pods[5]) != 2 || pods[5][0].Kind != sim.FaultSlow || pods[5][1].Kind != sim.FaultEventsLost {
		t.Errorf("pod 5 (a10g replica 1): %+v", pods[5])
	}
	for i := 1; i < 5; i++ {
		if pods[i] != nil {
			t.Errorf("pod %d has faults %+v", i, pods[i])
		}
	}
}

func TestFaultErrors(t *testing.T) {
	for _, tc := range []struct{ name, from, to, want string }{
		{"unknown key", "kind: fail-fast,", "kind: fail-fast, until: 3s,",
			`bad.yaml:45: unknown key "until" in faults (known: group, replica, kind, at, for, factor)`},
		{"unknown kind", "kind: fail-fast", "kind: explode", `faults[0]: unknown fault kind "explode" (known: hang, fail-fast, crash`},
		{"group", "group: h100, replica: 0", "group: h200, replica: 0", `faults[0].group "h200" names no fleet group`},
		{"replica", "group: h100, replica: 0", "group: h100, replica: 4", `faults[0].replica 4 is not a replica of group "h100"`},
		{"no factor", "factor: 3", "factor: 0.5", "fault slow needs a factor in [1, 1e6]"},
		{"factor elsewhere", "kind: fail-fast,", "kind: fail-fast, factor: 2,", "fault fail-fast takes no factor"},
		{"negative", "at: 120s", "at: -1s", "at and for must not be negative"},
	} {
		t.Run(tc.name, func(t *testing.T) { expectError(t, withFaults, tc.from, tc.to, tc.want) })
	}
}
