package e2e

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	egv1a1 "github.com/envoyproxy/gateway/api/v1alpha1"
	. "github.com/onsi/ginkgo/v2"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	infv1 "sigs.k8s.io/gateway-api-inference-extension/api/v1"
	gwapiv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/igw-dev/igw/pkg/epp/source"
	"github.com/igw-dev/igw/pkg/extproctest"
)

// headerUpstream, on a response of the front, is the endpoint it proxied the
// request to: what the front did, not what the picker claimed.
const headerUpstream = "x-e2e-upstream"

// headerFailedOpen, on a response of the front, says that the route's picker
// was down and the request went on unpicked under its policy's failOpen, and why.
const headerFailedOpen = "x-e2e-failed-open"

// envoy plays Envoy Gateway's data plane for one Gateway from what is in the
// API server, read again for every request: the HTTPRoutes attached to the
// Gateway (header and path matches, Gateway API precedence, the catch-all
// rule's direct response from its HTTPRouteFilter, request timeouts), the
// EnvoyExtensionPolicies (ext_proc filters with their body modes: those on the
// Gateway for every request, those on an HTTPRoute for its requests) and the
// BackendTrafficPolicies (the endpoint override header). The filter chain is
// the one pkg/egext's post-translation hook makes of Envoy Gateway's xDS (the
// Gateway's filters first, then the matched route's; the route is recomputed
// when a filter clears the route cache); controllers/translate_test.go checks
// that hook against Envoy Gateway's own translator.
//
// An ext_proc backend is a Service: the front sends to a pod of the
// Deployment the Service selects (a process of runDeployment or startPod)
// whose readiness probe passes, as the Service's endpoints would hold only
// ready pods (a picker's standby replicas are never ready). A backendRef of
// a route is a Service or an InferencePool: the endpoint override must be one
// of its ready endpoints, or the request fails (Envoy would fall back to its
// load balancer, which would hide a wrong pick). A route with no picker and no
// override (the model list's) goes to the pod behind its Service, as the
// Deployment processes are reached for ext_proc.
//
// An ext_proc filter whose Service has no ready pod is down: under its
// policy's failOpen the request goes on without it, and a route whose picker
// failed open is balanced over the backend's ready endpoints (Envoy's
// endpoint-override policy falls back to the cluster's own balancing);
// otherwise Envoy answers 500 itself.
//
// While the API server cannot be read, the front goes on with what it last
// read (lastKnown), as Envoy keeps the configuration Envoy Gateway last sent it.
type envoy struct {
	gateway types.NamespacedName
	api     *lastKnown

	URL string

	mu      sync.Mutex
	pods    []*process
	clients map[string]*extproctest.Client
	errs    []error
	// fallbacks counts requests balanced without a picker, to rotate over
	// the backend's endpoints.
	fallbacks int
}

// add makes more pods reachable through their Services.
func (e *envoy) add(pods ...*process) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.pods = append(e.pods, pods...)
}

func startEnvoy(gateway types.NamespacedName, pods ...*process) *envoy {
	e := &envoy{gateway: gateway, api: &lastKnown{Reader: k8s}, pods: pods, clients: map[string]*extproctest.Client{}}
	srv := httptest.NewServer(e)
	DeferCleanup(func() {
		srv.Close()
		e.mu.Lock()
		defer e.mu.Unlock()
		for _, c := range e.clients {
			_ = c.Close()
		}
	})
	e.URL = srv.URL
	return e
}

// errors returns and forgets what the front could not play: a spec that sees
// one fails, whatever the client received.
func (e *envoy) errors() []string {
	e.mu.Lock()
	defer e.mu.Unlock()
	out := make([]string, len(e.errs))
	for i, err := range e.errs {
		out[i] = err.Error()
	}
	e.errs = nil
	return out
}

