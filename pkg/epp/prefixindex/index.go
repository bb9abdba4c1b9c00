// Package prefixindex is the endpoint picker's approximate model of which prompt
// prefixes each endpoint holds in its KV cache. It never asks the model servers:
// it remembers what it sent where. A prompt is cut into fixed-size character
// blocks whose hashes are chained (each block's hash is seeded with the previous
// one, the first with the model name), so one hash names a whole prefix and a
// lookup walks the prompt's blocks until no endpoint holds the next one.
//
// Each endpoint has its own LRU bounded by a block capacity (tuned from the
// server's real KV size when known), so the index forgets what the server has
// most probably evicted. The LRU is a CLOCK over distinct blocks: touching a
// block it holds only marks it, and a marked block reaching the head of the
// ring gets a second chance. A system prompt shared by many requests thus
// takes its size in the capacity once, however often it is sent, as in the
// server's cache; Consume charges the capacity for what the server caches
// besides prompts (generated tokens).
package prefixindex

import (
	"sync"

	"github.com/cespare/xxhash/v2"
)

// Hash appends the chained hashes of prompt's full blocks of blockChars
// characters to dst, at most maxBlocks of them. A trailing partial block is not
// hashed: servers cache only full blocks.
func Hash(dst []uint64, seed string, prompt string, blockChars, maxBlocks int) []uint64 {
	if blockChars <= 0 {
		return dst
	}
	prev := xxhash.Sum64String(seed)
	var d xxhash.Digest
	for i := 0; i+blockChars <= len(prompt) && (maxBlocks <= 0 || i/blockChars < maxBlocks); i += blockChars {
		d.ResetWithSeed(prev)
		_, _ = d.WriteString(prompt[i : i+blockChars])
		prev = d.Sum64()
		dst = append(dst, prev)
	}
	return dst
}

// holder records that an endpoint holds a block; pos is the block's item in
// the endpoint's ring.
type holder struct {
	endpoint int32
	pos      int32
}

// entry lists the endpoints holding one block. Most blocks live on one or two
// endpoints, so the first holder is inline and the rest form a list in the
// index's overflow pool. Entries hold no pointers: the garbage collector never
// scans the index, however large.
type entry struct {
	hash  uint64
	first holder // endpoint < 0 when unused
	next  int32  // first overflow node, -1 for none
}

type overflowNode struct {
	holder
	next int32
}

const none = -1

func (ix *Index) find(e *entry, endpoint int32) *holder {
	if e.first.endpoint == endpoint {
		return &e.first
	}
	for n := e.next; n != none; n = ix.overflow[n].next {
		if ix.overflow[n].endpoint == endpoint {
			return &ix.overflow[n].holder
		}
	}
	return nil
}

func (ix *Index) addHolder(e *entry, h holder) {
	if e.first.endpoint < 0 {
		e.first = h
		return
	}
	var n int32
	if k := len(ix.freeNodes); k > 0 {
		n = ix.freeNodes[k-1]
		ix.freeNodes = ix.freeNodes[:k-1]
	} else {
		ix.overflow = append(ix.overflow, overflowNode{})
		n = int32(len(ix.overflow) - 1)
	}
	ix.overflow[n] = overflowNode{holder: h, next: e.next}
	e.next = n
}

// removeHolder drops endpoint and reports whether the entry is now empty.
func (ix *Index) removeHolder(e *entry, endpoint int32) bool {
	if e.first.endpoint == endpoint {
		if n := e.next; n != none {
			e.first = ix.overflow[n].holder
			e.next = ix.overflow[n].next
			ix.freeNodes = append(ix.freeNodes, n)
		} else {
			e.first.endpoint = -1
		}
		return e.first.endpoint < 0
	}
	for prev, n := int32(none), e.next; n != none; prev, n = n, ix.overflow[n].next {
		if ix.overflow[n].endpoint != endpoint {
			continue
		}
		if prev == none {
			e.next = ix.overflow[n].next
		} else {
			ix.overflow[prev].next = ix.overflow[n].next
		}
		ix.freeNodes = append(ix.freeNodes, n)
		break
	}
	return false
}

// ringItem is one block an endpoint holds (or, anonymous, capacity taken by
// data the index does not name); touched marks a use since the hand passed.
type ringItem struct {
	hash      uint64
	anonymous bool
	touched   bool
}

// lru is one endpoint's CLOCK ring: exactly one item per block it holds, plus
// anonymous items. The ring never exceeds capacity items, so at most capacity
// blocks are live. Once full, head is the hand: the oldest item, next to go
// unless touched.
type lru struct {
	ring     []ringItem
	head     int
	capacity int
	live     bool
}

// Index is safe for concurrent use: lookups share a read lock, updates take the
// write lock.
type Index struct {
	mu              sync.RWMutex
	blocks          map[uint64]int32 // hash -> slot in entries
	entries         []entry
	freeSlots       []int32
	overflow        []overflowNode
	freeNodes       []int32
	lrus            []lru // by endpoint id
	defaultCapacity int
}

