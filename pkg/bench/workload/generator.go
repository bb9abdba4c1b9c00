// Package workload generates a scenario's requests, deterministically per seed
// and identically for every routing policy: arrival times of sessions, their
// prompt texts and token IDs, output lengths and adapters. Prompts are built
// with pkg/tokenizer so that a shared system prompt and a conversation's
// history share leading KV-cache blocks exactly as the simulator caches them.
//
// A session is one request, or with multiTurn a conversation: its next turn's
// prompt is the previous prompt, the previous reply (tokenizer.OutputText) and
// new user text, released thinkTime after the previous turn finished. That
// release depends on when the backend finished the turn, so the generator is
// driven by the backend: Next/Pop for releases, Finished for completions.
package workload

import (
	"fmt"
	"math/rand/v2"
	"strconv"
	"time"

	"github.com/igw-dev/igw/internal/splitmix"
	"github.com/igw-dev/igw/internal/timeheap"
	"github.com/igw-dev/igw/pkg/bench/scenario"
	"github.com/igw-dev/igw/pkg/tokenizer"
)

// Request is one request of the workload.
type Request struct {
	// ID is unique in the run and stable across policies: session × turns + turn.
	ID      uint64
	Session int
	Turn    int
	// Arrival is when the client sends it, since the start of the run.
	Arrival time.Duration
	// Model is the served model; Adapter the LoRA adapter ("" for the base model).
	Model   string
	Adapter string
	// Prompt is the text; Tokens its token IDs (tokenizer.Tokenize(Prompt)).
	Prompt string
	Tokens []uint32
	// OutputTokens is the exact number of tokens the server generates.
	OutputTokens int
	// Counted is false for requests arriving during the warmup.
	Counted bool
	// Origin is the client region the session comes from (multi-cluster
	// scenarios; "" otherwise).
	Origin string
}

// session is one conversation's state.
type session struct {
	id      int
	group   int // shared-prefix group, -1 for none
	user    int // fixed-question user (sharedPrefix.fixedQuestions), -1 for none
	adapter string
	inputs  []int // new user tokens per turn
	outputs []int
	thinks  []time.Duration
	context string // prompt and reply of the last finished turn
}

// Generator releases a scenario's requests in time order. It is not safe for
// concurrent use; a wall-clock backend serialises its calls.
type Generator struct {
	sc         *scenario.Scenario
	seed       uint64
	model      string
	maxContext int
	turns      int

	arrivals    arrivalSource
	attrs       *rand.Rand
	nextArrival time.Duration
	hasArrival  bool
	sessions    int

	live     map[uint64]*session // sessions with a turn in flight or pending
	followUp timeheap.Heap[release]
	system   []string // per group, built on first use
	users    []int    // fixedQuestions: the users' shuffled turn order
	pop      *popularity

	origins   []string  // client regions
	originCum []float64 // their cumulative shares
}

// New returns the workload of sc for seed. maxContext is the longest prompt
// plus output every pod accepts: single requests are shortened to fit, and a
// conversation ends when its next turn would not fit.
func New(sc *scenario.Scenario, seed uint64, maxContext int) (*Generator, error) {
	w := sc.Workload
	g := &Generator{sc: sc, seed: seed, model: sc.Model(), maxContext: maxContext, turns: 1,
		attrs: rand.New(rand.NewPCG(seed, 0x5e55)), live: map[uint64]*session{}}
	g.origins, g.originCum = sc.OriginRegions()
	if w.MultiTurn != nil {
		g.turns = w.MultiTurn.Turns
	}
	if sp := w.SharedPrefix; sp != nil {
		if sp.SystemPromptTokens+2 > maxContext {
			return nil, fmt.Errorf("system prompts of %d tokens do not fit the fleet's context of %d tokens", sp.SystemPromptTokens, maxContext)
		}
		g.system = make([]string, sp.Groups)
		if sp.FixedQuestions {
			g.users = rand.New(rand.NewPCG(seed, 0x757365)).Perm(sp.Groups * sp.UsersPerGroup)
		}
	}
	if w.LoRA != nil && w.LoRA.Fraction > 0 {
		g.pop = newPopularity(w.LoRA.Adapters, w.LoRA.Popularity)
	}
	if w.Trace != nil {
		g.arrivals = &traceArrivals{trace: w.Trace, horizon: sc.Duration}
	} else {
		g.arrivals = newArrivals(w.Arrival, w.Stages, sc.Duration, rand.New(rand.NewPCG(seed, 0xa441)))
	}
	g.nextArrival, g.hasArrival = g.arrivals.next()
	return g, nil
}

