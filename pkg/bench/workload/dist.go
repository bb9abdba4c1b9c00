package workload

import (
	"math"
	"math/rand/v2"
	"time"

	"github.com/igw-dev/igw/pkg/bench/scenario"
)

// sample draws one value of d, clamped to its min and max.
func sample(r *rand.Rand, d scenario.Dist) float64 {
	var x float64
	switch d.Dist {
	case scenario.DistFixed:
		x = d.Value.V
	case scenario.DistUniform:
		x = d.Min.V + r.Float64()*(d.Max.V-d.Min.V)
	case scenario.DistNormal:
		sd := d.Stddev.V
		if !d.Stddev.Set {
			sd = d.Sigma
		}
		x = d.Mean.V + sd*r.NormFloat64()
	default: // lognormal
		x = d.Median.V * math.Exp(d.Sigma*r.NormFloat64())
	}
	if d.Min.Set {
		x = math.Max(x, d.Min.V)
	}
	if d.Max.Set {
		x = math.Min(x, d.Max.V)
	}
	return x
}

// sampleCount draws a token count (at least 1).
func sampleCount(r *rand.Rand, d scenario.Dist) int {
	return max(1, int(math.Round(sample(r, d))))
}

// sampleDuration draws a duration given in seconds (at least 0).
func sampleDuration(r *rand.Rand, d scenario.Dist) time.Duration {
	return time.Duration(math.Max(0, sample(r, d)) * float64(time.Second))
}

// popularity draws adapter indices 0..n-1: Zipf with exponent s (index 0 the
// most popular) or uniform.
type popularity struct {
	cdf []float64
}

func newPopularity(n int, p scenario.Popularity) *popularity {
	cdf := make([]float64, n)
	sum := 0.0
	for k := range n {
		w := 1.0
		if p.Dist == scenario.PopularityZipf {
			w = math.Pow(float64(k+1), -p.S)
		}
		sum += w
		cdf[k] = sum
	}
	for k := range cdf {
		cdf[k] /= sum
	}
	return &popularity{cdf: cdf}
}

func (p *popularity) draw(r *rand.Rand) int {
	u := r.Float64()
	lo, hi := 0, len(p.cdf)-1
	for lo < hi {
		mid := (lo + hi) / 2
		if p.cdf[mid] > u {
			hi = mid
		} else {
			lo = mid + 1
		}
	}
	return lo
}