func (e *envoy) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if err := e.serve(w, r); err != nil {
		err = fmt.Errorf("%s %s: %w", r.Method, r.URL.Path, err)
		e.mu.Lock()
		e.errs = append(e.errs, err)
		e.mu.Unlock()
		// An OpenAI-shaped error, so that the client's failure names the cause.
		body, _ := json.Marshal(map[string]any{"error": map[string]string{"message": "e2e front: " + err.Error(), "type": "e2e_front_error"}})
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusBadGateway)
		_, _ = w.Write(body)
	}
}

func (e *envoy) serve(w http.ResponseWriter, r *http.Request) error {
	body, err := io.ReadAll(r.Body)
	if err != nil {
		return err
	}
	h := extproctest.NewHeaders(":method", r.Method, ":path", r.URL.RequestURI(), ":scheme", "http", ":authority", r.Host)
	for k, vs := range r.Header {
		for _, v := range vs {
			h = append(h, extproctest.Header{Key: strings.ToLower(k), Value: v})
		}
	}
	if len(body) > 0 {
		h = append(h, extproctest.Header{Key: "content-length", Value: strconv.Itoa(len(body))})
	}
	rc := r.Context()
	// The ext_proc streams outlive a client that hangs up after the last
	// event: Envoy ends them by a reset or a half-close, not by cancelling a
	// message in flight.
	xc := context.WithoutCancel(rc)

	routes, err := e.routes(rc)
	if err != nil {
		return err
	}
	// Envoy picks the route when the headers arrive, before any filter.
	m := match(routes, h)
	gwProcs, err := e.extProcs(rc, e.gateway.Namespace, "Gateway", e.gateway.Name)
	if err != nil {
		return err
	}
	for _, xp := range gwProcs {
		if xp.response {
			return fmt.Errorf("ext_proc %s on the Gateway asks for the response path, which the front does not play", xp.addr)
		}
		l, err := xp.begin(xc, extproctest.Request{Headers: h, Body: body})
		if errors.Is(err, errFilterDown) {
			if xp.failOpen {
				continue
			}
			writeImmediate(w, http.StatusInternalServerError, nil, nil)
			return nil
		}
		if err != nil {
			return fmt.Errorf("ext_proc %s: %w", xp.addr, err)
		}
		if err := l.Close(); err != nil {
			return fmt.Errorf("ext_proc %s: %w", xp.addr, err)
		}
		if l.ImmediateResponse != nil {
			writeImmediate(w, l.ImmediateResponse.Status, l.ImmediateResponse.Headers, l.ImmediateResponse.Body)
			return nil
		}
		h, body = l.RequestHeaders, l.RequestBody
		if l.RouteCacheCleared {
			m = match(routes, h)
		}
	}
	if m == nil {
		writeImmediate(w, http.StatusNotFound, nil, nil) // Envoy's NR: no route
		return nil
	}
	rule := m.route.Spec.Rules[m.rule]
	if len(rule.Filters) > 0 { // the front plays the first filter: a rendered rule has at most one
		dr, err := e.directResponse(rc, m.route.Namespace, rule.Filters[0])
		if err != nil {
			return err
		}
		ct := "text/plain"
		if dr.ContentType != nil {
			ct = *dr.ContentType
		}
		var payload []byte
		if dr.Body != nil && dr.Body.Inline != nil {
			payload = []byte(*dr.Body.Inline)
		}
		writeImmediate(w, *dr.StatusCode, extproctest.NewHeaders("content-type", ct), payload)
		return nil
	}
	if len(rule.BackendRefs) != 1 {
		return fmt.Errorf("HTTPRoute %s rule %d has %d backendRefs, the front plays one", m.route.Name, m.rule, len(rule.BackendRefs))
	}

	routeProcs, err := e.extProcs(rc, m.route.Namespace, "HTTPRoute", m.route.Name)
	if err != nil {
		return err
	}
	var respond *extproctest.Live // the filter that sees the response
	failedOpen := ""              // why the route's picker was passed over, when it was
	for _, xp := range routeProcs {
		l, err := xp.begin(xc, extproctest.Request{Headers: h, Body: body})
		if errors.Is(err, errFilterDown) {
			if xp.failOpen {
				failedOpen = err.Error()
				continue
			}
			writeImmediate(w, http.StatusInternalServerError, nil, nil)
			return nil
		}
		if err != nil {
			return fmt.Errorf("ext_proc %s: %w", xp.addr, err)
		}
		defer func() {
			if err := l.Close(); err != nil && rc.Err() == nil {
				e.mu.Lock()
				e.errs = append(e.errs, fmt.Errorf("ext_proc %s: %w", xp.addr, err))
				e.mu.Unlock()
			}
		}()
		if l.ImmediateResponse != nil {
			writeImmediate(w, l.ImmediateResponse.Status, l.ImmediateResponse.Headers, l.ImmediateResponse.Body)
			return nil
		}
		h, body = l.RequestHeaders, l.RequestBody
		if xp.response {
			if respond != nil {
				return errors.New("two ext_proc filters on the response path")
			}
			respond = l
		}
	}

	backend := rule.BackendRefs[0].BackendObjectReference
	dest, err := e.destination(rc, m.route, h)
	switch {
	case errors.Is(err, errNoDestination) && failedOpen != "":
		if dest, err = e.fallbackEndpoint(rc, m.route.Namespace, backend); err != nil {
			return err
		}
	case errors.Is(err, errNoOverride) && len(routeProcs) == 0:
		// No picker and no override: Envoy balances over the backend
		// Service's endpoints, here the one pod process behind it.
		if (backend.Kind != nil && *backend.Kind != "Service") || backend.Port == nil {
			return fmt.Errorf("HTTPRoute %s: backendRef %+v is not a Service port", m.route.Name, backend)
		}
		if dest, err = e.servicePod(rc, refNamespace(backend, m.route.Namespace), string(backend.Name), int32(*backend.Port)); err != nil {
			return err
		}
	case err != nil:
		return err
	default:
		if err := e.checkEndpoint(rc, m.route.Namespace, backend, dest); err != nil {
			return err
		}
	}
	upCtx := rc
	if t := rule.Timeouts; t != nil && t.Request != nil {
		d, err := time.ParseDuration(string(*t.Request))
		if err != nil {
			return err
		}
		var cancel context.CancelFunc
		upCtx, cancel = context.WithTimeout(rc, d)
		defer cancel()
	}
	up, err := http.NewRequestWithContext(upCtx, r.Method, "http://"+dest+h.Get(":path"), bytes.NewReader(body))
	if err != nil {
		return err
	}
	for _, x := range h {
		if !strings.HasPrefix(x.Key, ":") && x.Key != "content-length" && x.Key != "host" {
			up.Header.Add(x.Key, x.Value)
		}
	}
	resp, err := http.DefaultClient.Do(up)
	if err != nil {
		return fmt.Errorf("upstream %s: %w", dest, err)
	}
	defer resp.Body.Close()
	w.Header().Set(headerUpstream, dest)
	if failedOpen != "" {
		w.Header().Set(headerFailedOpen, strings.Join(strings.Fields(failedOpen), " "))
	}
	if respond == nil {
		for k, vs := range resp.Header {
			w.Header()[k] = vs
		}
		w.WriteHeader(resp.StatusCode)
		if _, err := io.Copy(w, resp.Body); err != nil && rc.Err() == nil {
			return err
		}
		return nil
	}
	var rh extproctest.Headers
	for k, vs := range resp.Header {
		for _, v := range vs {
			rh = append(rh, extproctest.Header{Key: strings.ToLower(k), Value: v})
		}
	}
	if err := respond.Respond(resp.StatusCode, rh, resp.Body, w); err != nil && rc.Err() == nil {
		return err
	} // else the client hung up: Envoy resets the upstream and the ext_proc stream
	return nil
}

