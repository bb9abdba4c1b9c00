package kvevents

import (
	"math/bits"
	"strconv"
	"sync"
	"sync/atomic"
)

// Index is the exact record of which pod holds which KV block, built from the
// pods' events. A block is one entry, named by its own key (see Seed), with a
// bitmap of the pods holding it; each pod maps the engine's hashes to entries,
// so removals and parents in later events find their block. Entries, bitmaps
// and maps hold no pointers: the garbage collector does not scan them.
//
// Safe for concurrent use: events are applied under the write lock, lookups
// share the read lock.
type Index struct {
	mu        sync.RWMutex
	blockSize int
	byKey     table[uint32] // own key → entry
	keys      []uint64      // entry → own key
	bits      []uint64      // entry*words .. +words: the pods holding it
	words     int
	free      []uint32
	pods      []*podBlocks // by slot; nil when free
	slots     map[string]int32
	freeSlots []int32
}

// podBlocks is one pod's view: engine hash → the block and how many copies
// the engine holds (vLLM may cache two blocks with one hash).
type podBlocks struct {
	key    string
	engine table[uint64] // engine hash → held, packed
	// exact is set while the pod's stream is complete: only then do its
	// matches count (else the picker falls back to its approximate index).
	exact atomic.Bool
}

type held struct{ entry, copies uint32 }

func (h held) pack() uint64 { return uint64(h.entry)<<32 | uint64(h.copies) }
func unpack(v uint64) held  { return held{entry: uint32(v >> 32), copies: uint32(v)} }
func (p *podBlocks) get(h uint64) (held, bool) {
	v, ok := p.engine.Get(h)
	return unpack(v), ok
}

// NewIndex returns an empty index for engines with blockSize-token blocks.
func NewIndex(blockSize int) *Index {
	return &Index{blockSize: blockSize, words: 1, slots: map[string]int32{}}
}

// BlockSize is the block size in tokens the index keys requests with.
func (x *Index) BlockSize() int { return x.blockSize }

// Slot returns the pod's slot, adding the pod if it is new.
func (x *Index) Slot(pod string) int32 {
	x.mu.Lock()
	defer x.mu.Unlock()
	return x.slotLocked(pod)
}

func (x *Index) slotLocked(pod string) int32 {
	if s, ok := x.slots[pod]; ok {
		return s
	}
	var s int32
	if n := len(x.freeSlots); n > 0 {
		s = x.freeSlots[n-1]
		x.freeSlots = x.freeSlots[:n-1]
	} else {
		s = int32(len(x.pods))
		x.pods = append(x.pods, nil)
	}
	x.pods[s] = &podBlocks{key: pod}
	x.slots[pod] = s
	if int(s) >= 64*x.words {
		x.widen(x.words + 1)
	}
	return s
}

// widen gives every entry's bitmap w words.
func (x *Index) widen(w int) {
	nb := make([]uint64, len(x.keys)*w)
	for e := range x.keys {
		copy(nb[e*w:], x.bits[e*x.words:(e+1)*x.words])
	}
	x.bits, x.words = nb, w
}

// SlotOf returns the pod's slot, if it has one.
func (x *Index) SlotOf(pod string) (int32, bool) {
	x.mu.RLock()
	defer x.mu.RUnlock()
	s, ok := x.slots[pod]
	return s, ok
}

// RemovePod forgets a pod and every block it held.
func (x *Index) RemovePod(pod string) {
	x.mu.Lock()
	defer x.mu.Unlock()
	s, ok := x.slots[pod]
	if !ok {
		return
	}
	x.clearLocked(s)
	delete(x.slots, pod)
	x.pods[s] = nil
	x.freeSlots = append(x.freeSlots, s)
}

// ClearPod drops every block the pod holds (AllBlocksCleared, or a stream
// whose history is lost).
func (x *Index) ClearPod(pod string) {
	x.mu.Lock()
	defer x.mu.Unlock()
	if s, ok := x.slots[pod]; ok {
		x.clearLocked(s)
	}
}

