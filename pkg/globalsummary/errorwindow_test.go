package globalsummary

import (
	"testing"
	"time"
)

func TestErrorWindowSlides(t *testing.T) {
	t0 := time.Unix(1000, 0)
	w := NewErrorWindow(10*time.Second, 10)
	for i := range 10 {
		w.Record(i%2 == 0, t0.Add(time.Duration(i)*time.Second))
	}
	if r, n := w.Rate(t0.Add(9 * time.Second)); n != 10 || r != 0.5 {
		t.Fatalf("rate %v over %d, want 0.5 over 10", r, n)
	}
	// Five seconds on, the first five seconds (3 failures of 5) have left.
	if r, n := w.Rate(t0.Add(14 * time.Second)); n != 5 || r != 0.4 {
		t.Fatalf("rate %v over %d, want 0.4 over 5", r, n)
	}
	w.Record(true, t0.Add(14*time.Second)) // reuses the bucket of second 4
	if r, n := w.Rate(t0.Add(14 * time.Second)); n != 6 || r != 0.5 {
		t.Fatalf("rate %v over %d, want 0.5 over 6", r, n)
	}
	if _, n := w.Rate(t0.Add(time.Minute)); n != 0 {
		t.Fatalf("%d requests a minute later", n)
	}
	w.Reset()
	if _, n := w.Rate(t0.Add(14 * time.Second)); n != 0 {
		t.Fatalf("%d requests after Reset", n)
	}
}
