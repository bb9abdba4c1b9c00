package egext

import (
	"context"
	"slices"
	"testing"

	pb "github.com/envoyproxy/gateway/proto/extension"
	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	extprocv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/ext_proc/v3"
	routerv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/router/v3"
	hcmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	matcherv3 "github.com/envoyproxy/go-control-plane/envoy/type/matcher/v3"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"

	"github.com/igw-dev/igw/internal/envoysim"
	"github.com/igw-dev/igw/pkg/wire"
)

// Filter names as Envoy Gateway gives them to igw's policies and to someone else's.
const (
	bbr    = "envoy.filters.http.ext_proc/envoyextensionpolicy/models/igw-igw-bbr/extproc/0"
	eppA   = "envoy.filters.http.ext_proc/envoyextensionpolicy/models/a-igw-epp/extproc/0"
	eppB   = "envoy.filters.http.ext_proc/envoyextensionpolicy/models/b-igw-epp/extproc/0"
	others = "envoy.filters.http.ext_proc/envoyextensionpolicy/models/audit/extproc/0"
)

func extProcFilter(name string) *hcmv3.HttpFilter {
	return &hcmv3.HttpFilter{Name: name, Disabled: true, ConfigType: &hcmv3.HttpFilter_TypedConfig{TypedConfig: mustAny(&extprocv3.ExternalProcessor{})}}
}

func route(name, model string, enabled ...string) *routev3.Route {
	m := &routev3.RouteMatch{PathSpecifier: &routev3.RouteMatch_Prefix{Prefix: "/"}}
	if model != "" {
		m.Headers = []*routev3.HeaderMatcher{{Name: wire.HeaderModelName, HeaderMatchSpecifier: &routev3.HeaderMatcher_StringMatch{
			StringMatch: &matcherv3.StringMatcher{MatchPattern: &matcherv3.StringMatcher_Exact{Exact: model}}}}}
	}
	r := &routev3.Route{Name: name, Match: m, TypedPerFilterConfig: map[string]*anypb.Any{},
		Action: &routev3.Route_Route{Route: &routev3.RouteAction{ClusterSpecifier: &routev3.RouteAction_Cluster{Cluster: name}}}}
	for _, f := range enabled {
		r.TypedPerFilterConfig[f] = enabledFilter
	}
	return r
}

// translated mimics Envoy Gateway's output for two model routes, a catch-all
// and someone else's route-level ext_proc, with the filters in the given order.
func translated(filters ...string) ([]*listenerv3.Listener, []*routev3.RouteConfiguration) {
	hcm := &hcmv3.HttpConnectionManager{RouteSpecifier: &hcmv3.HttpConnectionManager_Rds{Rds: &hcmv3.Rds{RouteConfigName: "rc"}}}
	for _, f := range filters {
		hcm.HttpFilters = append(hcm.HttpFilters, extProcFilter(f))
	}
	hcm.HttpFilters = append(hcm.HttpFilters, &hcmv3.HttpFilter{Name: "envoy.filters.http.router",
		ConfigType: &hcmv3.HttpFilter_TypedConfig{TypedConfig: mustAny(&routerv3.Router{})}})
	l := &listenerv3.Listener{Name: "http", FilterChains: []*listenerv3.FilterChain{{Filters: []*listenerv3.Filter{{
		Name: hcmFilterName, ConfigType: &listenerv3.Filter_TypedConfig{TypedConfig: mustAny(hcm)}}}}}}
	rc := &routev3.RouteConfiguration{Name: "rc", VirtualHosts: []*routev3.VirtualHost{{Name: "vh", Domains: []string{"*"}, Routes: []*routev3.Route{
		route("route-a", "model-a", eppA),
		route("route-b", "model-b", eppB),
		route("audited", "", others),
		route("catch-all", "", bbr),
	}}}}
	// The audited route is more specific in real life; here it only matters that it exists.
	rc.VirtualHosts[0].Routes[2].Match.PathSpecifier = &routev3.RouteMatch_Prefix{Prefix: "/audit"}
	return []*listenerv3.Listener{l}, []*routev3.RouteConfiguration{rc}
}

func hcmOf(t *testing.T, l *listenerv3.Listener) *hcmv3.HttpConnectionManager {
	t.Helper()
	var hcm hcmv3.HttpConnectionManager
	if err := l.GetFilterChains()[0].GetFilters()[0].GetTypedConfig().UnmarshalTo(&hcm); err != nil {
		t.Fatal(err)
	}
	return &hcm
}

func bodySays(model string) map[string]envoysim.Effect {
	return map[string]envoysim.Effect{
		bbr:  func(h map[string]string) { h[wire.HeaderModelName] = model },
		eppA: func(h map[string]string) { h[wire.HeaderDestinationEndpoint] = "10.0.0.1:8000" },
		eppB: func(h map[string]string) { h[wire.HeaderDestinationEndpoint] = "10.0.0.2:8000" },
	}
}

func walk(t *testing.T, ls []*listenerv3.Listener, rcs []*routev3.RouteConfiguration, req envoysim.Request, model string) envoysim.Trace {
	t.Helper()
	tr, err := envoysim.Walk(hcmOf(t, ls[0]), rcs[0], req, bodySays(model))
	if err != nil {
		t.Fatal(err)
	}
	return tr
}

