package scheduling

import (
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/igw-dev/igw/pkg/epp/datastore"
	"github.com/igw-dev/igw/pkg/epp/prefixindex"
)

func TestResetEstimatesPromptTokensOnlyWhenUnknown(t *testing.T) {
	c := NewCycle(rand.New(rand.NewPCG(1, 1)))
	c.Reset(&Request{Prompt: strings.Repeat("x", 40)}, time.Unix(0, 0), PrefixSettings{})
	if c.PromptTokens != 10 {
		t.Errorf("estimated %d prompt tokens for 40 characters, want 10", c.PromptTokens)
	}
	c.Reset(&Request{Prompt: strings.Repeat("x", 40), PromptTokens: 3}, time.Unix(0, 0), PrefixSettings{})
	if c.PromptTokens != 3 {
		t.Errorf("prompt tokens %d, want the request's 3", c.PromptTokens)
	}
}

// prefixCycle is a cycle on ix with blocks of 4 tokens (16 characters).
func prefixCycle(c *Cycle, req *Request, ix *prefixindex.Index) *Cycle {
	if c == nil {
		c = NewCycle(rand.New(rand.NewPCG(1, 1)))
	}
	c.Reset(req, time.Unix(0, 0), PrefixSettings{Index: ix, BlockTokens: 4, MaxBlocks: 8})
	return c
}

// An endpoint that was recorded as holding a prompt matches the blocks a
// later prompt shares with it; the cached and uncached token counts follow.
func TestPrefixMatchAfterRecordPick(t *testing.T) {
	ix := prefixindex.New(100)
	system := strings.Repeat("s", 48) // three blocks
	first := &Request{Model: "m", Prompt: system + strings.Repeat("a", 32)}
	c := prefixCycle(nil, first, ix)
	if got := c.PrefixBlocks(); got != 5 {
		t.Fatalf("%d prompt blocks, want 5", got)
	}
	c.RecordPick(1)

	vs := []*datastore.View{{ID: 0}, {ID: 1}, {ID: 7}}
	c = prefixCycle(c, &Request{Model: "m", Prompt: system + strings.Repeat("b", 30)}, ix) // reused
	if c.BlockTokens() != 4 || c.PrefixBlocks() != 4 {
		t.Fatalf("block tokens %d, prompt blocks %d; want 4 and 4 (the partial block is not hashed)", c.BlockTokens(), c.PrefixBlocks())
	}
	for i, want := range []int{0, 3, 0} {
		if got := c.MatchedBlocks(vs[i]); got != want {
			t.Errorf("endpoint %d matches %d blocks, want %d", vs[i].ID, got, want)
		}
	}
	if c.PromptTokens != 20 || c.CachedTokens(vs[1]) != 12 || c.UncachedTokens(vs[1]) != 8 || c.UncachedTokens(vs[0]) != 20 {
		t.Errorf("prompt %d, cached %d, uncached %d (holder) and %d (other); want 20, 12, 8, 20",
			c.PromptTokens, c.CachedTokens(vs[1]), c.UncachedTokens(vs[1]), c.UncachedTokens(vs[0]))
	}
	// A LoRA adapter computes different KV: the same text for an adapter
	// matches nothing the base model left.
	c = prefixCycle(c, &Request{Model: "m", Adapter: "sql", Prompt: system + strings.Repeat("b", 30)}, ix)
	if got := c.MatchedBlocks(vs[1]); got != 0 {
		t.Errorf("adapter request matches %d base-model blocks, want 0", got)
	}
}

// Without a block size nothing is hashed or matched.
func TestNoPrefixSettings(t *testing.T) {
	c := NewCycle(rand.New(rand.NewPCG(1, 1)))
	c.Reset(&Request{Model: "m", Prompt: strings.Repeat("s", 400)}, time.Unix(0, 0), PrefixSettings{})
	v := &datastore.View{}
	if c.PrefixBlocks() != 0 || c.MatchedBlocks(v) != 0 || c.UncachedTokens(v) != 100 {
		t.Fatalf("blocks %d, matched %d, uncached %d; want 0, 0, 100", c.PrefixBlocks(), c.MatchedBlocks(v), c.UncachedTokens(v))
	}
	c.RecordPick(0) // no index: nothing to record, no panic
}

func TestViewsReusesItsSlots(t *testing.T) {
	c := NewCycle(nil)
	a := c.Views(4)
	b := c.Views(2)
	if len(a) != 4 || len(b) != 2 || &a[0] != &b[0] {
		t.Fatalf("views %d then %d, same backing %v; want 4, 2, true", len(a), len(b), &a[0] == &b[0])
	}
	if got := len(c.Views(8)); got != 8 {
		t.Fatalf("grown to %d views, want 8", got)
	}
}

func keysOf(vs []*datastore.View) string {
	keys := make([]string, len(vs))
	for i, v := range vs {
		keys[i] = v.Key
	}
	return strings.Join(slices.Clip(keys), "")
}
