package predictedlatency

import (
	"math"
	"sync/atomic"

	"github.com/igw-dev/igw/pkg/epp/datastore"
	"github.com/igw-dev/igw/pkg/epp/scheduling"
)

// Placing new content. A prompt that no endpoint holds any of puts its
// content in the cache of the endpoint it goes to, and where prompts share
// prefixes, the later requests that share it follow it there for as long
// as it stays. Ranked by time to first token alone, such a prompt goes
// wherever the queue happens to be shortest at that moment, and the
// content each endpoint holds, with the traffic it draws, ends up as
// uneven as those moments were. On llm-d-precise-prefix (150 shared
// contexts over 8 endpoints; des, seed 15) one endpoint was sent 112
// prompts and another 84 while the contexts were first seen; from then on
// every request went where its prompt was cached, the first carried a
// third more of the traffic, its batch grew to three times the others' as
// its streams slowed, and at the top of the load ramp its KV cache
// overflowed, evicted contexts and turned hits into misses: P99 TTFT
// 0.30 s against 0.10, 419 requests shed. Where prompts are reused, new
// content is therefore steered to the endpoints given the least content of
// late for their speed (datastore.View.PlacedSeconds), as SGLang's gateway
// sends it to its smallest cache tree: 84-101 prompts each, no request
// shed, P99 TTFT 0.096 s. Over seeds 11-20 the mean P99 TTFT went from
// 0.134 to 0.098 s (two such overflows before, none after) and goodput
// from 35.84 to 36.00 req/s; shared-prefix's from 0.318 to 0.307 s.
// Scenarios whose prompts are seldom reused are not touched.

// reuseAlpha is one request's weight in the running share of each prompt
// cached somewhere (reuseShare).
const reuseAlpha = 0.05

// Placement steering starts once that running share reaches
// placementFrom and is whole from placementFull: where less of each prompt
// is cached somewhere (the Mooncake traces: 2-7% of their tokens) there is
// no steering, and requests keep the endpoint that serves them first.
const (
	placementFrom = 0.3
	placementFull = 0.7
)

// placementTolerance is the share of the candidates' mean placed content
// added to each before the ratio to the least: the smaller, the more
// sharply the endpoint given the least wins new content (with the least
// near nothing, one given this share of the mean scores about half).
const placementTolerance = 0.05

// reuseShare is a running mean of the share of each prompt some candidate
// holds in its cache, safe for concurrent pickers (a lost update only
// delays the mean).
type reuseShare struct{ bits atomic.Uint64 }

// observe folds in a prompt of which share (0..1) was cached somewhere and
// returns the new mean.
func (r *reuseShare) observe(share float64) float64 {
	old := math.Float64frombits(r.bits.Load())
	mean := old + reuseAlpha*(share-old)
	r.bits.Store(math.Float64bits(mean))
	return mean
}

// placementTally is what steerPlacement needs of the candidates, gathered
// as Score goes through them: whether they all hold as much of the prompt
// (new content), and the most any holds.
type placementTally struct {
	uncached      int // the first candidate's uncached tokens
	unequal       bool
	leastUncached int
	n             int
}

// add counts a (non-stale) candidate with uncached prompt tokens.
func (t *placementTally) add(uncached int) {
	if t.n == 0 {
		t.uncached, t.leastUncached = uncached, uncached
	} else {
		t.unequal = t.unequal || uncached != t.uncached
		t.leastUncached = min(t.leastUncached, uncached)
	}
	t.n++
}

// steerPlacement scales scores for a prompt of promptTokens that no
// candidate holds more of than another (new content) toward the candidates
// given the least content of late, in proportion to how much prompts are
// reused. Stale candidates keep their score (0). The content placed is
// read only for the few prompts steered.
func (s *Scorer) steerPlacement(c *scheduling.Cycle, t *placementTally, cands []*datastore.View, scores []float64) {
	if c.PromptTokens <= 0 || t.n == 0 {
		return
	}
	reuse := s.reuse.observe(float64(c.PromptTokens-t.leastUncached) / float64(c.PromptTokens))
	w := min(1, max(0, (reuse-placementFrom)/(placementFull-placementFrom)))
	if t.unequal || w == 0 {
		return
	}
	least, total := math.Inf(1), 0.0
	for _, v := range cands {
		if !v.Stale {
			placed := v.PlacedSeconds(c.Now)
			least, total = min(least, placed), total+placed
		}
	}
	if total <= 0 {
		return
	}
	tolerance := placementTolerance * total / float64(t.n)
	for i, v := range cands {
		if !v.Stale {
			scores[i] *= 1 - w + w*(least+tolerance)/(v.PlacedSeconds(c.Now)+tolerance)
		}
	}
}
