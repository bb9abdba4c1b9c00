package grid

import (
	"fmt"
	"strings"

	"github.com/igw-dev/igw/pkg/bench"
	"github.com/igw-dev/igw/pkg/bench/policies"
)

// llmdScenario is the public scenario that rebuilds llm-d's published
// precise-prefix-cache benchmark.
const llmdScenario = "llm-d-precise-prefix"

// llmdPublished are llm-d's published figures: P90 TTFT (s) and output tok/s.
var llmdPublished = []struct {
	name      string
	p90, toks float64
}{{"llm-d precise", 0.542, 8730}, {"llm-d approximate", 31.1, 6944}, {"llm-d random", 92.6, 4429}}

// llmdPage sets the reproduction's figures beside the published ones: P90
// TTFT (every seed's requests pooled), its ratio to random's, and output
// throughput (median over seeds).
func (r *Result) llmdPage(w *strings.Builder) {
	rep := r.report(llmdScenario)
	if rep == nil {
		return
	}
	ttfts := r.TTFTs[llmdScenario]
	random := bench.Percentile(ttfts[policies.Random], 90)
	fmt.Fprintf(w, "## llm-d precise-prefix reproduction\n\n"+
		"`%s` rebuilt from llm-d's published facts; the published rows are theirs (P90 TTFT "+
		"random/precise = 170.8×). Ours: P90 TTFT over every seed's requests pooled, output tok/s the median over seeds.\n\n", r.file(r.scenario(llmdScenario)))
	w.WriteString("| policy | P90 TTFT (s) | random P90 / this P90 | output tok/s |\n|---|---:|---:|---:|\n")
	for _, p := range llmdPublished {
		fmt.Fprintf(w, "| %s (published) | %.3g | %.1f× | %.0f |\n", p.name, p.p90, llmdPublished[2].p90/p.p90, p.toks)
	}
	for _, p := range r.Options.Policies {
		m, ok := rep.Summary[p]
		if !ok {
			continue
		}
		p90 := bench.Percentile(ttfts[p], 90)
		ratio := "–"
		if p90 > 0 && random > 0 {
			ratio = fmt.Sprintf("%.1f×", random/p90)
		}
		fmt.Fprintf(w, "| %s | %.3g | %s | %.0f |\n", p, p90, ratio, m.OutputTokPerS)
	}
	w.WriteString("\n")
}
