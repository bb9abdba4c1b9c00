package globalsummary

import (
	"math"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/igw-dev/igw/pkg/epp/datastore"
	"github.com/igw-dev/igw/pkg/epp/latency"
	"github.com/igw-dev/igw/pkg/epp/prefixindex"
	"github.com/igw-dev/igw/pkg/tokencount"
)

var t0 = time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)

// pool is an endpoint picker's state as the exporter reads it: three
// endpoints (one with stale telemetry), served model lists and a prefix index
// holding one conversation on the first endpoint.
func pool(t *testing.T) (Source, []uint64) {
	t.Helper()
	store := datastore.NewStore(latency.DefaultPriors)
	eps := []datastore.Endpoint{{Address: "10.0.0.1", Port: 8000}, {Address: "10.0.0.2", Port: 8000}, {Address: "10.0.0.3", Port: 8000}}
	store.SetEndpoints(eps)
	store.UpdateMetrics(eps[0].Key(), datastore.Metrics{Waiting: 2, Running: 5, KVCacheKnown: true, KVCacheUsage: 0.5, BlockSizeTokens: 16, NumGPUBlocks: 1000, SampledAt: t0}, t0)
	store.UpdateMetrics(eps[1].Key(), datastore.Metrics{Waiting: 1, Running: 3, KVCacheKnown: true, KVCacheUsage: 0.9, BlockSizeTokens: 16, NumGPUBlocks: 3000, SampledAt: t0}, t0)
	store.UpdateMetrics(eps[2].Key(), datastore.Metrics{Waiting: 50, SampledAt: t0.Add(-time.Minute)}, t0.Add(-time.Minute))
	store.SetServedModels(eps[0].Key(), datastore.NewServedModels([]string{"llama", "sql"}, t0))
	store.SetServedModels(eps[2].Key(), datastore.NewServedModels([]string{"llama", "chat"}, t0))

	ix := prefixindex.New(1000)
	prompt := strings.Repeat("You are a helpful assistant. ", 200)
	hashes := prefixindex.Hash(nil, "llama", prompt, 128*tokencount.CharsPerToken, 0)
	ix.Add(store.Get(eps[0].Key()).ID(), hashes[:5], nil)

	errs := NewErrorWindow(DefaultErrorWindow, 30)
	for i := range 20 {
		errs.Record(i < 2, t0.Add(-time.Second))
	}
	return Source{Model: "llama", Store: store, Index: ix, BlockTokens: 128, Staleness: time.Second, Errors: errs}, hashes
}

func TestExporterSummarisesThePicker(t *testing.T) {
	src, hashes := pool(t)
	e := NewExporter(ExporterOptions{Cluster: "use1", Region: "us-east-1"}, func() []Source { return []Source{src} })
	s := e.Summary(t0)
	if err := s.Validate(); err != nil {
		t.Fatal(err)
	}
	if s.Sequence != 1 || e.Summary(t0).Sequence != 2 {
		t.Fatal("sequence does not grow")
	}
	m := s.Find("llama")
	if m == nil {
		t.Fatal("no llama entry")
	}
	if m.Endpoints != 3 || m.ReadyEndpoints != 2 {
		t.Errorf("endpoints %d ready %d, want 3 and 2 (one is stale)", m.Endpoints, m.ReadyEndpoints)
	}
	if m.Waiting != 3 || m.Running != 8 {
		t.Errorf("waiting %d running %d, want 3 and 8 (the stale endpoint left out)", m.Waiting, m.Running)
	}
	if want := 2 * latency.DefaultPriors.PrefillTokensPerSecond; m.PrefillTokensPerSecond != want || m.EndpointPrefillTokensPerSecond != want/2 {
		t.Errorf("rates %v / %v, want %v / %v", m.PrefillTokensPerSecond, m.EndpointPrefillTokensPerSecond, want, want/2)
	}
	// 3 waiting requests nobody sent through this picker, at the default prompt each.
	if m.QueuedPrefillTokens != 3*256 {
		t.Errorf("queued %v tokens, want %v", m.QueuedPrefillTokens, 3*256)
	}
	// Capacity-weighted: (0.5 × 16000 + 0.1 × 48000) / 64000.
	if m.KVHeadroom == nil || math.Abs(*m.KVHeadroom-0.2) > 1e-9 || m.KVCapacityTokens != 64000 {
		t.Errorf("headroom %v of %d tokens, want 0.2 of 64000", m.KVHeadroom, m.KVCapacityTokens)
	}
	if !slices.Equal(m.Adapters, []string{"chat", "sql"}) {
		t.Errorf("adapters %v", m.Adapters)
	}
	if m.ErrorRate != 0.1 || m.Requests != 20 {
		t.Errorf("error rate %v over %d", m.ErrorRate, m.Requests)
	}
	if m.Digest == nil || m.Digest.BlockTokens != 128 || m.Digest.Blocks != 5 {
		t.Fatalf("digest %+v", m.Digest)
	}
	if got := m.Digest.MatchLeading(hashes); got != 5 {
		t.Errorf("the digest matches %d leading blocks of the conversation, want the 5 held", got)
	}
	other := prefixindex.Hash(nil, "qwen", strings.Repeat("You are a helpful assistant. ", 200), 512, 0)
	if got := m.Digest.MatchLeading(other); got != 0 {
		t.Errorf("another model's prompt matches %d blocks", got)
	}
}

// TestDigestKeepsTheMostRecentWhenFull: an index larger than the largest
// filter exports what the servers most probably still hold: each endpoint's
// newest blocks, a conversation's head before its tail, endpoints in turn.
func TestDigestKeepsTheMostRecentWhenFull(t *testing.T) {
	ix := prefixindex.New(100000)
	var convs [][]uint64
	for i := range 40 {
		p := strings.Repeat(string(rune('a'+i%26))+strings.Repeat("x", i), 4000)
		h := prefixindex.Hash(nil, "m", p, 512, 0)
		ix.Add(int32(i%4), h, nil)
		convs = append(convs, h)
	}
	d := digestOf(ix, 128, MinDigestBits) // room for 102 of the index's 6,000 blocks
	if d.Blocks != d.Capacity() {
		t.Fatalf("%d blocks in a filter for %d", d.Blocks, d.Capacity())
	}
	for i := 36; i < 40; i++ { // the newest conversation of each endpoint
		if got := d.MatchLeading(convs[i]); got < 20 || got > 30 {
			t.Errorf("conversation %d matches %d leading blocks, want about a quarter of the filter (25)", i, got)
		}
	}
	if got := d.MatchLeading(convs[0]); got > 1 {
		t.Errorf("the oldest conversation matches %d blocks of a full filter", got)
	}
}
