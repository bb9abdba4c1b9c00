package workload

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/igw-dev/igw/pkg/bench/scenario"
	"github.com/igw-dev/igw/pkg/bench/scenario/scenariotest"
	"github.com/igw-dev/igw/pkg/tokenizer"
)

const fleet = `
fleet:
  - {name: h100, replicas: 2, gpu: H100, model: llama-3.1-8b, maxLoras: 4}
`

// withWorkload parses scenario x on the test fleet: the top-level keys top
// (duration, warmup) and the workload's keys.
func withWorkload(t *testing.T, top, workload string) *scenario.Scenario {
	t.Helper()
	return scenariotest.Parse(t, "test.yaml", "name: x\n"+top+fleet+"workload:\n"+workload)
}

// steady is the workload keys of constant arrivals with fixed lengths.
func steady(rate, input, output int) string {
	return fmt.Sprintf("  arrival: {type: constant, rate: %d}\n  input: {dist: fixed, value: %d}\n  output: {dist: fixed, value: %d}\n", rate, input, output)
}

// drain releases every request, finishing each one at its arrival plus 1 s.
func drain(t *testing.T, g *Generator) []*Request {
	t.Helper()
	var out []*Request
	type inflight struct {
		r   *Request
		end time.Duration
	}
	var pending []inflight
	for {
		next, ok := g.Next()
		if len(pending) > 0 && (!ok || pending[0].end <= next) {
			g.Finished(pending[0].r, pending[0].end, true)
			pending = pending[1:]
			continue
		}
		if !ok {
			return out
		}
		r := g.Pop()
		if r.Arrival != next {
			t.Fatalf("popped %v, announced %v", r.Arrival, next)
		}
		if len(out) > 0 && r.Arrival < out[len(out)-1].Arrival {
			t.Fatalf("releases out of order: %v after %v", r.Arrival, out[len(out)-1].Arrival)
		}
		out = append(out, r)
		pending = append(pending, inflight{r, r.Arrival + time.Second})
		slices.SortFunc(pending, func(a, b inflight) int { return int(a.end - b.end) })
	}
}

func TestDeterministicPerSeed(t *testing.T) {
	sc := withWorkload(t, "duration: 60s\nwarmup: 10s", `
  arrival: {type: poisson, rate: 5}
  input: {dist: lognormal, median: 200, sigma: 1}
  output: {dist: uniform, min: 1, max: 50}
  sharedPrefix: {groups: 3, usersPerGroup: 2, systemPromptTokens: 100}
  multiTurn: {turns: 3, thinkTime: {dist: uniform, min: 1s, max: 3s}}
  lora: {adapters: 5, fraction: 0.5, popularity: {dist: zipf, s: 1}}
`)
	run := func(seed uint64) []*Request {
		g, err := New(sc, seed, 100000)
		if err != nil {
			t.Fatal(err)
		}
		return drain(t, g)
	}
	a, b, c := run(1), run(1), run(2)
	if len(a) != len(b) {
		t.Fatalf("same seed, %d vs %d requests", len(a), len(b))
	}
	for i := range a {
		if a[i].ID != b[i].ID || a[i].Arrival != b[i].Arrival || a[i].Prompt != b[i].Prompt ||
			a[i].OutputTokens != b[i].OutputTokens || a[i].Adapter != b[i].Adapter || a[i].Counted != b[i].Counted {
			t.Fatalf("request %d differs between runs of the same seed", i)
		}
	}
	if len(c) == len(a) && c[0].Prompt == a[0].Prompt {
		t.Fatal("another seed gives the same workload")
	}
	for _, r := range a {
		if r.Counted != (r.Arrival >= 10*time.Second) || r.Arrival > 60*time.Second {
			t.Fatalf("request at %v counted=%v", r.Arrival, r.Counted)
		}
		if !slices.Equal(r.Tokens, tokenizer.Tokenize(r.Prompt)) {
			t.Fatal("tokens are not the prompt's")
		}
	}
}

