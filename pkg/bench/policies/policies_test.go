package policies

import (
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/igw-dev/igw/pkg/epp/admission"
	"github.com/igw-dev/igw/pkg/epp/datastore"
	"github.com/igw-dev/igw/pkg/tokenizer"
)

var t0 = time.Unix(1000, 0)

func fleetOf(n int) Fleet {
	f := Fleet{ScrapeInterval: 50 * time.Millisecond}
	for range n {
		f.Pods = append(f.Pods, Pod{Group: "h100", KVTokens: 400000})
	}
	return f
}

func req(id uint64, prompt string) *Request {
	return &Request{ID: id, Model: "m", Prompt: prompt, Tokens: tokenizer.Tokenize(prompt), OutputTokens: 10}
}

func mustNew(t *testing.T, name string, f Fleet) Router {
	t.Helper()
	r, err := New(name, f, 1)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func TestRoundRobinAndLeastRequest(t *testing.T) {
	rr := mustNew(t, RoundRobin, fleetOf(3))
	for i, want := range []int{0, 1, 2, 0, 1} {
		if p, _, _ := rr.Route(req(uint64(i), "x"), t0); p != want {
			t.Fatalf("round-robin pick %d went to %d, want %d", i, p, want)
		}
	}
	lr := mustNew(t, LeastRequest, fleetOf(2))
	p0, t1, _ := lr.Route(req(1, "x"), t0)
	p1, _, _ := lr.Route(req(2, "x"), t0)
	if p0 == p1 {
		t.Fatal("least-request sent two requests to one pod of two idle ones")
	}
	lr.ObserveCompletion(t1, 5, t0)
	if p, _, _ := lr.Route(req(3, "x"), t0); p != p0 {
		t.Fatalf("least-request ignored a completion: picked %d, want the freed %d", p, p0)
	}
}

func TestArgminBreaksTiesAtRandom(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 1))
	seen := map[int]int{}
	for range 300 {
		seen[argmin([]float64{2, 1, 1, 1}, rng)]++
	}
	if seen[0] != 0 || seen[1] < 60 || seen[2] < 60 || seen[3] < 60 {
		t.Fatalf("ties not shared: %v", seen)
	}
}

// SGLang's rule: prefix match above 30% wins while load is balanced; an
// imbalance beyond both thresholds sends to the least-loaded worker;
// otherwise the smallest tree takes the request.
func TestSGLangCacheAware(t *testing.T) {
	s := mustNew(t, SGLangCacheAware, fleetOf(3)).(*sglang)
	system := strings.Repeat("shared system prompt ", 40)
	first, _, _ := s.Route(req(1, system+"question one"), t0)
	if again, _, _ := s.Route(req(2, system+"question two"), t0); again != first {
		t.Fatalf("prefix match above threshold went to %d, not %d", again, first)
	}
	// A prompt sharing nothing goes to the smallest tree: an empty one.
	other, _, _ := s.Route(req(3, strings.Repeat("unrelated text ", 50)), t0)
	if other == first || s.treeSize[other] == 0 {
		t.Fatalf("no-match request went to %d (tree %v)", other, s.treeSize)
	}
	// Imbalance: 100 in flight on the prefix worker, 0 elsewhere.
	s.load[first] = 100
	if p, _, _ := s.Route(req(4, system+"question three"), t0); p == first {
		t.Fatal("imbalanced load still followed the prefix")
	}
}

// Dynamo's cost: a worker holding the prefix saves its blocks of prefill,
// and every worker pays for its active (in-flight) blocks.
func TestDynamoCost(t *testing.T) {
	d := mustNew(t, DynamoCost, fleetOf(2)).(*dynamo)
	system := strings.Repeat("shared system prompt ", 100)
	p, first, _ := d.Route(req(1, system+"question one"), t0)
	blocks := d.active[p]
	if blocks == 0 || d.prefill[p] != blocks {
		t.Fatalf("first request: active %v prefill %v", d.active, d.prefill)
	}
	d.ObserveFirstToken(first, t0)
	if d.prefill[p] != 0 {
		t.Fatalf("prefill blocks not released at the first token: %v", d.prefill)
	}
	d.ObserveCompletion(first, 10, t0)
	if d.active[p] != 0 {
		t.Fatalf("active blocks not released at completion: %v", d.active)
	}
	// Both idle: the holder of the prefix wins.
	q, second, _ := d.Route(req(2, system+"question two"), t0)
	if q != p {
		t.Fatal("an idle holder of the prefix lost to an idle worker without it")
	}
	// While that request is in flight its active blocks outweigh the overlap
	// credit (Dynamo's cost weighs both 1).
	if r, _, _ := d.Route(req(3, system+"question three"), t0); r == p {
		t.Fatal("the holder's active blocks were not counted")
	}
	d.ObserveCompletion(second, 10, t0)
}

