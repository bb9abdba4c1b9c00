package sim

import (
	"fmt"
	"net/http"
	"slices"
	"testing"
	"time"
)

// BenchmarkSSEStreams measures how many concurrent SSE streams one simulator
// process sustains. N clients in this process open streams within half a second
// of engine time (prompt 32 tokens, 400 output tokens) on one server (H100, llama-3.1-8b, sequence slots
// and KV for all of them). For every stream the client's receipt times are
// compared, in engine time, with the engine's own token times:
//
//   - e2e_err: |observed − nominal| / nominal of arrival-to-last-token, where
//     arrival is the engine's and the last token is when the client read it;
//   - tpot_err: the same for the mean inter-token time, first to last token;
//   - first_late / token_late: how late (wall ms) tokens reached the client;
//   - intake: wall ms from the client sending to the engine admitting it.
//
// The process sustains N while the p95 of both errors stays within 5%.
//
//	go test ./pkg/sim -run '^$' -bench SSEStreams -benchtime 1x
func BenchmarkSSEStreams(b *testing.B) {
	for _, speedup := range []float64{1, 10} {
		for _, n := range []int{64, 128, 256, 512, 1024, 2048} {
			b.Run(fmt.Sprintf("speedup=%g/streams=%d", speedup, n), func(b *testing.B) {
				for b.Loop() {
					r := sseStreamsRound(b, speedup, n)
					b.ReportMetric(100*r.e2eErrP95, "e2e_err_p95_%")
					b.ReportMetric(100*r.tpotErrP95, "tpot_err_p95_%")
					b.ReportMetric(ms(r.firstLateP95), "first_late_p95_ms")
					b.ReportMetric(ms(r.tokenLateP99), "token_late_p99_ms")
					b.ReportMetric(ms(r.intakeP95), "intake_p95_ms")
				}
			})
		}
	}
}

type sseRound struct {
	e2eErrP95, tpotErrP95                 float64
	firstLateP95, tokenLateP99, intakeP95 time.Duration
}

func sseStreamsRound(b *testing.B, speedup float64, n int) sseRound {
	const promptLen, outputLen = 32, 400
	// Opening every stream in the same instant would measure the stampede, not
	// the steady state: spread the opens over half a second of engine time.
	const openSpread = 500 * time.Millisecond
	srv, base := startServer(b, func(o *Options) {
		o.Speedup = speedup
		o.MaxNumSeqs = 4096
		o.KVCacheTokens = 2000000
	})
	log := logTimes(srv)
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: n}}
	prompts := make([][]uint32, n)
	outputs := make([]int, n)
	for i := range prompts {
		prompts[i], outputs[i] = prompt(uint64(i), promptLen), outputLen
	}
	results := streamAll(b, client, base, prompts, outputs, func(i int) time.Duration {
		return time.Duration(float64(openSpread) * float64(i) / float64(n) / speedup)
	})
	if b.Failed() {
		b.FailNow()
	}
	log.mu.Lock()
	defer log.mu.Unlock()
	tokens, arrival := log.tokens, log.arrivals
	var e2eErrs, tpotErrs []float64
	var firstLate, tokenLate, intake []time.Duration
	for _, s := range results {
		eng, arrived := tokens[s.engineID], arrival[s.engineID]
		last := len(eng) - 1
		observedE2E := srv.rt.engineTime(s.tokens[last]) - arrived
		e2eErrs = append(e2eErrs, relErr(observedE2E, eng[last]-arrived))
		observedTPOT := engineDuration(s.tokens[last].Sub(s.tokens[0]), speedup)
		tpotErrs = append(tpotErrs, relErr(observedTPOT, eng[last]-eng[0]))
		for k, at := range s.tokens {
			tokenLate = append(tokenLate, at.Sub(srv.rt.wallTime(eng[k])))
		}
		firstLate = append(firstLate, s.tokens[0].Sub(srv.rt.wallTime(eng[0])))
		intake = append(intake, srv.rt.wallTime(arrived).Sub(s.sent))
	}
	return sseRound{
		e2eErrP95:    quantile(e2eErrs, 0.95),
		tpotErrP95:   quantile(tpotErrs, 0.95),
		firstLateP95: quantile(firstLate, 0.95),
		tokenLateP99: quantile(tokenLate, 0.99),
		intakeP95:    quantile(intake, 0.95),
	}
}

func quantile[T float64 | time.Duration](xs []T, q float64) T {
	slices.Sort(xs)
	return xs[min(len(xs)-1, int(q*float64(len(xs))))]
}
