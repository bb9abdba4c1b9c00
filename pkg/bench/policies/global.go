package policies

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/igw-dev/igw/pkg/epp/datastore"
	"github.com/igw-dev/igw/pkg/epp/scheduling"
	"github.com/igw-dev/igw/pkg/global"
	"github.com/igw-dev/igw/pkg/globalsummary"
)

// Global policy names (multi-cluster scenarios): each picks a member cluster
// per request; the member's own igw picks the pod.
const (
	GlobalRoundRobin = "global-round-robin"
	NearestRegion    = "nearest-region"
	GlobalBlend      = "global-blend"
	IGWGlobal        = "igw-global"
	GlobalOracle     = "global-oracle"
)

// GlobalNames lists the global policies in report order.
var GlobalNames = []string{GlobalRoundRobin, NearestRegion, GlobalBlend, IGWGlobal, GlobalOracle}

// IsGlobal reports whether name is a global policy.
func IsGlobal(name string) bool { return slices.Contains(GlobalNames, name) }

// Link is a one-way delay between two regions, both ways.
type Link struct {
	From, To string
	Delay    time.Duration
}

// GlobalPipeline is the global picker's pipeline for a global policy (all
// but the oracle, which routes on the members' exact state), with the
// scenario's network as the region-proximity table.
func GlobalPipeline(name string, network []Link, sameRegion time.Duration) (*global.Pipeline, error) {
	var b strings.Builder
	fmt.Fprintf(&b, "plugins:\n- {name: region-proximity, type: region-proximity, parameters: {sameRegion: %q, delays: [", sameRegion.String())
	for i, l := range network {
		if i > 0 {
			b.WriteString(", ")
		}
		fmt.Fprintf(&b, "{from: %q, to: %q, delay: %q}", l.From, l.To, l.Delay.String())
	}
	b.WriteString("]}}\n")
	if name == GlobalRoundRobin {
		b.WriteString("- {name: round-robin, type: " + roundRobinPickerType + "}\n")
	}
	switch name {
	case IGWGlobal:
		return global.LoadPipeline([]byte(global.DefaultConfig)) // uses no delay table
	case GlobalBlend:
		b.WriteString(global.BlendConfig)
	case NearestRegion:
		b.WriteString(filtersOnly + "scorers: [{plugin: region-proximity, weight: 1}]\npicker: max-score-picker\n")
	case GlobalRoundRobin:
		// region-proximity is declared for every pipeline; this one only filters.
		b.WriteString(filtersOnly + "scorers: [{plugin: region-proximity, weight: 0}]\npicker: round-robin\n")
	default:
		return nil, fmt.Errorf("policy %s has no global picker pipeline", name)
	}
	return global.LoadPipelineWith([]byte(b.String()), map[string]scheduling.Factory{roundRobinPickerType: newRoundRobinPicker})
}

// filtersOnly are igw-global's and global-blend's filters: the baselines
// skip members out of rotation, as any load balancer with health checks does.
const filtersOnly = "filters: [region-pin, member-health, member-serves-model]\nfallbacks: 1\n"

// roundRobinPickerType is the global round-robin baseline's picker: the
// members in turn, skipping those the filters removed.
const roundRobinPickerType = "bench-round-robin-picker"

type roundRobinPicker struct {
	scheduling.Named
	last int32
}

var newRoundRobinPicker = scheduling.NoParameters(roundRobinPickerType, func(n scheduling.Named) scheduling.Plugin {
	return &roundRobinPicker{Named: n, last: -1}
})

// Pick returns the n candidates after the last one picked, in member order.
func (p *roundRobinPicker) Pick(_ *scheduling.Cycle, cands []*datastore.View, _ []float64, n int, dst []int) []int {
	order := make([]int, len(cands))
	for i := range order {
		order[i] = i
	}
	// After the last pick first, then from the lowest ID: a turn of the ring.
	key := func(i int) int32 {
		id := cands[i].ID
		if id <= p.last {
			id += 1 << 30
		}
		return id
	}
	slices.SortFunc(order, func(a, b int) int { return int(key(a)) - int(key(b)) })
	dst = append(dst[:0], order[:min(n, len(order))]...)
	if len(dst) > 0 {
		p.last = cands[dst[0]].ID
	}
	return dst
}

// SummarySource is a member's in-cluster igw router as the source of its
// global summary (the EPP's store and prefix index); false for routers that
// are not the endpoint picker.
func SummarySource(r Router, model string, errs *globalsummary.ErrorWindow) (globalsummary.Source, bool) {
	e, ok := r.(*eppRouter)
	if !ok {
		return globalsummary.Source{}, false
	}
	return globalsummary.Source{Model: model, Store: e.d.Store(), Index: e.d.Index(), BlockTokens: e.d.BlockTokens(),
		Staleness: e.staleness, Errors: errs}, true
}
