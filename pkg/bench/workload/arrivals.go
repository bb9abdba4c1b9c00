package workload

import (
	"math"
	"math/rand/v2"
	"time"

	"github.com/igw-dev/igw/pkg/bench/scenario"
)

// arrivalSource yields session start times in order, false once none is left.
type arrivalSource interface {
	next() (time.Duration, bool)
}

// arrivals generates session start times. Every process is a renewal process
// with unit mean gaps run on an operational clock Λ(t) = ∫ rate: stages, the
// base rate and on/off bursts only change how fast Λ advances, so one
// mechanism serves constant, Poisson, gamma and bursty arrivals with any rate
// schedule.
type arrivals struct {
	rng     *rand.Rand
	gap     func(*rand.Rand) float64 // unit-mean gap in operational time
	stages  []scenario.Stage
	base    float64
	on, off time.Duration
	horizon time.Duration
	t       time.Duration
	done    bool
}

func newArrivals(a scenario.Arrival, stages []scenario.Stage, horizon time.Duration, rng *rand.Rand) *arrivals {
	ar := &arrivals{rng: rng, stages: stages, base: a.Rate, horizon: horizon}
	switch a.Type {
	case scenario.ArrivalConstant:
		ar.gap = func(*rand.Rand) float64 { return 1 }
	case scenario.ArrivalGamma:
		ar.gap = gammaGap(a.CV)
	case scenario.ArrivalOnOff:
		ar.on, ar.off = a.On, a.Off
		if a.CV > 0 {
			ar.gap = gammaGap(a.CV)
		} else {
			ar.gap = (*rand.Rand).ExpFloat64
		}
	default:
		ar.gap = (*rand.Rand).ExpFloat64
	}
	return ar
}

// gammaGap draws gaps with mean 1 and coefficient of variation cv.
func gammaGap(cv float64) func(*rand.Rand) float64 {
	shape := 1 / (cv * cv)
	return func(r *rand.Rand) float64 { return gamma(r, shape) / shape }
}

// gamma draws from Gamma(shape, 1) by Marsaglia and Tsang's method, boosted
// for shapes below 1.
func gamma(r *rand.Rand, shape float64) float64 {
	if shape < 1 {
		return gamma(r, shape+1) * math.Pow(r.Float64(), 1/shape)
	}
	d := shape - 1.0/3
	c := 1 / math.Sqrt(9*d)
	for {
		x := r.NormFloat64()
		v := 1 + c*x
		if v <= 0 {
			continue
		}
		v = v * v * v
		u := r.Float64()
		if math.Log(u) < 0.5*x*x+d-d*v+d*math.Log(v) {
			return d * v
		}
	}
}

// next returns the next arrival time, false once none falls before the horizon.
func (a *arrivals) next() (time.Duration, bool) {
	if a.done {
		return 0, false
	}
	need := a.gap(a.rng)
	t := a.t
	for {
		if t >= a.horizon {
			a.done = true
			return 0, false
		}
		rate, until := a.rateAt(t)
		until = min(until, a.horizon)
		span := (until - t).Seconds()
		if rate > 0 && span*rate >= need {
			t += time.Duration(need / rate * float64(time.Second))
			a.t = t
			return t, true
		}
		need -= span * rate
		t = until
	}
}

// rateAt is the arrival rate at t and the time it next may change.
func (a *arrivals) rateAt(t time.Duration) (rate float64, until time.Duration) {
	rate, until = a.base, time.Duration(math.MaxInt64)
	var start time.Duration
	for _, st := range a.stages {
		if t < start+st.Duration {
			rate, until = st.Rate, start+st.Duration
			break
		}
		start += st.Duration
	}
	if a.on > 0 {
		period := a.on + a.off
		phase := t % period
		if phase >= a.on {
			return 0, min(until, t-phase+period)
		}
		until = min(until, t-phase+a.on)
	}
	return rate, until
}