// New returns an empty index whose endpoints hold at most defaultCapacity blocks
// each until SetCapacity says otherwise.
func New(defaultCapacity int) *Index {
	if defaultCapacity <= 0 {
		defaultCapacity = 1
	}
	return &Index{blocks: make(map[uint64]int32), defaultCapacity: defaultCapacity}
}

func (ix *Index) lruFor(endpoint int32) *lru {
	for int(endpoint) >= len(ix.lrus) {
		ix.lrus = append(ix.lrus, lru{})
	}
	l := &ix.lrus[endpoint]
	if !l.live {
		l.live = true
		if l.capacity == 0 {
			l.capacity = ix.defaultCapacity
		}
	}
	return l
}

// SetCapacity bounds how many blocks endpoint keeps; shrinking evicts the oldest.
func (ix *Index) SetCapacity(endpoint int32, blocks int) {
	if blocks <= 0 || endpoint < 0 {
		return
	}
	ix.mu.Lock()
	defer ix.mu.Unlock()
	l := ix.lruFor(endpoint)
	if l.capacity == blocks {
		return
	}
	items := l.ordered()
	if len(items) > blocks {
		for _, it := range items[:len(items)-blocks] {
			ix.evict(endpoint, it)
		}
		items = items[len(items)-blocks:]
	}
	l.ring = append(make([]ringItem, 0, min(blocks, 1024)), items...)
	l.head = 0
	l.capacity = blocks
	for pos, it := range l.ring {
		if hd := ix.holderOf(endpoint, it); hd != nil {
			hd.pos = int32(pos)
		}
	}
}

// ordered returns the ring's items oldest first.
func (l *lru) ordered() []ringItem {
	if len(l.ring) < l.capacity {
		return append([]ringItem(nil), l.ring...)
	}
	out := make([]ringItem, 0, len(l.ring))
	out = append(out, l.ring[l.head:]...)
	return append(out, l.ring[:l.head]...)
}

// Add records that endpoint now holds the prefix named by hashes (from Hash).
// slots, when not nil, are the entry slots Match found for the leading hashes,
// which spares their map lookups.
//
// New blocks are pushed last to first, so the leading blocks are the most
// recent and the LRU evicts a prefix from its tail, as servers do: a prefix
// whose head was evicted would be useless however much of its tail remained.
// Blocks already held are only marked as touched (see lru).
func (ix *Index) Add(endpoint int32, hashes []uint64, slots []int32) {
	if endpoint < 0 || len(hashes) == 0 {
		return
	}
	ix.mu.Lock()
	defer ix.mu.Unlock()
	l := ix.lruFor(endpoint)
	for i := len(hashes) - 1; i >= 0; i-- {
		h := hashes[i]
		slot := int32(none)
		if i < len(slots) && slots[i] >= 0 && int(slots[i]) < len(ix.entries) && ix.entries[slots[i]].hash == h && ix.entries[slots[i]].first.endpoint >= 0 {
			slot = slots[i]
		} else if s, ok := ix.blocks[h]; ok {
			slot = s
		} else {
			slot = ix.newSlot(h)
			ix.blocks[h] = slot
		}
		if hd := ix.find(&ix.entries[slot], endpoint); hd != nil {
			l.ring[hd.pos].touched = true
			continue
		}
		pos := ix.push(endpoint, l, ringItem{hash: h})
		// push may have reused entry slots for evicted blocks, never this one:
		// it holds no hold of endpoint, so nothing of it was evicted.
		ix.addHolder(&ix.entries[slot], holder{endpoint: endpoint, pos: pos})
	}
}

// Consume charges endpoint's capacity with blocks of cached data the index
// does not name (a reply's tokens, which the server caches too), pushing its
// oldest blocks out as the server's own cache would.
func (ix *Index) Consume(endpoint int32, blocks int) {
	if endpoint < 0 || blocks <= 0 {
		return
	}
	ix.mu.Lock()
	defer ix.mu.Unlock()
	l := ix.lruFor(endpoint)
	for range min(blocks, l.capacity) {
		ix.push(endpoint, l, ringItem{anonymous: true})
	}
}

// push puts item into endpoint's ring and returns its position. A full ring
// advances its hand past touched items, clearing their marks (their second
// chance: in a circular ring passing an item makes it the newest), and
// replaces the first untouched one. Each step is a flag test, and every mark
// cleared was paid for by a touch, so a push costs O(1) amortised.
func (ix *Index) push(endpoint int32, l *lru, item ringItem) int32 {
	if len(l.ring) < l.capacity {
		l.ring = append(l.ring, item)
		return int32(len(l.ring) - 1)
	}
	for l.ring[l.head].touched {
		l.ring[l.head].touched = false
		l.head = (l.head + 1) % len(l.ring)
	}
	ix.evict(endpoint, l.ring[l.head])
	pos := l.head
	l.ring[pos] = item
	l.head = (l.head + 1) % len(l.ring)
	return int32(pos)
}

// slotOf is the entry slot of ring item it's block (false for an anonymous
// item).
func (ix *Index) slotOf(it ringItem) (int32, bool) {
	if it.anonymous {
		return 0, false
	}
	slot, ok := ix.blocks[it.hash]
	return slot, ok
}

