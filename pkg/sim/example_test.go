package sim_test

import (
	"fmt"
	"time"

	"github.com/igw-dev/igw/pkg/sim"
	"github.com/igw-dev/igw/pkg/tokenizer"
)

// A discrete-event loop over several pods: the next thing to happen is either an
// arrival or the earliest step end among the pods; nothing sleeps.
func Example_discreteEventLoop() {
	pods := make([]*sim.Engine, 2)
	for i := range pods {
		pods[i], _ = sim.New(sim.Config{GPU: "H100", Model: "llama-3.1-8b", SpeedJitter: 0.05, Seed: uint64(i)})
	}
	type arrival struct {
		at  time.Duration
		req sim.Request
	}
	var arrivals []arrival
	for i := range 6 {
		prompt := tokenizer.Tokenize(tokenizer.GenerateText(uint64(i), 500))
		arrivals = append(arrivals, arrival{time.Duration(i) * 20 * time.Millisecond,
			sim.Request{ID: uint64(i), Prompt: prompt, OutputTokens: 50}})
	}
	ttft := map[uint64]time.Duration{}
	finished, total := 0, len(arrivals)
	handle := func(events []sim.Event) {
		for _, ev := range events {
			switch ev.Kind {
			case sim.EventFirstToken:
				ttft[ev.RequestID] = ev.Time
			case sim.EventFinish:
				ttft[ev.RequestID] -= ev.Arrival
				finished++
			}
		}
	}
	for finished < total {
		// The earliest pending step end, if any.
		next, pod := time.Duration(1<<62), -1
		for i, e := range pods {
			if t, ok := e.NextEventTime(); ok && t < next {
				next, pod = t, i
			}
		}
		if len(arrivals) > 0 && arrivals[0].at <= next {
			a := arrivals[0]
			arrivals = arrivals[1:]
			// Route with the cost model: the pod that answers first.
			best, bestTTFT := 0, time.Duration(1<<62)
			for i, e := range pods {
				handle(e.Advance(a.at)) // bring every pod's state up to now first
				if d, _ := e.PredictTTFT(a.req, a.at); d < bestTTFT {
					best, bestTTFT = i, d
				}
			}
			_ = pods[best].Submit(a.req, a.at)
			continue
		}
		handle(pods[pod].Advance(next))
	}
	fmt.Println("finished:", finished)
	fmt.Println("every TTFT under 100ms:", func() bool {
		for _, d := range ttft {
			if d >= 100*time.Millisecond {
				return false
			}
		}
		return true
	}())
	// Output:
	// finished: 6
	// every TTFT under 100ms: true
}
