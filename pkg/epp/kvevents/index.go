package kvevents

import (
	"math/bits"
	"strconv"
	"sync"
	"sync/atomic"
)

// Index is the exact record of which pod holds which KV block, built from the
// pods' events. A block is named by its own key (see Seed) and carries a
// bitmap of the pods holding it; each pod maps the engine's hashes to own
// keys, so removals and parents in later events find their block. Tables
// hold no pointers: the garbage collector does not scan them.
//
// Safe for concurrent use: events are applied under the write lock, lookups
// share the read lock.
type Index struct {
	mu        sync.RWMutex
	blockSize int
	blocks    blockTable
	pods      []*podBlocks // by slot; nil when free
	slots     map[string]int32
	freeSlots []int32
	// keys is Apply's scratch: one event's own keys.
	keys []uint64
}

// podBlocks is one pod's view: engine hash → own key, and the extra copies
// of blocks the engine holds twice (vLLM may cache two blocks with one hash).
type podBlocks struct {
	key    string
	engine table[uint64]
	copies map[uint64]uint32
	// exact is set while the pod's stream is complete: only then do its
	// matches count (else the picker falls back to its approximate index).
	exact atomic.Bool
}

// NewIndex returns an empty index for engines with blockSize-token blocks.
func NewIndex(blockSize int) *Index {
	x := &Index{blockSize: blockSize, slots: map[string]int32{}}
	x.blocks.words = 1
	return x
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
	x.blocks.widen(int(s)/64 + 1)
	return s
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
	p.engine.All(func(_ uint64, key uint64) { x.blocks.unset(key, s) })
	p.engine.Clear()
	p.copies = nil
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
			x.touchRemoved(p, ev.Hashes)
			for _, h := range ev.Hashes {
				key, ok := p.engine.Get(h)
				if !ok {
					a.UnknownRemoved++
					continue
				}
				a.Removed++
				if c := p.copies[h]; c > 0 {
					if c == 1 {
						delete(p.copies, h)
					} else {
						p.copies[h] = c - 1
					}
					continue
				}
				p.engine.Delete(h)
				x.blocks.unset(key, s)
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
		key, ok := p.engine.Get(ev.Parent)
		if !ok {
			a.Orphans += len(ev.Hashes)
			return
		}
		prev = key
	} else {
		prev = eventSeed(ev)
	}
	keys := x.keys[:0]
	for i := range ev.Hashes {
		prev = chainKey(prev, ev.Tokens[i*x.blockSize:(i+1)*x.blockSize])
		keys = append(keys, prev)
	}
	x.keys = keys
	keep(p.engine.touch(ev.Hashes) ^ x.blocks.touch(keys))
	for i, h := range ev.Hashes {
		key := keys[i]
		a.Stored++
		if _, ok := p.engine.Get(h); ok {
			if p.copies == nil {
				p.copies = map[uint64]uint32{}
			}
			p.copies[h]++
			continue
		}
		x.blocks.set(key, s)
		p.engine.Put(h, key)
	}
}

// touchRemoved brings into cache the table slots removing hashes will
// probe: the pod's entries of hashes, then the blocks they name.
func (x *Index) touchRemoved(p *podBlocks, hashes []uint64) {
	keep(p.engine.touch(hashes))
	keys := x.keys[:0]
	for _, h := range hashes {
		if key, ok := p.engine.Get(h); ok {
			keys = append(keys, key)
		}
	}
	x.keys = keys
	keep(x.blocks.touch(keys))
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
	return x.matchLocked(len(keys), func(i int, _ uint64) uint64 { return keys[i] }, matched)
}