func TestMultiTurnHistoryIsAPrefix(t *testing.T) {
	sc := withWorkload(t, "duration: 30s", steady(1, 37, 21)+`
  sharedPrefix: {groups: 1, usersPerGroup: 1, systemPromptTokens: 50}
  multiTurn: {turns: 3, thinkTime: {dist: fixed, value: 2s}}
`)
	g, _ := New(sc, 7, 100000)
	reqs := drain(t, g)
	bySession := map[int][]*Request{}
	for _, r := range reqs {
		bySession[r.Session] = append(bySession[r.Session], r)
	}
	system := tokenizer.Tokenize(tokenizer.GenerateText(g.textSeed(-1, 0), 50))
	for s, turns := range bySession {
		if !slices.Equal(turns[0].Tokens[:50], system) || len(turns[0].Tokens) != 50+37 {
			t.Fatalf("session %d: first turn is not system prompt + input", s)
		}
		for k := 1; k < len(turns); k++ {
			prev, cur := turns[k-1], turns[k]
			history := append(slices.Clone(prev.Tokens), outputTokens(prev.OutputTokens)...)
			if !slices.Equal(cur.Tokens[:len(history)], history) || len(cur.Tokens) != len(history)+37 {
				t.Fatalf("session %d turn %d does not extend the previous prompt and reply", s, k)
			}
			if cur.Arrival != prev.Arrival+time.Second+2*time.Second {
				t.Fatalf("turn %d arrived at %v, want previous finish + think time", k, cur.Arrival)
			}
		}
	}
	if len(bySession[0]) != 3 {
		t.Fatalf("first conversation has %d turns", len(bySession[0]))
	}
}

func outputTokens(n int) []uint32 {
	out := make([]uint32, n)
	for i := range out {
		out[i] = tokenizer.OutputToken(i)
	}
	return out
}

func TestArrivalRatesAndShapes(t *testing.T) {
	count := func(a scenario.Arrival, stages []scenario.Stage, horizon time.Duration) []time.Duration {
		ar := newArrivals(a, stages, horizon, rand.New(rand.NewPCG(3, 4)))
		var ts []time.Duration
		for {
			at, ok := ar.next()
			if !ok {
				return ts
			}
			ts = append(ts, at)
		}
	}
	const h = 2000 * time.Second
	if n := len(count(scenario.Arrival{Type: "poisson", Rate: 10}, nil, h)); math.Abs(float64(n)-20000) > 500 {
		t.Errorf("poisson: %d arrivals, want about 20000", n)
	}
	cst := count(scenario.Arrival{Type: "constant", Rate: 4}, nil, 10*time.Second)
	if len(cst) != 40 || cst[1]-cst[0] != 250*time.Millisecond {
		t.Errorf("constant: %d arrivals, gap %v", len(cst), cst[1]-cst[0])
	}
	g := count(scenario.Arrival{Type: "gamma", Rate: 10, CV: 4}, nil, h)
	if cv := gapCV(g); !(math.Abs(cv-4) <= 0.6) || math.Abs(float64(len(g))-20000) > 3000 { // NaN fails
		t.Errorf("gamma: cv %.2f over %d arrivals, want 4 and about 20000", cv, len(g))
	}
	for _, at := range count(scenario.Arrival{Type: "onoff", Rate: 10, On: 2 * time.Second, Off: 3 * time.Second}, nil, 100*time.Second) {
		if at%(5*time.Second) >= 2*time.Second {
			t.Fatalf("arrival at %v falls in an off period", at)
		}
	}
	st := count(scenario.Arrival{Type: "poisson", Rate: 1}, []scenario.Stage{{Rate: 0, Duration: 100 * time.Second}, {Rate: 50, Duration: 100 * time.Second}}, 300*time.Second)
	var first, second, third int
	for _, at := range st {
		switch {
		case at < 100*time.Second:
			first++
		case at < 200*time.Second:
			second++
		default:
			third++
		}
	}
	if first != 0 || math.Abs(float64(second)-5000) > 300 || math.Abs(float64(third)-100) > 40 {
		t.Errorf("stages: %d / %d / %d arrivals, want 0 / ~5000 / ~100", first, second, third)
	}
}

