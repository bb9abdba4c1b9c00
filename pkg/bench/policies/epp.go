package policies

import (
	"context"
	"net"
	"strconv"
	"time"

	"github.com/igw-dev/igw/pkg/epp/admission"
	"github.com/igw-dev/igw/pkg/epp/config"
	"github.com/igw-dev/igw/pkg/epp/datastore"
	"github.com/igw-dev/igw/pkg/epp/director"
	"github.com/igw-dev/igw/pkg/epp/kvevents"
	"github.com/igw-dev/igw/pkg/epp/latency"
	"github.com/igw-dev/igw/pkg/epp/scheduling"
	"github.com/igw-dev/igw/pkg/wire"
)

// LegacyBlendConfig is the default of the system igw is modelled on, as an EPP
// configuration: queue 2, kv-cache 2, prefix 3, max-score picker with random
// tie-break, its prefix scorer cutting prompts into 64-character (16-token)
// blocks, at most 256 of them, with no minimum match.
var LegacyBlendConfig = blendConfig(`{name: prefix, type: prefix-cache, parameters: {minMatchTokens: 16}}`)

// blendConfig is the legacy blend's weights (queue 2, kv-cache 2, prefix 3)
// and approximate prefix index (16-token blocks, at most 256) with the given
// prefix scorer, a plugin entry named prefix. Its admission has no overload
// bounds: the systems modelled shed no request of the default priority.
func blendConfig(prefixPlugin string) string {
	return `
plugins:
- ` + prefixPlugin + `
scorers:
- {plugin: queue, weight: 2}
- {plugin: kv-cache-utilization, weight: 2}
- {plugin: prefix, weight: 3}
picker: max-score-picker
prefix: {blockTokens: 16, maxBlocks: 256}
admission: {maxWaitSeconds: 0, maxInterTokenSeconds: 0}
`
}

// eppRouter is the real endpoint picker in process: every decision goes
// through director.Schedule, telemetry through UpdateMetrics, and the
// response path through the Observe methods, as the ext_proc server does.
type eppRouter struct {
	d     *director.Director
	keys  []string
	podOf map[string]int
	ctx   context.Context
	// events feeds the precise scorers, if the configuration has any.
	events *eventFeed
	// staleness is the telemetry age beyond which an endpoint is not fresh.
	staleness time.Duration
	// places are the held requests' places in the picker's queue, by
	// request ID; nil while holding is off (HoldRequests).
	places map[uint64]*director.Place
}

// HoldRequests implements Queuing.
func (r *eppRouter) HoldRequests() { r.places = map[uint64]*director.Place{} }

// StalenessFor is the telemetry age after which the picker treats an endpoint
// as stale: the production default (200 ms), or four scrapes when they are
// slower than that.
func StalenessFor(scrape time.Duration) time.Duration { return max(200*time.Millisecond, 4*scrape) }

// RouteSLO is a scenario's SLO as a route declares it to igw's picker,
// which bounds its admission by it.
func RouteSLO(ttft, tpot time.Duration) admission.SLO {
	return admission.SLO{TTFTSeconds: ttft.Seconds(), TPOTSeconds: tpot.Seconds()}
}

// RouteConfig is igw's picker configuration text ("" for the built-in one)
// told the route's SLO; unchanged when the SLO is not set.
func RouteConfig(yaml string, slo admission.SLO) (string, error) {
	if slo.TTFTSeconds > 0 && slo.TPOTSeconds > 0 {
		return config.WithRouteSLO(yaml, slo)
	}
	return yaml, nil
}

// newRouteEPP is newEPP for igw's own configurations, told the route's SLO.
func newRouteEPP(fleet Fleet, yaml string, seed uint64) (*eppRouter, error) {
	yaml, err := RouteConfig(yaml, fleet.SLO)
	if err != nil {
		return nil, err
	}
	return newEPP(fleet, yaml, seed)
}

