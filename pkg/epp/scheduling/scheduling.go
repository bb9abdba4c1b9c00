// Package scheduling is the picker's framework: filters narrow the candidate
// endpoints, weighted scorers rate each survivor in [0, 1], and a picker ranks
// them (the first is the destination, the next ones are fallbacks for retries).
// Plugins implement one narrow interface each and are built by type name from a
// Registry, so the configuration file can name them.
//
// The framework reads no clock and holds no locks: a Cycle carries the request,
// the decision time and the views of the endpoints, so the same code runs in
// the ext_proc server and in a virtual-time benchmark.
package scheduling

import (
	"math/rand/v2"
	"time"

	"github.com/igw-dev/igw/pkg/epp/datastore"
	"github.com/igw-dev/igw/pkg/epp/latency"
	"github.com/igw-dev/igw/pkg/epp/prefixindex"
	"github.com/igw-dev/igw/pkg/tokencount"
)

// Request is what the scheduler knows of one inference request.
type Request struct {
	// Model is the base model; Adapter the LoRA adapter the request names ("" for none).
	Model   string
	Adapter string
	// Prompt is the text the server will prefill (the prompt, or the chat
	// messages flattened), used for prefix affinity and work estimates.
	Prompt string
	// PromptTokens is the prompt's length in tokens; 0 means estimate from Prompt.
	PromptTokens int
	// Priority orders shedding: lower values are shed first when the fleet is saturated.
	Priority int
	// Subset, when not nil, lists the only "ip:port" endpoints allowed.
	Subset []string
	// Headers are the request headers (lower-case names), for plugins that route on them.
	Headers map[string]string
	// Body is the OpenAI request body when the caller has it, valid during
	// scheduling only: a scorer that tokenizes as the server does
	// (precise-prefix-cache) renders a chat from its messages.
	Body []byte
	// TokenIDs are the prompt's token IDs when the caller knows them (the
	// benchmark does); they spare tokenizing.
	TokenIDs []uint32
}

// Plugin is anything the configuration can name.
type Plugin interface {
	// Type is the kebab-case type name the plugin is registered under.
	Type() string
	// Name is the instance name given in the configuration (the type by default).
	Name() string
}

// Filter removes candidates that must not serve the request. It may reorder or
// reuse in's backing array.
type Filter interface {
	Plugin
	Filter(c *Cycle, in []*datastore.View) []*datastore.View
}

// Scorer writes a score in [0, 1] for each candidate into scores (same length
// as cands; higher is better).
type Scorer interface {
	Plugin
	Score(c *Cycle, cands []*datastore.View, scores []float64)
}

// Picker appends to dst up to n indices of cands, best first, using totals
// (the weighted sums of scores).
type Picker interface {
	Plugin
	Pick(c *Cycle, cands []*datastore.View, totals []float64, n int, dst []int) []int
}

// CacheReader is a plugin that knows exactly how much of the prompt some
// endpoints hold (precise-prefix-cache, from the servers' KV events). It
// records that in the cycle (SetCachedTokens) before the cycle's first
// judgement (Profile.ReadCache), so that the overload bounds, the scorers
// and the pick's accounting all price the prefill really left, and the
// approximate prefix index is consulted only for endpoints it does not know.
type CacheReader interface {
	Plugin
	ReadCache(c *Cycle, cands []*datastore.View)
}

// WeightedScorer is a scorer with the weight its scores are multiplied by.
type WeightedScorer struct {
	Scorer Scorer
	Weight float64
}

// PrefixSettings tells a cycle how to cut and look up the prompt.
type PrefixSettings struct {
	Index *prefixindex.Index
	// BlockTokens is the index's block size in tokens; the prompt is cut into
	// blocks of BlockTokens*tokencount.CharsPerToken characters.
	BlockTokens int
	// MaxBlocks bounds how much of a long prompt is hashed.
	MaxBlocks int
}

// Cycle is the scratch state of one scheduling decision. Plugins read it; the
// director owns and reuses it.
type Cycle struct {
	Now     time.Time
	Request *Request
	// PromptTokens is the request's prompt length in tokens (estimated when the
	// request did not say).
	PromptTokens int
	// Rand is the decision's random source (tie-breaks, sampling).
	Rand *rand.Rand
	// Latency is the configured timing model of the servers.
	Latency latency.Model
	// Data is what the caller attaches for its own plugins, untouched by
	// Reset: the global tier's table of member clusters. The endpoint picker
	// leaves it nil.
	Data any

	prefix      PrefixSettings
	hashes      []uint64
	matched     []int32
	slots       []int32
	prefixDone  bool
	longestHeld int
	// cached holds, by endpoint ID, cached tokens known exactly (-1: not
	// known; see SetCachedTokens).
	cached []int32
	// cacheRead: the profile's cache readers ran for this cycle.
	cacheRead bool
	// tokenized is the prompt's length as the server's tokenizer counts it,
	// when a cache reader tokenized it (0: not known).
	tokenized int

	views   []datastore.View
	cands   []*datastore.View
	raw     [][]float64 // per scorer, per candidate
	totals  []float64
	ranking []int
}

// NewCycle returns an empty cycle with its own random source.
func NewCycle(rng *rand.Rand) *Cycle { return &Cycle{Rand: rng} }

