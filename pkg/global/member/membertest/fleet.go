package membertest

import (
	"fmt"
	"math/rand/v2"
	"strings"

	"github.com/igw-dev/igw/pkg/epp/prefixindex"
	"github.com/igw-dev/igw/pkg/globalsummary"
	"github.com/igw-dev/igw/pkg/tokencount"
)

// BenchRegions are the eight regions the benchmarks' members spread over.
var BenchRegions = []string{"us-east-1", "us-east-2", "us-west-2", "eu-west-1", "eu-central-1", "ap-south-1", "ap-northeast-1", "sa-east-1"}

// BenchPrompts are n conversations of about 8k tokens each.
func BenchPrompts(n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = strings.Repeat(fmt.Sprintf("conversation %d: user asks, assistant answers at length. ", i), 600)[:8192*tokencount.CharsPerToken]
	}
	return out
}

// BenchModel is a busy member's summary entry of model for the benchmarks:
// load drawn from rng, and a digest of 20,000 blocks (a 256 Ki-bit filter),
// lead of them the leading 128-token blocks of prompt, the rest random.
func BenchModel(rng *rand.Rand, model, prompt string, lead int) globalsummary.Model {
	kv := 0.2 + 0.6*rng.Float64()
	e := globalsummary.Model{Model: model, Endpoints: 8, ReadyEndpoints: 8, Waiting: rng.IntN(20), Running: 50 + rng.IntN(100),
		QueuedPrefillTokens: float64(rng.IntN(100000)), PrefillTokensPerSecond: 160000, EndpointPrefillTokensPerSecond: 20000,
		DecodeStepSeconds: 0.012, KVHeadroom: &kv, KVCapacityTokens: 8_000_000, ErrorRate: 0.01 * rng.Float64(), Requests: 500}
	e.Digest = globalsummary.NewDigest(128, 20000, globalsummary.DefaultMaxDigestBits)
	for range 20000 - 64 {
		e.Digest.Add(rng.Uint64())
	}
	for _, h := range prefixindex.Hash(nil, model, prompt, 128*tokencount.CharsPerToken, 256)[:lead] {
		e.Digest.Add(h)
	}
	return e
}