func (x *Index) clearLocked(s int32) {
	p := x.pods[s]
	p.engine.All(func(_ uint64, v uint64) { x.unset(unpack(v).entry, s) })
	p.engine.Clear()
}

func (x *Index) unset(e uint32, s int32) {
	row := x.bits[int(e)*x.words : int(e+1)*x.words]
	row[s/64] &^= 1 << (s % 64)
	for _, w := range row {
		if w != 0 {
			return
		}
	}
	x.byKey.Delete(x.keys[e])
	x.free = append(x.free, e)
}

func (x *Index) entryFor(key uint64) uint32 {
	if e, ok := x.byKey.Get(key); ok {
		return e
	}
	var e uint32
	if n := len(x.free); n > 0 {
		e = x.free[n-1]
		x.free = x.free[:n-1]
		x.keys[e] = key
	} else {
		e = uint32(len(x.keys))
		x.keys = append(x.keys, key)
		x.bits = append(x.bits, make([]uint64, x.words)...)
	}
	x.byKey.Put(key, e)
	return e
}

// Applied counts what one batch did to a pod's blocks.
type Applied struct {
	Stored, Removed, Cleared int
	// Orphans are stored blocks whose parent the pod never reported (sent
	// before the subscription began): they cannot be keyed, so they are left
	// out. UnknownRemoved are removals of blocks never stored.
	Orphans, UnknownRemoved int
	// WrongBlockSize are stored blocks of another block size than the index's.
	WrongBlockSize int
}

// Add sums counts.
func (a *Applied) Add(b Applied) {
	a.Stored += b.Stored
	a.Removed += b.Removed
	a.Cleared += b.Cleared
	a.Orphans += b.Orphans
	a.UnknownRemoved += b.UnknownRemoved
	a.WrongBlockSize += b.WrongBlockSize
}

// Apply applies a batch of the pod's events in order.
func (x *Index) Apply(pod string, events []Event) Applied {
	x.mu.Lock()
	defer x.mu.Unlock()
	s := x.slotLocked(pod)
	p := x.pods[s]
	var a Applied
	for i := range events {
		ev := &events[i]
		switch ev.Kind {
		case BlockStored:
			x.stored(s, p, ev, &a)
		case BlockRemoved:
			for _, h := range ev.Hashes {
				hb, ok := p.get(h)
				if !ok {
					a.UnknownRemoved++
					continue
				}
				a.Removed++
				if hb.copies > 1 {
					hb.copies--
					p.engine.Put(h, hb.pack())
					continue
				}
				p.engine.Delete(h)
				x.unset(hb.entry, s)
			}
		case AllBlocksCleared:
			x.clearLocked(s)
			a.Cleared++
		}
	}
	return a
}

func (x *Index) stored(s int32, p *podBlocks, ev *Event, a *Applied) {
	if ev.BlockSize != x.blockSize {
		a.WrongBlockSize += len(ev.Hashes)
		return
	}
	var prev uint64
	if ev.HasParent {
		ph, ok := p.get(ev.Parent)
		if !ok {
			a.Orphans += len(ev.Hashes)
			return
		}
		prev = x.keys[ph.entry]
	} else {
		prev = eventSeed(ev)
	}
	word, mask := int(s/64), uint64(1)<<(s%64)
	for i, h := range ev.Hashes {
		key := chainKey(prev, ev.Tokens[i*x.blockSize:(i+1)*x.blockSize])
		prev = key
		a.Stored++
		if hb, ok := p.get(h); ok {
			hb.copies++
			p.engine.Put(h, hb.pack())
			continue
		}
		e := x.entryFor(key)
		x.bits[int(e)*x.words+word] |= mask
		p.engine.Put(h, held{entry: e, copies: 1}.pack())
	}
}

// eventSeed is the chain seed of a stored prompt's first block. An adapter
// known only by vLLM's integer ID (older releases send no name) gets a seed
// no request matches: its blocks are tracked, never hit.
func eventSeed(ev *Event) uint64 {
	if ev.LoRAName == "" && ev.LoRAID != 0 {
		return Seed("\x00lora-id:" + strconv.FormatInt(ev.LoRAID, 10))
	}
	return Seed(ev.LoRAName)
}

