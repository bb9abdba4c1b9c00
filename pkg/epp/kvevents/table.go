package kvevents

import "github.com/igw-dev/igw/internal/splitmix"

// table is an open-addressing hash table from uint64 keys to V (homed by
// splitmix.Mix of the key: engine hashes need not be uniform): linear
// probing, and deletion by shifting the following entries back, so that a
// cache's constant churn (a block stored for every one evicted) leaves no
// tombstones to lengthen probes, as Go's maps do under such churn. A slot
// holds its key and value side by side (one cache line per probe, and no
// pointers for the garbage collector to scan); key 0 marks an empty slot, so
// the key 0 itself is kept aside. At most 3/4 full.
type table[V uint32 | uint64] struct {
	slots []slot[V]
	n     int
	mask  uint64
	// zero holds key 0's value when hasZero.
	zero    V
	hasZero bool
}

type slot[V uint32 | uint64] struct {
	key uint64
	val V
}

// Len is the number of entries.
func (t *table[V]) Len() int {
	if t.hasZero {
		return t.n + 1
	}
	return t.n
}

// Get returns the value of k.
func (t *table[V]) Get(k uint64) (V, bool) {
	if k == 0 {
		return t.zero, t.hasZero
	}
	if t.n == 0 {
		return 0, false
	}
	for i := splitmix.Mix(k) & t.mask; ; i = (i + 1) & t.mask {
		s := &t.slots[i]
		if s.key == k {
			return s.val, true
		}
		if s.key == 0 {
			return 0, false
		}
	}
}

// touch reads the home slot of each of keys, as blockTable.touch does.
func (t *table[V]) touch(keys []uint64) uint64 {
	if t.n == 0 {
		return 0
	}
	acc := uint64(0)
	for _, k := range keys {
		acc ^= t.slots[splitmix.Mix(k)&t.mask].key
	}
	return acc
}

// Put sets k's value.
func (t *table[V]) Put(k uint64, v V) {
	if k == 0 {
		t.zero, t.hasZero = v, true
		return
	}
	if 4*(t.n+1) > 3*len(t.slots) {
		t.grow()
	}
	i := splitmix.Mix(k) & t.mask
	for ; t.slots[i].key != 0; i = (i + 1) & t.mask {
		if t.slots[i].key == k {
			t.slots[i].val = v
			return
		}
	}
	t.slots[i] = slot[V]{k, v}
	t.n++
}

// Delete removes k, shifting later entries of its probe run back.
func (t *table[V]) Delete(k uint64) bool {
	if k == 0 {
		had := t.hasZero
		t.zero, t.hasZero = 0, false
		return had
	}
	if t.n == 0 {
		return false
	}
	i := splitmix.Mix(k) & t.mask
	for ; ; i = (i + 1) & t.mask {
		switch t.slots[i].key {
		case 0:
			return false
		case k:
		default:
			continue
		}
		break
	}
	for j := (i + 1) & t.mask; t.slots[j].key != 0; j = (j + 1) & t.mask {
		home := splitmix.Mix(t.slots[j].key) & t.mask
		// Move j back to the hole at i unless its home lies in (i, j].
		if (j-home)&t.mask >= (j-i)&t.mask {
			t.slots[i] = t.slots[j]
			i = j
		}
	}
	t.slots[i] = slot[V]{}
	t.n--
	return true
}

// Clear removes every entry; a large table's memory is given back.
func (t *table[V]) Clear() {
	if len(t.slots) > 1<<16 {
		*t = table[V]{}
		return
	}
	clear(t.slots)
	t.n, t.zero, t.hasZero = 0, 0, false
}

// All calls f for every entry (f must not change the table).
func (t *table[V]) All(f func(k uint64, v V)) {
	if t.hasZero {
		f(0, t.zero)
	}
	for _, s := range t.slots {
		if s.key != 0 {
			f(s.key, s.val)
		}
	}
}

func (t *table[V]) grow() {
	size := max(16, 2*len(t.slots))
	old := t.slots
	t.slots, t.mask, t.n = make([]slot[V], size), uint64(size-1), 0
	for _, s := range old {
		if s.key != 0 {
			t.Put(s.key, s.val)
		}
	}
}
