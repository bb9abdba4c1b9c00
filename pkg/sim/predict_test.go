package sim

import (
	"testing"
	"time"
)

// With no arrivals after it and no KV pressure, the prediction is the TTFT the
// request then gets.
func TestPredictTTFTMatchesOutcome(t *testing.T) {
	cfg := Config{GPU: "L40S", Model: "llama-3.1-8b", MaxNumSeqs: 8, MaxLoras: 2, SpeedJitter: 0.05, Seed: 3}
	reqs, arrivals := randomWorkload(11, 40)
	exact := 0
	for i := range reqs {
		e := newEngine(t, cfg)
		for j := range i {
			e.Advance(arrivals[j])
			if err := e.Submit(reqs[j], arrivals[j]); err != nil {
				t.Fatal(err)
			}
		}
		e.Advance(arrivals[i])
		before := e.Snapshot()
		predicted, err := e.PredictTTFT(reqs[i], arrivals[i])
		if err != nil {
			t.Fatal(err)
		}
		if after := e.Snapshot(); after.Steps != before.Steps || after.Running != before.Running || after.Waiting != before.Waiting {
			t.Fatal("PredictTTFT changed the engine")
		}
		actual := drive(t, e, reqs[i:i+1], arrivals[i:i+1])[reqs[i].ID]
		got := actual.first - actual.arrival
		if predicted == got {
			exact++
		} else if d := (predicted - got).Seconds() / got.Seconds(); d > 0.05 || d < -0.05 {
			t.Errorf("request %d: predicted %v, actual %v", i, predicted, got)
		}
	}
	t.Logf("%d of %d predictions exact", exact, len(reqs))
	if exact < len(reqs)*9/10 {
		t.Errorf("only %d of %d predictions exact", exact, len(reqs))
	}
}

func TestPredictTTFTRanksLoadedPodsLower(t *testing.T) {
	idle := newEngine(t, Config{GPU: "H100", Model: "llama-3.1-8b"})
	busy := newEngine(t, Config{GPU: "H100", Model: "llama-3.1-8b", MaxNumSeqs: 4})
	for i := range 12 {
		if err := busy.Submit(Request{ID: uint64(i), Prompt: prompt(uint64(i), 2000), OutputTokens: 100}, 0); err != nil {
			t.Fatal(err)
		}
	}
	busy.Advance(at(20))
	req := Request{ID: 100, Prompt: prompt(100, 1000), OutputTokens: 10}
	pi, _ := idle.PredictTTFT(req, at(20))
	pb, _ := busy.PredictTTFT(req, at(20))
	p := idle.Profile()
	if pi != p.AnalyticTTFT(1000, 0, DefaultMaxNumBatchedTokens) {
		t.Errorf("idle prediction %v, analytic %v", pi, p.AnalyticTTFT(1000, 0, DefaultMaxNumBatchedTokens))
	}
	// Eight requests queue ahead for four sequence slots: it waits for two rounds.
	if pb < 2*time.Duration(100)*p.AnalyticITL(2000) {
		t.Errorf("busy prediction %v is less than two rounds of 100 decode steps", pb)
	}
}
