package controllers_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	egv1a1 "github.com/envoyproxy/gateway/api/v1alpha1"
	pb "github.com/envoyproxy/gateway/proto/extension"
	adminv3 "github.com/envoyproxy/go-control-plane/envoy/admin/v3"
	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	endpointv3 "github.com/envoyproxy/go-control-plane/envoy/config/endpoint/v3"
	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	_ "github.com/envoyproxy/go-control-plane/envoy/extensions/access_loggers/file/v3"
	extprocv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/ext_proc/v3"
	_ "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/health_check/v3"
	_ "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/router/v3"
	hcmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	_ "github.com/envoyproxy/go-control-plane/envoy/extensions/load_balancing_policies/least_request/v3"
	overridehostv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/load_balancing_policies/override_host/v3"
	_ "github.com/envoyproxy/go-control-plane/envoy/extensions/retry/host/previous_hosts/v3"
	_ "github.com/envoyproxy/go-control-plane/envoy/extensions/transport_sockets/tls/v3"
	_ "github.com/envoyproxy/go-control-plane/envoy/extensions/upstreams/http/v3"
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"
	corev1 "k8s.io/api/core/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	gwapiv1 "sigs.k8s.io/gateway-api/apis/v1"
	"sigs.k8s.io/yaml"

	igwv1 "github.com/igw-dev/igw/api/v1alpha1"
	"github.com/igw-dev/igw/internal/envoysim"
	"github.com/igw-dev/igw/internal/testenv"
	"github.com/igw-dev/igw/pkg/bbr"
	"github.com/igw-dev/igw/pkg/egext"
	"github.com/igw-dev/igw/pkg/extproctest"
	"github.com/igw-dev/igw/pkg/render"
	"github.com/igw-dev/igw/pkg/wire"
)

// egctl returns Envoy Gateway's CLI, building it once per machine (hack/egctl.sh).
func egctl() string {
	cmd := exec.Command(filepath.Join(testenv.RepoRoot(), "hack", "egctl.sh"))
	cmd.Stderr = GinkgoWriter
	out, err := cmd.Output()
	Expect(err).NotTo(HaveOccurred(), "building egctl with hack/egctl.sh")
	return strings.TrimSpace(string(out))
}

// envoyGatewayInput is what Envoy Gateway reads from the cluster for the
// namespace's Gateway, as stored by the API server: the GatewayClass, the
// Gateway API and Envoy Gateway objects, and Services. Envoy Gateway does not
// watch the other kinds (InferencePool, Deployments, ...), so neither is its
// translator given them.
func envoyGatewayInput(namespace, gatewayName string) []byte {
	var objs []client.Object
	var gc gwapiv1.GatewayClass
	Expect(k8s.Get(ctx, types.NamespacedName{Name: gatewayClassName}, &gc)).To(Succeed())
	var gw gwapiv1.Gateway
	Expect(k8s.Get(ctx, types.NamespacedName{Namespace: namespace, Name: gatewayName}, &gw)).To(Succeed())
	objs = append(objs, &gc, &gw)
	for _, list := range []client.ObjectList{&gwapiv1.HTTPRouteList{}, &corev1.ServiceList{},
		&egv1a1.BackendList{}, &egv1a1.BackendTrafficPolicyList{}, &egv1a1.EnvoyExtensionPolicyList{}, &egv1a1.ClientTrafficPolicyList{}, &egv1a1.HTTPRouteFilterList{},
		&gwapiv1.BackendTLSPolicyList{}, &corev1.ConfigMapList{}} {
		Expect(k8s.List(ctx, list, client.InNamespace(namespace))).To(Succeed())
		items, err := apimeta.ExtractList(list)
		Expect(err).NotTo(HaveOccurred())
		for _, it := range items {
			objs = append(objs, it.(client.Object))
		}
	}
	var b bytes.Buffer
	for _, o := range objs {
		gvks, _, err := scheme.ObjectKinds(o)
		Expect(err).NotTo(HaveOccurred())
		m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(o)
		Expect(err).NotTo(HaveOccurred())
		u := &unstructured.Unstructured{Object: m}
		u.SetGroupVersionKind(gvks[0])
		u.SetManagedFields(nil)
		delete(m, "status")
		data, err := yaml.Marshal(m)
		Expect(err).NotTo(HaveOccurred())
		b.WriteString("---\n")
		b.Write(data)
	}
	return b.Bytes()
}

