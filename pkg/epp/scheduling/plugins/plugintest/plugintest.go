// Package plugintest builds the cycles and endpoint views that the plugin
// packages' tests run their plugins on, so that each test states only the
// endpoints' state and the expected outcome.
package plugintest

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/igw-dev/igw/pkg/epp/datastore"
	"github.com/igw-dev/igw/pkg/epp/latency"
	"github.com/igw-dev/igw/pkg/epp/prefixindex"
	"github.com/igw-dev/igw/pkg/epp/scheduling"
)

// T0 is the decision time of every cycle and the sample time of every view.
var T0 = time.Unix(1000, 0)

// BlockTokens is the prefix block size of the cycles Cycle returns.
const BlockTokens = 16

// Cycle returns a cycle for req at T0 with a fixed random seed and the default
// timing model; ix (nil for none) is its prefix index, cut in BlockTokens blocks.
func Cycle(req *scheduling.Request, ix *prefixindex.Index) *scheduling.Cycle {
	c := scheduling.NewCycle(rand.New(rand.NewPCG(7, 7)))
	c.Reset(req, T0, scheduling.PrefixSettings{Index: ix, BlockTokens: BlockTokens, MaxBlocks: 512})
	c.Latency = latency.DefaultModel
	return c
}

// Views returns one view per sample, with IDs 0, 1, ... and keys "a", "b", ...,
// each sampled at T0.
func Views(samples ...datastore.Metrics) []*datastore.View {
	out := make([]*datastore.View, len(samples))
	for i, m := range samples {
		m.SampledAt = T0
		out[i] = &datastore.View{ID: int32(i), Key: string(rune('a' + i)), Metrics: m, HasMetrics: true}
	}
	return out
}

// KVSample is a sample of an endpoint whose KV cache of 100 blocks of 16
// tokens is used to the given share.
func KVSample(usage float64) datastore.Metrics {
	return datastore.Metrics{KVCacheKnown: true, KVCacheUsage: usage, NumGPUBlocks: 100, BlockSizeTokens: 16}
}

// New builds a plugin with factory from params (JSON; "" for the defaults),
// failing t if the factory refuses them, and returns it as a T.
func New[T scheduling.Plugin](t testing.TB, factory scheduling.Factory, params string) T {
	t.Helper()
	p, err := factory("test", scheduling.Parameters(params))
	if err != nil {
		t.Fatal(err)
	}
	typed, ok := p.(T)
	if !ok {
		t.Fatalf("%T is not a %T", p, *new(T))
	}
	return typed
}

// Score builds a scorer with factory from params and scores cands for req.
func Score(t testing.TB, factory scheduling.Factory, params string, req *scheduling.Request, cands []*datastore.View) []float64 {
	t.Helper()
	return Scores(New[scheduling.Scorer](t, factory, params), Cycle(req, nil), cands)
}

// Scores runs s on cands in c and returns the scores.
func Scores(s scheduling.Scorer, c *scheduling.Cycle, cands []*datastore.View) []float64 {
	out := make([]float64, len(cands))
	s.Score(c, cands, out)
	return out
}

// Keys joins the keys of vs, e.g. "ac" for the first and third of Views.
func Keys(vs []*datastore.View) string {
	var out []byte
	for _, v := range vs {
		out = append(out, v.Key...)
	}
	return string(out)
}

// TenantPrompts returns n prompts of about 8k tokens (32k characters) in 16
// groups sharing a 6k-character system prompt, like a multi-tenant fleet; the
// same n prompts on every call, so that benchmarks compare like with like.
func TenantPrompts(n int) []string {
	rng := rand.New(rand.NewPCG(1, 1))
	var groups []string
	for g := range 16 {
		groups = append(groups, strings.Repeat(fmt.Sprintf("tenant %d system prompt. ", g), 250)[:6000])
	}
	out := make([]string, n)
	for i := range out {
		var sb strings.Builder
		sb.WriteString(groups[rng.IntN(len(groups))])
		for sb.Len() < 32768 {
			fmt.Fprintf(&sb, "user text %d ", rng.Uint64())
		}
		out[i] = sb.String()[:32768]
	}
	return out
}
