// Package envoysim follows one HTTP request through translated xDS the way
// Envoy's HTTP connection manager does, so tests can assert which filters a
// request meets and where it goes without running Envoy. It models exactly the
// behaviour igw's wiring depends on:
//
//   - the route is matched on the request's path prefix and exact header
//     matches, first route of the first virtual host whose domains match;
//   - the filter chain is built once, from the first matched route: a filter
//     disabled on the listener joins only if that route enables it with a
//     FilterConfig, and a FilterConfig with disabled=true removes an enabled
//     one; other per-route configs do not change the chain;
//   - filters then run in listener order; an ext_proc filter skips itself when
//     the route current at that moment carries an ExtProcPerRoute with
//     disabled=true;
//   - a filter that changes headers clears the route cache (as the body-based
//     router and the picker do), so later filters and the router see the
//     recomputed route;
//   - an ext_proc filter whose server is down fails open when its
//     failure_mode_allow (or the current route's override of it) is true: the
//     request goes on unchanged; otherwise Envoy answers 500 itself.
package envoysim

import (
	"fmt"
	"slices"
	"strings"

	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	extprocv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/ext_proc/v3"
	hcmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	"google.golang.org/protobuf/types/known/anypb"
)

// Request is what arrives at the listener.
type Request struct {
	Path    string
	Headers map[string]string
	// Down names the ext_proc filters whose server cannot be reached (or does
	// not answer within the message timeout).
	Down []string
}

// Effect is what an ext_proc server does to the request headers; nil leaves them.
type Effect func(headers map[string]string)

// Trace is what happened to a request.
type Trace struct {
	FirstRoute string
	// Chain are the filters that joined the stream, in order.
	Chain []string
	// Ran are the ext_proc filters that processed the request, in order.
	Ran []string
	// FailedOpen are the filters whose server was down and that let the request
	// go on; FailedClosed is the one that ended it with Envoy's 500.
	FailedOpen   []string
	FailedClosed string
	FinalRoute   string
	// Cluster the router sent the request to, or DirectStatus when the route answered itself.
	Cluster      string
	DirectStatus uint32
	DirectBody   string
	Headers      map[string]string
}

const extProcType = "type.googleapis.com/envoy.extensions.filters.http.ext_proc.v3.ExternalProcessor"

// Walk follows req through hcm and its route configuration rc; effects say
// what each ext_proc filter (by name) does when it runs.
func Walk(hcm *hcmv3.HttpConnectionManager, rc *routev3.RouteConfiguration, req Request, effects map[string]Effect) (Trace, error) {
	headers := map[string]string{}
	for k, v := range req.Headers {
		headers[strings.ToLower(k)] = v
	}
	first := match(rc, req.Path, headers)
	if first == nil {
		return Trace{}, fmt.Errorf("no route matches %s %v", req.Path, headers)
	}
	t := Trace{FirstRoute: first.GetName()}
	var chain []*hcmv3.HttpFilter
	for _, hf := range hcm.GetHttpFilters() {
		enabled := !hf.GetDisabled()
		if fc, ok := filterConfig(first, hf.GetName()); ok {
			enabled = !fc.GetDisabled()
		}
		if enabled {
			chain = append(chain, hf)
			t.Chain = append(t.Chain, hf.GetName())
		}
	}
	current := first
	for _, hf := range chain {
		if hf.GetTypedConfig().GetTypeUrl() != extProcType {
			continue
		}
		if extProcDisabledOn(current, hf.GetName()) {
			continue
		}
		if slices.Contains(req.Down, hf.GetName()) {
			if !failureModeAllow(hf, current) {
				t.FailedClosed, t.FinalRoute, t.Headers, t.DirectStatus = hf.GetName(), current.GetName(), headers, 500
				return t, nil
			}
			t.FailedOpen = append(t.FailedOpen, hf.GetName())
			continue
		}
		t.Ran = append(t.Ran, hf.GetName())
		if e := effects[hf.GetName()]; e != nil {
			e(headers)
			if current = match(rc, req.Path, headers); current == nil {
				return t, fmt.Errorf("no route matches after %s set %v", hf.GetName(), headers)
			}
		}
	}
	t.FinalRoute = current.GetName()
	t.Headers = headers
	switch a := current.GetAction().(type) {
	case *routev3.Route_Route:
		t.Cluster = a.Route.GetCluster()
	case *routev3.Route_DirectResponse:
		t.DirectStatus = a.DirectResponse.GetStatus()
		t.DirectBody = directBody(a.DirectResponse)
	}
	return t, nil
}

