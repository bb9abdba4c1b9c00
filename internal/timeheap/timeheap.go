// Package timeheap is a queue of values in virtual-time order for the
// benchmark's simulations; equal times go in sequence-number order, so that
// a run with the same seed is the same every time.
package timeheap

import (
	"container/heap"
	"time"
)

// Heap holds values, earliest first. The zero value is empty and ready.
type Heap[T any] struct{ items items[T] }

type item[T any] struct {
	at  time.Duration
	seq uint64
	v   T
}

// Push adds v at time at; seq orders it among values of the same time.
func (h *Heap[T]) Push(at time.Duration, seq uint64, v T) {
	heap.Push(&h.items, item[T]{at: at, seq: seq, v: v})
}

// Pop removes and returns the earliest value and its time; the heap must
// not be empty.
func (h *Heap[T]) Pop() (time.Duration, T) {
	it := heap.Pop(&h.items).(item[T])
	return it.at, it.v
}

// Next is the earliest value's time; ok is false when the heap is empty.
func (h *Heap[T]) Next() (at time.Duration, ok bool) {
	if len(h.items) == 0 {
		return 0, false
	}
	return h.items[0].at, true
}

// Len is the number of values held.
func (h *Heap[T]) Len() int { return len(h.items) }

// items is container/heap's view of the values.
type items[T any] []item[T]

func (q items[T]) Len() int { return len(q) }
func (q items[T]) Less(i, j int) bool {
	if q[i].at != q[j].at {
		return q[i].at < q[j].at
	}
	return q[i].seq < q[j].seq
}
func (q items[T]) Swap(i, j int) { q[i], q[j] = q[j], q[i] }
func (q *items[T]) Push(x any)   { *q = append(*q, x.(item[T])) }
func (q *items[T]) Pop() any {
	old := *q
	last := old[len(old)-1]
	*q = old[:len(old)-1]
	return last
}
