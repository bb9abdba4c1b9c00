package gateway

import (
	"context"
	"time"

	"github.com/igw-dev/igw/pkg/apierror"
	"github.com/igw-dev/igw/pkg/epp/datastore"
	"github.com/igw-dev/igw/pkg/epp/director"
	"github.com/igw-dev/igw/pkg/epp/scheduling"
)

// Pick is one routed request as the gateway sees it.
type Pick struct {
	// Endpoint is where the request goes ("ip:port"); Fallbacks the next
	// choices when Endpoint cannot be reached.
	Endpoint  string
	Fallbacks []string
	// Breakdown is the explanation for x-igw-debug's x-igw-score-breakdown
	// ("" unless asked).
	Breakdown string
	// Ticket is the picker's own handle on the pick.
	Ticket any
}

// Picker chooses endpoints for one pool and learns from what became of the
// requests it routed, through the pick lifecycle every igw picker shares.
// Its methods are called from many goroutines, each with the gateway's time.
type Picker interface {
	// Resolve splits a request's model into base model and LoRA adapter;
	// base is the base model the body-based router named ("" for none).
	Resolve(model, base string) (baseModel, adapter string)
	// Pick chooses the endpoint and fallbacks for req at now; explain asks
	// for a breakdown. The pick counts against its endpoint until it ends.
	Pick(ctx context.Context, req *scheduling.Request, explain bool, now time.Time) (*Pick, *apierror.Error)
	// Reroute tells the picker that p goes to endpoint, one of its
	// fallbacks, because its endpoint failed with f before the first byte
	// of an answer reached the client (it could not be reached, reset the
	// connection, answered a server error or did not answer in time): the
	// pick fails there and counts against endpoint from now on.
	Reroute(p *Pick, f director.Failure, endpoint string, now time.Time)
	director.Lifecycle[*Pick]
	// UpdateMetrics takes a telemetry sample of the endpoint key (the
	// scraper's sink); false when the picker does not know the endpoint.
	UpdateMetrics(key string, m datastore.Metrics, now time.Time) bool
}

// eppPicker is igw's endpoint picker in process: the same director the
// ext_proc server drives. A pick's ticket is its *director.Result, nil once
// a reroute went to an endpoint the store no longer knows.
type eppPicker struct {
	d *director.Director
	// now is the gateway's clock, for a request that waits in the picker's
	// queue to be decided again when an endpoint frees up.
	now func() time.Time
}

var _ Picker = (*eppPicker)(nil)

func (e *eppPicker) Resolve(model, base string) (string, string) {
	return e.d.ResolveModel(model, base)
}

func (e *eppPicker) Pick(ctx context.Context, req *scheduling.Request, explain bool, _ time.Time) (*Pick, *apierror.Error) {
	clock := e.now
	if clock == nil {
		clock = time.Now
	}
	res, err := e.d.ScheduleWaiting(ctx, req, explain, clock)
	if err != nil {
		return nil, err
	}
	p := &Pick{Endpoint: res.Primary, Fallbacks: res.Fallbacks, Ticket: res}
	if res.Breakdown != nil {
		p.Breakdown = res.Breakdown.String()
	}
	return p, nil
}

// result is p's director decision, nil when it went unaccounted.
func result(p *Pick) *director.Result {
	res, _ := p.Ticket.(*director.Result)
	return res
}

func (e *eppPicker) Reroute(p *Pick, f director.Failure, endpoint string, now time.Time) {
	if p.Breakdown != "" {
		p.Breakdown += ";rerouted=" + endpoint
	}
	if res := result(p); res != nil {
		p.Ticket = e.d.Reroute(res, f, endpoint, now)
	}
}

func (e *eppPicker) ObserveFirstToken(p *Pick, now time.Time) {
	if res := result(p); res != nil {
		e.d.ObserveFirstToken(res, now)
	}
}

func (e *eppPicker) ObserveTokens(p *Pick, n int, now time.Time) {
	if res := result(p); res != nil {
		e.d.ObserveTokens(res, n, now)
	}
}

func (e *eppPicker) ObserveCompletion(p *Pick, outputTokens int, now time.Time) {
	if res := result(p); res != nil {
		e.d.ObserveCompletion(res, outputTokens, now)
	}
}

func (e *eppPicker) ObserveFailure(p *Pick, f director.Failure, now time.Time) {
	if res := result(p); res != nil {
		e.d.ObserveFailure(res, f, now)
	}
}

func (e *eppPicker) UpdateMetrics(key string, m datastore.Metrics, now time.Time) bool {
	return e.d.UpdateMetrics(key, m, now)
}
