package sim

// splitmix64 drives the per-step jitter: tiny state (so a pod's future can be
// replayed by copying it), and identical draws on every platform.
type splitmix64 uint64

func (s *splitmix64) next() uint64 {
	*s += 0x9e3779b97f4a7c15
	z := uint64(*s)
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9
	z = (z ^ (z >> 27)) * 0x94d049bb133111eb
	return z ^ (z >> 31)
}

// symmetric returns a uniform draw in [-1, 1).
func (s *splitmix64) symmetric() float64 { return float64(s.next()>>11)/(1<<52) - 1 }