func TestEPPPoliciesRouteThroughTheDirector(t *testing.T) {
	for _, name := range []string{IGW, LegacyBlend} {
		r := mustNew(t, name, fleetOf(2))
		if w := r.Wants(); !w.Telemetry || !w.Tokens {
			t.Fatalf("%s wants %+v", name, w)
		}
		for pod := range 2 {
			r.Observe(pod, &datastore.Metrics{KVCacheKnown: true, SampledAt: t0}, t0)
		}
		seen := map[int]bool{}
		for i := range 4 {
			p, ticket, err := r.Route(req(uint64(i), strings.Repeat("prompt "+strconv.Itoa(i)+" ", 200)), t0)
			if err != nil || p < 0 || p > 1 || ticket == nil {
				t.Fatalf("%s: pod %d ticket %v err %v", name, p, ticket, err)
			}
			seen[p] = true
			r.ObserveFirstToken(ticket, t0.Add(50*time.Millisecond))
			r.ObserveTokens(ticket, 1, t0.Add(60*time.Millisecond))
			r.ObserveCompletion(ticket, 2, t0.Add(70*time.Millisecond))
		}
		if len(seen) != 2 {
			t.Errorf("%s used one pod of two idle ones", name)
		}
	}
}

func TestNewRejectsUnknownAndOracleWithoutModel(t *testing.T) {
	if _, err := New("fastest", fleetOf(1), 1); err == nil {
		t.Fatal("unknown policy accepted")
	}
	if _, err := New(Oracle, fleetOf(1), 1); err == nil || !strings.Contains(err.Error(), "exact cost model") {
		t.Fatalf("oracle without a predictor: %v", err)
	}
	predicted := []time.Duration{3 * time.Second, time.Second}
	o, err := New(Oracle, Fleet{Pods: fleetOf(2).Pods, Predict: func(pod int, _ *Request, _ time.Time) (time.Duration, error) {
		return predicted[pod], nil
	}}, 1)
	if err != nil {
		t.Fatal(err)
	}
	if p, _, _ := o.Route(req(1, "x"), t0); p != 1 {
		t.Fatalf("oracle picked %d, want the pod predicted first", p)
	}
}

// Every global policy but the oracle is a pipeline of the global picker;
// round-robin's picker takes the members in turn, skipping none that passed.
func TestGlobalPipelines(t *testing.T) {
	for _, name := range GlobalNames {
		pl, err := GlobalPipeline(name, []Link{{From: "a", To: "b", Delay: 40 * time.Millisecond}}, time.Millisecond)
		if name == GlobalOracle {
			if err == nil {
				t.Errorf("%s has a pipeline", name)
			}
			continue
		}
		if err != nil || pl == nil {
			t.Fatalf("%s: %v", name, err)
		}
	}
	p := &roundRobinPicker{last: -1}
	cands := []*datastore.View{{ID: 4}, {ID: 1}, {ID: 7}}
	var got []int32
	for range 4 {
		got = append(got, cands[p.Pick(nil, cands, nil, 1, nil)[0]].ID)
	}
	if !slices.Equal(got, []int32{1, 4, 7, 1}) {
		t.Fatalf("round-robin picked %v", got)
	}
	if two := p.Pick(nil, cands, nil, 2, nil); cands[two[0]].ID != 4 || cands[two[1]].ID != 7 {
		t.Fatalf("round-robin's pick and fallback %v", two)
	}
}

// igw's admission follows the scenario's SLO, as a route's would; the peers'
// configurations are left as published.
func TestIGWAdmissionFollowsTheSLO(t *testing.T) {
	f := fleetOf(2)
	f.SLO = admission.SLO{TTFTSeconds: 4, TPOTSeconds: 0.2}
	for name, want := range map[string]float64{IGW: 3, IGWPrecise: 3, LegacyBlend: 0, LLMDPrecise: 0} {
		if got := mustNew(t, name, f).(*eppRouter).d.Pipeline().Admission.MaxWaitSeconds; got != want {
			t.Errorf("%s: wait bound %v s, want %v s", name, got, want)
		}
	}
}
