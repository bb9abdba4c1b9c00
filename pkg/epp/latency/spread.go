package latency

// spreadWindow is how many of the latest streams the spread is taken over.
const spreadWindow = 100

// StreamSpreads keeps the latest spreadWindow finished streams' time per
// output token over the mean time between tokens at their end, and their
// 99th percentile: the second slowest (of fewer, still the second slowest;
// of one, that one). It says how far the slow streams run from the mean.
// The zero value is empty.
type StreamSpreads struct {
	ratios  [spreadWindow]float64
	next    int
	samples int
	spread  float64
}

// Add counts one finished stream's ratio: one pass over the window.
func (s *StreamSpreads) Add(ratio float64) {
	s.ratios[s.next] = ratio
	s.next = (s.next + 1) % spreadWindow
	s.samples++
	var slowest, second float64
	for _, r := range s.ratios[:min(s.samples, spreadWindow)] {
		if r > slowest {
			slowest, second = r, slowest
		} else if r > second {
			second = r
		}
	}
	if s.samples == 1 {
		second = slowest
	}
	s.spread = second
}

// Spread is the spread (0: no stream counted) and the streams counted.
func (s *StreamSpreads) Spread() (spread float64, samples int) { return s.spread, s.samples }
