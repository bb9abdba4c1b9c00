package sim

import (
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"time"

	"github.com/igw-dev/igw/pkg/epp/kvevents"
	"github.com/igw-dev/igw/pkg/tokenizer"
)

// KV cache events, as vLLM publishes them with --kv-events-config: every
// engine step that changes the prefix cache yields one batch of events, in
// the order the changes happened. A full block registered in the prefix cache
// is a BlockStored (with its tokens, so a consumer can rebuild the chain of
// prefixes), an evicted one a BlockRemoved, a cache reset AllBlocksCleared. The kinds are
// the endpoint picker's decoder's (kvevents.EventKind): one definition of the
// tags on both ends of the wire.

// BlockHash is a block's vLLM hash: SHA-256 over the canonical CBOR of
// (parent hash, block token IDs, extra keys).
type BlockHash [32]byte

// Int is the hash as vLLM publishes it by default
// (VLLM_KV_EVENTS_USE_INT_BLOCK_HASHES=1): the digest read as a big-endian
// integer, masked to 64 bits, which is its last eight bytes.
func (h BlockHash) Int() uint64 { return binary.BigEndian.Uint64(h[24:]) }

// KVEvent is one event of a batch. The slices belong to the engine and are
// reused after the sink returns.
type KVEvent struct {
	Kind kvevents.EventKind
	// BlockHashes are the blocks stored or removed, in token order for a store.
	BlockHashes []BlockHash
	// Parent is the hash of the block before the first stored one; HasParent
	// is false when the first stored block starts the prompt.
	Parent    BlockHash
	HasParent bool
	// TokenIDs are the stored blocks' tokens, BlockSize per block.
	TokenIDs []uint32
	// LoRAID is vLLM's integer adapter ID (0: none) and LoRAName its name.
	LoRAID   int
	LoRAName string
}

// KVEventSink receives the engine's KV cache events, one call per engine step
// that changed the prefix cache, at the engine time of the step's start (when
// the scheduler allocated and registered the blocks). It is called with the
// engine's lock held, if any: it must not call back into the engine, and must
// copy what it keeps.
type KVEventSink interface {
	PublishKVEvents(at time.Duration, events []KVEvent)
}

// KVEventLossSink is a KVEventSink that is also told of each batch the
// engine dropped (an events-lost fault), at the time it would have gone out:
// a subscriber sees such a batch as a sequence gap.
type KVEventLossSink interface {
	KVEventSink
	LostKVEvents(at time.Duration)
}

// KVEventSinkFunc adapts a function to KVEventSink.
type KVEventSinkFunc func(at time.Duration, events []KVEvent)

// PublishKVEvents calls f.
func (f KVEventSinkFunc) PublishKVEvents(at time.Duration, events []KVEvent) { f(at, events) }

// NoneHash is vLLM's seed of every hash chain for a hash seed (the value of
// PYTHONHASHSEED): the hash of the seed string. Without PYTHONHASHSEED vLLM
// draws 32 random bytes instead, so that only processes sharing the variable
// share block hashes.
func NoneHash(hashSeed string) BlockHash {
	return sha256.Sum256(appendCBORText(nil, hashSeed))
}

// HashBlock is vLLM's hash_block_tokens with sha256_cbor (the
// --prefix-caching-hash-algo that other languages can reproduce): SHA-256 of
// the canonical CBOR array [parent, tokens, extra keys]; extra keys are the
// LoRA name as a one-element array, or null for the base model.
func HashBlock(buf []byte, parent BlockHash, tokens []uint32, loraName string) (BlockHash, []byte) {
	b := append(buf[:0], 0x83) // array of 3
	b = appendCBORHead(b, 2, 32)
	b = append(b, parent[:]...)
	b = appendCBORHead(b, 4, uint64(len(tokens)))
	for _, t := range tokens {
		b = appendCBORHead(b, 0, uint64(t))
	}
	if loraName == "" {
		b = append(b, 0xf6) // null
	} else {
		b = appendCBORHead(b, 4, 1)
		b = appendCBORText(b, loraName)
	}
	return sha256.Sum256(b), b
}