// AdapterName is the name of adapter k (0-based; 0 is the most popular).
func AdapterName(k int) string { return "adapter-" + strconv.Itoa(k+1) }

// Next is the release time of the next request, false when none is known:
// arrivals have stopped and no conversation awaits a release (one may still
// follow a Finished call).
func (g *Generator) Next() (time.Duration, bool) {
	switch {
	case g.followUpFirst():
		at, _ := g.followUp.Next()
		return at, true
	case g.hasArrival:
		return g.nextArrival, true
	}
	return 0, false
}

// followUpFirst: a conversation's next turn is due no later than the next
// arrival.
func (g *Generator) followUpFirst() bool {
	at, ok := g.followUp.Next()
	return ok && (!g.hasArrival || at <= g.nextArrival)
}

// Pop releases the request Next announced.
func (g *Generator) Pop() *Request {
	if g.followUpFirst() {
		at, r := g.followUp.Pop()
		return g.turn(r.s, r.turn, at)
	}
	if !g.hasArrival {
		return nil
	}
	at := g.nextArrival
	if t, ok := g.arrivals.(*traceArrivals); ok {
		rec := t.current()
		g.nextArrival, g.hasArrival = g.arrivals.next()
		return g.traceRequest(rec, at)
	}
	g.nextArrival, g.hasArrival = g.arrivals.next()
	return g.turn(g.newSession(), 0, at)
}

// Finished tells the generator that req ended at the given time; ok is false
// for a failed request, which ends its conversation.
func (g *Generator) Finished(req *Request, at time.Duration, ok bool) {
	s := g.live[req.ID]
	if s == nil {
		return
	}
	delete(g.live, req.ID)
	next := req.Turn + 1
	if !ok || next >= g.turns {
		return
	}
	at += s.thinks[next]
	s.context = tokenizer.Join(req.Prompt, tokenizer.OutputText(0, req.OutputTokens))
	if at > g.sc.Duration || tokenizer.Count(s.context)+s.inputs[next]+s.outputs[next] > g.maxContext {
		return // arrivals stop at the duration; a client stops at the context limit
	}
	g.followUp.Push(at, uint64(s.id), release{s: s, turn: next}) // session ids count up from 0
}

// newSession draws everything about a session up front, so that its content
// does not depend on how fast a policy serves it.
func (g *Generator) newSession() *session {
	w := g.sc.Workload
	r := g.attrs
	s := &session{id: g.sessions, group: -1, user: -1}
	g.sessions++
	switch sp := w.SharedPrefix; {
	case g.users != nil:
		s.user = g.users[s.id%len(g.users)]
		s.group = s.user / sp.UsersPerGroup
	case sp != nil:
		s.group = r.IntN(sp.Groups*sp.UsersPerGroup) / sp.UsersPerGroup
	}
	s.adapter = g.drawAdapter()
	s.inputs, s.outputs, s.thinks = make([]int, g.turns), make([]int, g.turns), make([]time.Duration, g.turns)
	for k := range g.turns {
		if s.user >= 0 {
			s.inputs[k] = g.questionLength(s.user)
		} else {
			s.inputs[k] = sampleCount(r, w.Input)
		}
		s.outputs[k] = sampleCount(r, w.Output)
		if k > 0 {
			s.thinks[k] = sampleDuration(r, w.MultiTurn.ThinkTime)
		}
	}
	if s.group >= 0 {
		s.context = g.systemPrompt(s.group)
	}
	return s
}

