package sim

// kvManager is the KV-cache accounting the scheduler needs. The engine uses the
// real block cache; the TTFT predictor's shadow pod uses a counter, so that both
// run the same scheduling code.
type kvManager interface {
	// lookupHit returns how many leading blocks of r are in the prefix cache,
	// leaving at least one token to compute.
	lookupHit(r *request) int32
	// admit takes the hitBlocks found by the last lookupHit of r plus new blocks
	// for tokens tokens; false (and no change) if the cache is too full.
	admit(r *request, hitBlocks, tokens int32) bool
	// grow extends a running request's blocks to cover tokens tokens.
	grow(r *request, tokens int32) bool
	// release returns r's blocks; full ones stay cached until evicted.
	release(r *request)
	freeBlocks() int32
}

// kvCache is a paged KV cache with prefix caching as in vLLM: blocks hold
// BlockSize tokens; a full block is registered under its chained hash and can be
// shared by later requests; blocks nobody holds sit in an LRU free queue and keep
// their cached content until they are reused.
type kvCache struct {
	numBlocks int32
	refs      []int32
	hash      []uint64
	cached    []bool // registered in index
	// prev and next link the free queue; head is evicted first.
	prev, next []int32
	head, tail int32
	free       int32
	index      map[uint64]int32
	// hitIDs holds the blocks found by the last lookupHit.
	hitIDs []int32
	// events, when KV events are on, records registrations and evictions.
	events *kvEventLog
}

const none = -1

func newKVCache(numBlocks int32) *kvCache {
	kv := &kvCache{
		numBlocks: numBlocks,
		refs:      make([]int32, numBlocks),
		hash:      make([]uint64, numBlocks),
		cached:    make([]bool, numBlocks),
		prev:      make([]int32, numBlocks),
		next:      make([]int32, numBlocks),
		head:      none,
		tail:      none,
		index:     make(map[uint64]int32, numBlocks),
	}
	for b := range numBlocks {
		kv.pushFree(b)
	}
	return kv
}

func (kv *kvCache) freeBlocks() int32 { return kv.free }

func (kv *kvCache) pushFree(b int32) {
	kv.prev[b], kv.next[b] = kv.tail, none
	if kv.tail != none {
		kv.next[kv.tail] = b
	} else {
		kv.head = b
	}
	kv.tail = b
	kv.free++
}

func (kv *kvCache) unlinkFree(b int32) {
	p, n := kv.prev[b], kv.next[b]
	if p != none {
		kv.next[p] = n
	} else {
		kv.head = n
	}
	if n != none {
		kv.prev[n] = p
	} else {
		kv.tail = p
	}
	kv.free--
}

// takeFree reuses the least recently freed block, evicting its cached content.
func (kv *kvCache) takeFree() int32 {
	b := kv.head
	kv.unlinkFree(b)
	if kv.cached[b] {
		if kv.index[kv.hash[b]] == b {
			delete(kv.index, kv.hash[b])
			if kv.events != nil {
				kv.events.removed(b)
			}
		}
		kv.cached[b] = false
	}
	kv.refs[b] = 1
	return b
}

func (kv *kvCache) lookupHit(r *request) int32 {
	maxBlocks := (r.numTokens() - 1) / BlockSize
	r.ensureHashes(maxBlocks)
	kv.hitIDs = kv.hitIDs[:0]
	for _, h := range r.hashes[:maxBlocks] {
		b, ok := kv.index[h]
		if !ok {
			break
		}
		kv.hitIDs = append(kv.hitIDs, b)
	}
	return int32(len(kv.hitIDs))
}

func (kv *kvCache) admit(r *request, hitBlocks, tokens int32) bool {
	hits := kv.hitIDs[:hitBlocks]
	var idleHits int32 // hits nobody holds come out of the free queue
	for _, b := range hits {
		if kv.refs[b] == 0 {
			idleHits++
		}
	}
	if idleHits+blocksFor(tokens)-hitBlocks > kv.free {
		return false
	}
	r.sharedBlocks = hitBlocks - idleHits
	for _, b := range hits {
		if kv.refs[b] == 0 {
			kv.unlinkFree(b)
		}
		kv.refs[b]++
	}
	r.blocks = append(r.blocks[:0], hits...)
	r.registered = hitBlocks
	r.hitBlocks = hitBlocks
	kv.fill(r, tokens)
	return true
}

func (kv *kvCache) grow(r *request, tokens int32) bool {
	if blocksFor(tokens)-int32(len(r.blocks)) > kv.free {
		return false
	}
	kv.fill(r, tokens)
	return true
}

// fill allocates blocks up to tokens tokens and registers the ones that are full.
// Registering at scheduling time, as vLLM does, lets a request admitted later in
// the same step share blocks being computed now.
func (kv *kvCache) fill(r *request, tokens int32) {
	for int32(len(r.blocks)) < blocksFor(tokens) {
		r.blocks = append(r.blocks, kv.takeFree())
	}
	full := tokens / BlockSize
	if r.registered >= full {
		return
	}
	r.ensureHashes(full)
	for k := r.registered; k < full; k++ {
		b, h := r.blocks[k], r.hashes[k]
		if _, dup := kv.index[h]; !dup {
			kv.index[h] = b
			kv.hash[b] = h
			kv.cached[b] = true
			if kv.events != nil {
				kv.events.stored(r, k, b)
			}
		}
	}
	r.registered = full
}

func (kv *kvCache) release(r *request) {
	for i := len(r.blocks) - 1; i >= 0; i-- {
		b := r.blocks[i]
		kv.refs[b]--
		if kv.refs[b] == 0 {
			// Reverse order puts a request's last blocks nearest eviction.
			kv.pushFree(b)
		}
	}
	r.blocks = r.blocks[:0]
	r.registered = 0
}

// kvCounter is the predictor's stand-in for kvCache: it counts blocks and takes
// each request's prefix hit as fixed when the prediction starts.
type kvCounter struct{ free int32 }

func (kc *kvCounter) freeBlocks() int32          { return kc.free }
func (kc *kvCounter) lookupHit(r *request) int32 { return r.shadowHit }

func (kc *kvCounter) admit(r *request, hitBlocks, tokens int32) bool {
	need := blocksFor(tokens) - hitBlocks + (hitBlocks - r.sharedBlocks)
	if need > kc.free {
		return false
	}
	kc.free -= need
	r.heldBlocks, r.ownBlocks = blocksFor(tokens), need
	return true
}

func (kc *kvCounter) grow(r *request, tokens int32) bool {
	need := blocksFor(tokens) - r.heldBlocks
	if need <= 0 {
		return true
	}
	if need > kc.free {
		return false
	}
	kc.free -= need
	r.heldBlocks += need
	r.ownBlocks += need
	return true
}

func (kc *kvCounter) release(r *request) {
	kc.free += r.ownBlocks
	r.heldBlocks, r.ownBlocks = 0, 0
}
