package preciseprefixcache_test

import (
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/igw-dev/igw/pkg/epp/config"
	"github.com/igw-dev/igw/pkg/epp/datastore"
	"github.com/igw-dev/igw/pkg/epp/kvevents"
	"github.com/igw-dev/igw/pkg/epp/prefixindex"
	"github.com/igw-dev/igw/pkg/epp/scheduling"
	"github.com/igw-dev/igw/pkg/epp/scheduling/plugins"
	"github.com/igw-dev/igw/pkg/epp/scheduling/plugins/preciseprefixcache"
	"github.com/igw-dev/igw/pkg/tokenizer"
)

// bytes4 tokenizes as the simulator does (four bytes of text per token:
// the stand-in tokenizer it uses), so that tests can build prompts and events
// alike without running the simulator.
type bytes4 struct{}

func (bytes4) AppendPromptTokens(dst []uint32, _ []byte, text string) ([]uint32, error) {
	return tokenizer.AppendTokens(dst, text), nil
}

func init() { kvevents.RegisterTokenizer("test-bytes4", bytes4{}) }

func newScorer(t testing.TB, params string) *preciseprefixcache.Scorer {
	t.Helper()
	p, err := preciseprefixcache.New("precise", scheduling.Parameters(params))
	if err != nil {
		t.Fatal(err)
	}
	return p.(*preciseprefixcache.Scorer)
}

// storedPrompt is the event a pod sends after computing the first n blocks
// of tokens (engine hashes made up per pod, as real engines' differ).
func storedPrompt(pod int, tokens []uint32, blocks int) []kvevents.Event {
	hashes := make([]uint64, blocks)
	for i := range hashes {
		hashes[i] = uint64(pod)<<40 | uint64(tokens[0])<<8 | uint64(i)
	}
	return []kvevents.Event{{Kind: kvevents.BlockStored, Hashes: hashes, Tokens: tokens[:16*blocks], BlockSize: 16}}
}

// promptFixture is a profile of one scorer with params bound to a hub, a
// feed of that hub to publish pods' events on, and a 256-token prompt with
// its tokens, at now.
func promptFixture(t *testing.T, params string) (prof *scheduling.Profile, feed *kvevents.Feed, prompt string, toks []uint32, now time.Time) {
	t.Helper()
	hub := kvevents.NewHub(nil)
	t.Cleanup(hub.Close)
	prof = &scheduling.Profile{Scorers: []scheduling.WeightedScorer{{Scorer: newScorer(t, params), Weight: 1}}}
	preciseprefixcache.BindAll(prof, hub)
	prompt = strings.Repeat("abcdefghijklmnop", 64) // 256 tokens
	toks, _ = bytes4{}.AppendPromptTokens(nil, nil, prompt)
	return prof, hub.NewFeed(0), prompt, toks, time.Unix(100, 0)
}

func TestNewValidates(t *testing.T) {
	for _, bad := range []string{
		`{"eventsPort":0}`, `{"replayPort":5557}`, `{"blockSize":0}`, `{"minMatchTokens":0}`,
		`{"resyncSeconds":0}`, `{"tokenizers":{"m":"no-such-tokenizer"}}`, `{"tokenizers":{"m":"hf:/nonexistent/tokenizer.json"}}`,
		`{"unknown":1}`,
	} {
		if _, err := preciseprefixcache.New("p", scheduling.Parameters(bad)); err == nil {
			t.Errorf("%s accepted", bad)
		}
	}
	_, err := preciseprefixcache.New("p", scheduling.Parameters(`{"tokenizers":{"m":"nope"}}`))
	if err == nil || !strings.Contains(err.Error(), "test-bytes4") {
		t.Errorf("an unknown tokenizer's error should list the registered ones: %v", err)
	}
	s := newScorer(t, `{"replayPort":0,"topic":"kv-events"}`)
	if c := s.StreamConfig(); c.EventsPort != 5557 || c.ReplayPort != 0 || c.Topic != "kv-events" || c.BlockSize != 16 {
		t.Errorf("stream config %+v", c)
	}
}

