// Package member is what the global picker's plugins know of the member
// clusters in one decision. Members are endpoints of a datastore.Store (one
// store per model), so the scheduler framework and the endpoint picker's own
// plugins work on them unchanged; what is member-specific (region, round trip,
// the model's summary, health) is in a Table attached to the cycle
// (scheduling.Cycle.Data) and indexed by the view's ID.
package member

import (
	"math"
	"strings"
	"time"

	"github.com/igw-dev/igw/pkg/epp/datastore"
	"github.com/igw-dev/igw/pkg/epp/prefixindex"
	"github.com/igw-dev/igw/pkg/epp/scheduling"
	"github.com/igw-dev/igw/pkg/global/health"
	"github.com/igw-dev/igw/pkg/globalsummary"
	"github.com/igw-dev/igw/pkg/tokencount"
)

// State is one member as one decision sees it (a copy: plugins need no locks).
type State struct {
	Name    string
	Region  string
	Address string
	// Summary is the member's entry for the request's model in its latest
	// valid summary (nil: none, or the member does not serve the model);
	// SummaryAt is when the hub received it (the hub's clock).
	Summary   *globalsummary.Model
	SummaryAt time.Time
	// SentTokens is the uncached prompt tokens the hub sent there for this
	// model since that summary.
	SentTokens float64
	// RTT is the smoothed round trip from the hub to the member (RTTKnown false: never measured).
	RTT      time.Duration
	RTTKnown bool
	Health   health.Status
}

// SummaryAge is how old the state's summary is at now (0 for a future receipt time).
func (s *State) SummaryAge(now time.Time) time.Duration { return max(0, now.Sub(s.SummaryAt)) }

// MetricsOf is the telemetry sample a member's model summary stands for in the
// member's datastore endpoint: queue and batch, and KV use with its capacity
// (one token per block), so that the store's corrections for picks since the
// sample apply to members as to pods.
func MetricsOf(m *globalsummary.Model, receivedAt time.Time) datastore.Metrics {
	out := datastore.Metrics{Waiting: m.Waiting, Running: m.Running, PrefixCacheHitRate: -1, SampledAt: receivedAt}
	if m.KVHeadroom != nil {
		out.KVCacheKnown, out.KVCacheUsage = true, 1-*m.KVHeadroom
		if m.KVCapacityTokens > 0 && m.KVCapacityTokens <= math.MaxInt32 {
			out.NumGPUBlocks, out.BlockSizeTokens = int(m.KVCapacityTokens), 1
		}
	}
	return out
}

type promptHashes struct {
	blockTokens int
	hashes      []uint64
}

// Table is the decision's member data. The global picker owns and reuses it.
type Table struct {
	// Origin is the region the request comes from.
	Origin string
	// MaxPrefixBlocks bounds how many prompt blocks are hashed for digests.
	MaxPrefixBlocks int

	states    []State
	present   []bool
	matched   []int32 // leading blocks found in the digest, -1: not looked up yet
	hashes    []promptHashes
	notes     []string
	rejection string
}

// Reset empties the table for a decision over store ids below n.
func (t *Table) Reset(origin string, maxPrefixBlocks int, n int) {
	t.Origin, t.MaxPrefixBlocks = origin, maxPrefixBlocks
	if cap(t.states) < n {
		t.states, t.present, t.matched = make([]State, n), make([]bool, n), make([]int32, n)
	}
	t.states, t.present, t.matched = t.states[:n], t.present[:n], t.matched[:n]
	clear(t.states)
	clear(t.present)
	for i := range t.matched {
		t.matched[i] = -1
	}
	for i := range t.hashes {
		t.hashes[i].hashes = t.hashes[i].hashes[:0]
	}
	t.hashes = t.hashes[:0]
	t.notes = t.notes[:0]
	t.rejection = ""
}

// Set stores the state of the member whose view has id.
func (t *Table) Set(id int32, s State) {
	t.states[id], t.present[id] = s, true
}

// From returns the table attached to c, or nil outside the global picker.
func From(c *scheduling.Cycle) *Table {
	t, _ := c.Data.(*Table)
	return t
}