func writeImmediate(w http.ResponseWriter, status int, h extproctest.Headers, body []byte) {
	for _, x := range h {
		if !strings.HasPrefix(x.Key, ":") {
			w.Header().Add(x.Key, x.Value)
		}
	}
	w.WriteHeader(status)
	_, _ = w.Write(body)
}

// routes lists the HTTPRoutes attached to the Gateway.
func (e *envoy) routes(ctx context.Context) ([]gwapiv1.HTTPRoute, error) {
	var list gwapiv1.HTTPRouteList
	if err := e.api.List(ctx, &list); err != nil {
		return nil, err
	}
	var out []gwapiv1.HTTPRoute
	for _, hr := range list.Items {
		for _, p := range hr.Spec.ParentRefs {
			ns := hr.Namespace
			if p.Namespace != nil {
				ns = string(*p.Namespace)
			}
			if (p.Kind == nil || *p.Kind == "Gateway") && ns == e.gateway.Namespace && string(p.Name) == e.gateway.Name {
				out = append(out, hr)
				break
			}
		}
	}
	return out, nil
}

// matched is the rule a request takes.
type matched struct {
	route *gwapiv1.HTTPRoute
	rule  int
	match gwapiv1.HTTPRouteMatch
	index int // of the match in the rule
}

// match finds the rule for a request by the Gateway API's precedence: exact
// path, then the longest prefix, then a method match, then the most header
// matches, then the most query matches, then the oldest route, then the route
// name, then rule and match order.
func match(routes []gwapiv1.HTTPRoute, h extproctest.Headers) *matched {
	var all []matched
	for i := range routes {
		for r, rule := range routes[i].Spec.Rules {
			ms := rule.Matches
			if len(ms) == 0 {
				ms = []gwapiv1.HTTPRouteMatch{{}}
			}
			for j, m := range ms {
				if matches(m, h) {
					all = append(all, matched{route: &routes[i], rule: r, match: m, index: j})
				}
			}
		}
	}
	if len(all) == 0 {
		return nil
	}
	slices.SortStableFunc(all, func(a, b matched) int {
		ae, al := pathRank(a.match)
		be, bl := pathRank(b.match)
		return cmp.Or(
			-cmp.Compare(boolInt(ae), boolInt(be)),
			-cmp.Compare(al, bl),
			-cmp.Compare(boolInt(a.match.Method != nil), boolInt(b.match.Method != nil)),
			-cmp.Compare(len(a.match.Headers), len(b.match.Headers)),
			-cmp.Compare(len(a.match.QueryParams), len(b.match.QueryParams)),
			a.route.CreationTimestamp.Compare(b.route.CreationTimestamp.Time),
			cmp.Compare(a.route.Namespace+"/"+a.route.Name, b.route.Namespace+"/"+b.route.Name),
			cmp.Compare(a.rule, b.rule),
			cmp.Compare(a.index, b.index),
		)
	})
	return &all[0]
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}

