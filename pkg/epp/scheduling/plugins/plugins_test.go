package plugins_test

import (
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/igw-dev/igw/pkg/epp/datastore"
	"github.com/igw-dev/igw/pkg/epp/latency"
	"github.com/igw-dev/igw/pkg/epp/prefixindex"
	"github.com/igw-dev/igw/pkg/epp/scheduling"
	"github.com/igw-dev/igw/pkg/epp/scheduling/plugins"
)

var t0 = time.Unix(1000, 0)

func build(t *testing.T, typ, params string) scheduling.Plugin {
	t.Helper()
	p, err := plugins.NewRegistry().New(typ, "", scheduling.Parameters(params))
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func cycle(req *scheduling.Request, ix *prefixindex.Index) *scheduling.Cycle {
	c := scheduling.NewCycle(rand.New(rand.NewPCG(7, 7)))
	c.Reset(req, t0, scheduling.PrefixSettings{Index: ix, BlockTokens: 16, MaxBlocks: 512})
	c.Latency = latency.DefaultModel
	return c
}

func views(ms ...datastore.Metrics) []*datastore.View {
	out := make([]*datastore.View, len(ms))
	for i, m := range ms {
		m.SampledAt = t0
		out[i] = &datastore.View{ID: int32(i), Key: string(rune('a' + i)), Metrics: m, HasMetrics: true}
	}
	return out
}

func scores(t *testing.T, typ, params string, c *scheduling.Cycle, vs []*datastore.View) []float64 {
	t.Helper()
	out := make([]float64, len(vs))
	build(t, typ, params).(scheduling.Scorer).Score(c, vs, out)
	return out
}

func TestQueueScorer(t *testing.T) {
	s := scores(t, "queue", "", cycle(&scheduling.Request{}, nil), views(datastore.Metrics{Waiting: 0}, datastore.Metrics{Waiting: 5}, datastore.Metrics{Waiting: 10}))
	if s[0] != 1 || s[1] != 0.5 || s[2] != 0 {
		t.Fatalf("queue scores %v", s)
	}
	// Counter-case: equal queues do not discriminate.
	s = scores(t, "queue", "", cycle(&scheduling.Request{}, nil), views(datastore.Metrics{Waiting: 3}, datastore.Metrics{Waiting: 3}))
	if s[0] != s[1] {
		t.Fatalf("equal queues scored %v", s)
	}
}

func TestKVCacheScorerCountsPicksSinceSample(t *testing.T) {
	vs := views(datastore.Metrics{KVCacheKnown: true, KVCacheUsage: 0.2, NumGPUBlocks: 100, BlockSizeTokens: 16},
		datastore.Metrics{KVCacheKnown: true, KVCacheUsage: 0.3, NumGPUBlocks: 100, BlockSizeTokens: 16}, datastore.Metrics{})
	s := scores(t, "kv-cache-utilization", "", cycle(&scheduling.Request{}, nil), vs)
	if s[0] != 0.8 || s[1] != 0.7 || s[2] != 0.5 {
		t.Fatalf("kv scores %v", s)
	}
	vs[0].PicksSinceSample, vs[0].MeanPromptTokens = 2, 400 // +800 of 1600 tokens
	if s := scores(t, "kv-cache-utilization", "", cycle(&scheduling.Request{}, nil), vs); !(s[0] < s[1]) {
		t.Fatalf("picks since sample ignored: %v", s)
	}
}

func TestRunningRequestsScorer(t *testing.T) {
	vs := views(datastore.Metrics{Running: 4, Waiting: 1}, datastore.Metrics{Running: 1})
	if s := scores(t, "running-requests", "", cycle(&scheduling.Request{}, nil), vs); s[1] != 1 || s[0] != 0 {
		t.Fatalf("running scores %v", s)
	}
	vs[1].PicksSinceSample = 6 // six requests sent since: now the busier
	if s := scores(t, "running-requests", "", cycle(&scheduling.Request{}, nil), vs); s[0] != 1 {
		t.Fatalf("picks since sample ignored: %v", s)
	}
}

func TestLoRAAffinityScorer(t *testing.T) {
	vs := views(
		datastore.Metrics{RunningAdapters: []string{"sql"}, MaxAdapters: 2},
		datastore.Metrics{RunningAdapters: []string{"chat"}, MaxAdapters: 2},
		datastore.Metrics{RunningAdapters: []string{"chat"}, WaitingAdapters: []string{"sql"}, MaxAdapters: 1},
		datastore.Metrics{RunningAdapters: []string{"a", "b"}, MaxAdapters: 2},
	)
	s := scores(t, "lora-affinity", "", cycle(&scheduling.Request{Adapter: "sql"}, nil), vs)
	if s[0] != 1 || s[1] != 0.8 || s[2] != 0.6 || s[3] != 0 {
		t.Fatalf("lora scores %v", s)
	}
	vs[3].AdaptersSinceSample = []string{"sql"} // sent there since the sample: loading
	if s := scores(t, "lora-affinity", "", cycle(&scheduling.Request{Adapter: "sql"}, nil), vs); s[3] != 1 {
		t.Fatalf("adapter sent since sample scored %v", s[3])
	}
	// Counter-case: base-model requests are indifferent.
	if s := scores(t, "lora-affinity", "", cycle(&scheduling.Request{}, nil), vs); s[0] != s[3] {
		t.Fatalf("base model scores %v", s)
	}
	// An adapter sent again while it runs takes no second slot.
	again := views(datastore.Metrics{RunningAdapters: []string{"chat"}, MaxAdapters: 2})
	again[0].AdaptersSinceSample = []string{"chat"}
	if s := scores(t, "lora-affinity", "", cycle(&scheduling.Request{Adapter: "sql"}, nil), again); s[0] != 0.8 {
		t.Fatalf("one adapter in two slots counted as full: %v", s)
	}
}

func TestPrefixCacheScorerNeedsMinimumMatch(t *testing.T) {
	ix := prefixindex.New(1000)
	shared := strings.Repeat("s", 64)             // one block shared by every request
	long := strings.Repeat("system prompt ", 100) // many blocks
	req := &scheduling.Request{Model: "m", Prompt: shared + long + "q"}
	c := cycle(req, ix)
	ix.Add(0, c.PromptHashes(), nil)
	ix.Add(1, c.PromptHashes()[:1], nil)
	s := scores(t, "prefix-cache", "", cycle(req, ix), views(datastore.Metrics{}, datastore.Metrics{}, datastore.Metrics{}))
	if s[0] != 1 || s[1] != 0 || s[2] != 0 {
		t.Fatalf("prefix scores %v (endpoint 1 holds only the first block)", s)
	}
	if s := scores(t, "prefix-cache", `{"minMatchTokens": 1}`, cycle(req, ix), views(datastore.Metrics{}, datastore.Metrics{})); s[1] == 0 {
		t.Fatal("minMatchTokens 1 ignored a one-block match")
	}
}

func TestPickers(t *testing.T) {
	vs := views(datastore.Metrics{}, datastore.Metrics{}, datastore.Metrics{}, datastore.Metrics{})
	totals := []float64{0.2, 0.9, 0.9, 0.1}
	c := cycle(&scheduling.Request{}, nil)
	max := build(t, "max-score-picker", "").(scheduling.Picker)
	seen := map[int]int{}
	for range 200 {
		got := max.Pick(c, vs, totals, 3, nil)
		if len(got) != 3 || got[2] != 0 || (got[0] != 1 && got[0] != 2) || got[0] == got[1] {
			t.Fatalf("max-score pick %v", got)
		}
		seen[got[0]]++
	}
	if seen[1] < 60 || seen[2] < 60 {
		t.Fatalf("ties not broken at random: %v", seen)
	}
	wr := build(t, "weighted-random-picker", "").(scheduling.Picker)
	counts := make([]int, 4)
	for range 4000 {
		got := wr.Pick(c, vs, totals, 2, nil)
		if len(got) != 2 || got[0] == got[1] {
			t.Fatalf("weighted-random pick %v", got)
		}
		counts[got[0]]++
	}
	// Expected shares 0.2/2.1, 0.9/2.1, 0.9/2.1, 0.1/2.1 of 4000.
	if counts[1] < 1500 || counts[2] < 1500 || counts[0] < 250 || counts[0] > 520 || counts[3] > 300 {
		t.Fatalf("weighted-random shares %v", counts)
	}
}

func TestFilters(t *testing.T) {
	vs := views(datastore.Metrics{Waiting: 9}, datastore.Metrics{Waiting: 0}, datastore.Metrics{Waiting: 1})
	vs[0].Labels = map[string]string{"gpu": "h100"}
	vs[2].Labels = map[string]string{"gpu": "h100", "zone": "a"}
	c := cycle(&scheduling.Request{}, nil)
	got := build(t, "label-selector-filter", `{"matchLabels": {"gpu": "h100"}}`).(scheduling.Filter).Filter(c, append([]*datastore.View(nil), vs...))
	if len(got) != 2 || got[0].Key != "a" || got[1].Key != "c" {
		t.Fatalf("label filter kept %v", got)
	}
	sat := build(t, "saturation-filter", `{"queueDepth": 5}`).(scheduling.Filter)
	if got := sat.Filter(c, append([]*datastore.View(nil), vs...)); len(got) != 2 {
		t.Fatalf("saturation filter kept %d", len(got))
	}
	all := views(datastore.Metrics{Waiting: 9}, datastore.Metrics{Waiting: 7})
	if got := sat.Filter(c, all); len(got) != 2 {
		t.Fatal("saturation filter emptied an all-saturated set")
	}
}

// TestModelServedFilter: a request for an adapter avoids the endpoints whose
// model list lacks it while some endpoint lists it; endpoints with no list are
// kept, no list anywhere (or none listing the adapter) keeps every endpoint,
// and base-model requests are never filtered.
func TestModelServedFilter(t *testing.T) {
	withSQL := datastore.NewServedModels([]string{"m", "sql"}, t0)
	without := datastore.NewServedModels([]string{"m", "chat"}, t0)
	f := build(t, "model-served-filter", "").(scheduling.Filter)
	keys := func(req *scheduling.Request, lists ...*datastore.ServedModels) string {
		vs := views(make([]datastore.Metrics, len(lists))...)
		for i, l := range lists {
			vs[i].Models = l
		}
		var out string
		for _, v := range f.Filter(cycle(req, nil), vs) {
			out += v.Key
		}
		return out
	}
	sql := &scheduling.Request{Adapter: "sql"}
	for _, c := range []struct {
		name  string
		req   *scheduling.Request
		lists []*datastore.ServedModels
		want  string
	}{
		{"known", sql, []*datastore.ServedModels{without, withSQL, without}, "b"},
		{"partially known", sql, []*datastore.ServedModels{withSQL, nil, without, withSQL}, "abd"},
		{"unknown", sql, []*datastore.ServedModels{nil, nil, nil}, "abc"},
		{"listed nowhere", sql, []*datastore.ServedModels{without, nil, without}, "abc"},
		{"base model", &scheduling.Request{Model: "m"}, []*datastore.ServedModels{without, withSQL, datastore.NewServedModels(nil, t0)}, "abc"},
	} {
		if got := keys(c.req, c.lists...); got != c.want {
			t.Errorf("%s: kept %q, want %q", c.name, got, c.want)
		}
	}
	if _, err := plugins.NewRegistry().New("model-served-filter", "", scheduling.Parameters(`{"strict": true}`)); err == nil {
		t.Error("unknown parameter accepted")
	}
}

func TestRegistryRejectsUnknown(t *testing.T) {
	r := plugins.NewRegistry()
	if _, err := r.New("no-such-plugin", "", nil); err == nil {
		t.Fatal("unknown type accepted")
	}
	if _, err := r.New("queue", "", scheduling.Parameters(`{"bogus": 1}`)); err == nil {
		t.Fatal("unknown parameter accepted")
	}
	if _, err := r.New("label-selector-filter", "", nil); err == nil {
		t.Fatal("label filter without labels accepted")
	}
}