// checkAccepted asserts that the translator accepted every object, with
// resolved references, and that only config's router policy is overridden.
func checkAccepted(t translation, config string) {
	for kind, list := range t.objects {
		for _, o := range list {
			for _, p := range append(o.Status.Parents, o.Status.Ancestors...) {
				for _, c := range p.Conditions {
					what := fmt.Sprintf("%s %s/%s %s=%s (%s: %s)", kind, o.Metadata.Namespace, o.Metadata.Name, c.Type, c.Status, c.Reason, c.Message)
					switch c.Type {
					case "Accepted", "ResolvedRefs", "BackendsAvailable", "Programmed":
						Expect(c.Status).To(Equal("True"), what)
					case "Overridden":
						// The router's Gateway-wide policy yields to each route's picker policy; the hook restores it there.
						Expect(o.Metadata.Name).To(Equal(render.NamesForConfig(config).BBRPolicy), what)
					default:
						Expect(c.Status).NotTo(Equal("False"), what)
					}
				}
			}
		}
	}
}

// translation is egctl's output: objects with the status the translator gave
// them, and the xDS config dump per Gateway.
type translation struct {
	objects map[string][]statusOf
	xds     map[string]struct {
		Configs []json.RawMessage `json:"configs"`
	}
}

type statusOf struct {
	Metadata struct{ Name, Namespace string } `json:"metadata"`
	Status   struct {
		Parents   []parentStatus `json:"parents"`
		Ancestors []parentStatus `json:"ancestors"`
	} `json:"status"`
}

type parentStatus struct {
	Conditions []struct{ Type, Status, Reason, Message string } `json:"conditions"`
}

func translate(input []byte) translation {
	dir := GinkgoT().TempDir()
	in := filepath.Join(dir, "resources.yaml")
	Expect(os.WriteFile(in, input, 0o644)).To(Succeed())
	cmd := exec.Command(egctl(), "x", "translate", "--from", "gateway-api", "--to", "gateway-api,xds", "-t", "all", "-o", "json", "-f", in)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	Expect(err).NotTo(HaveOccurred(), stderr.String())
	var raw map[string]json.RawMessage
	Expect(json.Unmarshal(out, &raw)).To(Succeed())
	t := translation{objects: map[string][]statusOf{}}
	for k, v := range raw {
		switch k {
		case "xds":
			Expect(json.Unmarshal(v, &t.xds)).To(Succeed())
		case "gatewayClass":
		default:
			var list []statusOf
			Expect(json.Unmarshal(v, &list)).To(Succeed(), k)
			t.objects[k] = list
		}
	}
	return t
}

// xdsDump holds the decoded listeners, routes, clusters and endpoints of one Gateway.
type xdsDump struct {
	listeners []*listenerv3.Listener
	routes    []*routev3.RouteConfiguration
	clusters  map[string]*clusterv3.Cluster
	endpoints map[string]*endpointv3.ClusterLoadAssignment
}

