package sim

import (
	"time"

	"github.com/igw-dev/igw/pkg/tokenizer"
)

// Request is one generation request as the engine sees it.
type Request struct {
	// ID identifies the request in events; it must be unique among requests in flight.
	ID uint64
	// Adapter names the LoRA adapter; "" is the base model.
	Adapter string
	// Prompt is the prompt's token IDs (see pkg/tokenizer). The engine keeps its
	// block hashes, not the slice.
	Prompt []uint32
	// OutputTokens is the exact number of tokens to generate (at least 1).
	OutputTokens int
	// EndsWithStop records that the output ends at an end-of-sequence token rather
	// than at the length limit; it only selects the finish reason in statistics.
	EndsWithStop bool
}

// request is the engine's state of one request. Token positions follow vLLM: a
// request has promptLen+generated known tokens, computed of them have KV in the
// cache, and a new token is sampled whenever every known token is computed.
type request struct {
	id        uint64
	adapter   int32 // index into Engine.adapterNames; noAdapter for the base model
	hashSeed  uint64
	arrival   time.Duration
	promptLen int32
	outputLen int32
	generated int32
	computed  int32
	// scheduled is the number of tokens computed by the step in flight.
	scheduled int32
	// hashes holds the chained hashes of the full blocks known so far; blocks
	// that reach into the output are hashed when they fill.
	hashes []uint64
	// tail is the prompt's partial last block, needed to hash it once output fills it.
	tail []uint32
	// blocks are the KV blocks held, in token order.
	blocks []int32
	// registered counts the leading blocks already offered to the prefix cache.
	registered int32
	// sharedBlocks counts prefix-cache hits that another request held at admission.
	sharedBlocks int32
	// heldBlocks and ownBlocks stand in for blocks in the predictor's shadow pod.
	heldBlocks, ownBlocks int32
	// hitBlocks counts the leading blocks found in the prefix cache at the
	// last admission.
	hitBlocks int32
	// With KV events on: the adapter's name, the prompt, and the vLLM hashes
	// of the leading blocks computed so far (kept across preemptions: they
	// depend on the tokens only).
	adapterName string
	prompt      []uint32
	ext         []BlockHash
	// shadowHit is the prefix hit (in blocks) the shadow pod assumes.
	shadowHit int32
	// hint caches the predictor's estimate of this waiting request's prefix hit.
	hintBlocks, hintIdle int32
	hintKnown            bool

	cachedTokens int32 // prefix hit of the first admission, reported as cached_tokens
	preemptions  int32
	firstTokenAt time.Duration
	lastTokenAt  time.Duration
	admitted     bool
	done         bool
	aborted      bool
	endsWithStop bool
}

const noAdapter = -1

func (r *request) numTokens() int32 { return r.promptLen + r.generated }

// isDecode reports whether the request's next step computes only the token it
// sampled last (a decode), as opposed to a prompt or recompute chunk.
func (r *request) isDecode() bool { return r.generated > 0 && r.numTokens()-r.computed == 1 }

// tokenAt returns the token at pos, which must lie in the prompt's partial last
// block or in the output (earlier prompt blocks are hashed at submission).
func (r *request) tokenAt(pos int32) uint32 {
	if pos >= r.promptLen {
		return tokenizer.OutputToken(int(pos - r.promptLen))
	}
	return r.tail[pos-r.promptLen/BlockSize*BlockSize]
}

// ensureHashes extends the hash chain to the first n blocks, all of which must
// be full of known tokens.
func (r *request) ensureHashes(n int32) {
	var block [BlockSize]uint32
	for k := int32(len(r.hashes)); k < n; k++ {
		for i := range block {
			block[i] = r.tokenAt(k*BlockSize + int32(i))
		}
		prev := r.hashSeed
		if k > 0 {
			prev = r.hashes[k-1]
		}
		r.hashes = append(r.hashes, tokenizer.ChainHash(prev, block[:]))
	}
}

func blocksFor(tokens int32) int32 { return (tokens + BlockSize - 1) / BlockSize }
