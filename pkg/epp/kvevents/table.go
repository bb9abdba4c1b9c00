package kvevents

import "math/bits"

// table is an open-addressing hash table from uint64 keys to V: linear
// probing, and deletion by shifting the following entries back, so that a
// cache's constant churn (a block stored for every one evicted) leaves no
// tombstones to lengthen probes, as Go's maps do under such churn. Keys and
// values live in two flat arrays without pointers (12 bytes a slot for
// uint32 values), at most 3/4 full.
type table[V uint32 | uint64] struct {
	keys []uint64
	vals []V
	used []uint64 // bitmap of occupied slots
	n    int
	mask uint64
}

// mix spreads a key's bits (the splitmix64 finalizer): engine hashes need
// not be uniform.
func mix(k uint64) uint64 {
	k ^= k >> 30
	k *= 0xbf58476d1ce4e5b9
	k ^= k >> 27
	k *= 0x94d049bb133111eb
	return k ^ k>>31
}

func (t *table[V]) occupied(i uint64) bool { return t.used[i>>6]&(1<<(i&63)) != 0 }

// Len is the number of entries.
func (t *table[V]) Len() int { return t.n }

// Get returns the value of k.
func (t *table[V]) Get(k uint64) (V, bool) {
	if t.n == 0 {
		return 0, false
	}
	for i := mix(k) & t.mask; t.occupied(i); i = (i + 1) & t.mask {
		if t.keys[i] == k {
			return t.vals[i], true
		}
	}
	return 0, false
}

// Put sets k's value.
func (t *table[V]) Put(k uint64, v V) {
	if 4*(t.n+1) > 3*len(t.keys) {
		t.grow()
	}
	i := mix(k) & t.mask
	for ; t.occupied(i); i = (i + 1) & t.mask {
		if t.keys[i] == k {
			t.vals[i] = v
			return
		}
	}
	t.keys[i], t.vals[i] = k, v
	t.used[i>>6] |= 1 << (i & 63)
	t.n++
}

// Delete removes k, shifting later entries of its probe run back.
func (t *table[V]) Delete(k uint64) bool {
	if t.n == 0 {
		return false
	}
	i := mix(k) & t.mask
	for ; ; i = (i + 1) & t.mask {
		if !t.occupied(i) {
			return false
		}
		if t.keys[i] == k {
			break
		}
	}
	for j := (i + 1) & t.mask; t.occupied(j); j = (j + 1) & t.mask {
		home := mix(t.keys[j]) & t.mask
		// Move j back to the hole at i unless its home lies in (i, j].
		if (j-home)&t.mask >= (j-i)&t.mask {
			t.keys[i], t.vals[i] = t.keys[j], t.vals[j]
			i = j
		}
	}
	t.used[i>>6] &^= 1 << (i & 63)
	t.n--
	return true
}

// Clear removes every entry; a large table's memory is given back.
func (t *table[V]) Clear() {
	if len(t.keys) > 1<<16 {
		*t = table[V]{}
		return
	}
	clear(t.used)
	t.n = 0
}

// All calls f for every entry (f must not change the table).
func (t *table[V]) All(f func(k uint64, v V)) {
	for w, word := range t.used {
		for ; word != 0; word &= word - 1 {
			i := uint64(w)<<6 | uint64(bits.TrailingZeros64(word))
			f(t.keys[i], t.vals[i])
		}
	}
}

func (t *table[V]) grow() {
	size := max(16, 2*len(t.keys))
	old := *t
	*t = table[V]{keys: make([]uint64, size), vals: make([]V, size), used: make([]uint64, (size+63)/64), mask: uint64(size - 1)}
	old.All(func(k uint64, v V) { t.Put(k, v) })
}