// Reset prepares the cycle for req at now.
func (c *Cycle) Reset(req *Request, now time.Time, prefix PrefixSettings) {
	c.Now, c.Request, c.prefix = now, req, prefix
	c.PromptTokens = req.PromptTokens
	if c.PromptTokens <= 0 {
		c.PromptTokens = tokencount.Estimate(req.Prompt)
	}
	c.hashes = c.hashes[:0]
	c.matched = c.matched[:0]
	c.slots = c.slots[:0]
	c.prefixDone = false
	c.longestHeld = 0
	c.cached = c.cached[:0]
	c.cacheRead, c.tokenized = false, 0
	c.cands = c.cands[:0]
	c.ranking = c.ranking[:0]
}

// Views returns n view slots owned by the cycle, reused from decision to
// decision: they hold the last decision's views, which
// datastore.EndpointState.View overwrites field by field.
func (c *Cycle) Views(n int) []datastore.View {
	if cap(c.views) < n {
		c.views = make([]datastore.View, n)
	}
	c.views = c.views[:n]
	return c.views
}

// PromptHashes returns the chained block hashes of the prompt (computed once).
func (c *Cycle) PromptHashes() []uint64 {
	if len(c.hashes) == 0 && c.prefix.BlockTokens > 0 && !c.prefixDone {
		seed := c.Request.Model
		if c.Request.Adapter != "" {
			seed = c.Request.Adapter
		}
		c.hashes = prefixindex.Hash(c.hashes, seed, c.Request.Prompt,
			c.prefix.BlockTokens*tokencount.CharsPerToken, c.prefix.MaxBlocks)
	}
	return c.hashes
}

func (c *Cycle) matchPrefix() {
	if c.prefixDone {
		return
	}
	hashes := c.PromptHashes()
	c.prefixDone = true
	if c.prefix.Index == nil || len(hashes) == 0 {
		return
	}
	maxID := c.prefix.Index.Endpoints()
	if cap(c.matched) < int(maxID) {
		c.matched = make([]int32, maxID)
	}
	c.matched = c.matched[:maxID]
	clear(c.matched)
	c.longestHeld, c.slots = c.prefix.Index.Match(hashes, c.matched, c.slots[:0])
}

// BlockTokens is the prefix block size in tokens.
func (c *Cycle) BlockTokens() int { return c.prefix.BlockTokens }

// RecordPick tells the prefix index that endpoint now holds the prompt.
func (c *Cycle) RecordPick(endpoint int32) {
	if c.prefix.Index != nil {
		c.prefix.Index.Add(endpoint, c.PromptHashes(), c.slots)
	}
}

// MaxPrefixTokens is how much of a prompt the approximate index keys at
// most (PrefixSettings.MaxBlocks blocks; 0: no bound).
func (c *Cycle) MaxPrefixTokens() int { return c.prefix.MaxBlocks * c.prefix.BlockTokens }

// PrefixBlocks is the number of full prompt blocks considered for affinity.
func (c *Cycle) PrefixBlocks() int { return len(c.PromptHashes()) }

// MatchedBlocks is how many leading prompt blocks endpoint v is believed to hold.
func (c *Cycle) MatchedBlocks(v *datastore.View) int {
	c.matchPrefix()
	if int(v.ID) < len(c.matched) {
		return int(c.matched[v.ID])
	}
	return 0
}

// CachedTokens is the prompt tokens endpoint v is believed to hold already:
// as set by SetCachedTokens, else from the approximate prefix index.
func (c *Cycle) CachedTokens(v *datastore.View) int {
	if cached, ok := c.ExactCachedTokens(v); ok {
		return min(cached, c.PromptTokens)
	}
	return min(c.MatchedBlocks(v)*c.prefix.BlockTokens, c.PromptTokens)
}

// ExactCachedTokens is the prompt tokens v holds as SetCachedTokens
// recorded it, and whether it did.
func (c *Cycle) ExactCachedTokens(v *datastore.View) (int, bool) {
	if id := int(v.ID); id >= 0 && id < len(c.cached) && c.cached[id] >= 0 {
		return int(c.cached[id]), true
	}
	return 0, false
}

// SetTokenizedPromptTokens records the prompt's length as the server's
// tokenizer counts it; TokenizedPromptTokens reads it (0: not known).
func (c *Cycle) SetTokenizedPromptTokens(n int) { c.tokenized = n }

// TokenizedPromptTokens is the prompt's length as a cache reader's tokenizer
// counted it, 0 when none tokenized it.
func (c *Cycle) TokenizedPromptTokens() int { return c.tokenized }

// SetCachedTokens records, for the rest of the cycle, the prompt tokens v
// holds as known exactly (the precise prefix-cache scorer, from the servers'
// KV events), so that the plugins after it price the prefill that is really
// left.
func (c *Cycle) SetCachedTokens(v *datastore.View, tokens int) {
	id := int(v.ID)
	if id < 0 {
		return
	}
	for len(c.cached) <= id {
		c.cached = append(c.cached, -1)
	}
	c.cached[id] = int32(max(tokens, 0))
}

// UncachedTokens is the prompt tokens endpoint v would have to prefill.
func (c *Cycle) UncachedTokens(v *datastore.View) int { return c.PromptTokens - c.CachedTokens(v) }
