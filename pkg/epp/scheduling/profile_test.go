package scheduling

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/igw-dev/igw/pkg/epp/datastore"
)

// keepFilter keeps the candidates whose key is in keep and counts its calls.
type keepFilter struct {
	Named
	keep  string
	calls int
}

func (f *keepFilter) Filter(_ *Cycle, in []*datastore.View) []*datastore.View {
	f.calls++
	out := in[:0]
	for _, v := range in {
		if len(v.Key) == 1 && slices.Contains([]byte(f.keep), v.Key[0]) {
			out = append(out, v)
		}
	}
	return out
}

// fixedScorer writes one score per candidate key.
type fixedScorer struct {
	Named
	byKey map[string]float64
}

func (s *fixedScorer) Score(_ *Cycle, cands []*datastore.View, scores []float64) {
	for i, v := range cands {
		scores[i] = s.byKey[v.Key]
	}
}

// rankPicker ranks by total, highest first, and records what it was asked.
type rankPicker struct {
	Named
	n      int
	totals []float64
}

func (p *rankPicker) Pick(_ *Cycle, cands []*datastore.View, totals []float64, n int, dst []int) []int {
	p.n, p.totals = n, slices.Clone(totals)
	order := make([]int, len(cands))
	for i := range order {
		order[i] = i
	}
	slices.SortStableFunc(order, func(a, b int) int {
		switch {
		case totals[a] > totals[b]:
			return -1
		case totals[a] < totals[b]:
			return 1
		}
		return 0
	})
	return append(dst, order[:min(n, len(order))]...)
}

func endpoints(keys string) []*datastore.View {
	out := make([]*datastore.View, len(keys))
	for i := range keys {
		out[i] = &datastore.View{ID: int32(i), Key: keys[i : i+1]}
	}
	return out
}

func testCycle() *Cycle {
	c := NewCycle(rand.New(rand.NewPCG(1, 1)))
	c.Reset(&Request{Model: "m"}, time.Unix(0, 0), PrefixSettings{})
	return c
}

// Filters narrow in turn, each scorer's clamped score is weighted into the
// totals, and the picker ranks the survivors for a destination and fallbacks.
func TestProfileRun(t *testing.T) {
	picker := &rankPicker{Named: Named{"rank", "rank"}}
	p := &Profile{
		Filters: []Filter{
			&keepFilter{Named: Named{"keep", "no-d"}, keep: "abc"},
			&keepFilter{Named: Named{"keep", "no-a"}, keep: "bcd"},
		},
		Scorers: []WeightedScorer{
			{Scorer: &fixedScorer{Named: Named{"fixed", "load"}, byKey: map[string]float64{"b": 0.5, "c": 2}}, Weight: 2},
			{Scorer: &fixedScorer{Named: Named{"fixed", "cache"}, byKey: map[string]float64{"b": 1, "c": math.NaN()}}, Weight: 3},
		},
		Picker:    picker,
		Fallbacks: 1,
	}
	survivors, ranking := p.Run(testCycle(), endpoints("abcd"))
	if got := keysOf(survivors); got != "bc" {
		t.Fatalf("survivors %q, want \"bc\"", got)
	}
	// b: 2·0.5 + 3·1 = 4; c: 2·1 (2 clamped to 1) + 3·0 (NaN clamped to 0) = 2.
	if !slices.Equal(picker.totals, []float64{4, 2}) {
		t.Fatalf("totals %v, want [4 2]", picker.totals)
	}
	if picker.n != 2 || !slices.Equal(ranking, []int{0, 1}) {
		t.Fatalf("picker asked for %d, ranking %v; want 2 (destination and one fallback), [0 1]", picker.n, ranking)
	}
}

// Once a filter leaves nothing, later filters, the scorers and the picker do
// not run and the ranking is empty.
func TestProfileRunStopsWhenNothingSurvives(t *testing.T) {
	later := &keepFilter{Named: Named{"keep", "later"}, keep: "abc"}
	picker := &rankPicker{Named: Named{"rank", "rank"}}
	p := &Profile{
		Filters: []Filter{&keepFilter{Named: Named{"keep", "none"}, keep: ""}, later},
		Scorers: []WeightedScorer{{Scorer: &fixedScorer{Named: Named{"fixed", "f"}}, Weight: 1}},
		Picker:  picker,
	}
	survivors, ranking := p.Run(testCycle(), endpoints("abc"))
	if len(survivors) != 0 || ranking != nil || later.calls != 0 || picker.totals != nil {
		t.Fatalf("survivors %v, ranking %v, later filter calls %d, picker totals %v; want nothing run", survivors, ranking, later.calls, picker.totals)
	}
}

