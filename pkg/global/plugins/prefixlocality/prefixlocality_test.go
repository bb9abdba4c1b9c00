package prefixlocality

import (
	"strings"
	"testing"

	"github.com/igw-dev/igw/pkg/epp/prefixindex"
	"github.com/igw-dev/igw/pkg/epp/scheduling"
	"github.com/igw-dev/igw/pkg/epp/scheduling/plugins/plugintest"
	"github.com/igw-dev/igw/pkg/global/member"
	"github.com/igw-dev/igw/pkg/global/member/membertest"
	"github.com/igw-dev/igw/pkg/globalsummary"
	"github.com/igw-dev/igw/pkg/tokencount"
)

func holding(hashes []uint64, blockTokens int) *globalsummary.Model {
	m := membertest.Model("llama")
	m.Digest = globalsummary.NewDigest(blockTokens, len(hashes), 0)
	for _, h := range hashes {
		m.Digest.Add(h)
	}
	return m
}

// TestScoresTheShareHeld: a member holding 6 of the prompt's 8 blocks scores
// 0.75, one holding a single 64-token block (under minMatchTokens) 0, one holding the
// same conversation of another model 0, one with its own block size is
// matched at that size.
func TestScoresTheShareHeld(t *testing.T) {
	prompt := strings.Repeat("turn one. turn two. ", 1000)[:8*128*tokencount.CharsPerToken+50]
	h128 := prefixindex.Hash(nil, "llama", prompt, 128*tokencount.CharsPerToken, 256)
	h64 := prefixindex.Hash(nil, "llama", prompt, 64*tokencount.CharsPerToken, 256)
	h256 := prefixindex.Hash(nil, "llama", prompt, 256*tokencount.CharsPerToken, 256)
	other := prefixindex.Hash(nil, "qwen", prompt, 128*tokencount.CharsPerToken, 256)
	states := []member.State{
		membertest.Ready("six", "r", holding(h128[:6], 128)),
		membertest.Ready("one", "r", holding(h64[:1], 64)),
		membertest.Ready("qwen", "r", holding(other, 128)),
		membertest.Ready("big", "r", holding(h256[:2], 256)),
		membertest.Ready("none", "r", membertest.Model("llama")),
	}
	s, _ := New(Type, nil)
	c, views := membertest.Decide(&scheduling.Request{Model: "llama", Prompt: prompt}, states...)
	got := plugintest.Scores(s.(*Scorer), c, views)
	want := []float64{0.75, 0, 0, 0.5, 0}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("%s scores %v, want %v", states[i].Name, got[i], want[i])
		}
	}
	// Without the minimum, the single block counts: 1 of the prompt's 16 blocks of 64 tokens.
	all, _ := New(Type, scheduling.Parameters(`{"minMatchTokens":0}`))
	if got := plugintest.Scores(all.(*Scorer), c, views); got[1] != 1.0/16 {
		t.Errorf("without a minimum, one block of 16 scores %v", got[1])
	}
	// An adapter's prompt is hashed with the adapter's name, as the member's picker does.
	c, views = membertest.Decide(&scheduling.Request{Model: "llama", Adapter: "sql", Prompt: prompt}, states...)
	if got := plugintest.Scores(s.(*Scorer), c, views); got[0] != 0 {
		t.Errorf("the base model's blocks matched an adapter's prompt: %v", got[0])
	}
}

// minMatchTokens 0 means no minimum; a negative one is a mistake.
func TestRejectsNegativeMinimum(t *testing.T) {
	if _, err := New(Type, scheduling.Parameters(`{"minMatchTokens": 0}`)); err != nil {
		t.Errorf("no minimum rejected: %v", err)
	}
	if _, err := New(Type, scheduling.Parameters(`{"minMatchTokens": -1}`)); err == nil {
		t.Error("a negative minimum accepted")
	}
}