func decodeXDS(configs []json.RawMessage) xdsDump {
	d := xdsDump{clusters: map[string]*clusterv3.Cluster{}, endpoints: map[string]*endpointv3.ClusterLoadAssignment{}}
	for _, c := range configs {
		var head struct {
			Type string `json:"@type"`
		}
		Expect(json.Unmarshal(c, &head)).To(Succeed())
		switch {
		case strings.HasSuffix(head.Type, "ListenersConfigDump"):
			var ld adminv3.ListenersConfigDump
			Expect(unmarshalAny(c, &ld)).To(Succeed())
			d.listeners = append(d.listeners, unpackEach[listenerv3.Listener](ld.GetDynamicListeners(),
				func(e *adminv3.ListenersConfigDump_DynamicListener) *anypb.Any {
					return e.GetActiveState().GetListener()
				})...)
		case strings.HasSuffix(head.Type, "RoutesConfigDump"):
			var rd adminv3.RoutesConfigDump
			Expect(unmarshalAny(c, &rd)).To(Succeed())
			d.routes = append(d.routes, unpackEach[routev3.RouteConfiguration](rd.GetDynamicRouteConfigs(),
				(*adminv3.RoutesConfigDump_DynamicRouteConfig).GetRouteConfig)...)
		case strings.HasSuffix(head.Type, "ClustersConfigDump"):
			var cd adminv3.ClustersConfigDump
			Expect(unmarshalAny(c, &cd)).To(Succeed())
			for _, cl := range unpackEach[clusterv3.Cluster](cd.GetDynamicActiveClusters(), (*adminv3.ClustersConfigDump_DynamicCluster).GetCluster) {
				d.clusters[cl.GetName()] = cl
			}
		case strings.HasSuffix(head.Type, "EndpointsConfigDump"):
			var ed adminv3.EndpointsConfigDump
			Expect(unmarshalAny(c, &ed)).To(Succeed())
			for _, la := range unpackEach[endpointv3.ClusterLoadAssignment](ed.GetDynamicEndpointConfigs(), (*adminv3.EndpointsConfigDump_DynamicEndpointConfig).GetEndpointConfig) {
				d.endpoints[la.GetClusterName()] = la
			}
		}
	}
	return d
}

// unpackEach decodes the resource each entry of a config dump carries.
func unpackEach[T any, PT interface {
	*T
	proto.Message
}, E any](entries []E, resource func(E) *anypb.Any) []PT {
	out := make([]PT, len(entries))
	for i, e := range entries {
		out[i] = PT(new(T))
		Expect(resource(e).UnmarshalTo(out[i])).To(Succeed())
	}
	return out
}

// unmarshalAny reads one config-dump entry (JSON with an "@type") into m.
func unmarshalAny(data []byte, m proto.Message) error {
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(data, &fields); err != nil {
		return err
	}
	delete(fields, "@type")
	rest, err := json.Marshal(fields)
	if err != nil {
		return err
	}
	return protojson.Unmarshal(rest, m)
}

// httpConnectionManager returns the HCM of the Gateway's HTTP listener and its route configuration.
func (d xdsDump) httpConnectionManager() (*hcmv3.HttpConnectionManager, *routev3.RouteConfiguration) {
	for _, l := range d.listeners {
		for _, fc := range append(l.GetFilterChains(), l.GetDefaultFilterChain()) {
			for _, f := range fc.GetFilters() {
				var hcm hcmv3.HttpConnectionManager
				if f.GetTypedConfig() == nil || f.GetTypedConfig().UnmarshalTo(&hcm) != nil || hcm.GetRds() == nil {
					continue
				}
				for _, rc := range d.routes {
					if rc.GetName() == hcm.GetRds().GetRouteConfigName() {
						return &hcm, rc
					}
				}
			}
		}
	}
	Fail("no HTTP connection manager with routes in the translated listeners")
	return nil, nil
}

