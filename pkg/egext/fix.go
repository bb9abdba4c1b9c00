// Package egext is igw's Envoy Gateway extension server: a post-translation
// hook that makes Envoy Gateway's per-route ext_proc filters behave the way an
// inference request needs them to.
//
// Envoy Gateway attaches every route-level ext_proc filter to the listener
// disabled, and enables it on the routes of its policy. Envoy picks the filters
// of a stream from the first route that matched, before the body-based router
// has set the model header; a picker enabled only on its model's route is
// therefore missing when the recomputed route is that model's. Fix rewrites the
// translated listeners and routes so that igw's picker filters are in every
// stream's chain from the start and each one switches itself off (ext_proc's
// own per-route "disabled", read on the recomputed route) everywhere but on its
// model's routes; the body-based router is put ahead of them and enabled on the
// model routes, where Envoy Gateway's policy precedence had dropped it.
package egext

import (
	"fmt"
	"slices"
	"strings"

	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	extprocv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/ext_proc/v3"
	hcmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"

	"github.com/igw-dev/igw/pkg/render"
)

// Names Envoy Gateway gives the ext_proc filters of an EnvoyExtensionPolicy:
// envoy.filters.http.ext_proc/envoyextensionpolicy/NAMESPACE/NAME/extproc/INDEX.
const (
	extProcFilterPrefix = "envoy.filters.http.ext_proc/envoyextensionpolicy/"
	hcmFilterName       = "envoy.filters.network.http_connection_manager"
)

// Role of an ext_proc filter in igw's data path.
type Role int

const (
	RoleOther Role = iota
	RoleBBR
	RoleEPP
)

// FilterRole tells igw's filters apart by the name of the policy that made them.
func FilterRole(filterName string) Role {
	rest, ok := strings.CutPrefix(filterName, extProcFilterPrefix)
	if !ok {
		return RoleOther
	}
	parts := strings.Split(rest, "/") // NAMESPACE, NAME, "extproc", INDEX
	if len(parts) != 4 || parts[2] != "extproc" {
		return RoleOther
	}
	switch {
	case strings.HasSuffix(parts[1], render.SuffixEPPPolicy):
		return RoleEPP
	case strings.HasSuffix(parts[1], render.SuffixBBRPolicy):
		return RoleBBR
	}
	return RoleOther
}

var (
	disabledExtProc = mustAny(&extprocv3.ExtProcPerRoute{Override: &extprocv3.ExtProcPerRoute_Disabled{Disabled: true}})
	// enabledFilter is how Envoy Gateway enables a listener-disabled filter on a route.
	enabledFilter = mustAny(&routev3.FilterConfig{Config: &anypb.Any{}})
)

func mustAny(m proto.Message) *anypb.Any {
	a, err := anypb.New(m)
	if err != nil {
		panic(err)
	}
	return a
}

// Fix rewrites listeners and routes in place; running it again changes nothing.
func Fix(listeners []*listenerv3.Listener, routes []*routev3.RouteConfiguration) error {
	byName := map[string]*routev3.RouteConfiguration{}
	for _, rc := range routes {
		byName[rc.GetName()] = rc
	}
	for _, l := range listeners {
		chains := slices.Clone(l.GetFilterChains())
		if dc := l.GetDefaultFilterChain(); dc != nil {
			chains = append(chains, dc)
		}
		for _, fc := range chains {
			for _, f := range fc.GetFilters() {
				if err := fixConnectionManager(l.GetName(), f, byName); err != nil {
					return err
				}
			}
		}
	}
	return nil
}

func fixConnectionManager(listener string, f *listenerv3.Filter, routes map[string]*routev3.RouteConfiguration) error {
	tc := f.GetTypedConfig()
	if f.GetName() != hcmFilterName || tc == nil {
		return nil
	}
	hcm := &hcmv3.HttpConnectionManager{}
	if err := tc.UnmarshalTo(hcm); err != nil {
		return fmt.Errorf("listener %s: %w", listener, err)
	}
	var bbr, epp []string
	for _, hf := range hcm.GetHttpFilters() {
		switch FilterRole(hf.GetName()) {
		case RoleBBR:
			bbr = append(bbr, hf.GetName())
		case RoleEPP:
			epp = append(epp, hf.GetName())
		}
	}
	if len(epp) == 0 {
		return nil
	}
	hcm.HttpFilters = orderRouterFirst(hcm.GetHttpFilters())
	for _, hf := range hcm.GetHttpFilters() {
		if FilterRole(hf.GetName()) == RoleEPP {
			hf.Disabled = false
		}
	}
	if rc := routes[hcm.GetRds().GetRouteConfigName()]; rc != nil {
		for _, vh := range rc.GetVirtualHosts() {
			for _, r := range vh.GetRoutes() {
				fixRoute(r, bbr, epp)
			}
		}
	}
	a, err := anypb.New(hcm)
	if err != nil {
		return err
	}
	f.ConfigType = &listenerv3.Filter_TypedConfig{TypedConfig: a}
	return nil
}

// orderRouterFirst moves igw's picker filters right behind the last
// body-based router filter, so that the model header is set before any picker
// looks at the route; every other filter keeps its place.
func orderRouterFirst(filters []*hcmv3.HttpFilter) []*hcmv3.HttpFilter {
	lastBBR := -1
	for i, hf := range filters {
		if FilterRole(hf.GetName()) == RoleBBR {
			lastBBR = i
		}
	}
	if lastBBR < 0 {
		return filters
	}
	var early, pickers []*hcmv3.HttpFilter
	var rest []*hcmv3.HttpFilter
	for i, hf := range filters {
		switch {
		case FilterRole(hf.GetName()) == RoleEPP:
			pickers = append(pickers, hf)
		case i <= lastBBR:
			early = append(early, hf)
		default:
			rest = append(rest, hf)
		}
	}
	return append(append(early, pickers...), rest...)
}

// fixRoute switches off, on this route, every picker that is not the route's
// own; and on a model's route (one with its picker enabled) it enables the
// body-based router, so that a request which matched the model route first
// (its client sent the header) still has its model read from the body.
func fixRoute(r *routev3.Route, bbr, epp []string) {
	if r.TypedPerFilterConfig == nil {
		r.TypedPerFilterConfig = map[string]*anypb.Any{}
	}
	own := false
	for _, name := range epp {
		if cfg, ok := r.TypedPerFilterConfig[name]; ok && !isDisabledExtProc(cfg) {
			own = true
			continue
		}
		r.TypedPerFilterConfig[name] = disabledExtProc
	}
	if !own {
		return
	}
	for _, name := range bbr {
		if _, ok := r.TypedPerFilterConfig[name]; !ok {
			r.TypedPerFilterConfig[name] = enabledFilter
		}
	}
}

func isDisabledExtProc(a *anypb.Any) bool {
	var pr extprocv3.ExtProcPerRoute
	if a.MessageIs(&pr) && a.UnmarshalTo(&pr) == nil {
		return pr.GetDisabled()
	}
	return false
}