// drawAdapter names the adapter a new session uses ("" for the base model).
func (g *Generator) drawAdapter() string {
	if g.pop != nil && g.attrs.Float64() < g.sc.Workload.LoRA.Fraction {
		return AdapterName(g.pop.draw(g.attrs))
	}
	return ""
}

func (g *Generator) systemPrompt(group int) string {
	if g.system[group] == "" {
		g.system[group] = tokenizer.GenerateText(g.textSeed(-1, group), g.sc.Workload.SharedPrefix.SystemPromptTokens)
	}
	return g.system[group]
}

// questionLength is a fixed-question user's question length: drawn from the
// input distribution by the user alone, so it is the same on every turn.
func (g *Generator) questionLength(user int) int {
	return sampleCount(rand.New(rand.NewPCG(g.seed^0x7175657374696f6e, uint64(user))), g.sc.Workload.Input)
}

// textSeed names one piece of generated text: a session's turn, (session -1)
// a group's system prompt, or (session -2) a fixed-question user's question.
func (g *Generator) textSeed(session, part int) uint64 {
	return g.seed*0x9e3779b97f4a7c15 ^ uint64(session+1)<<20 ^ uint64(part)
}

// turn builds the request for turn k of s, arriving at at.
func (g *Generator) turn(s *session, k int, at time.Duration) *Request {
	input, output := s.inputs[k], s.outputs[k]
	prefix := tokenizer.Count(s.context)
	if k == 0 {
		input, output = g.fit(prefix, input, output)
	}
	text := g.textSeed(s.id, k)
	if s.user >= 0 {
		text = g.textSeed(-2, s.user)
	}
	prompt := tokenizer.Join(s.context, tokenizer.GenerateText(text, input))
	req := g.request(s.id, k, at, s.adapter, prompt, output)
	g.live[req.ID] = s
	return req
}

// fit shortens a single request (prompt of prefix plus input tokens, output
// tokens) to the fleet's context rather than dropping it: the output first,
// then the input.
func (g *Generator) fit(prefix, input, output int) (int, int) {
	output = max(1, min(output, g.maxContext-prefix-1))
	return max(1, min(input, g.maxContext-prefix-output)), output
}

// request builds turn k of session s arriving at at.
func (g *Generator) request(s, k int, at time.Duration, adapter, prompt string, output int) *Request {
	return &Request{
		ID: uint64(s)*uint64(g.turns) + uint64(k), Session: s, Turn: k, Arrival: at,
		Model: g.model, Adapter: adapter, Prompt: prompt, Tokens: tokenizer.Tokenize(prompt),
		OutputTokens: output, Counted: at >= g.sc.Warmup, Origin: g.origin(s),
	}
}

// origin is session s's client region: a draw by the origins' shares from a
// hash of the seed and the session, so that it takes nothing from the
// generator's other random streams.
func (g *Generator) origin(s int) string {
	if len(g.origins) == 0 {
		return ""
	}
	u := float64(splitmix.Mix(g.seed^0x6f726967696e^uint64(s)*0x9e3779b97f4a7c15)>>11) / (1 << 53)
	for i, c := range g.originCum {
		if u < c {
			return g.origins[i]
		}
	}
	return g.origins[len(g.origins)-1]
}

// release is a conversation's next turn waiting for its time.
type release struct {
	s    *session
	turn int
}

// MaxCounted is the most requests of sc's workload for seed that a run can
// count (arriving after the warmup): every session's turns, as if each
// conversation ran to its last turn.
func MaxCounted(sc *scenario.Scenario, seed uint64) int {
	g, err := New(sc, seed, 1<<30)
	if err != nil {
		return 0
	}
	sessions, turns := 0, g.turns
	for at, ok := g.nextArrival, g.hasArrival; ok; at, ok = g.arrivals.next() {
		if turns > 1 || at >= sc.Warmup {
			sessions++
		}
	}
	return sessions * turns
}