// matchLocked walks n blocks whose keys key gives (from the previous key),
// until no pod holds the next one: a prompt nobody holds costs a few
// lookups. Keys are looked up a chunk at a time, so that the loads of a
// chunk (independent of each other) overlap in the CPU.
func (x *Index) matchLocked(n int, key func(i int, prev uint64) uint64, matched []int32) []int32 {
	pods := len(x.pods)
	if cap(matched) < pods {
		matched = make([]int32, pods)
	}
	matched = matched[:pods]
	clear(matched)
	if n == 0 {
		return matched
	}
	var small [4]uint64
	active := small[:0]
	if x.blocks.words > len(small) {
		active = make([]uint64, 0, x.blocks.words)
	}
	const chunk = 32
	var keys [chunk]uint64
	var rows [chunk][]uint64
	var k uint64
	for base := 0; base < n; base += chunk {
		m := min(chunk, n-base)
		for j := range m {
			k = key(base+j, k)
			keys[j] = k
		}
		keep(x.blocks.touch(keys[:m]))
		for j := range m {
			rows[j], _ = x.blocks.row(keys[j])
		}
		for j := range m {
			i := base + j
			row := rows[j]
			if i == 0 {
				if row == nil {
					return matched
				}
				active = append(active, row...)
				continue
			}
			any := uint64(0)
			for w := range active {
				var r uint64
				if row != nil {
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
	}
	for w, a := range active {
		for ; a != 0; a &= a - 1 {
			matched[w*64+bits.TrailingZeros64(a)] = int32(n)
		}
	}
	return matched
}

// keep takes a value so that the loads computing it are not optimised away.
//
//go:noinline
func keep(uint64) {}

// SetExact marks whether the pod's blocks are complete (its stream has no
// unrecovered gap), adding the pod if it is new.
func (x *Index) SetExact(pod string, exact bool) {
	x.mu.Lock()
	defer x.mu.Unlock()
	x.pods[x.slotLocked(pod)].exact.Store(exact)
}

// MatchPrompt writes into out, for each of pods, how many leading blocks of
// tokens (keyed from seed, at most maxBlocks) it holds, or -1 for a pod whose
// blocks are not known exactly (no stream, or a stream with a gap). Keys are
// computed as the walk needs them. bySlot is scratch, reused between calls.
func (x *Index) MatchPrompt(seed uint64, tokens []uint32, maxBlocks int, pods []string, out, bySlot []int32) ([]int32, []int32) {
	n := len(tokens) / x.blockSize
	if maxBlocks > 0 {
		n = min(n, maxBlocks)
	}
	bs := x.blockSize
	x.mu.RLock()
	defer x.mu.RUnlock()
	bySlot = x.matchLocked(n, func(i int, prev uint64) uint64 {
		if i == 0 {
			prev = seed
		}
		return chainKey(prev, tokens[i*bs:(i+1)*bs])
	}, bySlot)
	return x.podsLocked(pods, bySlot, out[:0]), bySlot
}

// MatchPods is MatchPrompt for keys already computed.
func (x *Index) MatchPods(keys []uint64, pods []string, out, bySlot []int32) ([]int32, []int32) {
	x.mu.RLock()
	defer x.mu.RUnlock()
	bySlot = x.matchLocked(len(keys), func(i int, _ uint64) uint64 { return keys[i] }, bySlot)
	return x.podsLocked(pods, bySlot, out[:0]), bySlot
}

func (x *Index) podsLocked(pods []string, bySlot, out []int32) []int32 {
	for i, pod := range pods {
		// Candidates usually come in the same order as the slots were
		// made: try the slot of the candidate's position before the map.
		s := int32(-1)
		if i < len(x.pods) && x.pods[i] != nil && x.pods[i].key == pod {
			s = int32(i)
		} else if t, ok := x.slots[pod]; ok {
			s = t
		}
		if s >= 0 && x.pods[s].exact.Load() {
			out = append(out, bySlot[s])
		} else {
			out = append(out, -1)
		}
	}
	return out
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

// PodKeys returns the own keys of the blocks the pod holds, with copies, for
// tests and diagnostics.
func (x *Index) PodKeys(pod string) map[uint64]int {
	return x.podBlocks(pod, func(_, key uint64) uint64 { return key })
}

// EngineHashes returns the engine hashes the pod holds, with copies.
func (x *Index) EngineHashes(pod string) map[uint64]int {
	return x.podBlocks(pod, func(h, _ uint64) uint64 { return h })
}

// podBlocks counts the blocks the pod holds, with copies, under the name
// name picks from each block's engine hash and own key.
func (x *Index) podBlocks(pod string, name func(h, key uint64) uint64) map[uint64]int {
	x.mu.RLock()
	defer x.mu.RUnlock()
	out := map[uint64]int{}
	if s, ok := x.slots[pod]; ok {
		p := x.pods[s]
		p.engine.All(func(h, key uint64) { out[name(h, key)] += 1 + int(p.copies[h]) })
	}
	return out
}

// Blocks is the number of distinct blocks held anywhere.
func (x *Index) Blocks() int {
	x.mu.RLock()
	defer x.mu.RUnlock()
	return x.blocks.n
}