// appendCBORHead writes a CBOR major type and argument in the shortest form,
// which is what canonical encoding requires.
func appendCBORHead(b []byte, major byte, n uint64) []byte {
	m := major << 5
	switch {
	case n < 24:
		return append(b, m|byte(n))
	case n <= 0xff:
		return append(b, m|24, byte(n))
	case n <= 0xffff:
		return append(b, m|25, byte(n>>8), byte(n))
	case n <= 0xffffffff:
		return binary.BigEndian.AppendUint32(append(b, m|26), uint32(n))
	}
	return binary.BigEndian.AppendUint64(append(b, m|27), n)
}

func appendCBORText(b []byte, s string) []byte {
	return append(appendCBORHead(b, 3, uint64(len(s))), s...)
}

// kvEventLog collects the events of the step being scheduled and the vLLM
// hash of every block registered in the prefix cache.
type kvEventLog struct {
	sink     KVEventSink
	noneHash BlockHash
	// ext[b] is block b's vLLM hash while it is registered.
	ext    []BlockHash
	events []KVEvent
	// hashes and tokens back the events' slices; both are reset per step.
	hashes  []BlockHash
	tokens  []uint32
	cborBuf []byte
	// lastReq stored block lastK in the last event, which a store of its
	// block lastK+1 extends.
	lastReq *request
	lastK   int32
}

// ErrKVEventsLate is returned when events are enabled on an engine that
// already cached blocks: their hashes were never computed.
var ErrKVEventsLate = errors.New("sim: KV events must be enabled before the first request")

// EnableKVEvents makes the engine report its KV cache events to sink, with
// block hashes chained from NoneHash(hashSeed). Call it before the first
// Submit.
func (e *Engine) EnableKVEvents(sink KVEventSink, hashSeed string) error {
	return e.enableKVEvents(sink, NoneHash(hashSeed))
}

func (e *Engine) enableKVEvents(sink KVEventSink, none BlockHash) error {
	if len(e.kv.index) > 0 || e.kv.free != e.kv.numBlocks {
		return ErrKVEventsLate
	}
	e.kv.events = &kvEventLog{sink: sink, noneHash: none, ext: make([]BlockHash, e.kv.numBlocks)}
	e.pod.afterSchedule = e.flushKVEvents
	return nil
}

// flushKVEvents hands the step's events to the sink.
func (e *Engine) flushKVEvents(at time.Duration) {
	l := e.kv.events
	if len(l.events) == 0 {
		return
	}
	// The slices were built by appending to hashes and tokens, which may have
	// moved since; re-slice them from the final arrays.
	var h, t int
	for i := range l.events {
		ev := &l.events[i]
		nh, nt := len(ev.BlockHashes), len(ev.TokenIDs)
		ev.BlockHashes = l.hashes[h : h+nh : h+nh]
		if ev.Kind == kvevents.BlockStored {
			ev.TokenIDs = l.tokens[t : t+nt : t+nt]
		}
		h, t = h+nh, t+nt
	}
	if !e.eventsLost(at) {
		l.sink.PublishKVEvents(at, l.events)
	} else if ls, ok := l.sink.(KVEventLossSink); ok {
		ls.LostKVEvents(at)
	}
	l.events, l.hashes, l.tokens = l.events[:0], l.hashes[:0], l.tokens[:0]
	l.lastReq = nil
}

// stored records that r's block k (held in cache block b) was registered.
// Consecutive blocks of one request make one event, as in vLLM.
func (l *kvEventLog) stored(r *request, k int32, b int32) {
	h := r.extHash(k, l)
	l.ext[b] = h
	if l.lastReq != r || l.lastK != k-1 {
		ev := KVEvent{Kind: kvevents.BlockStored, LoRAName: r.adapterName}
		if r.adapter != noAdapter {
			ev.LoRAID = int(r.adapter) + 1
		}
		if k > 0 {
			ev.Parent, ev.HasParent = r.ext[k-1], true
		}
		l.events = append(l.events, ev)
	}
	l.appendBlock(&l.events[len(l.events)-1], r, k, h)
	l.lastReq, l.lastK = r, k
}

