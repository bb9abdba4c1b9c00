package predictedttft

import (
	"math"
	"strings"
	"testing"
	"time"

	"github.com/igw-dev/igw/pkg/epp/prefixindex"
	"github.com/igw-dev/igw/pkg/epp/scheduling"
	"github.com/igw-dev/igw/pkg/epp/scheduling/plugins/plugintest"
	"github.com/igw-dev/igw/pkg/global/member/membertest"
	"github.com/igw-dev/igw/pkg/globalsummary"
	"github.com/igw-dev/igw/pkg/tokencount"
)

// TestPredictionTerms checks each term on its own: round trip, the queue
// drained since the summary plus the hub's sends, the own prompt less what
// the digest holds, and the decode step.
func TestPredictionTerms(t *testing.T) {
	prompt := strings.Repeat("x", 4000*tokencount.CharsPerToken) // 4000 tokens
	m := membertest.Model("llama")                               // 20k tokens/s, step 10 ms, KV half free
	m.QueuedPrefillTokens, m.PrefillTokensPerSecond = 40000, 40000
	hashes := prefixindex.Hash(nil, "llama", prompt, 128*tokencount.CharsPerToken, 256)
	m.Digest = globalsummary.NewDigest(128, 100, 0)
	for _, h := range hashes[:10] { // the member holds 1280 tokens of the prompt
		m.Digest.Add(h)
	}
	s := membertest.Member("a", "r", m, 40*time.Millisecond, membertest.Now.Add(-500*time.Millisecond))
	s.SentTokens = 20000
	c, views := membertest.Decide(&scheduling.Request{Model: "llama", Prompt: prompt}, s)
	got, ok := Predict(c, views[0], 0)
	// 0.04 + (40000 + 20000 - 40000×0.5)/40000 + (4000-1280)/20000 + 0.01
	want := 0.04 + 1 + 0.136 + 0.01
	if !ok || math.Abs(got-want) > 1e-9 {
		t.Fatalf("predicted %v (%v), want %v", got, ok, want)
	}
	s.Summary = nil
	c, views = membertest.Decide(&scheduling.Request{Model: "llama", Prompt: prompt}, s)
	if _, ok := Predict(c, views[0], 0); ok {
		t.Fatal("predicted without a summary")
	}
}

// TestNetworkAgainstQueue: an idle member 80 ms away beats a near one with a
// second of queued work; with a short queue the near one wins.
func TestNetworkAgainstQueue(t *testing.T) {
	sc := plugintest.New[*Scorer](t, New, "")
	busy, idle := membertest.Model("m"), membertest.Model("m")
	busy.QueuedPrefillTokens = 20000
	near := membertest.Member("near", "r1", busy, 2*time.Millisecond, membertest.Now)
	far := membertest.Member("far", "r2", idle, 80*time.Millisecond, membertest.Now)
	c, views := membertest.Decide(&scheduling.Request{Model: "m", PromptTokens: 500}, near, far)
	if sc := plugintest.Scores(sc, c, views); !(sc[1] == 1 && sc[0] < 0.2) {
		t.Fatalf("scores near %v far %v: the far idle member should win", sc[0], sc[1])
	}
	busy.QueuedPrefillTokens = 200
	c, views = membertest.Decide(&scheduling.Request{Model: "m", PromptTokens: 500}, near, far)
	if sc := plugintest.Scores(sc, c, views); !(sc[0] == 1 && sc[1] < 0.5) {
		t.Fatalf("scores near %v far %v: the near member should win", sc[0], sc[1])
	}
}

// TestUnknownRTTAndStale: an unmeasured member is assumed as far as the
// farthest measured one; a stale one scores 0.
func TestUnknownRTTAndStale(t *testing.T) {
	sc := plugintest.New[*Scorer](t, New, "")
	a := membertest.Member("a", "r", membertest.Model("m"), 50*time.Millisecond, membertest.Now)
	b := membertest.Member("b", "r", membertest.Model("m"), 0, membertest.Now)
	c, views := membertest.Decide(&scheduling.Request{Model: "m", PromptTokens: 100}, a, b)
	if got := UnknownRTT(c, views, 9); got != 0.05 {
		t.Fatalf("unknown RTT %v, want the measured 0.05", got)
	}
	if s := plugintest.Scores(sc, c, views); s[0] != s[1] || s[0] != 1 {
		t.Fatalf("scores %v", s)
	}
	views[0].Stale = true
	if s := plugintest.Scores(sc, c, views); s[0] != 0 || s[1] != 1 {
		t.Fatalf("with a stale member: %v", s)
	}
	if _, err := New(Type, scheduling.Parameters(`{"unknownRTTSeconds":-1}`)); err == nil {
		t.Fatal("negative RTT accepted")
	}
}
