package integration

import (
	"testing"

	"github.com/igw-dev/igw/pkg/sim"
	"github.com/igw-dev/igw/pkg/sim/simproc"
	"github.com/igw-dev/igw/pkg/tokenizer"
)

// TestPrefixCacheScorerPrefersCachedPrefix, through the ext_proc server and
// an OpenAI client: requests sharing a 2048-token system prompt follow the
// simulator that served it first, and that simulator reports the prompt as
// cached. Counter-cases: a prompt with a different system prompt, or one that
// shares less than minMatchTokens, gets no prefix score anywhere.
func TestPrefixCacheScorerPrefersCachedPrefix(t *testing.T) {
	opts := simproc.Options{Config: sim.Config{GPU: "H100", Model: "llama-3.1-8b"},
		Speedup: 10, ServedModelName: "m", Extra: []string{"--enable-prompt-tokens-details"}}
	a, b := simproc.Start(t, opts), simproc.Start(t, opts)
	d, s := pickerOver(t, `
plugins:
- {name: prefix, type: prefix-cache, parameters: {minMatchTokens: 512}}
scorers: [{plugin: prefix, weight: 1}]
`, a, b)
	scrapeAll(t, d, s) // the servers' KV block size fixes the index's before any pick
	c := startGateway(t, d).client()

	const systemTokens = 2048
	system := tokenizer.GenerateText(1, systemTokens)
	first := chat(t, c, system, tokenizer.GenerateText(100, 32))
	for i := range 6 {
		got := chat(t, c, system, tokenizer.GenerateText(uint64(101+i), 32))
		if got.Upstream != first.Upstream || term(got.Breakdown, "prefix") <= 0 {
			t.Fatalf("request %d with the cached system prompt went to %s (%s), want %s", i, got.Upstream, got.Breakdown, first.Upstream)
		}
		if cached := got.Usage.PromptTokensDetails.CachedTokens; cached < systemTokens-64 {
			t.Fatalf("the preferred simulator had %d of the %d system-prompt tokens cached", cached, systemTokens)
		}
	}

	shared := tokenizer.GenerateText(2, 256) // two index blocks, below minMatchTokens
	for i := range 4 {
		for name, sys := range map[string]string{
			"different system prompt": tokenizer.GenerateText(uint64(1000+i), systemTokens),
			"short shared prefix":     tokenizer.Join(shared, tokenizer.GenerateText(uint64(2000+i), systemTokens)),
		} {
			got := chat(t, c, sys, tokenizer.GenerateText(uint64(3000+i), 32))
			if p := term(got.Breakdown, "prefix"); p != 0 {
				t.Fatalf("%s %d: prefix score %v (%s), want 0", name, i, p, got.Breakdown)
			}
		}
	}
}
