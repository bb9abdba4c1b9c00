package gateway

import "time"

// clock is the gateway's time. With a scale above 1 it runs that many times
// faster than the wall clock, for benchmarks against simulators that run
// faster than a GPU (modelsim --speedup): the picker's staleness, learned
// speeds and priors then stay in the simulated GPU's time.
type clock struct {
	origin time.Time
	scale  float64
}

func newClock(scale float64) clock {
	if scale <= 0 {
		scale = 1
	}
	return clock{origin: time.Now(), scale: scale}
}

// Now is the gateway's current time.
func (c clock) Now() time.Time {
	now := time.Now()
	if c.scale == 1 {
		return now
	}
	return c.origin.Add(time.Duration(float64(now.Sub(c.origin)) * c.scale))
}

// Wall is how long d of gateway time lasts on the wall clock.
func (c clock) Wall(d time.Duration) time.Duration {
	return time.Duration(float64(d) / c.scale)
}