// pathRank is whether a match is exact and how long its path is ("/" when absent).
func pathRank(m gwapiv1.HTTPRouteMatch) (bool, int) {
	if m.Path == nil || m.Path.Value == nil {
		return false, 1
	}
	return m.Path.Type != nil && *m.Path.Type == gwapiv1.PathMatchExact, len(*m.Path.Value)
}

// matches evaluates one HTTPRouteMatch; a kind of match the front does not
// play never matches, so such a route is never taken by mistake.
func matches(m gwapiv1.HTTPRouteMatch, h extproctest.Headers) bool {
	path, _, _ := strings.Cut(h.Get(":path"), "?")
	if m.Path != nil && m.Path.Value != nil {
		v := *m.Path.Value
		switch {
		case m.Path.Type == nil || *m.Path.Type == gwapiv1.PathMatchPathPrefix:
			p := strings.TrimSuffix(v, "/")
			if path != p && !strings.HasPrefix(path, p+"/") {
				return false
			}
		case *m.Path.Type == gwapiv1.PathMatchExact:
			if path != v {
				return false
			}
		default:
			return false
		}
	}
	if m.Method != nil && string(*m.Method) != h.Get(":method") {
		return false
	}
	if len(m.QueryParams) > 0 {
		return false
	}
	for _, hm := range m.Headers {
		got, ok := h.Lookup(strings.ToLower(string(hm.Name)))
		if !ok {
			return false
		}
		switch {
		case hm.Type == nil || *hm.Type == gwapiv1.HeaderMatchExact:
			if got != hm.Value {
				return false
			}
		case *hm.Type == gwapiv1.HeaderMatchRegularExpression:
			if ok, err := regexp.MatchString("^(?:"+hm.Value+")$", got); err != nil || !ok {
				return false
			}
		default:
			return false
		}
	}
	return true
}

