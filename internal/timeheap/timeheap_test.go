package timeheap

import (
	"slices"
	"testing"
)

func TestEarliestFirstTiesBySequence(t *testing.T) {
	var h Heap[string]
	if _, ok := h.Next(); ok {
		t.Fatal("an empty heap has a next time")
	}
	h.Push(30, 1, "c")
	h.Push(10, 9, "b")
	h.Push(10, 2, "a")
	h.Push(20, 0, "x")
	if at, ok := h.Next(); !ok || at != 10 {
		t.Fatalf("next %v %v, want 10", at, ok)
	}
	var got []string
	for h.Len() > 0 {
		_, v := h.Pop()
		got = append(got, v)
	}
	if want := []string{"a", "b", "x", "c"}; !slices.Equal(got, want) {
		t.Fatalf("popped %v, want %v", got, want)
	}
}
