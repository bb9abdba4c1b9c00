package director_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/igw-dev/igw/pkg/epp/config"
	"github.com/igw-dev/igw/pkg/epp/datastore"
	"github.com/igw-dev/igw/pkg/epp/director"
	"github.com/igw-dev/igw/pkg/epp/scheduling"
)

// fifoServer plays a model server for the picker's accounting: it prefills
// prompts one after another at rate tokens/s and streams outTokens tokens a
// step apart; pausedUntil holds all work (a stopped container).
type fifoServer struct {
	rate, step  float64
	outTokens   int
	busyUntil   float64
	pausedUntil float64
	events      []serverEvent
}

type serverEvent struct {
	at    float64
	first bool
	req   *datastore.Request
	st    *datastore.EndpointState
}

func (s *fifoServer) accept(st *datastore.EndpointState, r *datastore.Request, now float64) {
	start := max(now, s.busyUntil, s.pausedUntil)
	s.busyUntil = start + float64(r.UncachedTokens)/s.rate + s.step
	s.events = append(s.events, serverEvent{at: s.busyUntil, first: true, req: r, st: st},
		serverEvent{at: s.busyUntil + float64(s.outTokens-1)*s.step, req: r, st: st})
}

// deliver reports to the accounting what the server did up to now.
func (s *fifoServer) deliver(now float64) {
	kept := s.events[:0]
	for _, e := range s.events {
		switch {
		case e.at > now:
			kept = append(kept, e)
		case e.first:
			e.st.ObserveFirstToken(e.req, at(e.at))
		default:
			e.st.ObserveCompletion(e.req, s.outTokens, at(e.at))
		}
	}
	s.events = kept
}

func at(sec float64) time.Time { return t0.Add(time.Duration(sec * float64(time.Second))) }

// TestStoppedPodIsNotLostForGood reproduces a healthy GPU lost for good: one
// of two equal pods stops for 28 s with requests waiting for their first
// token, which collapses its learned prefill rate; the other pod can carry
// the load alone, so a picker that learns only from traffic never sends the
// first pod anything again. After it resumes it must be measured again and
// get at least a fifth of its fair share (half) of the picks within a minute.
func TestStoppedPodIsNotLostForGood(t *testing.T) {
	d := newDirector(t, config.Default, 2, director.Options{})
	states := d.Store().Endpoints(nil)
	servers := map[string]*fifoServer{}
	for _, st := range states {
		servers[st.Key()] = &fifoServer{rate: 4000, step: 0.02, outTokens: 20}
	}
	stopped := servers[states[0].Key()]
	picks := map[string]int{}
	const interval, prompt = 0.2, 500 // 2,500 tokens/s: within one pod's capacity
	for i := 0; float64(i)*interval < 160; i++ {
		now := float64(i) * interval
		if i == int(30/interval) {
			stopped.pausedUntil = now + 28
		}
		for _, s := range servers {
			s.deliver(now)
		}
		for _, st := range states {
			d.UpdateMetrics(st.Key(), datastore.Metrics{KVCacheKnown: true, SampledAt: at(now)}, at(now))
		}
		res := schedule(t, d, &scheduling.Request{Model: "m", Prompt: strings.Repeat(fmt.Sprintf("%d ", i), prompt/2)}, at(now))
		servers[res.Primary].accept(res.Endpoint, res.Request, now)
		if now >= 100 {
			picks[res.Primary]++
		}
	}
	got, total := picks[states[0].Key()], picks[states[0].Key()]+picks[states[1].Key()]
	if share := float64(got) / float64(total); share < 0.2*0.5 {
		t.Fatalf("the pod stopped for 28 s got %d of %d picks from 100 s to 160 s (%.0f%% of its fair share); its learned speed %+v",
			got, total, 100*share/0.5, states[0].Speed())
	}
}
