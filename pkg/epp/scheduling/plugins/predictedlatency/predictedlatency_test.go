package predictedlatency

import (
	"math/rand/v2"
	"testing"
	"time"

	"github.com/igw-dev/igw/pkg/epp/datastore"
	"github.com/igw-dev/igw/pkg/epp/latency"
	"github.com/igw-dev/igw/pkg/epp/scheduling"
)

var t0 = time.Unix(1000, 0)

func view(id int32, prefillRate, decodeStep float64, waiting int) *datastore.View {
	return &datastore.View{
		ID: id, Key: string(rune('a' + id)), HasMetrics: true,
		Metrics:          datastore.Metrics{Waiting: waiting, SampledAt: t0},
		MeanPromptTokens: 1000,
		Speed:            datastore.Speed{PrefillTokensPerSecond: prefillRate, DecodeStepSeconds: decodeStep, PrefillSamples: 10, DecodeSamples: 10},
	}
}

func score(t *testing.T, req *scheduling.Request, cands ...*datastore.View) []float64 {
	t.Helper()
	p, err := New(Type, nil)
	if err != nil {
		t.Fatal(err)
	}
	c := scheduling.NewCycle(rand.New(rand.NewPCG(1, 2)))
	c.Reset(req, t0, scheduling.PrefixSettings{})
	c.Latency = latency.DefaultModel
	out := make([]float64, len(cands))
	p.(*Scorer).Score(c, cands, out)
	return out
}

func TestPrefersFasterEndpointWhenQueuesEqual(t *testing.T) {
	req := &scheduling.Request{Model: "m", PromptTokens: 2000}
	h100 := view(0, 27700, 0.008, 3)
	a10g := view(1, 1500, 0.037, 3)
	s := score(t, req, h100, a10g)
	if !(s[0] > s[1]) {
		t.Fatalf("equal queues: H100-like %v should beat A10G-like %v", s[0], s[1])
	}
}

func TestPrefersLessLoadedWhenSpeedsEqual(t *testing.T) {
	req := &scheduling.Request{Model: "m", PromptTokens: 500}
	busy := view(0, 10000, 0.01, 8)
	idle := view(1, 10000, 0.01, 1)
	s := score(t, req, busy, idle)
	if !(s[1] > s[0]) {
		t.Fatalf("equal speeds: idle %v should beat busy %v", s[1], s[0])
	}
	if s[1] != 1 {
		t.Fatalf("best endpoint scores %v, want 1", s[1])
	}
}

func TestBusyFastBeatsIdleSlowOnlyWhileItsQueueIsShort(t *testing.T) {
	req := &scheduling.Request{Model: "m", PromptTokens: 1000}
	slowIdle := view(1, 1500, 0.037, 0) // ~0.7 s to first token
	if s := score(t, req, view(0, 27700, 0.008, 2), slowIdle); !(s[0] > s[1]) {
		t.Fatalf("fast endpoint with 2 queued should still win: %v", s)
	}
	if s := score(t, req, view(0, 27700, 0.008, 40), slowIdle); !(s[1] > s[0]) {
		t.Fatalf("fast endpoint with 40 queued should lose to the idle slow one: %v", s)
	}
}

func TestStaleScoresZeroAndParametersValidated(t *testing.T) {
	stale := view(0, 10000, 0.01, 0)
	stale.Stale = true
	if s := score(t, &scheduling.Request{PromptTokens: 10}, stale, view(1, 10000, 0.01, 50)); s[0] != 0 || s[1] != 1 {
		t.Fatalf("stale endpoint scored %v", s)
	}
	if _, err := New(Type, scheduling.Parameters(`{"adapterLoadSeconds": -1}`)); err == nil {
		t.Fatal("negative adapterLoadSeconds accepted")
	}
	if _, err := New(Type, scheduling.Parameters(`{"chunkTokenz": 1}`)); err == nil {
		t.Fatal("unknown parameter accepted")
	}
}

func TestAdapterLoadCosts(t *testing.T) {
	req := &scheduling.Request{Model: "m", Adapter: "sql", PromptTokens: 100}
	resident := view(0, 10000, 0.01, 0)
	resident.Metrics.RunningAdapters = []string{"sql"}
	resident.Metrics.MaxAdapters = 1
	full := view(1, 10000, 0.01, 0)
	full.Metrics.RunningAdapters = []string{"chat"}
	full.Metrics.MaxAdapters = 1
	if s := score(t, req, resident, full); !(s[0] > s[1]) {
		t.Fatalf("resident adapter should win: %v", s)
	}
}
