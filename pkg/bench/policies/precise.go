package policies

import (
	"math/rand/v2"
	"time"

	"github.com/igw-dev/igw/pkg/epp/director"
	"github.com/igw-dev/igw/pkg/epp/kvevents"
	"github.com/igw-dev/igw/pkg/epp/scheduling/plugins/preciseprefixcache"
)

// Precise-mode policy names: the same routers reading the exact block index
// the servers' KV events build (pkg/epp/kvevents), each falling back, pod by
// pod, to its approximate form where events are absent or lost.
const (
	LLMDPrecise   = "llm-d-precise"
	DynamoPrecise = "dynamo-precise"
	IGWPrecise    = "igw-precise"
)

// KVEventReceiver is a Router that reads the servers' KV events (Feedback
// KVEvents): a backend hands it every batch a pod's engine publishes, and
// every batch the engine dropped, at the time the engine produced it; the
// router applies them after the fleet's KVEventDelay.
type KVEventReceiver interface {
	PublishKVEvents(pod int, at time.Time, events []kvevents.Event)
	LostKVEvents(pod int, at time.Time)
}

// LLMDPreciseConfig is llm-d's published precise prefix-cache routing, as an
// EPP configuration: the precise prefix-cache scorer (exact blocks from KV
// events) at weight 3, kv-cache utilisation and queue at 2 each, max-score
// picker: the legacy blend's weights with the precise scorer. Its blocks are
// the servers' 16 tokens, with no minimum match; where a pod has no exact
// stream the scorer reads the approximate index, keyed as the legacy blend's.
var LLMDPreciseConfig = blendConfig(`{name: prefix, type: precise-prefix-cache, parameters: {blockSize: 16, minMatchTokens: 16}}`)

// IGWPreciseConfig is igw's default configuration (config.Default) plus the
// precise prefix-cache scorer at weight 1, ahead of predicted-latency
// (preciseprefixcache.DefaultConfig), its blocks the servers' 16 tokens. It
// is not igw's default, since it needs the servers' KV events. Over windows
// of the Mooncake traces (make bench-windows) it holds 1.02 times igw's
// capacity under SLO on the conversation trace and 1.07 times on the
// synthetic one, whose prompts of up to 130k tokens the approximate index
// keys only in part.
var IGWPreciseConfig = preciseprefixcache.DefaultConfig(`{blockSize: 16}`)

// eventFeed is a router's exact index: a kvevents hub (no subscribers: the
// backend delivers in process) fed after the fleet's event delay.
type eventFeed struct {
	hub  *kvevents.Hub
	feed *kvevents.Feed
	keys []string
}

func newEventFeed(hub *kvevents.Hub, fleet Fleet, keys []string) *eventFeed {
	return &eventFeed{hub: hub, feed: hub.NewFeed(fleet.KVEventDelay), keys: keys}
}

// PublishKVEvents implements KVEventReceiver.
func (f *eventFeed) PublishKVEvents(pod int, at time.Time, events []kvevents.Event) {
	f.feed.Publish(f.keys[pod], at, events)
}

// LostKVEvents implements KVEventReceiver.
func (f *eventFeed) LostKVEvents(pod int, at time.Time) { f.feed.Lost(f.keys[pod], at) }

// bindPrecise gives the director's precise scorers a hub of their own and
// returns its feed, or nil when the configuration has none.
func bindPrecise(d *director.Director, fleet Fleet, keys []string) *eventFeed {
	hub := kvevents.NewHub(nil)
	if preciseprefixcache.BindAll(d.Pipeline().Profile, hub) == 0 {
		return nil
	}
	return newEventFeed(hub, fleet, keys)
}

// dynamoPrecise is Dynamo's KV router with KV events: the same cost, its
// overlap read from the exact index of what each worker holds; a worker
// without an exact stream is priced from the router's own record, as Dynamo
// without events is.
type dynamoPrecise struct {
	*dynamo
	*eventFeed
	matched, bySlot []int32
}

func newDynamoPrecise(fleet Fleet, rng *rand.Rand) *dynamoPrecise {
	keys := make([]string, len(fleet.Pods))
	for i, p := range fleet.Pods {
		keys[i] = endpointOf(i, p).Key()
	}
	d := &dynamoPrecise{dynamo: newDynamo(fleet, rng), eventFeed: newEventFeed(kvevents.NewHub(nil), fleet, keys)}
	d.overlap = d.exactOverlap
	return d
}

// exactOverlap overwrites the approximate overlaps with exact ones where the
// pod's stream is exact.
func (d *dynamoPrecise) exactOverlap(req *Request, now time.Time, matched []int32) {
	d.feed.Advance(now)
	if len(req.Tokens) == 0 {
		return
	}
	d.matched, d.bySlot = d.hub.Index().MatchPrompt(kvevents.Seed(req.Adapter), req.Tokens, 0, d.keys, d.matched, d.bySlot)
	for p, m := range d.matched {
		if m >= 0 {
			matched[p] = m
		}
	}
}

func (d *dynamoPrecise) Wants() Feedback { return Feedback{KVEvents: true} }