// holderOf returns endpoint's hold on the block of ring item it (nil for an
// anonymous item).
func (ix *Index) holderOf(endpoint int32, it ringItem) *holder {
	slot, ok := ix.slotOf(it)
	if !ok {
		return nil
	}
	return ix.find(&ix.entries[slot], endpoint)
}

// evict forgets endpoint's hold on old's block, if it has one
// (removeHolder leaves an entry without it as it is). One map lookup:
// evictions run for most blocks of every new prompt once the rings are full.
func (ix *Index) evict(endpoint int32, old ringItem) {
	if slot, ok := ix.slotOf(old); ok && ix.removeHolder(&ix.entries[slot], endpoint) {
		delete(ix.blocks, old.hash)
		ix.freeSlots = append(ix.freeSlots, slot)
	}
}

func (ix *Index) newSlot(h uint64) int32 {
	e := entry{hash: h, first: holder{endpoint: -1}, next: none}
	if n := len(ix.freeSlots); n > 0 {
		s := ix.freeSlots[n-1]
		ix.freeSlots = ix.freeSlots[:n-1]
		ix.entries[s] = e
		return s
	}
	ix.entries = append(ix.entries, e)
	return int32(len(ix.entries) - 1)
}

// Match writes into matched[id] how many leading blocks of hashes endpoint id
// holds (ids beyond len(matched) are ignored) and returns the longest match.
// matched must be zeroed by the caller. The entry slot of each matched block is
// appended to slots, for Add.
func (ix *Index) Match(hashes []uint64, matched []int32, slots []int32) (int, []int32) {
	ix.mu.RLock()
	defer ix.mu.RUnlock()
	best := 0
	for i, h := range hashes {
		slot, ok := ix.blocks[h]
		if !ok {
			break
		}
		e := &ix.entries[slot]
		advanced := advance(matched, e.first.endpoint, int32(i))
		for n := e.next; n != none; n = ix.overflow[n].next {
			advanced = advance(matched, ix.overflow[n].endpoint, int32(i)) || advanced
		}
		if !advanced {
			break
		}
		slots = append(slots, slot)
		best = i + 1
	}
	return best, slots
}

// advance extends endpoint's match from i to i+1 blocks when it matched all i
// blocks before this one.
func advance(matched []int32, endpoint, i int32) bool {
	if endpoint < 0 || int(endpoint) >= len(matched) || matched[endpoint] != i {
		return false
	}
	matched[endpoint] = i + 1
	return true
}

// RemoveEndpoint forgets everything endpoint held, so its id can be reused.
func (ix *Index) RemoveEndpoint(endpoint int32) {
	ix.mu.Lock()
	defer ix.mu.Unlock()
	if endpoint < 0 || int(endpoint) >= len(ix.lrus) {
		return
	}
	l := &ix.lrus[endpoint]
	for _, it := range l.ring {
		ix.evict(endpoint, it)
	}
	*l = lru{}
}

// Reset forgets everything, e.g. when the block size changes and every hash
// would name a different prefix.
func (ix *Index) Reset() {
	ix.mu.Lock()
	defer ix.mu.Unlock()
	ix.blocks = make(map[uint64]int32)
	ix.entries, ix.freeSlots = nil, nil
	ix.overflow, ix.freeNodes = nil, nil
	for i := range ix.lrus {
		ix.lrus[i].ring = nil
		ix.lrus[i].head = 0
	}
}

// Endpoints is one more than the largest endpoint id the index has seen: the
// length of the slice Match needs.
func (ix *Index) Endpoints() int32 {
	ix.mu.RLock()
	defer ix.mu.RUnlock()
	return int32(len(ix.lrus))
}

// Blocks returns how many distinct blocks the index holds.
func (ix *Index) Blocks() int {
	ix.mu.RLock()
	defer ix.mu.RUnlock()
	return len(ix.blocks)
}

// VisitRecent calls visit with the hash of every block the index holds, the
// ones most likely to stay first, until visit returns false: a summary that
// can describe only so many blocks keeps those. Blocks touched since their
// ring's hand passed come first, then each endpoint's blocks newest first
// (a prefix's leading blocks are its newest, see Add), endpoints taken in
// turn. A block that several endpoints hold is visited once per holder. visit
// runs under the index's read lock: it must not call the index.
func (ix *Index) VisitRecent(visit func(hash uint64) bool) {
	ix.mu.RLock()
	defer ix.mu.RUnlock()
	longest := 0
	for e := range ix.lrus {
		l := &ix.lrus[e]
		longest = max(longest, len(l.ring))
		for _, it := range l.ring {
			if it.touched && !it.anonymous && !visit(it.hash) {
				return
			}
		}
	}
	for j := range longest {
		for e := range ix.lrus {
			l := &ix.lrus[e]
			n := len(l.ring)
			if j >= n {
				continue
			}
			// The newest item sits just before the hand (the ring's end until it is full).
			it := l.ring[((l.head-1-j)%n+n)%n]
			if !it.touched && !it.anonymous && !visit(it.hash) {
				return
			}
		}
	}
}
