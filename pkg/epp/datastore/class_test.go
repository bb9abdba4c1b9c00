package datastore

import (
	"math"
	"strconv"
	"testing"

	"github.com/igw-dev/igw/pkg/epp/latency"
	"github.com/igw-dev/igw/pkg/wire"
)

// serve drives st like a server with the given prefill rate and decode
// step: n requests of 1000 tokens one after another from start, ten tokens
// each. It returns when the last one ended.
func serve(st *EndpointState, rate, step float64, n int, start float64) float64 {
	now := start
	for range n {
		r := &Request{UncachedTokens: 1000, ChunkTokens: 8192}
		st.Picked(r, at(now))
		ttft := 1000/rate + step
		st.ObserveFirstToken(r, at(now+ttft))
		for k := 1; k <= 10; k++ {
			st.ObserveTokens(r, 1, at(now+ttft+float64(k)*step))
		}
		st.ObserveCompletion(r, 11, at(now+ttft+10*step))
		now += ttft + 10*step + 0.2
	}
	return now
}

// endpointsOn is a store's endpoints, one on each accelerator named (""
// for none), in order.
func endpointsOn(gpus ...string) ([]*EndpointState, []Endpoint) {
	s := NewStore(latency.DefaultPriors)
	var eps []Endpoint
	for i, gpu := range gpus {
		eps = append(eps, Endpoint{Address: "10.0.0." + strconv.Itoa(i+1), Port: 8000, Labels: map[string]string{wire.LabelGPUProduct: gpu}})
	}
	s.SetEndpoints(eps)
	return s.Endpoints(nil), eps
}

// An idle endpoint forgets what it learned toward what the other endpoints
// on its accelerator were measured at, not toward the fleet-wide prior:
// relaxed toward 20k tokens/s, an idle A10G-like endpoint looked as fast as
// an H100 within a minute.
func TestIdleEndpointRelaxesTowardItsClass(t *testing.T) {
	st, _ := endpointsOn("A10G", "A10G", "A10G", "H100", "")
	// The first A10G stalled once and learned a collapsed rate; the second
	// ran at its true speed; the H100 at its own.
	end := serve(st[0], 400, 0.037, 20, 0)
	end = max(end, serve(st[1], 1500, 0.037, 40, 0))
	end = max(end, serve(st[3], 27000, 0.012, 40, 0))
	serve(st[4], 400, 0.037, 20, 0) // no label: no class
	var v View
	for _, tc := range []struct {
		name       string
		st         *EndpointState
		towardRate float64
	}{
		{"A10G with a collapsed rate: toward its best peer", st[0], 1500},
		{"the best A10G: stays, not dragged toward its collapsed peer", st[1], 1500},
		{"H100 alone in its class: toward the prior, not itself", st[3], latency.DefaultPriors.PrefillTokensPerSecond},
		{"endpoint without an accelerator label: toward the prior", st[4], latency.DefaultPriors.PrefillTokensPerSecond},
	} {
		before := tc.st.Speed().PrefillTokensPerSecond
		tc.st.View(at(end+300), 0, &v) // twenty time constants idle
		if got := v.Speed.PrefillTokensPerSecond; math.Abs(got-tc.towardRate)/tc.towardRate > 0.01 {
			t.Errorf("%s: rate %.0f -> %.0f tokens/s after 300 s idle, want about %.0f", tc.name, before, got, tc.towardRate)
		}
	}
}

// Every stream that finishes on an endpoint counts toward its speed class's
// pooled spread, which the views of all the class's endpoints carry (one
// that served nothing included); an endpoint without a class has none.
func TestViewsCarryTheirClassStreamSpread(t *testing.T) {
	st, eps := endpointsOn("L4", "L4", "L4", "H100", "")
	end := serve(st[0], 2500, 0.09, 20, 0)
	end = max(end, serve(st[1], 2500, 0.09, 15, 0))
	end = max(end, serve(st[4], 2500, 0.09, 20, 0))
	var v View
	own := st[0].Speed()
	for i, want := range []int{35, 35, 35, 0, 0} {
		st[i].View(at(end), 0, &v)
		if v.ClassSpreadSamples != want {
			t.Errorf("endpoint %d (%q): %d streams in its class's spread, want %d", i, eps[i].Labels[wire.LabelGPUProduct], v.ClassSpreadSamples, want)
		}
		// Every stream ran at its endpoint's mean: the spread is about 1.
		if want > 0 && math.Abs(v.ClassStreamSpread-1) > 0.1 {
			t.Errorf("endpoint %d: class spread %.3f, want about 1 (its own: %.3f)", i, v.ClassStreamSpread, own.StreamSpread)
		}
	}
	if own.SpreadSamples != 20 {
		t.Errorf("endpoint 0's own spread counts %d streams, want its 20", own.SpreadSamples)
	}
}

// The pick rate counts picks over a decaying window: n picks a second for
// long reads n, and it halves in a window's ln 2 without picks.
func TestPickRate(t *testing.T) {
	st := newState()
	for i := range 600 {
		st.Picked(&Request{UncachedTokens: 10}, at(float64(i)/2))
	}
	var v View
	st.View(at(300), 0, &v)
	if math.Abs(v.PickRate-2)/2 > 0.01 {
		t.Fatalf("pick rate %.3f after 2 picks/s for 300 s, want 2", v.PickRate)
	}
	st.View(at(300+PickRateWindow.Seconds()*math.Ln2), 0, &v)
	if math.Abs(v.PickRate-1)/1 > 0.01 {
		t.Fatalf("pick rate %.3f after a half-life idle, want 1", v.PickRate)
	}
}
