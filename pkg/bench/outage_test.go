package bench

import (
	"testing"
	"time"

	"github.com/igw-dev/igw/pkg/bench/scenario"
)

// A synthetic run around an outage of cluster a (20 s to 30 s): one request
// a second alternating between a and b, a send to a 1.5 s into the outage,
// a takes its turn again at 34 s (back 5 s after the outage, counting that whole second), slower requests in the recovery window.
func TestOutageReport(t *testing.T) {
	sc := &scenario.Scenario{Duration: 60 * time.Second, Warmup: 10 * time.Second,
		Clusters: []scenario.Cluster{{Name: "a"}, {Name: "b"}},
		Outages:  []scenario.Outage{{Cluster: "a", At: 20 * time.Second, For: 10 * time.Second}}}
	var recs []Record
	for s := range 60 {
		at := time.Duration(s) * time.Second
		cluster := s % 2
		if at >= 20*time.Second && at < 33*time.Second {
			cluster = 1
		}
		ttft := 100 * time.Millisecond
		if at >= 30*time.Second && at < 60*time.Second {
			ttft = 300 * time.Millisecond
		}
		recs = append(recs, Record{ID: uint64(s), Arrival: at, FirstToken: at + ttft, Finish: at + time.Second, Done: true,
			Counted: at >= sc.Warmup, Sends: []Send{{At: at, Cluster: cluster}}})
	}
	// Sent to a as it died and retried on b; one cut after its first byte;
	// one failed without one.
	recs[21].Sends = []Send{{At: 21500 * time.Millisecond, Cluster: 0}, {At: 21600 * time.Millisecond, Cluster: 1}}
	recs[22].Failed, recs[22].Cut, recs[22].Code = true, true, CodeNoResponse
	recs[23].Failed, recs[23].FirstToken, recs[23].Code = true, 0, 503
	reps := Outages(Outcome{Job: Job{Policy: "p", Seed: 7}, Trace: &Trace{Records: recs}}, sc)
	if len(reps) != 1 {
		t.Fatalf("%d reports", len(reps))
	}
	r := reps[0]
	if r.OffAfter != 1500*time.Millisecond || r.BackAfter != 5*time.Second || r.SteadyShare != 0.5 {
		t.Errorf("off after %v, back after %v, steady share %v", r.OffAfter, r.BackAfter, r.SteadyShare)
	}
	if r.SteadyP99 != 0.1 || r.RecoveryP99 != 0.3 || r.ErrorsWithoutFirstByte != 1 || r.Cut != 1 {
		t.Errorf("steady P99 %v, recovery P99 %v, errors %d, cut %d", r.SteadyP99, r.RecoveryP99, r.ErrorsWithoutFirstByte, r.Cut)
	}
	if len(r.Points) != 50 || r.Points[0].At != 10 || r.Points[0].Share != 1 || r.Points[1].Share != 0 || r.Points[12].Share != 0 || r.Points[11].Share != 0.5 {
		t.Errorf("points %+v", r.Points[:13])
	}
}