// TestScoreExactAndFallback: exact pods score what they hold; a pod without
// a stream is scored from the approximate index; a request that cannot be
// tokenized is scored approximately everywhere.
func TestScoreExactAndFallback(t *testing.T) {
	s := newScorer(t, `{"minMatchTokens":32,"tokenizers":{"m":"test-bytes4"}}`)
	hub := kvevents.NewHub(nil)
	defer hub.Close()
	prof := &scheduling.Profile{Scorers: []scheduling.WeightedScorer{{Scorer: s, Weight: 1}}}
	if n := preciseprefixcache.BindAll(prof, hub); n != 1 || !hub.Configured() {
		t.Fatalf("bound %d scorers", n)
	}
	prompt := strings.Repeat("abcdefghijklmnop", 64) // 256 tokens, 16 blocks
	var toks []uint32
	toks, _ = bytes4{}.AppendPromptTokens(toks, nil, prompt)
	feed := hub.NewFeed(0)
	now := time.Unix(100, 0)
	feed.Publish("10.0.0.1:8000", now, storedPrompt(1, toks, 12)) // 192 of 256 tokens
	feed.Publish("10.0.0.2:8000", now, storedPrompt(2, toks, 1))  // below minMatchTokens

	approx := prefixindex.New(1000)
	views := []datastore.View{{ID: 0, Key: "10.0.0.1:8000"}, {ID: 1, Key: "10.0.0.2:8000"}, {ID: 2, Key: "10.0.0.3:8000"}}
	cands := []*datastore.View{&views[0], &views[1], &views[2]}
	settings := scheduling.PrefixSettings{Index: approx, BlockTokens: 16, MaxBlocks: 256}
	score := func(req *scheduling.Request) []float64 {
		c := scheduling.NewCycle(rand.New(rand.NewPCG(1, 1)))
		c.Reset(req, now, settings)
		out := make([]float64, len(cands))
		prof.ReadCache(c, cands)
		s.Score(c, cands, out)
		return out
	}
	// The approximate index believes pod 3 holds the prompt (it was sent there).
	for _, model := range []string{"m", "unknown"} {
		c := scheduling.NewCycle(rand.New(rand.NewPCG(1, 1)))
		c.Reset(&scheduling.Request{Model: model, Prompt: prompt}, now, settings)
		c.RecordPick(2)
	}

	got := score(&scheduling.Request{Model: "m", Prompt: prompt})
	if got[0] != 0.75 || got[1] != 0 || got[2] != 1 {
		t.Fatalf("scores %v, want [0.75 0 1]: exact 192/256, exact below the minimum, approximate full", got)
	}
	if ids := score(&scheduling.Request{Model: "other", Prompt: "x", TokenIDs: toks}); ids[0] != 0.75 {
		t.Fatalf("with token IDs given: %v", ids)
	}
	// No tokenizer for the model: every pod from the approximate index.
	if got := score(&scheduling.Request{Model: "unknown", Prompt: prompt}); got[0] != 0 || got[2] != 1 {
		t.Fatalf("untokenizable request: %v, want the approximate scores [0 0 1]", got)
	}
	// An adapter's blocks are another chain.
	if got := score(&scheduling.Request{Model: "m", Adapter: "sql", Prompt: prompt}); got[0] != 0 {
		t.Fatalf("adapter request matched base-model blocks: %v", got)
	}
	// Evicted blocks stop counting.
	feed.Publish("10.0.0.1:8000", now, []kvevents.Event{{Kind: kvevents.BlockRemoved, Hashes: storedPrompt(1, toks, 12)[0].Hashes[4:]}})
	if got := score(&scheduling.Request{Model: "m", Prompt: prompt}); got[0] != 0.25 {
		t.Fatalf("after evicting blocks 4..11: %v, want 0.25", got)
	}
	if n := preciseprefixcache.BindAll(&scheduling.Profile{}, hub); n != 0 || hub.Configured() {
		t.Fatal("a profile without the scorer left the hub configured")
	}
}

// Before the cycle's first judgement, the scorer hands what exact pods hold
// to everything after it (the cycle's cached tokens, which admission and
// predicted-latency price); a pod without a stream keeps the approximate
// index's belief.
func TestReadCacheSetsCycleCachedTokens(t *testing.T) {
	prof, feed, prompt, toks, now := promptFixture(t, `{"tokenizers":{"m":"test-bytes4"}}`)
	feed.Publish("10.0.0.1:8000", now, storedPrompt(1, toks, 3)) // 48 tokens
	feed.Follow("10.0.0.2:8000")                                 // exact, holds nothing

	approx := prefixindex.New(1000)
	settings := scheduling.PrefixSettings{Index: approx, BlockTokens: 16, MaxBlocks: 256}
	views := []datastore.View{{ID: 0, Key: "10.0.0.1:8000"}, {ID: 1, Key: "10.0.0.2:8000"}, {ID: 2, Key: "10.0.0.3:8000"}}
	c := scheduling.NewCycle(rand.New(rand.NewPCG(1, 1)))
	c.Reset(&scheduling.Request{Model: "m", Prompt: prompt}, now, settings)
	for i := range views { // the router sent the prompt everywhere, as far as it knows
		c.RecordPick(int32(i))
	}
	c.Reset(&scheduling.Request{Model: "m", Prompt: prompt}, now, settings)
	if got := c.CachedTokens(&views[0]); got != 256 {
		t.Fatalf("approximate belief %d tokens, want 256", got)
	}
	prof.ReadCache(c, []*datastore.View{&views[0], &views[1], &views[2]})
	if a, b, x := c.CachedTokens(&views[0]), c.CachedTokens(&views[1]), c.CachedTokens(&views[2]); a != 48 || b != 0 || x != 256 {
		t.Fatalf("cached tokens after reading the cache %d, %d, %d; want 48 and 0 (exact), 256 (approximate)", a, b, x)
	}
	if got := c.TokenizedPromptTokens(); got != 256 {
		t.Fatalf("tokenized prompt %d tokens, want 256", got)
	}
	c.Reset(&scheduling.Request{Model: "m", Prompt: prompt}, now, settings)
	if got := c.CachedTokens(&views[0]); got != 256 {
		t.Fatalf("a new cycle kept the exact figure: %d", got)
	}
}

