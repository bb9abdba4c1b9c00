package workload

import (
	"strings"
	"time"

	"github.com/igw-dev/igw/internal/splitmix"
	"github.com/igw-dev/igw/pkg/bench/scenario"
	"github.com/igw-dev/igw/pkg/tokenizer"
)

// traceArrivals releases a trace's requests at their (scaled) times, up to the
// scenario's duration, which a shortened or rate-scaled run moves.
type traceArrivals struct {
	trace   *scenario.Trace
	horizon time.Duration
	i       int // the record next() returns next
	cur     int // the record of the last arrival returned
}

func (t *traceArrivals) next() (time.Duration, bool) {
	if t.i >= len(t.trace.Records) {
		return 0, false
	}
	at := t.trace.Arrival(&t.trace.Records[t.i])
	if at >= t.horizon {
		t.i = len(t.trace.Records)
		return 0, false
	}
	t.cur = t.i
	t.i++
	return at, true
}

// current is the record of the arrival next returned last.
func (t *traceArrivals) current() *scenario.TraceRecord { return &t.trace.Records[t.cur] }

// traceRequest builds the request of a trace record arriving at at: its
// prompt is the text of its blocks, cut to its input length.
func (g *Generator) traceRequest(rec *scenario.TraceRecord, at time.Duration) *Request {
	id := g.sessions
	g.sessions++
	input, output := g.fit(0, rec.InputTokens, rec.OutputTokens)
	req := g.request(id, 0, at, g.drawAdapter(), BlocksText(rec.Blocks, input), output)
	g.live[req.ID] = &session{id: id, group: -1}
	return req
}

// BlocksText is the prompt text of a chain of trace blocks, cut to tokens
// tokens: each block id stands for scenario.TraceBlockTokens tokens of its
// own (BlockText), so two prompts share exactly their common leading blocks,
// in text, token IDs and KV-cache blocks alike.
func BlocksText(blocks []uint32, tokens int) string {
	var b strings.Builder
	b.Grow(4 * tokens)
	for _, id := range blocks {
		if tokens <= 0 {
			break
		}
		n := min(tokens, scenario.TraceBlockTokens)
		b.WriteString(BlockText(id)[:4*n])
		tokens -= n
	}
	return b.String()
}

// markerAlphabet spells a block id in its first token: 64 letters, 4 per
// token, 2^24 ids (scenario.MaxTraceBlockID).
const markerAlphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"

// BlockText is the text of one trace block: scenario.TraceBlockTokens tokens
// whose first spells the id, so different ids differ from the first token on
// (no two blocks share a leading token, and so no KV-cache block either),
// followed by word-like text seeded by the id.
func BlockText(id uint32) string {
	var marker [4]byte
	for i := range marker {
		marker[i] = markerAlphabet[id>>(6*(3-i))&63]
	}
	return string(marker[:]) + tokenizer.GenerateText(splitmix.Mix(uint64(id)^0x7ace_b10c), scenario.TraceBlockTokens-1)
}