// directResponse resolves a rule filter; only Envoy Gateway's HTTPRouteFilter
// direct responses are played.
func (e *envoy) directResponse(ctx context.Context, ns string, f gwapiv1.HTTPRouteFilter) (*egv1a1.HTTPDirectResponseFilter, error) {
	ref := f.ExtensionRef
	if f.Type != gwapiv1.HTTPRouteFilterExtensionRef || ref == nil || string(ref.Group) != egv1a1.GroupName || ref.Kind != egv1a1.KindHTTPRouteFilter {
		return nil, fmt.Errorf("route filter %+v is not played by the front", f)
	}
	var hf egv1a1.HTTPRouteFilter
	if err := e.api.Get(ctx, types.NamespacedName{Namespace: ns, Name: string(ref.Name)}, &hf); err != nil {
		return nil, err
	}
	dr := hf.Spec.DirectResponse
	if dr == nil || dr.StatusCode == nil || (dr.Body != nil && dr.Body.Inline == nil) {
		return nil, fmt.Errorf("HTTPRouteFilter %s: only inline direct responses with a status are played", hf.Name)
	}
	return dr, nil
}

// extProc is one ext_proc filter of a policy.
type extProc struct {
	addr     string
	client   *extproctest.Client // nil when the filter is down
	down     error               // why it is down
	response bool                // the filter processes the response too
	failOpen bool
}

// errFilterDown: Envoy cannot reach the filter's server.
var errFilterDown = errors.New("ext_proc server unreachable")

// begin plays the request path through the filter's server.
func (xp extProc) begin(ctx context.Context, req extproctest.Request) (*extproctest.Live, error) {
	if xp.client == nil {
		return nil, fmt.Errorf("%w: %w", errFilterDown, xp.down)
	}
	l, err := xp.client.Begin(ctx, req)
	if status.Code(err) == codes.Unavailable { // status.Code sees through wrapping
		return nil, fmt.Errorf("%w: %w", errFilterDown, err)
	}
	return l, err
}

// extProcs are the ext_proc filters of the EnvoyExtensionPolicies in ns
// that target kind/name, in policy name order.
func (e *envoy) extProcs(ctx context.Context, ns, kind, name string) ([]extProc, error) {
	var list egv1a1.EnvoyExtensionPolicyList
	if err := e.api.List(ctx, &list, client.InNamespace(ns)); err != nil {
		return nil, err
	}
	slices.SortFunc(list.Items, func(a, b egv1a1.EnvoyExtensionPolicy) int { return cmp.Compare(a.Name, b.Name) })
	var out []extProc
	for _, p := range list.Items {
		if !slices.ContainsFunc(p.Spec.GetTargetRefs(), func(t gwapiv1.LocalPolicyTargetReferenceWithSectionName) bool {
			return string(t.Kind) == kind && string(t.Name) == name
		}) {
			continue
		}
		for i, xp := range p.Spec.ExtProc {
			if len(xp.BackendRefs) != 1 {
				return nil, fmt.Errorf("EnvoyExtensionPolicy %s ext_proc %d: %d backendRefs, the front plays one", p.Name, i, len(xp.BackendRefs))
			}
			ref := xp.BackendRefs[0].BackendObjectReference
			if (ref.Kind != nil && *ref.Kind != "Service") || ref.Port == nil {
				return nil, fmt.Errorf("EnvoyExtensionPolicy %s: backendRef %+v is not a Service port", p.Name, ref)
			}
			failOpen := xp.FailOpen != nil && *xp.FailOpen
			addr, err := e.servicePod(ctx, refNamespace(ref, p.Namespace), string(ref.Name), int32(*ref.Port))
			if errors.Is(err, errNoReadyPod) {
				out = append(out, extProc{failOpen: failOpen, down: err})
				continue
			}
			if err != nil {
				return nil, fmt.Errorf("EnvoyExtensionPolicy %s: %w", p.Name, err)
			}
			cfg, response, err := processingMode(xp.ProcessingMode)
			if err != nil {
				return nil, fmt.Errorf("EnvoyExtensionPolicy %s: %w", p.Name, err)
			}
			c, err := e.client(addr, cfg)
			if err != nil {
				return nil, err
			}
			out = append(out, extProc{addr: addr, client: c, response: response, failOpen: failOpen})
		}
	}
	return out, nil
}