// Match writes into matched, indexed by slot (it is grown to the number of
// slots), how many of keys' leading blocks each pod holds, and returns it.
func (x *Index) Match(keys []uint64, matched []int32) []int32 {
	x.mu.RLock()
	defer x.mu.RUnlock()
	n := len(x.pods)
	if cap(matched) < n {
		matched = make([]int32, n)
	}
	matched = matched[:n]
	clear(matched)
	if len(keys) == 0 {
		return matched
	}
	var small [4]uint64
	active := small[:0]
	if x.words > len(small) {
		active = make([]uint64, 0, x.words)
	}
	for i, k := range keys {
		e, ok := x.byKey.Get(k)
		var row []uint64
		if ok {
			row = x.bits[int(e)*x.words : int(e+1)*x.words]
		}
		if i == 0 {
			if !ok {
				return matched
			}
			active = append(active, row...)
			continue
		}
		any := uint64(0)
		for w := range active {
			var r uint64
			if ok {
				r = row[w]
			}
			for gone := active[w] &^ r; gone != 0; gone &= gone - 1 {
				matched[w*64+bits.TrailingZeros64(gone)] = int32(i)
			}
			active[w] &= r
			any |= active[w]
		}
		if any == 0 {
			return matched
		}
	}
	for w, a := range active {
		for ; a != 0; a &= a - 1 {
			matched[w*64+bits.TrailingZeros64(a)] = int32(len(keys))
		}
	}
	return matched
}

// SetExact marks whether the pod's blocks are complete (its stream has no
// unrecovered gap), adding the pod if it is new.
func (x *Index) SetExact(pod string, exact bool) {
	x.mu.Lock()
	defer x.mu.Unlock()
	x.pods[x.slotLocked(pod)].exact.Store(exact)
}

// MatchPods writes into out, for each of pods, how many of keys' leading
// blocks it holds, or -1 for a pod whose blocks are not known exactly (no
// stream, or a stream with a gap); scratch is reused between calls.
func (x *Index) MatchPods(keys []uint64, pods []string, out []int32, scratch []int32) ([]int32, []int32) {
	scratch = x.Match(keys, scratch)
	out = out[:0]
	x.mu.RLock()
	defer x.mu.RUnlock()
	for _, pod := range pods {
		s, ok := x.slots[pod]
		switch {
		case !ok || !x.pods[s].exact.Load():
			out = append(out, -1)
		case int(s) < len(scratch):
			out = append(out, scratch[s])
		default: // added since Match
			out = append(out, 0)
		}
	}
	return out, scratch
}

// Holds reports how many blocks the pod holds (distinct engine hashes).
func (x *Index) Holds(pod string) int {
	x.mu.RLock()
	defer x.mu.RUnlock()
	if s, ok := x.slots[pod]; ok {
		return x.pods[s].engine.Len()
	}
	return 0
}

// PodKeys returns the own keys of the blocks the pod holds, for tests and
// diagnostics.
func (x *Index) PodKeys(pod string) map[uint64]int {
	x.mu.RLock()
	defer x.mu.RUnlock()
	out := map[uint64]int{}
	if s, ok := x.slots[pod]; ok {
		x.pods[s].engine.All(func(_ uint64, v uint64) { h := unpack(v); out[x.keys[h.entry]] += int(h.copies) })
	}
	return out
}

// EngineHashes returns the engine hashes the pod holds, with copies.
func (x *Index) EngineHashes(pod string) map[uint64]int {
	x.mu.RLock()
	defer x.mu.RUnlock()
	out := map[uint64]int{}
	if s, ok := x.slots[pod]; ok {
		x.pods[s].engine.All(func(h uint64, v uint64) { out[h] = int(unpack(v).copies) })
	}
	return out
}

// Blocks is the number of distinct blocks held anywhere.
func (x *Index) Blocks() int {
	x.mu.RLock()
	defer x.mu.RUnlock()
	return x.byKey.Len()
}
