package kvevents

// blockTable maps a block's own key to the bitmap of pods holding it, in
// one flat array: each slot is the key followed by the bitmap's words, so a
// lookup touches one place in memory. Open addressing with linear probing
// and backward-shift deletion, like table; key 0 marks an empty slot (own
// keys are never 0, see chainKey). At most 3/4 full.
type blockTable struct {
	data  []uint64 // slot i: data[i*stride] key, then words
	words int
	n     int
	mask  uint64
}

func (t *blockTable) stride() int { return 1 + t.words }

func (t *blockTable) find(k uint64) (int, bool) {
	if len(t.data) == 0 {
		return 0, false
	}
	st := t.stride()
	// Own keys are hash values already: their low bits place them.
	for i := k & t.mask; ; i = (i + 1) & t.mask {
		switch t.data[int(i)*st] {
		case k:
			return int(i) * st, true
		case 0:
			return int(i) * st, false
		}
	}
}

// touch reads the home slot of each of keys and returns a value of no
// meaning: the loads are independent of each other, so the CPU overlaps
// their cache misses, and the probes that follow find the slots in cache.
func (t *blockTable) touch(keys []uint64) uint64 {
	if len(t.data) == 0 {
		return 0
	}
	st, acc := uint64(t.stride()), uint64(0)
	for _, k := range keys {
		acc ^= t.data[(k&t.mask)*st]
	}
	return acc
}

// row returns k's bitmap (valid until the table changes).
func (t *blockTable) row(k uint64) ([]uint64, bool) {
	at, ok := t.find(k)
	if !ok {
		return nil, false
	}
	return t.data[at+1 : at+1+t.words], true
}

// set adds pod slot s to k's holders, inserting k if needed.
func (t *blockTable) set(k uint64, s int32) {
	if 4*(t.n+1) > 3*(len(t.data)/max(1, t.stride())) || len(t.data) == 0 {
		t.resize(max(16, 2*len(t.data)/t.stride()), t.words)
	}
	at, ok := t.find(k)
	if !ok {
		t.data[at] = k
		t.n++
	}
	t.data[at+1+int(s/64)] |= 1 << (s % 64)
}

// unset removes pod slot s from k's holders; a block nobody holds goes.
func (t *blockTable) unset(k uint64, s int32) {
	at, ok := t.find(k)
	if !ok {
		return
	}
	t.data[at+1+int(s/64)] &^= 1 << (s % 64)
	for _, w := range t.data[at+1 : at+1+t.words] {
		if w != 0 {
			return
		}
	}
	t.deleteAt(at)
}

func (t *blockTable) deleteAt(at int) {
	st := t.stride()
	i := uint64(at / st)
	for j := (i + 1) & t.mask; t.data[int(j)*st] != 0; j = (j + 1) & t.mask {
		home := t.data[int(j)*st] & t.mask
		if (j-home)&t.mask >= (j-i)&t.mask {
			copy(t.data[int(i)*st:int(i+1)*st], t.data[int(j)*st:int(j+1)*st])
			i = j
		}
	}
	clear(t.data[int(i)*st : int(i+1)*st])
	t.n--
}

// resize rebuilds the table with size slots of 1+words uint64s.
func (t *blockTable) resize(size, words int) {
	old, oldStride := t.data, t.stride()
	t.data, t.words, t.mask, t.n = make([]uint64, size*(1+words)), words, uint64(size-1), 0
	for at := 0; at < len(old); at += oldStride {
		k := old[at]
		if k == 0 {
			continue
		}
		dst, _ := t.find(k)
		t.data[dst] = k
		copy(t.data[dst+1:dst+1+words], old[at+1:at+oldStride])
		t.n++
	}
}

// widen gives every bitmap w words.
func (t *blockTable) widen(w int) {
	if w <= t.words {
		return
	}
	size := len(t.data) / t.stride()
	if size == 0 {
		t.words = w
		return
	}
	t.resize(size, w)
}