func TestFixRunsTheModelsPickerAfterTheRouterReroutes(t *testing.T) {
	ls, rcs := translated(eppA, eppB, bbr, others)
	before := walk(t, ls, rcs, envoysim.Request{Path: "/v1/chat/completions"}, "model-a")
	if !slices.Equal(before.Ran, []string{bbr}) || before.FinalRoute != "route-a" {
		t.Fatalf("without the fix the trap should show (only the router runs): %+v", before)
	}
	if err := Fix(ls, rcs); err != nil {
		t.Fatal(err)
	}
	for model, want := range map[string][]string{"model-a": {bbr, eppA}, "model-b": {bbr, eppB}, "unknown": {bbr}} {
		tr := walk(t, ls, rcs, envoysim.Request{Path: "/v1/chat/completions"}, model)
		if !slices.Equal(tr.Ran, want) {
			t.Errorf("%s: ran %v, want %v", model, tr.Ran, want)
		}
	}
	// A client that sends the header itself still has the body decide.
	tr := walk(t, ls, rcs, envoysim.Request{Path: "/v1/chat/completions", Headers: map[string]string{wire.HeaderModelName: "model-a"}}, "model-b")
	if tr.FirstRoute != "route-a" || tr.FinalRoute != "route-b" || !slices.Equal(tr.Ran, []string{bbr, eppB}) {
		t.Errorf("client-sent header: %+v", tr)
	}
	// Someone else's route filter keeps Envoy Gateway's semantics: on its route only, and no picker there.
	tr = walk(t, ls, rcs, envoysim.Request{Path: "/audit"}, "")
	if !slices.Equal(tr.Ran, []string{others}) {
		t.Errorf("audited route ran %v", tr.Ran)
	}
}

func TestFixPutsTheRouterBeforeThePickersAndLeavesOthersInPlace(t *testing.T) {
	ls, rcs := translated(eppA, others, bbr, eppB)
	if err := Fix(ls, rcs); err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, f := range hcmOf(t, ls[0]).GetHttpFilters() {
		names = append(names, f.GetName())
	}
	want := []string{others, bbr, eppA, eppB, "envoy.filters.http.router"}
	if !slices.Equal(names, want) {
		t.Fatalf("order %v, want %v", names, want)
	}
	for _, f := range hcmOf(t, ls[0]).GetHttpFilters() {
		// Pickers join every chain; the router and others keep Envoy Gateway's per-route enabling.
		wantDisabled := f.GetName() == bbr || f.GetName() == others
		if f.GetDisabled() != wantDisabled {
			t.Errorf("%s disabled=%v, want %v", f.GetName(), f.GetDisabled(), wantDisabled)
		}
	}
}

// fixChanges runs Fix on the first listener and route configuration and
// reports whether it changed them.
func fixChanges(t *testing.T, ls []*listenerv3.Listener, rcs []*routev3.RouteConfiguration) bool {
	t.Helper()
	before := []proto.Message{proto.Clone(ls[0]), proto.Clone(rcs[0])}
	if err := Fix(ls, rcs); err != nil {
		t.Fatal(err)
	}
	return !proto.Equal(before[0], ls[0]) || !proto.Equal(before[1], rcs[0])
}

func TestFixIsIdempotent(t *testing.T) {
	ls, rcs := translated(bbr, eppA, eppB)
	if !fixChanges(t, ls, rcs) {
		t.Fatal("the first Fix of a gateway with pickers changed nothing")
	}
	if fixChanges(t, ls, rcs) {
		t.Fatal("a second Fix changed the resources")
	}
}

func TestFixLeavesListenersWithoutPickersAlone(t *testing.T) {
	ls, rcs := translated(bbr, others)
	if fixChanges(t, ls, rcs) {
		t.Fatal("Fix changed a gateway that has no igw picker")
	}
}

func TestFilterRole(t *testing.T) {
	for name, want := range map[string]Role{
		bbr: RoleBBR, eppA: RoleEPP, others: RoleOther,
		"envoy.filters.http.ext_proc/envoyextensionpolicy/models/x-igw-epp/lua/0": RoleOther,
		"envoy.filters.http.router": RoleOther,
	} {
		if got := FilterRole(name); got != want {
			t.Errorf("%s: %v, want %v", name, got, want)
		}
	}
}

func TestPostTranslateModifyPassesClustersAndSecretsThrough(t *testing.T) {
	ls, rcs := translated(bbr, eppA)
	clusters := []*clusterv3.Cluster{{Name: "c"}}
	resp, err := Server{}.PostTranslateModify(context.Background(), &pb.PostTranslateModifyRequest{Clusters: clusters, Listeners: ls, Routes: rcs})
	if err != nil {
		t.Fatal(err)
	}
	if len(resp.GetClusters()) != 1 || resp.GetClusters()[0].GetName() != "c" || len(resp.GetListeners()) != 1 || len(resp.GetRoutes()) != 1 {
		t.Fatalf("response %v", resp)
	}
	if hcmOf(t, resp.GetListeners()[0]).GetHttpFilters()[1].GetDisabled() {
		t.Fatal("the response does not carry the fixed listener")
	}
}