func gapCV(ts []time.Duration) float64 {
	var sum, sq float64
	for i := 1; i < len(ts); i++ {
		g := (ts[i] - ts[i-1]).Seconds()
		sum += g
		sq += g * g
	}
	n := float64(len(ts) - 1)
	mean := sum / n
	return math.Sqrt(sq/n-mean*mean) / mean
}

func TestZipfAdapters(t *testing.T) {
	p := newPopularity(15, scenario.Popularity{Dist: "zipf", S: 1.1})
	r := rand.New(rand.NewPCG(1, 2))
	counts := make([]int, 15)
	for range 100000 {
		counts[p.draw(r)]++
	}
	// P(1)/P(2) = 2^1.1 ≈ 2.14.
	if ratio := float64(counts[0]) / float64(counts[1]); !(math.Abs(ratio-2.14) <= 0.1) { // NaN fails
		t.Errorf("zipf ratio of the two most popular adapters %.2f, want 2.14", ratio)
	}
	for k := 1; k < 15; k++ {
		if counts[k] > counts[k-1]+200 {
			t.Errorf("adapter %d more popular than %d", k, k-1)
		}
	}
}

func TestSingleRequestsFitTheContext(t *testing.T) {
	sc := withWorkload(t, "duration: 20s", steady(5, 5000, 700))
	g, _ := New(sc, 1, 4000)
	for _, r := range drain(t, g) {
		if len(r.Tokens)+r.OutputTokens > 4000 || r.OutputTokens != 700 {
			t.Fatalf("request of %d+%d tokens for a 4000-token context", len(r.Tokens), r.OutputTokens)
		}
	}
}

func TestFixedQuestionsRepeatEachUsersPromptInTurn(t *testing.T) {
	sc := withWorkload(t, "duration: 100s", `
  arrival: {type: constant, rate: 1}
  input: {dist: uniform, min: 20, max: 60}
  output: {dist: fixed, value: 5}
  sharedPrefix: {groups: 3, usersPerGroup: 2, systemPromptTokens: 50, fixedQuestions: true}
`)
	g, err := New(sc, 1, 100000)
	if err != nil {
		t.Fatal(err)
	}
	reqs := drain(t, g)
	const users = 6
	if len(reqs) < 3*users {
		t.Fatalf("%d requests, want at least %d", len(reqs), 3*users)
	}
	first := map[string]int{} // prompt -> index of its first request
	for i, r := range reqs {
		if i < users {
			if _, dup := first[r.Prompt]; dup {
				t.Fatalf("request %d repeats a prompt before every user had a turn", i)
			}
			first[r.Prompt] = i
			continue
		}
		if r.Prompt != reqs[i-users].Prompt {
			t.Fatalf("request %d is not the prompt of request %d: users do not take turns in one order", i, i-users)
		}
	}
	// Users of one group share its system prompt and differ after it.
	byGroup := map[string][]string{}
	for p := range first {
		sys := tokenizer.Tokenize(p)[:50]
		byGroup[fmt.Sprint(sys)] = append(byGroup[fmt.Sprint(sys)], p)
	}
	if len(byGroup) != 3 {
		t.Fatalf("%d distinct system prompts among the users, want 3", len(byGroup))
	}
	for _, ps := range byGroup {
		if len(ps) != 2 || ps[0] == ps[1] {
			t.Fatalf("a group's users ask %d distinct questions, want 2", len(ps))
		}
	}
	other, err := New(sc, 2, 100000)
	if err != nil {
		t.Fatal(err)
	}
	if drain(t, other)[0].Prompt == reqs[0].Prompt {
		t.Fatal("another seed gives the same first prompt")
	}
}