// appendBlock adds block k's hash and tokens to ev. The event's slices are
// lengths into l.hashes and l.tokens until flushKVEvents fixes them.
func (l *kvEventLog) appendBlock(ev *KVEvent, r *request, k int32, h BlockHash) {
	l.hashes = append(l.hashes, h)
	ev.BlockHashes = l.hashes[len(l.hashes)-len(ev.BlockHashes)-1:]
	start := len(l.tokens)
	for i := range int32(BlockSize) {
		l.tokens = append(l.tokens, r.fullTokenAt(k*BlockSize+i))
	}
	ev.TokenIDs = l.tokens[start-len(ev.TokenIDs):]
}

// removed records the eviction of cache block b.
func (l *kvEventLog) removed(b int32) {
	l.lastReq = nil
	l.hashes = append(l.hashes, l.ext[b])
	if n := len(l.events); n > 0 && l.events[n-1].Kind == kvevents.BlockRemoved {
		last := &l.events[n-1]
		last.BlockHashes = l.hashes[len(l.hashes)-len(last.BlockHashes)-1:]
		return
	}
	l.events = append(l.events, KVEvent{Kind: kvevents.BlockRemoved, BlockHashes: l.hashes[len(l.hashes)-1:]})
}

func (l *kvEventLog) cleared() {
	l.lastReq = nil
	l.events = append(l.events, KVEvent{Kind: kvevents.AllBlocksCleared})
}

// extHash returns the vLLM hash of r's block k, extending r's chain as
// needed. A block r found in the prefix cache already carries its hash.
func (r *request) extHash(k int32, l *kvEventLog) BlockHash {
	for j := int32(len(r.ext)); j <= k; j++ {
		if j < int32(len(r.blocks)) && j < r.hitBlocks {
			r.ext = append(r.ext, l.ext[r.blocks[j]])
			continue
		}
		parent := l.noneHash
		if j > 0 {
			parent = r.ext[j-1]
		}
		var block [BlockSize]uint32
		for i := range block {
			block[i] = r.fullTokenAt(j*BlockSize + int32(i))
		}
		var h BlockHash
		h, l.cborBuf = HashBlock(l.cborBuf, parent, block[:], r.adapterName)
		r.ext = append(r.ext, h)
	}
	return r.ext[k]
}

// fullTokenAt is the token at pos of a request whose prompt the engine kept
// (KV events on).
func (r *request) fullTokenAt(pos int32) uint32 {
	if pos >= r.promptLen {
		return tokenizer.OutputToken(int(pos - r.promptLen))
	}
	return r.prompt[pos]
}

// ResetPrefixCache drops every cached block nobody holds, as vLLM's
// /reset_prefix_cache; it does nothing and returns false while requests hold
// blocks (vLLM refuses then too). With KV events on it publishes
// AllBlocksCleared.
func (e *Engine) ResetPrefixCache(now time.Duration) bool {
	e.resetEvents()
	e.advanceTo(max(now, e.now))
	if e.kv.free != e.kv.numBlocks {
		return false
	}
	clear(e.kv.index)
	clear(e.kv.cached)
	if l := e.kv.events; l != nil {
		l.cleared()
		e.flushKVEvents(e.now)
	}
	return true
}

// CachedBlockHashes appends the vLLM hash of every block in the prefix cache
// (KV events on; nothing otherwise): what a subscriber's index should hold.
func (e *Engine) CachedBlockHashes(dst []BlockHash) []BlockHash {
	if e.kv.events == nil {
		return dst
	}
	for _, b := range e.kv.index {
		dst = append(dst, e.kv.events.ext[b])
	}
	return dst
}
