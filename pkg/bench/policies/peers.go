package policies

import (
	"math"
	"math/rand/v2"
	"time"

	"github.com/igw-dev/igw/pkg/epp/datastore"
	"github.com/igw-dev/igw/pkg/epp/director"
	"github.com/igw-dev/igw/pkg/epp/prefixindex"
	"github.com/igw-dev/igw/pkg/tokencount"
)

// Both peers track prefixes in blocks of the servers' 16-token KV blocks
// (64 characters of the project's tokenizer).
const (
	peerBlockTokens = 16
	peerBlockChars  = peerBlockTokens * tokencount.CharsPerToken
)

// prefixTracker is a router's own approximate record of which prompt prefixes
// it sent to which pod (it cannot see the servers' caches), reusing igw's
// chained-hash index with one LRU per pod.
type prefixTracker struct {
	index   *prefixindex.Index
	hashes  []uint64
	matched []int32
	slots   []int32
}

func newPrefixTracker(pods int, capacity func(pod int) int) *prefixTracker {
	t := &prefixTracker{index: prefixindex.New(1), matched: make([]int32, pods)}
	for p := range pods {
		t.index.SetCapacity(int32(p), max(1, capacity(p)))
	}
	return t
}

// match hashes req's prompt and returns the leading blocks each pod holds.
func (t *prefixTracker) match(req *Request) (blocks int, matched []int32) {
	seed := req.Model
	if req.Adapter != "" {
		seed = req.Adapter // adapters compute different KV, as the servers' hashes say
	}
	t.hashes = prefixindex.Hash(t.hashes[:0], seed, req.Prompt, peerBlockChars, 0)
	clear(t.matched)
	_, t.slots = t.index.Match(t.hashes, t.matched, t.slots[:0])
	return len(t.hashes), t.matched
}

// add records that pod now holds the prompt last matched.
func (t *prefixTracker) add(pod int) { t.index.Add(int32(pod), t.hashes, t.slots) }

// SGLang model gateway's cache-aware policy. Defaults of its router: balance
// thresholds 64 (absolute) and 1.5 (relative), cache threshold 0.3, a tree of
// at most 2^26 characters per worker.
const (
	sglangBalanceAbs    = 64
	sglangBalanceRel    = 1.5
	sglangCacheMinRate  = 0.3
	sglangMaxTreeBlocks = (1 << 26) / peerBlockChars
)

// sglang routes by its published rule: when load (requests in flight as the
// router counts them) is imbalanced, to the least-loaded worker; otherwise to
// the worker with the best prefix match if it covers more than 30% of the
// prompt; otherwise to the worker whose cache tree is smallest. The chosen
// worker's tree then holds the prompt.
type sglang struct {
	load     []float64
	treeSize []float64 // blocks recorded per worker
	tracker  *prefixTracker
	rng      *rand.Rand
	scratch  []float64
}

func newSGLang(fleet Fleet, rng *rand.Rand) *sglang {
	n := len(fleet.Pods)
	return &sglang{load: make([]float64, n), treeSize: make([]float64, n), rng: rng, scratch: make([]float64, n),
		tracker: newPrefixTracker(n, func(int) int { return sglangMaxTreeBlocks })}
}

func (s *sglang) Route(req *Request, _ time.Time) (int, Ticket, error) {
	blocks, matched := s.tracker.match(req)
	lo, hi := s.load[0], s.load[0]
	for _, l := range s.load {
		lo, hi = math.Min(lo, l), math.Max(hi, l)
	}
	var pod int
	switch {
	case hi-lo > sglangBalanceAbs && hi > sglangBalanceRel*lo:
		pod = argmin(s.load, s.rng)
	default:
		for i, m := range matched {
			s.scratch[i] = -float64(m)
		}
		pod = argmin(s.scratch, s.rng)
		rate := float64(int(matched[pod])*peerBlockChars) / float64(max(len(req.Prompt), 1))
		if rate <= sglangCacheMinRate {
			pod = argmin(s.treeSize, s.rng)
		}
	}
	s.treeSize[pod] += float64(blocks - int(matched[pod]))
	s.tracker.add(pod)
	s.load[pod]++
	return pod, podTicket{pod}, nil
}