// hookThroughGRPC sends the listeners and routes through igw's extension
// server, over gRPC as Envoy Gateway does, and replaces them with the answer.
func (d *xdsDump) hookThroughGRPC() {
	listening := make(chan net.Addr, 1)
	hookCtx, stop := context.WithCancel(ctx)
	defer stop()
	go func() {
		defer GinkgoRecover()
		Expect(egext.Runnable{Addr: "127.0.0.1:0", Listening: listening}.Start(hookCtx)).To(Succeed())
	}()
	addr := <-listening
	conn, err := grpc.NewClient(addr.String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	Expect(err).NotTo(HaveOccurred())
	defer conn.Close()
	resp, err := pb.NewEnvoyGatewayExtensionClient(conn).PostTranslateModify(hookCtx,
		&pb.PostTranslateModifyRequest{Listeners: d.listeners, Routes: d.routes})
	Expect(err).NotTo(HaveOccurred())
	d.listeners, d.routes = resp.GetListeners(), resp.GetRoutes()
}

// extProcFilter is the name Envoy Gateway gives the ext_proc filter of a policy.
func extProcFilter(namespace, policy string) string {
	return fmt.Sprintf("envoy.filters.http.ext_proc/envoyextensionpolicy/%s/%s/extproc/0", namespace, policy)
}

func eppFilterOf(route string) string {
	return extProcFilter(ns, render.NamesForRoute(route).EPPPolicy)
}

func bbrFilterOf(config string) string {
	return extProcFilter(ns, render.NamesForConfig(config).BBRPolicy)
}

// checkEnvoyGatewayTranslation runs Envoy Gateway's translator over what the
// operator created and checks the data path request by request.
func checkEnvoyGatewayTranslation(namespace string, routes []string, config string) {
	t := translate(envoyGatewayInput(namespace, "inference-gateway"))

	By("every route and policy is accepted, with resolved references")
	checkAccepted(t, config)
	Expect(t.objects).To(HaveKey("httpRoutes"))
	Expect(t.objects["httpRoutes"]).To(HaveLen(len(routes)+2), "one per model, the catch-all and the model list")

	dump := decodeXDS(t.xds[ns+"/inference-gateway"].Configs)
	hcm, rc := dump.httpConnectionManager()
	bbr := bbrFilterOf(config)
	firstModel := render.ServedNames(getRoute(ns, routes[0]))[0]
	effects := func(expectModel string) map[string]envoysim.Effect {
		e := map[string]envoysim.Effect{bbr: func(h map[string]string) { h[wire.HeaderModelName] = expectModel }}
		for _, r := range routes {
			picked := "10.0.0." + fmt.Sprint(len(r))
			e[eppFilterOf(r)] = func(h map[string]string) { h[wire.HeaderDestinationEndpoint] = picked + ":8000" }
		}
		return e
	}

	By("without the hook, Envoy would never run the picker of a body-routed request (the first-route trap)")
	before, err := envoysim.Walk(hcm, rc, envoysim.Request{Path: "/v1/chat/completions"}, effects(firstModel))
	Expect(err).NotTo(HaveOccurred())
	Expect(before.Ran).To(Equal([]string{bbr}))
	Expect(before.FinalRoute).To(HavePrefix("httproute/" + ns + "/" + routes[0] + "/"))

	dump.hookThroughGRPC()
	hcm, rc = dump.httpConnectionManager()

	for _, r := range routes {
		mr := getRoute(ns, r)
		for _, model := range render.ServedNames(mr) {
			By("a request for " + model + " goes through the router, then " + r + "'s picker, to the endpoint it picked")
			trace, err := envoysim.Walk(hcm, rc, envoysim.Request{Path: "/v1/chat/completions"}, effects(model))
			Expect(err).NotTo(HaveOccurred())
			Expect(trace.FirstRoute).To(HavePrefix("httproute/" + ns + "/" + render.NamesForConfig(config).CatchAll + "/"))
			Expect(trace.Ran).To(Equal([]string{bbr, eppFilterOf(r)}), model)
			Expect(trace.FinalRoute).To(HavePrefix("httproute/" + ns + "/" + r + "/"))
			checkPoolCluster(dump, trace.Cluster, r)
			checkPoolRetry(rc, trace.FinalRoute)
			checkPickerCluster(dump, hcm, eppFilterOf(r), r)
		}
	}

	cfg := getConfig(namespace, config)
	for _, r := range routes {
		model := render.ServedNames(getRoute(ns, r))[0]
		down := envoysim.Request{Path: "/v1/chat/completions", Down: []string{eppFilterOf(r)}}
		trace, err := envoysim.Walk(hcm, rc, down, effects(model))
		Expect(err).NotTo(HaveOccurred())
		if render.EPPFailureMode(getRoute(ns, r), cfg) == igwv1.FailOpen {
			By("with " + r + "'s picker down, its FailOpen request still reaches the pool, balanced without a destination header")
			Expect(trace.FailedOpen).To(Equal([]string{eppFilterOf(r)}))
			Expect(trace.Ran).To(Equal([]string{bbr}))
			Expect(trace.FinalRoute).To(HavePrefix("httproute/" + ns + "/" + r + "/"))
			Expect(trace.Headers).NotTo(HaveKey(wire.HeaderDestinationEndpoint))
			checkPoolCluster(dump, trace.Cluster, r)
		} else {
			By("with " + r + "'s picker down, its FailClose request gets Envoy's 500")
			Expect(trace.FailedClosed).To(Equal(eppFilterOf(r)))
			Expect(trace.DirectStatus).To(BeEquivalentTo(500))
			Expect(trace.Cluster).To(BeEmpty())
		}
		By("another model's picker being down does not touch " + r + "'s requests")
		for _, other := range routes {
			if other == r {
				continue
			}
			trace, err = envoysim.Walk(hcm, rc, envoysim.Request{Path: "/v1/chat/completions", Down: []string{eppFilterOf(other)}}, effects(model))
			Expect(err).NotTo(HaveOccurred())
			Expect(trace.FailedOpen).To(BeEmpty())
			Expect(trace.FailedClosed).To(BeEmpty())
			Expect(trace.Ran).To(Equal([]string{bbr, eppFilterOf(r)}))
		}
	}

	By("a client-sent model header does not bypass the router: the body decides")
	other := render.ServedNames(getRoute(ns, routes[1]))[0]
	trace, err := envoysim.Walk(hcm, rc, envoysim.Request{Path: "/v1/completions",
		Headers: map[string]string{wire.HeaderModelName: firstModel}}, effects(other))
	Expect(err).NotTo(HaveOccurred())
	Expect(trace.FirstRoute).To(HavePrefix("httproute/" + ns + "/" + routes[0] + "/"))
	Expect(trace.Ran).To(Equal([]string{bbr, eppFilterOf(routes[1])}))
	Expect(trace.FinalRoute).To(HavePrefix("httproute/" + ns + "/" + routes[1] + "/"))

	By("the real router, driven over ext_proc, removes a client's model header from a request it does not route (not JSON): it ends on the catch-all, meeting no picker")
	for _, contentType := range []string{"text/plain", ""} {
		trace, err = envoysim.Walk(hcm, rc, envoysim.Request{Path: "/v1/completions",
			Headers: map[string]string{wire.HeaderModelName: firstModel, wire.HeaderDebug: "1"}},
			map[string]envoysim.Effect{bbr: realRouter(contentType, []byte(`{"model":"`+firstModel+`"}`))})
		Expect(err).NotTo(HaveOccurred())
		Expect(trace.FirstRoute).To(HavePrefix("httproute/"+ns+"/"+routes[0]+"/"), "the client's header matched a model route at first")
		Expect(trace.Ran).To(Equal([]string{bbr}), contentType)
		Expect(trace.FinalRoute).To(HavePrefix("httproute/"+ns+"/"+render.NamesForConfig(config).CatchAll+"/"), contentType)
		Expect(trace.DirectStatus).To(BeEquivalentTo(404))
		Expect(trace.Headers).NotTo(HaveKey(wire.HeaderDebug))
	}
	By("and routes a JSON request on its body whatever model header the client sent")
	trace, err = envoysim.Walk(hcm, rc, envoysim.Request{Path: "/v1/completions",
		Headers: map[string]string{wire.HeaderModelName: firstModel}},
		map[string]envoysim.Effect{bbr: realRouter("application/json", []byte(`{"model":"`+other+`","prompt":"p"}`))})
	Expect(err).NotTo(HaveOccurred())
	Expect(trace.FinalRoute).To(HavePrefix("httproute/" + ns + "/" + routes[1] + "/"))
	Expect(trace.Headers).To(HaveKeyWithValue(wire.HeaderModelName, other))

	By("an unknown model ends on the catch-all rule with the OpenAI-style 404")
	trace, err = envoysim.Walk(hcm, rc, envoysim.Request{Path: "/v1/chat/completions"}, effects("no-such-model"))
	Expect(err).NotTo(HaveOccurred())
	Expect(trace.Ran).To(Equal([]string{bbr}))
	Expect(trace.FinalRoute).To(HavePrefix("httproute/" + ns + "/" + render.NamesForConfig(config).CatchAll + "/"))
	Expect(trace.DirectStatus).To(BeEquivalentTo(404))
	Expect(trace.DirectBody).To(Equal(render.ModelNotFoundBody()))

	By("GET /v1/models goes to the router's model list port, even when a body names a model, and meets no picker")
	for _, req := range []struct {
		headers map[string]string
		effects map[string]envoysim.Effect
	}{
		{nil, nil}, // a GET: no body, so the router sets nothing
		{map[string]string{wire.HeaderModelName: other}, nil},
		{map[string]string{wire.HeaderModelName: other}, effects(firstModel)},
	} {
		trace, err = envoysim.Walk(hcm, rc, envoysim.Request{Path: wire.ModelsPath, Headers: req.headers}, req.effects)
		Expect(err).NotTo(HaveOccurred())
		modelList := "httproute/" + ns + "/" + render.NamesForConfig(config).ModelList + "/"
		Expect(trace.FirstRoute).To(HavePrefix(modelList), "the longer path prefix outranks a model route's header match")
		Expect(trace.Ran).To(Equal([]string{bbr}))
		Expect(trace.FinalRoute).To(HavePrefix(modelList))
		checkModelListCluster(dump, trace.Cluster, config)
	}
	By("a path below it (OpenAI's retrieve-model) goes to the router's models port too; a path that only starts alike does not")
	trace, err = envoysim.Walk(hcm, rc, envoysim.Request{Path: wire.ModelsPath + "/" + firstModel}, nil)
	Expect(err).NotTo(HaveOccurred())
	Expect(trace.FinalRoute).To(HavePrefix("httproute/" + ns + "/" + render.NamesForConfig(config).ModelList + "/"))
	checkModelListCluster(dump, trace.Cluster, config)
	trace, err = envoysim.Walk(hcm, rc, envoysim.Request{Path: wire.ModelsPath + "x"}, nil)
	Expect(err).NotTo(HaveOccurred())
	Expect(trace.FinalRoute).To(HavePrefix("httproute/" + ns + "/" + render.NamesForConfig(config).CatchAll + "/"))
	Expect(trace.DirectStatus).To(BeEquivalentTo(404))

	By("the router buffers the body, which is what lets its header re-route; pickers failing closed stream both ways, those failing open buffer the request and stream the response")
	pickerModes := map[string]igwv1.FailureMode{}
	for _, r := range routes {
		pickerModes[eppFilterOf(r)] = render.EPPFailureMode(getRoute(ns, r), cfg)
	}
	seen := 0
	for _, hf := range hcm.GetHttpFilters() {
		var ep extprocv3.ExternalProcessor
		if hf.GetTypedConfig().UnmarshalTo(&ep) != nil {
			continue
		}
		switch egext.FilterRole(hf.GetName()) {
		case egext.RoleBBR:
			Expect(ep.GetProcessingMode().GetRequestBodyMode()).To(Equal(extprocv3.ProcessingMode_BUFFERED))
		case egext.RoleEPP:
			Expect(hf.GetDisabled()).To(BeFalse(), "pickers must be in every stream's chain")
			Expect(ep.GetMetadataOptions().GetReceivingNamespaces().GetUntyped()).To(ContainElement(wire.MetadataNamespaceLB))
			Expect(pickerModes).To(HaveKey(hf.GetName()))
			seen++
			request, response := extprocv3.ProcessingMode_FULL_DUPLEX_STREAMED, extprocv3.ProcessingMode_FULL_DUPLEX_STREAMED
			failOpen := pickerModes[hf.GetName()] == igwv1.FailOpen
			if failOpen {
				request, response = extprocv3.ProcessingMode_BUFFERED, extprocv3.ProcessingMode_STREAMED
			}
			Expect(ep.GetFailureModeAllow()).To(Equal(failOpen), hf.GetName())
			Expect(ep.GetProcessingMode().GetRequestBodyMode()).To(Equal(request), hf.GetName())
			Expect(ep.GetProcessingMode().GetResponseBodyMode()).To(Equal(response), hf.GetName())
		}
	}
	Expect(seen).To(Equal(len(routes)))
	Expect(pickerModes).To(ContainElements(igwv1.FailOpen, igwv1.FailClose), "the suite's routes cover both failure modes")
}

// realRouter is the body-based router as an envoysim effect: the request's
// headers, with contentType and body, go through a real bbr.ExtProc over
// ext_proc (buffered, as the router's policy configures Envoy), and come back
// as Envoy would forward them.
func realRouter(contentType string, body []byte) envoysim.Effect {
	return func(h map[string]string) {
		req := extproctest.Request{Headers: extproctest.NewHeaders(":method", "POST", ":path", "/v1/completions",
			":scheme", "http", ":authority", "gateway.local"), Body: body}
		if contentType != "" {
			req.Headers = append(req.Headers, extproctest.Header{Key: "content-type", Value: contentType})
		}
		for k, v := range h {
			req.Headers = append(req.Headers, extproctest.Header{Key: k, Value: v})
		}
		c := extproctest.Start(GinkgoT(), &bbr.ExtProc{Router: bbr.NewRouter(bbr.RouterConfig{}), BodyMode: bbr.Buffered},
			extproctest.Config{RequestBodyMode: extproctest.Buffered})
		res, err := c.Process(ctx, req)
		Expect(err).NotTo(HaveOccurred())
		Expect(res.ImmediateResponse).To(BeNil())
		clear(h)
		for _, hv := range res.RequestHeaders {
			if !strings.HasPrefix(hv.Key, ":") && hv.Key != "content-type" && hv.Key != "content-length" {
				h[hv.Key] = hv.Value
			}
		}
	}
}

// checkPoolCluster asserts that a model's cluster overrides the host from the
// picker's destination header, among the route's pool Service endpoints.
func checkPoolCluster(d xdsDump, name, route string) {
	checkOverrideHost(d, name)
	var svc corev1.Service
	Expect(k8s.Get(ctx, types.NamespacedName{Namespace: ns, Name: render.NamesForRoute(route).PoolService}, &svc)).To(Succeed())
	Expect(endpointAddresses(d, name)).To(ContainElement(svc.Spec.ClusterIP))
}

// checkOverrideHost asserts that a cluster overrides the host from the
// picker's destination header, and balances by least request without it.
func checkOverrideHost(d xdsDump, name string) {
	cl, ok := d.clusters[name]
	Expect(ok).To(BeTrue(), "cluster %q", name)
	var oh overridehostv3.OverrideHost
	found := false
	for _, p := range cl.GetLoadBalancingPolicy().GetPolicies() {
		if p.GetTypedExtensionConfig().GetTypedConfig().UnmarshalTo(&oh) == nil {
			found = true
		}
	}
	Expect(found).To(BeTrue(), "cluster %s has no override_host load balancing policy", name)
	Expect(oh.GetOverrideHostSources()).To(ContainElement(HaveField("Header", wire.HeaderDestinationEndpoint)))
	// Without the header (a picker that failed open) or with a host not in the
	// pool, the fallback balances over the pool's endpoints.
	var fallbacks []string
	for _, p := range oh.GetFallbackPolicy().GetPolicies() {
		fallbacks = append(fallbacks, p.GetTypedExtensionConfig().GetTypedConfig().GetTypeUrl())
	}
	Expect(fallbacks).To(ContainElement(HaveSuffix("least_request.v3.LeastRequest")), "fallback of cluster %s", name)
}

// checkPoolRetry asserts that a model's route retries once what failed
// before the response headers (a refused or reset connection, a server
// error), on another host: the override then takes the destination
// header's next endpoint, the picker's fallback.
func checkPoolRetry(rc *routev3.RouteConfiguration, name string) {
	route := findRoute(rc, name)
	Expect(route).NotTo(BeNil(), "route %s", name)
	rp := route.GetRoute().GetRetryPolicy()
	Expect(rp).NotTo(BeNil(), "route %s has no retry policy", name)
	Expect(rp.GetNumRetries().GetValue()).To(BeEquivalentTo(1), name)
	Expect(strings.Split(rp.GetRetryOn(), ",")).To(ConsistOf("connect-failure", "reset", "retriable-status-codes"), name)
	var codes []int
	for _, c := range render.RetriedStatusCodes {
		codes = append(codes, int(c))
	}
	var got []int
	for _, c := range rp.GetRetriableStatusCodes() {
		got = append(got, int(c))
	}
	Expect(got).To(ConsistOf(codes), name)
	Expect(rp.GetRetryHostPredicate()).To(ContainElement(HaveField("Name", "envoy.retry_host_predicates.previous_hosts")), name)
}

// checkModelListCluster asserts that a cluster is the router Service's model list port.
func checkModelListCluster(d xdsDump, name, config string) {
	Expect(d.clusters).To(HaveKey(name))
	var svc corev1.Service
	Expect(k8s.Get(ctx, types.NamespacedName{Namespace: ns, Name: render.NamesForConfig(config).BBR}, &svc)).To(Succeed())
	var got []string
	for _, le := range d.endpoints[name].GetEndpoints() {
		for _, e := range le.GetLbEndpoints() {
			a := e.GetEndpoint().GetAddress().GetSocketAddress()
			got = append(got, fmt.Sprintf("%s:%d", a.GetAddress(), a.GetPortValue()))
		}
	}
	Expect(got).To(ConsistOf(fmt.Sprintf("%s:%d", svc.Spec.ClusterIP, render.BBRModelsPort)), "endpoints of cluster %s", name)
}

// checkPickerCluster asserts that a picker filter talks to its route's EPP Service.
func checkPickerCluster(d xdsDump, hcm *hcmv3.HttpConnectionManager, filter, route string) {
	for _, hf := range hcm.GetHttpFilters() {
		if hf.GetName() != filter {
			continue
		}
		var ep extprocv3.ExternalProcessor
		Expect(hf.GetTypedConfig().UnmarshalTo(&ep)).To(Succeed())
		var svc corev1.Service
		Expect(k8s.Get(ctx, types.NamespacedName{Namespace: ns, Name: render.NamesForRoute(route).EPP}, &svc)).To(Succeed())
		Expect(endpointAddresses(d, ep.GetGrpcService().GetEnvoyGrpc().GetClusterName())).To(ContainElement(svc.Spec.ClusterIP))
		return
	}
	Fail("no filter " + filter)
}

func endpointAddresses(d xdsDump, cluster string) []string {
	var out []string
	for _, le := range d.endpoints[cluster].GetEndpoints() {
		for _, e := range le.GetLbEndpoints() {
			out = append(out, e.GetEndpoint().GetAddress().GetSocketAddress().GetAddress())
		}
	}
	return out
}