// processingMode translates a policy's processing mode into what the
// ext_proc client plays; the modes igw does not use are not played.
func processingMode(pm *egv1a1.ExtProcProcessingMode) (extproctest.Config, bool, error) {
	mode := func(o *egv1a1.ProcessingModeOptions) (extproctest.BodyMode, error) {
		if o == nil || o.Body == nil {
			return 0, errors.New("a processing mode without a body mode is not played")
		}
		switch *o.Body {
		case egv1a1.BufferedExtProcBodyProcessingMode:
			return extproctest.Buffered, nil
		case egv1a1.FullDuplexStreamedExtBodyProcessingMode:
			return extproctest.FullDuplexStreamed, nil
		case egv1a1.StreamedExtProcBodyProcessingMode:
			return extproctest.Streamed, nil
		}
		return 0, fmt.Errorf("body mode %s is not played", *o.Body)
	}
	if pm == nil {
		return extproctest.Config{}, false, errors.New("an ext_proc filter without a processing mode is not played")
	}
	var cfg extproctest.Config
	var err error
	if cfg.RequestBodyMode, err = mode(pm.Request); err != nil {
		return cfg, false, err
	}
	if pm.Response == nil {
		return cfg, false, nil
	}
	cfg.ResponseBodyMode, err = mode(pm.Response)
	return cfg, true, err
}

func (e *envoy) client(addr string, cfg extproctest.Config) (*extproctest.Client, error) {
	key := fmt.Sprintf("%s %v %v", addr, cfg.RequestBodyMode, cfg.ResponseBodyMode)
	e.mu.Lock()
	defer e.mu.Unlock()
	if c := e.clients[key]; c != nil {
		return c, nil
	}
	c, err := extproctest.Dial(addr, cfg)
	if err != nil {
		return nil, err
	}
	e.clients[key] = c
	return c, nil
}

func refNamespace(ref gwapiv1.BackendObjectReference, def string) string {
	if ref.Namespace != nil {
		return string(*ref.Namespace)
	}
	return def
}

// servicePod resolves a Service port to the address of the process behind
// it: the Deployment pod the Service selects, at the container port its
// targetPort names.
func (e *envoy) servicePod(ctx context.Context, ns, name string, port int32) (string, error) {
	var svc corev1.Service
	if err := e.api.Get(ctx, types.NamespacedName{Namespace: ns, Name: name}, &svc); err != nil {
		return "", err
	}
	var target *intstr.IntOrString
	for _, sp := range svc.Spec.Ports {
		if sp.Port == port {
			target = &sp.TargetPort
		}
	}
	if target == nil {
		return "", fmt.Errorf("Service %s/%s has no port %d", ns, name, port)
	}
	e.mu.Lock()
	pods := slices.Clone(e.pods)
	e.mu.Unlock()
	var notReady []error
	for _, p := range pods {
		if !p.serves(ns, svc.Spec.Selector) {
			continue
		}
		c := p.Deployment.Spec.Template.Spec.Containers[0]
		if c.ReadinessProbe != nil {
			if err := p.probe(c, c.ReadinessProbe); err != nil {
				notReady = append(notReady, err)
				continue
			}
		}
		return p.port(c, *target)
	}
	return "", fmt.Errorf("%w (of %d selected) behind Service %s/%s: %w", errNoReadyPod, len(notReady), ns, name, errors.Join(notReady...))
}