// A cycle reused for a second decision with fewer candidates and scores
// starts from clean totals.
func TestProfileRunReusesCycle(t *testing.T) {
	picker := &rankPicker{Named: Named{"rank", "rank"}}
	p := &Profile{
		Scorers: []WeightedScorer{{Scorer: &fixedScorer{Named: Named{"fixed", "f"}, byKey: map[string]float64{"a": 1, "b": 0.25, "c": 0.5}}, Weight: 1}},
		Picker:  picker,
	}
	c := testCycle()
	p.Run(c, endpoints("abc"))
	c.Reset(&Request{}, time.Unix(1, 0), PrefixSettings{})
	_, ranking := p.Run(c, endpoints("cb"))
	// Not [1.5 0.5]: the first run's totals of positions 0 and 1 are gone.
	if !slices.Equal(picker.totals, []float64{0.5, 0.25}) || !slices.Equal(ranking, []int{0}) {
		t.Fatalf("second run: totals %v, ranking %v; want [0.5 0.25], [0]", picker.totals, ranking)
	}
}

func TestBreakdown(t *testing.T) {
	p := &Profile{
		Scorers: []WeightedScorer{
			{Scorer: &fixedScorer{Named: Named{"fixed", "queue"}, byKey: map[string]float64{"a": 1, "b": 0.5}}, Weight: 2},
			{Scorer: &fixedScorer{Named: Named{"fixed", "prefix-cache"}, byKey: map[string]float64{"a": 0.2, "b": 7}}, Weight: 3},
		},
		Picker: &rankPicker{Named: Named{"rank", "rank"}},
	}
	c := testCycle()
	p.Run(c, endpoints("ab"))
	b := c.Breakdown(p, 1)
	b.Reason = "scored"
	want := "endpoint=b;reason=scored;total=4.0000;candidates=2;queue=0.5000*2;prefix-cache=1.0000*3"
	if got := b.String(); got != want {
		t.Fatalf("breakdown %q, want %q", got, want)
	}
	if b := c.Breakdown(p, 2); b.Endpoint != "" || b.Terms != nil || b.Candidates != 2 {
		t.Fatalf("out-of-range breakdown %+v, want only the candidate count", b)
	}
}

// cacheStub knows that endpoint "a" holds 100 tokens, and counts its reads.
type cacheStub struct {
	fixedScorer
	reads int
}

func (s *cacheStub) ReadCache(c *Cycle, cands []*datastore.View) {
	s.reads++
	for _, v := range cands {
		if v.Key == "a" {
			c.SetCachedTokens(v, 100)
		}
	}
}

// A cache reader runs once per cycle, before anything judges the
// candidates: when the director asked for it (ReadCache), Run does not read
// again; when it did not, Run does before filtering, so a scorer always
// sees the exact figures.
func TestReadCacheOncePerCycle(t *testing.T) {
	reader := &cacheStub{fixedScorer: fixedScorer{byKey: map[string]float64{}}}
	p := &Profile{Scorers: []WeightedScorer{{Scorer: reader, Weight: 1}}, Picker: &rankPicker{}}
	views := []datastore.View{{ID: 0, Key: "a"}, {ID: 1, Key: "b"}}
	cands := []*datastore.View{&views[0], &views[1]}
	c := NewCycle(rand.New(rand.NewPCG(1, 1)))
	c.Reset(&Request{Model: "m", PromptTokens: 400}, time.Unix(0, 0), PrefixSettings{})
	p.ReadCache(c, cands)
	if got := c.UncachedTokens(&views[0]); got != 300 || reader.reads != 1 {
		t.Fatalf("after ReadCache: %d uncached tokens on a (want 300), %d reads", got, reader.reads)
	}
	p.Run(c, cands)
	if reader.reads != 1 {
		t.Fatalf("Run read the cache again in the same cycle (%d reads)", reader.reads)
	}
	c.Reset(&Request{Model: "m", PromptTokens: 400}, time.Unix(0, 0), PrefixSettings{})
	if _, known := c.ExactCachedTokens(&views[0]); known {
		t.Fatal("a new cycle kept the last one's exact figure")
	}
	p.Run(c, cands)
	if cached, known := c.ExactCachedTokens(&views[0]); reader.reads != 2 || !known || cached != 100 {
		t.Fatalf("Run without ReadCache: %d reads, a holds %d (known %v)", reader.reads, cached, known)
	}
}
