package member_test

import (
	"math"
	"strings"
	"testing"

	"github.com/igw-dev/igw/pkg/epp/datastore"
	"github.com/igw-dev/igw/pkg/epp/prefixindex"
	"github.com/igw-dev/igw/pkg/epp/scheduling"
	"github.com/igw-dev/igw/pkg/global/member"
	"github.com/igw-dev/igw/pkg/global/member/membertest"
	"github.com/igw-dev/igw/pkg/globalsummary"
)

func TestRejectSaysTheNotesFirst(t *testing.T) {
	c, _ := membertest.Decide(&scheduling.Request{Model: "m"})
	tb := member.From(c)
	tb.Note("model m is pinned to regions [a]")
	tb.Reject("no member cluster is in rotation: x down")
	if got := tb.Rejection(); got != "model m is pinned to regions [a]; no member cluster is in rotation: x down" {
		t.Fatalf("rejection %q", got)
	}
	tb.Reset("", 0, 0)
	if tb.Rejection() != "" {
		t.Fatal("Reset kept the rejection")
	}
	if member.From(scheduling.NewCycle(nil)) != nil {
		t.Fatal("a table outside the global picker")
	}
}

// TestMatchedTokensCapsAtThePrompt: the match never exceeds the prompt, and
// a member without a digest holds nothing.
func TestMatchedTokensCapsAtThePrompt(t *testing.T) {
	prompt := strings.Repeat("abcd", 128*3) // 3 blocks of 128 tokens, exactly
	m := membertest.Model("m")
	m.Digest = globalsummary.NewDigest(128, 3, 0)
	for _, h := range prefixindex.Hash(nil, "m", prompt, 512, 0) {
		m.Digest.Add(h)
	}
	c, views := membertest.Decide(&scheduling.Request{Model: "m", Prompt: prompt, PromptTokens: 300}, membertest.Member("a", "r", m, 0, membertest.Now), membertest.Member("b", "r", membertest.Model("m"), 0, membertest.Now))
	tb := member.From(c)
	if got := tb.MatchedTokens(c, views[0]); got != 300 {
		t.Fatalf("matched %d tokens of a 300-token prompt", got)
	}
	if got := tb.MatchedTokens(c, views[1]); got != 0 {
		t.Fatalf("matched %d without a digest", got)
	}
	if got := tb.PromptBlocks(c, 128); got != 3 {
		t.Fatalf("%d prompt blocks", got)
	}
}

func TestScoreByCost(t *testing.T) {
	views := []*datastore.View{{}, {}, {}, {}}
	costs := []float64{0.1, 0.2, -1, 0}
	scores := make([]float64, 4)
	member.ScoreByCost(views[:3], scores[:3], 0.1, func(v *datastore.View) (float64, bool) {
		i := 0
		for views[i] != v {
			i++
		}
		return costs[i], costs[i] >= 0
	})
	if scores[0] != 1 || math.Abs(scores[1]-2.0/3) > 1e-9 || scores[2] != 0 {
		t.Fatalf("scores %v", scores[:3])
	}
	member.ScoreByCost(views[3:], scores[3:], 0, func(*datastore.View) (float64, bool) { return 0, true })
	if scores[3] != 1 {
		t.Fatalf("a free candidate without tolerance scores %v", scores[3])
	}
}

func TestMetricsOf(t *testing.T) {
	m := membertest.Model("m")
	got := member.MetricsOf(m, membertest.Now)
	if !got.KVCacheKnown || got.KVCacheUsage != 0.5 || got.NumGPUBlocks*got.BlockSizeTokens != 100000 || !got.SampledAt.Equal(membertest.Now) {
		t.Fatalf("metrics %+v", got)
	}
	m.KVHeadroom = nil
	if got := member.MetricsOf(m, membertest.Now); got.KVCacheKnown {
		t.Fatal("unknown headroom became known KV use")
	}
}
