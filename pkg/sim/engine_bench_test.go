package sim

import (
	"math"
	"testing"
	"time"

	"github.com/igw-dev/igw/internal/splitmix"
	"github.com/igw-dev/igw/pkg/tokenizer"
)

// podWorkload is one pod's share of a mixed-gpu-like scenario: Poisson arrivals,
// lognormal prompts around 1000 tokens and outputs around 130, some sharing a
// system prompt.
func podWorkload(seed uint64, rate float64, duration time.Duration) ([]Request, []time.Duration) {
	rng := splitmix.Source(seed)
	uniform := func() float64 { return (float64(rng.Next()>>11) + 0.5) / (1 << 53) }
	normal := func() float64 { return math.Sqrt(-2*math.Log(uniform())) * math.Cos(2*math.Pi*uniform()) }
	lognormal := func(median, sigma float64, lo, hi int) int {
		return min(hi, max(lo, int(median*math.Exp(sigma*normal()))))
	}
	system := tokenizer.GenerateText(seed^0xabc, 500)
	var reqs []Request
	var arrivals []time.Duration
	var t time.Duration
	for id := uint64(0); ; id++ {
		t += time.Duration(-math.Log(uniform()) / rate * float64(time.Second))
		if t > duration {
			return reqs, arrivals
		}
		text := tokenizer.GenerateText(rng.Next(), lognormal(1000, 1, 16, 16000))
		if id%4 == 0 {
			text = tokenizer.Join(system, text)
		}
		reqs = append(reqs, Request{ID: id, Prompt: tokenizer.Tokenize(text), OutputTokens: lognormal(130, 0.8, 1, 2000)})
		arrivals = append(arrivals, t)
	}
}

// BenchmarkPod600s runs one H100 pod through 600 simulated seconds at 4 req/s
// (the per-pod load of the mixed-gpu scenario) in virtual time.
func BenchmarkPod600s(b *testing.B) {
	reqs, arrivals := podWorkload(1, 4, 600*time.Second)
	var steps uint64
	for b.Loop() {
		e, _ := New(Config{GPU: "H100", Model: "llama-3.1-8b", SpeedJitter: 0.05})
		submitAt(b, e, reqs, arrivals, nil)
		drain(e, nil)
		steps = e.Snapshot().Steps
	}
	b.ReportMetric(float64(steps), "steps/run")
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(steps), "ns/step")
}

// BenchmarkPredictTTFT prices a request on a busy pod, as the oracle does for
// every pod on every arrival.
func BenchmarkPredictTTFT(b *testing.B) {
	reqs, arrivals := podWorkload(2, 12, 60*time.Second)
	e, _ := New(Config{GPU: "H100", Model: "llama-3.1-8b", SpeedJitter: 0.05})
	submitAt(b, e, reqs, arrivals, nil)
	probe := Request{ID: 1 << 40, Prompt: prompt(77, 1000), OutputTokens: 100}
	for b.Loop() {
		if _, err := e.PredictTTFT(probe, e.Now()); err != nil {
			b.Fatal(err)
		}
	}
	s := e.Snapshot()
	b.ReportMetric(float64(s.Running), "running")
	b.ReportMetric(float64(s.Waiting), "waiting")
}