// Of returns the state of v's member, or nil.
func (t *Table) Of(v *datastore.View) *State {
	if t == nil || v.ID < 0 || int(v.ID) >= len(t.states) || !t.present[v.ID] {
		return nil
	}
	return &t.states[v.ID]
}

// MatchedTokens is how many of the prompt's tokens v's member holds by its
// digest: the prompt is hashed as the member's endpoint picker hashes it (at
// the digest's block size, seeded with the adapter or the model), once per
// block size and decision, and its leading blocks are looked up.
func (t *Table) MatchedTokens(c *scheduling.Cycle, v *datastore.View) int {
	s := t.Of(v)
	if s == nil || s.Summary == nil || s.Summary.Digest == nil {
		return 0
	}
	d := s.Summary.Digest
	if t.matched[v.ID] < 0 {
		t.matched[v.ID] = int32(d.MatchLeading(t.promptHashes(c, d.BlockTokens)))
	}
	return min(int(t.matched[v.ID])*d.BlockTokens, c.PromptTokens)
}

// PromptBlocks is how many full blocks of blockTokens the prompt has (as hashed).
func (t *Table) PromptBlocks(c *scheduling.Cycle, blockTokens int) int {
	return len(t.promptHashes(c, blockTokens))
}

func (t *Table) promptHashes(c *scheduling.Cycle, blockTokens int) []uint64 {
	for i := range t.hashes {
		if t.hashes[i].blockTokens == blockTokens {
			return t.hashes[i].hashes
		}
	}
	seed := c.Request.Model
	if c.Request.Adapter != "" {
		seed = c.Request.Adapter
	}
	n := len(t.hashes)
	if n < cap(t.hashes) {
		t.hashes = t.hashes[:n+1]
	} else {
		t.hashes = append(t.hashes, promptHashes{})
	}
	t.hashes[n].blockTokens = blockTokens
	t.hashes[n].hashes = prefixindex.Hash(t.hashes[n].hashes[:0], seed, c.Request.Prompt, blockTokens*tokencount.CharsPerToken, t.MaxPrefixBlocks)
	return t.hashes[n].hashes
}

// Note records a constraint a filter applied (a region pin), so that a
// later filter that leaves nothing can say it.
func (t *Table) Note(s string) {
	if t != nil {
		t.notes = append(t.notes, s)
	}
}

// Reject records why a filter left no member: the reason, after the notes.
func (t *Table) Reject(reason string) {
	if t == nil {
		return
	}
	t.rejection = reason
	for i := len(t.notes) - 1; i >= 0; i-- {
		t.rejection = t.notes[i] + "; " + t.rejection
	}
}

// RejectEach records that a filter kept none of in: lead, then each
// candidate's member and why it was dropped. in must be intact (a filter that
// kept nothing has written nothing into it).
func (t *Table) RejectEach(lead string, in []*datastore.View, why func(s *State) string) {
	if t == nil {
		return
	}
	var sb strings.Builder
	sb.WriteString(lead)
	for i, v := range in {
		if i == 0 {
			sb.WriteString(": ")
		} else {
			sb.WriteString("; ")
		}
		if s := t.Of(v); s != nil {
			sb.WriteString(s.Name + " " + why(s))
		} else {
			sb.WriteString(v.Key + " (unknown member)")
		}
	}
	t.Reject(sb.String())
}

// Rejection is the reason recorded by Reject ("" when none was).
func (t *Table) Rejection() string { return t.rejection }

// ScoreByCost scores each candidate (best+tolerance)/(cost+tolerance): the
// cheapest scores 1, one twice as costly about 0.5. A candidate whose cost is
// unknown (ok false) scores 0 and takes no part in the best.
func ScoreByCost(cands []*datastore.View, scores []float64, tolerance float64, cost func(v *datastore.View) (float64, bool)) {
	best := math.Inf(1)
	for i, v := range cands {
		c, ok := cost(v)
		if !ok {
			scores[i] = math.NaN()
			continue
		}
		scores[i] = c
		best = min(best, c)
	}
	for i := range cands {
		if math.IsNaN(scores[i]) {
			scores[i] = 0
			continue
		}
		if d := scores[i] + tolerance; d > 0 {
			scores[i] = (best + tolerance) / d
		} else {
			scores[i] = 1 // free, and so is the best
		}
	}
}