// newEPP builds a director over the fleet with the given configuration
// ("" for config.Default, what igw ships).
func newEPP(fleet Fleet, yaml string, seed uint64) (*eppRouter, error) {
	store := datastore.NewStore(latency.DefaultPriors)
	r := &eppRouter{podOf: map[string]int{}, ctx: context.Background(), staleness: StalenessFor(fleet.ScrapeInterval)}
	eps := make([]datastore.Endpoint, len(fleet.Pods))
	for i, p := range fleet.Pods {
		eps[i] = endpointOf(i, p)
		r.keys = append(r.keys, eps[i].Key())
		r.podOf[eps[i].Key()] = i
	}
	store.SetEndpoints(eps)
	var err error
	r.d, err = config.NewDirector(store, yaml, director.Options{Staleness: r.staleness,
		StalePolicy: director.StaleSaturated, Seed: seed})
	if err == nil {
		r.events = bindPrecise(r.d, fleet, r.keys)
	}
	return r, err
}

// endpointOf is pod i's endpoint: its Key, or else a made-up unique address,
// labelled with its group and accelerator, as a pool's pods are.
func endpointOf(i int, p Pod) datastore.Endpoint {
	labels := map[string]string{"group": p.Group}
	if p.GPU != "" {
		labels[wire.LabelGPUProduct] = p.GPU
	}
	if host, port, err := net.SplitHostPort(p.Key); err == nil {
		if n, err := strconv.Atoi(port); err == nil {
			return datastore.Endpoint{Address: host, Port: n, Labels: labels}
		}
	}
	return datastore.Endpoint{Address: "10.0." + strconv.Itoa(i/250) + "." + strconv.Itoa(i%250+1), Port: 8000, Labels: labels}
}

func (r *eppRouter) Route(req *Request, now time.Time) (int, Ticket, error) {
	sreq := scheduling.Request{Model: req.Model, Adapter: req.Adapter, Prompt: req.Prompt}
	if r.events != nil {
		r.events.feed.Advance(now)
		sreq.TokenIDs = req.Tokens // the tokens the servers hash
	}
	if r.places == nil {
		res, apiErr := r.d.Schedule(r.ctx, &sreq, false, now)
		if apiErr != nil {
			return -1, nil, apiErr
		}
		return r.podOf[res.Primary], res, nil
	}
	res, place, apiErr := r.d.ScheduleQueued(r.ctx, &sreq, false, now, r.places[req.ID])
	if place != nil {
		r.places[req.ID] = place
		return -1, nil, &Held{Deadline: place.RetryBy()}
	}
	delete(r.places, req.ID)
	if apiErr != nil {
		return -1, nil, apiErr
	}
	return r.podOf[res.Primary], res, nil
}

func (r *eppRouter) ObserveFirstToken(t Ticket, now time.Time) {
	r.d.ObserveFirstToken(t.(*director.Result), now)
}

func (r *eppRouter) ObserveTokens(t Ticket, n int, now time.Time) {
	r.d.ObserveTokens(t.(*director.Result), n, now)
}

func (r *eppRouter) ObserveCompletion(t Ticket, outputTokens int, now time.Time) {
	r.d.ObserveCompletion(t.(*director.Result), outputTokens, now)
}

func (r *eppRouter) ObserveFailure(t Ticket, f director.Failure, now time.Time) {
	r.d.ObserveFailure(t.(*director.Result), f, now)
}

func (r *eppRouter) Observe(pod int, m *datastore.Metrics, now time.Time) {
	r.d.UpdateMetrics(r.keys[pod], *m, now)
}

func (r *eppRouter) Wants() Feedback {
	return Feedback{Telemetry: true, Tokens: true, KVEvents: r.events != nil}
}

// PublishKVEvents implements KVEventReceiver (precise configurations only).
func (r *eppRouter) PublishKVEvents(pod int, at time.Time, events []kvevents.Event) {
	if r.events != nil {
		r.events.PublishKVEvents(pod, at, events)
	}
}

// LostKVEvents implements KVEventReceiver (precise configurations only).
func (r *eppRouter) LostKVEvents(pod int, at time.Time) {
	if r.events != nil {
		r.events.LostKVEvents(pod, at)
	}
}

// Retry implements Retrier: the pick's next fallback, through the director's
// Reroute, as the gateway retries a request that failed before its first byte.
func (r *eppRouter) Retry(t Ticket, f director.Failure, now time.Time) (int, Ticket, bool) {
	res := t.(*director.Result)
	if len(res.Fallbacks) == 0 {
		r.d.ObserveFailure(res, f, now)
		return -1, nil, false
	}
	next := r.d.Reroute(res, f, res.Fallbacks[0], now)
	if next == nil {
		return -1, nil, false
	}
	next.Fallbacks = res.Fallbacks[1:]
	return r.podOf[next.Primary], next, true
}
