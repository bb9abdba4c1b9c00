package server_test

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/igw-dev/igw/pkg/epp/config"
	"github.com/igw-dev/igw/pkg/extproctest"
)

// Large prompts at high concurrency: 150 streams, each a 220 KB chat prompt
// whose answer streams for about two seconds before the next request, the
// condition at which another picker was reported to add over a second to the
// first token.
const (
	concurrentStreams  = 150
	largePromptBytes   = 220 << 10
	answerChunks       = 64
	answerChunkSpacing = 30 * time.Millisecond
)

// BenchmarkConcurrentLargePrompts measures the time the picker's request path
// adds before a request can go upstream (its share of the first token's
// latency) with concurrentStreams exchanges in flight, against the
// passthrough server under the same load in the same run. Each iteration is
// one request per stream; streams start spread over one answer's length, so
// arrivals are steady rather than one burst.
func BenchmarkConcurrentLargePrompts(b *testing.B) {
	body := chatBody(largePromptBytes)
	chunk := []byte("data: {\"choices\":[{\"delta\":{\"content\":\"token \"}}]}\n\n")
	resp := &extproctest.Response{Headers: extproctest.NewHeaders(":status", "200", "content-type", "text/event-stream"),
		Chunks: slices.Repeat([][]byte{chunk}, answerChunks), Pace: answerChunkSpacing}
	// The overload bounds off: by the speeds assumed before any answer, no
	// fleet of 16 takes 150 prompts of 55k tokens each within them, and the
	// picker would shed most of the load. Its cost on the request path is
	// what is measured here, not its admission.
	f := start(b, 16, config.Default+"admission: {maxWaitSeconds: 0, maxInterTokenSeconds: 0}\n")
	base := extproctest.Start(b, extproctest.Passthrough{}, extproctest.Config{})

	b.ResetTimer()
	baseTimes := requestPathTimes(b, base, body, resp)
	times := requestPathTimes(b, f.client, body, resp)
	b.StopTimer()

	q := func(d []time.Duration, p float64) float64 {
		return float64(d[int(p*float64(len(d)-1))].Microseconds()) / 1e3
	}
	b.ReportMetric(q(times, 0.5), "p50-ms")
	b.ReportMetric(q(times, 0.99), "p99-ms")
	b.ReportMetric(q(baseTimes, 0.99), "passthrough-p99-ms")
	b.ReportMetric(q(times, 0.99)-q(baseTimes, 0.99), "added-p99-ms")
	b.ReportMetric(q(times, 0.5)-q(baseTimes, 0.5), "added-p50-ms")
}

// requestPathTimes runs b.N requests on each of concurrentStreams streams
// and returns every request path's duration, sorted.
func requestPathTimes(b *testing.B, c *extproctest.Client, body []byte, resp *extproctest.Response) []time.Duration {
	stream := time.Duration(answerChunks) * answerChunkSpacing
	var (
		mu    sync.Mutex
		times []time.Duration
		wg    sync.WaitGroup
		errs  = make(chan error, concurrentStreams)
	)
	for s := range concurrentStreams {
		wg.Go(func() {
			time.Sleep(stream * time.Duration(s) / concurrentStreams)
			for range b.N {
				req := extproctest.PostJSON("/v1/chat/completions", body)
				req.Response = resp
				res, err := c.Process(context.Background(), req)
				if err == nil && (res.ImmediateResponse != nil || len(res.RequestBody) != len(body)) {
					err = fmt.Errorf("request not forwarded whole: %+v", res.ImmediateResponse)
				}
				if err != nil {
					errs <- err
					return
				}
				mu.Lock()
				times = append(times, res.RequestPathTime)
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		b.Fatal(err)
	}
	slices.Sort(times)
	return times
}