// destination is the endpoint the route's BackendTrafficPolicy takes from the
// request headers (the first of a comma-separated list; the rest are fallbacks).
func (e *envoy) destination(ctx context.Context, route *gwapiv1.HTTPRoute, h extproctest.Headers) (string, error) {
	var list egv1a1.BackendTrafficPolicyList
	if err := e.api.List(ctx, &list, client.InNamespace(route.Namespace)); err != nil {
		return "", err
	}
	for _, p := range list.Items {
		if !slices.ContainsFunc(p.Spec.GetTargetRefs(), func(t gwapiv1.LocalPolicyTargetReferenceWithSectionName) bool {
			return t.Kind == "HTTPRoute" && string(t.Name) == route.Name
		}) || p.Spec.LoadBalancer == nil || p.Spec.LoadBalancer.EndpointOverride == nil {
			continue
		}
		for _, from := range p.Spec.LoadBalancer.EndpointOverride.ExtractFrom {
			if from.Header == nil {
				continue
			}
			if v := h.Get(strings.ToLower(*from.Header)); v != "" {
				first, _, _ := strings.Cut(v, ",")
				return strings.TrimSpace(first), nil
			}
			return "", fmt.Errorf("%w: the request has no %s header for BackendTrafficPolicy %s", errNoDestination, *from.Header, p.Name)
		}
	}
	return "", fmt.Errorf("%w targets HTTPRoute %s", errNoOverride, route.Name)
}

var (
	// errNoOverride: a route that no picker serves has no endpoint override either.
	errNoOverride = errors.New("no BackendTrafficPolicy with an endpoint override")
	// errNoDestination: the route has an endpoint override, the request no endpoint.
	errNoDestination = errors.New("no picked endpoint")
	// errNoReadyPod: a Service with no ready pod behind it.
	errNoReadyPod = errors.New("no ready pod")
)

// checkEndpoint requires dest to be a ready endpoint of the backendRef: a
// Service (its selector, the targetPort of the referenced port) or an
// InferencePool (its selector, its target ports). Which Pods make endpoints
// is the rule of the picker's own pool source (source.Endpoints), the same as
// the endpoints controller's: ready, running, with an IP.
func (e *envoy) checkEndpoint(ctx context.Context, routeNS string, ref gwapiv1.BackendObjectReference, dest string) error {
	endpoints, err := e.backendEndpoints(ctx, routeNS, ref)
	if err != nil {
		return err
	}
	if !slices.Contains(endpoints, dest) {
		return fmt.Errorf("the picked endpoint %s is not a ready endpoint of %s %s/%s (%v)", dest, ptrOr(ref.Kind, "Service"), refNamespace(ref, routeNS), ref.Name, endpoints)
	}
	return nil
}