func (s *sglang) ObserveFirstToken(Ticket, time.Time)            {}
func (s *sglang) ObserveTokens(Ticket, int, time.Time)           {}
func (s *sglang) ObserveCompletion(t Ticket, _ int, _ time.Time) { s.load[t.(podTicket).pod]-- }
func (s *sglang) ObserveFailure(t Ticket, _ director.Failure, now time.Time) {
	s.ObserveCompletion(t, 0, now)
}
func (s *sglang) Observe(int, *datastore.Metrics, time.Time) {}
func (s *sglang) Wants() Feedback                            { return Feedback{} }

// dynamo is NVIDIA Dynamo's KV router cost with its defaults (prefill load
// scale 1, overlap credit 1, temperature 0: argmin with random ties):
//
//	cost = max(0, active prefill blocks + prompt blocks − overlap blocks) + active blocks + prompt blocks
//
// Active prefill blocks are the uncached prompt blocks of requests routed to
// the worker that have no first token yet; active blocks are the prompt
// blocks of every request in flight there. This is Dynamo's approximate
// mode (no KV events), where the overlap comes from the router's own record
// of what it sent, bounded per worker by the server's KV-cache size;
// dynamo-precise (precise.go) reads the overlap from the events instead.
type dynamo struct {
	prefill []float64
	active  []float64
	tracker *prefixTracker
	rng     *rand.Rand
	costs   []float64
	// overlap, when set, corrects the tracker's overlaps (blocks per pod).
	overlap func(req *Request, now time.Time, matched []int32)
}

type dynamoTicket struct {
	pod             int
	prefill, blocks float64
	prefillDone     bool
}

func newDynamo(fleet Fleet, rng *rand.Rand) *dynamo {
	n := len(fleet.Pods)
	return &dynamo{prefill: make([]float64, n), active: make([]float64, n), rng: rng, costs: make([]float64, n),
		tracker: newPrefixTracker(n, func(p int) int { return fleet.Pods[p].KVTokens / peerBlockTokens })}
}

func (d *dynamo) Route(req *Request, now time.Time) (int, Ticket, error) {
	_, matched := d.tracker.match(req)
	if d.overlap != nil {
		d.overlap(req, now, matched)
	}
	blocks := math.Ceil(float64(len(req.Tokens)) / peerBlockTokens)
	for p := range d.costs {
		d.costs[p] = math.Max(0, d.prefill[p]+blocks-float64(matched[p])) + d.active[p] + blocks
	}
	pod := argmin(d.costs, d.rng)
	d.tracker.add(pod)
	t := &dynamoTicket{pod: pod, prefill: math.Max(0, blocks-float64(matched[pod])), blocks: blocks}
	d.prefill[pod] += t.prefill
	d.active[pod] += blocks
	return pod, t, nil
}

func (d *dynamo) ObserveFirstToken(t Ticket, _ time.Time) {
	dt := t.(*dynamoTicket)
	if !dt.prefillDone {
		dt.prefillDone = true
		d.prefill[dt.pod] -= dt.prefill
	}
}

func (d *dynamo) ObserveTokens(Ticket, int, time.Time) {}

func (d *dynamo) ObserveCompletion(t Ticket, _ int, now time.Time) {
	d.ObserveFirstToken(t, now)
	dt := t.(*dynamoTicket)
	d.active[dt.pod] -= dt.blocks
}

func (d *dynamo) ObserveFailure(t Ticket, _ director.Failure, now time.Time) {
	d.ObserveCompletion(t, 0, now)
}

func (d *dynamo) Observe(int, *datastore.Metrics, time.Time) {}
func (d *dynamo) Wants() Feedback                            { return Feedback{} }