// TestKeysAsFarAsTheApproximateIndex: the scorer keys a prompt up to its
// own bound, or as far as the approximate index does where that is more
// (a share of the largest server cache), so that where caches hold long
// prompts whole, the pod holding more of one is told from the pod holding
// less.
func TestKeysAsFarAsTheApproximateIndex(t *testing.T) {
	prof, feed, prompt, toks, now := promptFixture(t, `{"tokenizers":{"m":"test-bytes4"},"maxPromptTokens":64}`)
	feed.Publish("10.0.0.1:8000", now, storedPrompt(1, toks, 12)) // 192 tokens
	feed.Publish("10.0.0.2:8000", now, storedPrompt(2, toks, 6))  // 96 tokens
	views := []datastore.View{{ID: 0, Key: "10.0.0.1:8000"}, {ID: 1, Key: "10.0.0.2:8000"}}
	for _, tc := range []struct {
		approxBlocks int // of 16 tokens
		want         [2]int
	}{{4, [2]int{64, 64}}, {16, [2]int{192, 96}}} {
		c := scheduling.NewCycle(rand.New(rand.NewPCG(1, 1)))
		c.Reset(&scheduling.Request{Model: "m", Prompt: prompt}, now, scheduling.PrefixSettings{Index: prefixindex.New(1000), BlockTokens: 16, MaxBlocks: tc.approxBlocks})
		prof.ReadCache(c, []*datastore.View{&views[0], &views[1]})
		if got := [2]int{c.CachedTokens(&views[0]), c.CachedTokens(&views[1])}; got != tc.want {
			t.Fatalf("approximate index keyed to %d tokens: the pods hold %v tokens as scored, want %v", 16*tc.approxBlocks, got, tc.want)
		}
	}
}

// DefaultConfig is igw's default with the precise scorer first: the same
// filters, picker and other scorers at the same weights.
func TestDefaultConfigIsTheDefaultPlusThePreciseScorer(t *testing.T) {
	reg := plugins.NewRegistry()
	base, err := config.Load([]byte(config.Default), reg)
	if err != nil {
		t.Fatal(err)
	}
	p, err := config.Load([]byte(preciseprefixcache.DefaultConfig(`{blockSize: 32, minMatchTokens: 64}`)), reg)
	if err != nil {
		t.Fatal(err)
	}
	type scorer struct {
		typ    string
		weight float64
	}
	scorers := func(prof *scheduling.Profile) (out []scorer) {
		for _, ws := range prof.Scorers {
			out = append(out, scorer{ws.Scorer.Type(), ws.Weight})
		}
		return out
	}
	want := append([]scorer{{preciseprefixcache.Type, 1}}, scorers(base.Profile)...)
	if got := scorers(p.Profile); !slices.Equal(got, want) {
		t.Errorf("scorers %v, want %v", got, want)
	}
	if len(p.Profile.Filters) != len(base.Profile.Filters) || p.Profile.Filters[0].Type() != base.Profile.Filters[0].Type() ||
		p.Profile.Picker.Type() != base.Profile.Picker.Type() {
		t.Errorf("filters %v and picker %s, want the default's %v and %s", p.Profile.Filters, p.Profile.Picker.Type(),
			base.Profile.Filters, base.Profile.Picker.Type())
	}
	if s := p.Profile.Scorers[0].Scorer.(*preciseprefixcache.Scorer); s.StreamConfig().BlockSize != 32 {
		t.Errorf("the parameters given were not the scorer's: block size %d", s.StreamConfig().BlockSize)
	}
}