// fallbackEndpoint is where Envoy sends a request that no picker placed: the
// next of the backend's ready endpoints in turn.
func (e *envoy) fallbackEndpoint(ctx context.Context, routeNS string, ref gwapiv1.BackendObjectReference) (string, error) {
	endpoints, err := e.backendEndpoints(ctx, routeNS, ref)
	if err != nil {
		return "", err
	}
	if len(endpoints) == 0 {
		return "", fmt.Errorf("%s %s/%s has no ready endpoint to fall back to", ptrOr(ref.Kind, "Service"), refNamespace(ref, routeNS), ref.Name)
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	e.fallbacks++
	return endpoints[e.fallbacks%len(endpoints)], nil
}

// backendEndpoints are the ready endpoints of a backendRef: a Service (its
// selector, the targetPort of the referenced port) or an InferencePool (its
// selector, its target ports), by the picker's own pool rule.
func (e *envoy) backendEndpoints(ctx context.Context, routeNS string, ref gwapiv1.BackendObjectReference) ([]string, error) {
	ns := refNamespace(ref, routeNS)
	key := types.NamespacedName{Namespace: ns, Name: string(ref.Name)}
	var pool infv1.InferencePool
	switch {
	case ref.Kind == nil || *ref.Kind == "Service":
		var svc corev1.Service
		if err := e.api.Get(ctx, key, &svc); err != nil {
			return nil, err
		}
		pool.Spec.Selector.MatchLabels = map[infv1.LabelKey]infv1.LabelValue{}
		for k, v := range svc.Spec.Selector {
			pool.Spec.Selector.MatchLabels[infv1.LabelKey(k)] = infv1.LabelValue(v)
		}
		for _, sp := range svc.Spec.Ports {
			if ref.Port != nil && sp.Port == int32(*ref.Port) && sp.TargetPort.Type == intstr.Int {
				pool.Spec.TargetPorts = append(pool.Spec.TargetPorts, infv1.Port{Number: infv1.PortNumber(sp.TargetPort.IntVal)})
			}
		}
	case *ref.Kind == "InferencePool":
		if err := e.api.Get(ctx, key, &pool); err != nil {
			return nil, err
		}
	default:
		return nil, fmt.Errorf("backendRef kind %s is not played", *ref.Kind)
	}
	selector := map[string]string{}
	for k, v := range pool.Spec.Selector.MatchLabels {
		selector[string(k)] = string(v)
	}
	var pods corev1.PodList
	if err := e.api.List(ctx, &pods, client.InNamespace(ns), client.MatchingLabels(selector)); err != nil {
		return nil, err
	}
	var endpoints []string
	for _, ep := range source.Endpoints(&pool, pods.Items) {
		endpoints = append(endpoints, ep.Key())
	}
	if len(selector) == 0 {
		return nil, nil // selects nothing
	}
	return endpoints, nil
}

func ptrOr[T ~string](p *T, def string) string {
	if p == nil {
		return def
	}
	return string(*p)
}

// lastKnown reads the API server for the front and remembers each answer: a
// read that fails for want of an API server (refused, timed out, an API
// server still starting) gets the last answer to the same read instead, as
// Envoy goes on with its last configuration while Envoy Gateway cannot watch.
// An answer that an object does not exist is an answer, not an outage.
type lastKnown struct {
	client.Reader

	mu   sync.Mutex
	last map[string]runtime.Object
	// stale counts the reads answered from memory.
	stale int
}

func (l *lastKnown) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	return l.settle(fmt.Sprintf("get %T %s", obj, key), obj, l.Reader.Get(ctx, key, obj, opts...))
}

func (l *lastKnown) List(ctx context.Context, list client.ObjectList, opts ...client.ListOption) error {
	o := (&client.ListOptions{}).ApplyOptions(opts)
	return l.settle(fmt.Sprintf("list %T %s %v", list, o.Namespace, o.LabelSelector), list, l.Reader.List(ctx, list, opts...))
}

func (l *lastKnown) settle(key string, obj runtime.Object, err error) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if err == nil {
		if l.last == nil {
			l.last = map[string]runtime.Object{}
		}
		l.last[key] = obj.DeepCopyObject()
		return nil
	}
	prev, ok := l.last[key]
	if !ok || objectNotFound(err) {
		return err
	}
	reflect.ValueOf(obj).Elem().Set(reflect.ValueOf(prev.DeepCopyObject()).Elem())
	l.stale++
	return nil
}

// staleReads is how many reads were answered from memory so far.
func (l *lastKnown) staleReads() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.stale
}

// objectNotFound: the API server answered that the object does not exist (not
// that it does not serve the object's kind yet, as one that has just started may).
func objectNotFound(err error) bool {
	var st apierrors.APIStatus
	if !errors.As(err, &st) || !apierrors.IsNotFound(err) {
		return false
	}
	s := st.Status()
	return s.Details != nil && s.Details.Name != "" && !strings.Contains(s.Message, "could not find the requested resource")
}