// directBody is the body a direct response sends: its body, or the text of its body format.
func directBody(d *routev3.DirectResponseAction) string {
	if b := d.GetBody(); b != nil {
		return b.GetInlineString() + string(b.GetInlineBytes())
	}
	src := d.GetBodyFormat().GetTextFormatSource()
	return src.GetInlineString() + string(src.GetInlineBytes())
}

func match(rc *routev3.RouteConfiguration, path string, headers map[string]string) *routev3.Route {
	for _, vh := range rc.GetVirtualHosts() {
		if !domainMatches(vh.GetDomains(), headers[":authority"]) {
			continue
		}
		for _, r := range vh.GetRoutes() {
			if routeMatches(r.GetMatch(), path, headers) {
				return r
			}
		}
		return nil
	}
	return nil
}

func domainMatches(domains []string, host string) bool {
	for _, d := range domains {
		if d == "*" || strings.EqualFold(d, host) {
			return true
		}
	}
	return false
}

func routeMatches(m *routev3.RouteMatch, path string, headers map[string]string) bool {
	switch p := m.GetPathSpecifier().(type) {
	case *routev3.RouteMatch_Prefix:
		if !strings.HasPrefix(path, p.Prefix) {
			return false
		}
	case *routev3.RouteMatch_Path:
		if path != p.Path {
			return false
		}
	case *routev3.RouteMatch_PathSeparatedPrefix:
		// Gateway API's PathPrefix: the prefix as whole path elements.
		if path != p.PathSeparatedPrefix && !strings.HasPrefix(path, p.PathSeparatedPrefix+"/") {
			return false
		}
	default:
		return false // other matchers are not used by the wiring under test
	}
	for _, h := range m.GetHeaders() {
		v, present := headers[strings.ToLower(h.GetName())]
		ok := present
		if sm := h.GetStringMatch(); sm != nil {
			ok = present && sm.GetExact() == v && sm.GetExact() != ""
		} else if h.GetPresentMatch() {
			ok = present
		}
		if h.GetInvertMatch() {
			ok = !ok
		}
		if !ok {
			return false
		}
	}
	return true
}

func filterConfig(r *routev3.Route, name string) (*routev3.FilterConfig, bool) {
	a, ok := r.GetTypedPerFilterConfig()[name]
	if !ok {
		return nil, false
	}
	var fc routev3.FilterConfig
	if a.MessageIs(&fc) && a.UnmarshalTo(&fc) == nil {
		return &fc, true
	}
	return nil, false
}

func extProcDisabledOn(r *routev3.Route, name string) bool {
	a, ok := r.GetTypedPerFilterConfig()[name]
	if !ok {
		return false
	}
	return isExtProcDisabled(a)
}

// failureModeAllow is the filter's failure_mode_allow, or the route's override of it.
func failureModeAllow(hf *hcmv3.HttpFilter, r *routev3.Route) bool {
	if a, ok := r.GetTypedPerFilterConfig()[hf.GetName()]; ok {
		var pr extprocv3.ExtProcPerRoute
		if a.MessageIs(&pr) && a.UnmarshalTo(&pr) == nil && pr.GetOverrides().GetFailureModeAllow() != nil {
			return pr.GetOverrides().GetFailureModeAllow().GetValue()
		}
	}
	var ep extprocv3.ExternalProcessor
	return hf.GetTypedConfig().UnmarshalTo(&ep) == nil && ep.GetFailureModeAllow()
}

func isExtProcDisabled(a *anypb.Any) bool {
	var pr extprocv3.ExtProcPerRoute
	return a.MessageIs(&pr) && a.UnmarshalTo(&pr) == nil && pr.GetDisabled()
}
