package controllers_test

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"time"

	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	extprocv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/ext_proc/v3"
	_ "github.com/envoyproxy/go-control-plane/envoy/extensions/retry/host/previous_hosts/v3"
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"

	igwv1 "github.com/igw-dev/igw/api/v1alpha1"
	"github.com/igw-dev/igw/controllers"
	"github.com/igw-dev/igw/internal/envoysim"
	"github.com/igw-dev/igw/pkg/render"
	"github.com/igw-dev/igw/pkg/wire"
)

// pickerStatusServer plays the global pickers' GET /status over HTTP: the
// report a spec sets is served for every picker Service.
type pickerStatusServer struct {
	once   sync.Once
	srv    *httptest.Server
	mu     sync.Mutex
	report *controllers.PickerReport
}

var pickerStatus = &pickerStatusServer{}

func (p *pickerStatusServer) url(namespace, service string) string {
	p.once.Do(func() {
		p.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			p.mu.Lock()
			defer p.mu.Unlock()
			if p.report == nil {
				http.Error(w, "no report", http.StatusServiceUnavailable)
				return
			}
			_ = json.NewEncoder(w).Encode(p.report)
		}))
	})
	return p.srv.URL + "/" + namespace + "/" + service + render.GlobalStatusPath
}

func (p *pickerStatusServer) set(r *controllers.PickerReport) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.report = r
}

func (p *pickerStatusServer) close() {
	if p.srv != nil {
		p.srv.Close()
	}
}

const hubNS = "hub"

func getGlobal(name string) *igwv1.GlobalInferenceGateway {
	var g igwv1.GlobalInferenceGateway
	Expect(k8s.Get(ctx, types.NamespacedName{Name: name}, &g)).To(Succeed())
	return &g
}

func globalCondition(name, typ string) func() string {
	return func() string { return condition(getGlobal(name).Status.Conditions, typ) }
}

// globalChildren are the children the operator must have created for a
// GlobalInferenceGateway, named by the pure rendering of the live objects.
func globalChildren(name string) []child {
	out, err := render.Global(render.GlobalInput{Global: getGlobal(name), Gateway: render.ResolveGateway(getConfig(hubNS, "hub")),
		Images: testImages})
	Expect(err).NotTo(HaveOccurred())
	return childrenOf(out.Objects)
}

func secret(ns, name string, data map[string]string) {
	s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, StringData: data}
	Expect(k8s.Create(ctx, s)).To(Succeed())
}

var _ = Describe("A GlobalInferenceGateway over three members", Ordered, func() {
	const name = "fabric"
	// Tokens the member Secrets hold: none may appear in a child.
	tokens := map[string]string{"use1": "tok-use1-d9f1c2", "usw2": "tok-usw2-7a3b55", "euw1": "tok-euw1-0c4e88"}

	BeforeAll(func() {
		heldNamespace(hubNS) // the global picker starts unready
		gateway(hubNS, "inference-gateway")
		config(hubNS, "hub", nil)
		// The members' Secrets, but euw1's: its absence must show in the status.
		secret(hubNS, "use1-token", map[string]string{"token": tokens["use1"]})
		secret(hubNS, "usw2-token", map[string]string{"token": tokens["usw2"]})
		member := func(n, region, ip string) igwv1.GlobalMember {
			return igwv1.GlobalMember{Name: n, Region: igwv1.RegionName(region), Address: ip + ":18080",
				SummaryURL:           "http://" + ip + ":18080" + wire.GlobalSummaryPath,
				CredentialsSecretRef: igwv1.SecretKeyRef{Name: n + "-token"}}
		}
		Expect(k8s.Create(ctx, &igwv1.GlobalInferenceGateway{ObjectMeta: metav1.ObjectMeta{Name: name},
			Spec: igwv1.GlobalInferenceGatewaySpec{
				Namespace: hubNS,
				Members:   []igwv1.GlobalMember{member("use1", "us-east-1", "10.1.0.10"), member("usw2", "us-west-2", "10.2.0.10"), member("euw1", "eu-west-1", "10.3.0.10")},
				Models:    []igwv1.GlobalModel{{Name: "meta-llama/Llama-3.1-8B-Instruct"}, {Name: "llama-eu", Regions: []igwv1.RegionName{"eu-west-1"}}},
				Routing:   &igwv1.GlobalRouting{Weights: map[string]int32{"member-prefix-locality": 500}},
			}})).To(Succeed())
	})

	It("gets its children in spec.namespace, controlled by it, without a token in any of them", func() {
		Eventually(func() error { return allExist(globalChildren(name)) }, eventually, poll).Should(Succeed())
		quiesce()
		gig := getGlobal(name)
		children := globalChildren(name)
		Expect(children).To(ContainElements(
			HaveField("GVK.Kind", "Deployment"), HaveField("GVK.Kind", "ConfigMap"), HaveField("GVK.Kind", "Service"),
			HaveField("GVK.Kind", "Backend"), HaveField("GVK.Kind", "BackendTrafficPolicy"), HaveField("GVK.Kind", "EnvoyExtensionPolicy")))
		routes := 0
		for _, c := range children {
			obj, err := c.fetch()
			Expect(err).NotTo(HaveOccurred())
			Expect(obj.GetNamespace()).To(Equal(hubNS), c.String())
			Expect(obj.GetLabels()).To(Equal(render.GlobalLabels(gig)), c.String())
			ref := metav1.GetControllerOf(obj)
			Expect(ref).NotTo(BeNil(), c.String())
			Expect(ref.UID).To(Equal(gig.UID), c.String())
			data, err := json.Marshal(obj)
			Expect(err).NotTo(HaveOccurred())
			for _, tok := range tokens {
				Expect(string(data)).NotTo(ContainSubstring(tok), c.String())
			}
			if c.GVK.Kind == render.KindHTTPRoute {
				routes++
			}
		}
		Expect(routes).To(Equal(2), "one HTTPRoute per global model")

		By("the picker's config names each member's token file, mounted from its Secret")
		var cm corev1.ConfigMap
		Expect(k8s.Get(ctx, types.NamespacedName{Namespace: hubNS, Name: render.NamesForGlobal(gig).Picker}, &cm)).To(Succeed())
		for m := range tokens {
			Expect(cm.Data[render.GlobalConfigKey]).To(ContainSubstring("tokenFile: /var/run/igw-global/members/" + m + "/token"))
		}
		Expect(cm.Data[render.GlobalConfigKey]).To(ContainSubstring("member-prefix-locality: 500"))
		var d appsv1.Deployment
		Expect(k8s.Get(ctx, types.NamespacedName{Namespace: hubNS, Name: render.NamesForGlobal(gig).Picker}, &d)).To(Succeed())
		var secrets []string
		for _, v := range d.Spec.Template.Spec.Volumes {
			if v.Projected != nil {
				for _, s := range v.Projected.Sources {
					secrets = append(secrets, s.Secret.Name)
				}
			}
		}
		Expect(secrets).To(ConsistOf("use1-token", "usw2-token", "euw1-token"))
		Expect(d.Spec.Template.Spec.Containers[0].Name).To(Equal("global-picker"))
	})

	It("says which Secret is missing, and moves on once it exists", func() {
		Eventually(globalCondition(name, igwv1.ConditionReady), eventually, poll).Should(Equal("False/" + igwv1.ReasonSecretNotFound))
		gig := getGlobal(name)
		ready := meta.FindStatusCondition(gig.Status.Conditions, igwv1.ConditionReady)
		Expect(ready.Message).To(ContainSubstring("Secret hub/euw1-token of members[euw1].credentialsSecretRef does not exist"))
		Expect(ready.Message).NotTo(ContainSubstring("use1-token"))
		Expect(ready.ObservedGeneration).To(Equal(gig.Generation))
		Expect(gig.Status.Members).To(HaveLen(3))
		Expect(condition(gig.Status.Members[2].Conditions, igwv1.ConditionReachable)).To(Equal("False/" + igwv1.ReasonSecretNotFound))
		Expect(condition(gig.Status.Members[0].Conditions, igwv1.ConditionReachable)).To(Equal("Unknown/" + igwv1.ReasonEndpointPickerUnavailable))
		Expect(gig.Status.MemberCount).To(BeEquivalentTo(3))

		secret(hubNS, "euw1-token", map[string]string{"token": tokens["euw1"]})
		// Secrets are not watched: the operator looks again on its re-check, which this reconcile stands in for.
		_, err := recs.Global.Reconcile(ctx, ctrl.Request{NamespacedName: types.NamespacedName{Name: name}})
		Expect(err).NotTo(HaveOccurred())
		Expect(globalCondition(name, igwv1.ConditionReady)()).To(Equal("False/" + igwv1.ReasonEndpointPickerUnavailable))
	})

	It("reports each member from the picker's status, with the counts kubectl shows", func() {
		at := time.Now().UTC().Truncate(time.Second)
		pickerStatus.set(&controllers.PickerReport{GeneratedAt: at, Members: []controllers.PickerMember{
			{Name: "use1", Region: "us-east-1", Reachable: true, SummaryValid: true, InRotation: true, SummaryAgeSeconds: 0.3, RTTSeconds: 0.002},
			{Name: "usw2", Region: "us-west-2", Reachable: true, SummaryValid: true, InRotation: true, SummaryAgeSeconds: 0.2, RTTSeconds: 0.061},
			{Name: "euw1", Region: "eu-west-1", Reason: "2 failed probes in a row", LastError: "dial tcp 10.3.0.10:18080: connect: connection refused"},
		}})
		passReadinessProbes(hubNS, render.NamesForGlobal(getGlobal(name)).Picker)
		Eventually(globalCondition(name, igwv1.ConditionReady), eventually, poll).Should(Equal("True/" + igwv1.ReasonReady))
		st := getGlobal(name).Status
		Expect(st.MembersInRotation).To(BeEquivalentTo(2))
		Expect(condition(st.Members[0].Conditions, igwv1.ConditionInRotation)).To(Equal("True/" + igwv1.ReasonInRotation))
		Expect(condition(st.Members[2].Conditions, igwv1.ConditionReachable)).To(Equal("False/" + igwv1.ReasonUnreachable))
		Expect(meta.FindStatusCondition(st.Members[2].Conditions, igwv1.ConditionInRotation).Message).To(Equal("2 failed probes in a row"))
		Expect(st.Members[1].RoundTrip.Duration).To(Equal(61 * time.Millisecond))
		out, err := env.Kubectl("get", "globalinferencegateways")
		Expect(err).NotTo(HaveOccurred())
		GinkgoWriter.Println(out)
		row := strings.Fields(strings.Split(out, "\n")[1])
		Expect(row).To(HaveLen(6), out)
		Expect(row[:3]).To(Equal([]string{name, "3", "2"}), "NAME, MEMBERS, IN ROTATION:\n"+out)
		// The API server's column printer shows the first match of .spec.models[*].name only.
		Expect(row[3]).To(Equal("meta-llama/Llama-3.1-8B-Instruct"), out)
		Expect(row[4]).To(Equal("True"), out)
	})

	It("reconciles an unchanged GlobalInferenceGateway without a single write", func() {
		quiesce()
		children := globalChildren(name)
		rvBefore := resourceVersions(children)
		n0, paths0 := ownWrites.snapshot()
		for range 3 {
			_, err := recs.Global.Reconcile(reconcileCtx(), ctrl.Request{NamespacedName: types.NamespacedName{Name: name}})
			Expect(err).NotTo(HaveOccurred())
		}
		n1, _ := ownWrites.snapshot()
		AddReportEntry("global idempotence", map[string]int{"reconciles": 3, "writes": n1 - n0, "children checked": len(children)})
		Expect(n1-n0).To(BeZero(), "writes during reconciles of an unchanged GlobalInferenceGateway:\n"+ownWrites.since(paths0))
		// The status refreshes on a timer; the children change only with the spec.
		Expect(resourceVersions(children)).To(Equal(rvBefore))
	})

	It("is accepted by Envoy Gateway's translator: each global route runs the global picker and retries once on another member", func() {
		checkGlobalTranslation(name)
	})

	It("removes its children when it is deleted", func() {
		children := globalChildren(name)
		Expect(k8s.Delete(ctx, getGlobal(name))).To(Succeed())
		Eventually(func() []string {
			var left []string
			for _, c := range children {
				if _, err := c.fetch(); err == nil {
					left = append(left, c.String())
				}
			}
			return left
		}, eventually, poll).Should(BeEmpty())
	})
})

// checkGlobalTranslation runs Envoy Gateway's translator over the hub
// namespace and follows a request for each global model through the hooked xDS.
func checkGlobalTranslation(name string) {
	gig := getGlobal(name)
	n := render.NamesForGlobal(gig)
	t := translate(envoyGatewayInput(hubNS, "inference-gateway"))
	By("every route and policy is accepted, with resolved references")
	checkAccepted(t, "hub")
	dump := decodeXDS(t.xds[hubNS+"/inference-gateway"].Configs)
	dump.hookThroughGRPC()
	hcm, rc := dump.httpConnectionManager()
	bbr := extProcFilter(hubNS, render.NamesForConfig("hub").BBRPolicy)
	picker := extProcFilter(hubNS, n.Policy)
	for _, model := range gig.Spec.Models {
		By("a request for " + string(model.Name) + " goes through the hub's router, then the global picker, to the member it picked")
		effects := map[string]envoysim.Effect{
			bbr:    func(h map[string]string) { h[wire.HeaderModelName] = string(model.Name) },
			picker: func(h map[string]string) { h[wire.HeaderDestinationEndpoint] = gig.Spec.Members[1].Address },
		}
		trace, err := envoysim.Walk(hcm, rc, envoysim.Request{Path: "/v1/chat/completions"}, effects)
		Expect(err).NotTo(HaveOccurred())
		Expect(trace.Ran).To(Equal([]string{bbr, picker}))
		route := "httproute/" + hubNS + "/" + n.Routes[string(model.Name)] + "/"
		Expect(trace.FinalRoute).To(HavePrefix(route))
		Expect(trace.Headers).To(HaveKeyWithValue(wire.HeaderDestinationEndpoint, gig.Spec.Members[1].Address))

		By("one cluster holds every member, the picker's header overrides the host among them")
		Expect(endpointAddresses(dump, trace.Cluster)).To(ConsistOf("10.1.0.10", "10.2.0.10", "10.3.0.10"))
		checkOverrideHost(dump, trace.Cluster)

		By("and the route retries once, on another host, what failed before the response headers, as a model's route does")
		checkPoolRetry(rc, trace.FinalRoute)
	}
	By("the global picker's filter streams both bodies full-duplex, failing closed, and talks to its Service")
	found := false
	for _, hf := range hcm.GetHttpFilters() {
		if hf.GetName() != picker {
			continue
		}
		found = true
		var ep extprocv3.ExternalProcessor
		Expect(hf.GetTypedConfig().UnmarshalTo(&ep)).To(Succeed())
		Expect(ep.GetFailureModeAllow()).To(BeFalse())
		Expect(ep.GetProcessingMode().GetRequestBodyMode()).To(Equal(extprocv3.ProcessingMode_FULL_DUPLEX_STREAMED))
		Expect(ep.GetProcessingMode().GetResponseBodyMode()).To(Equal(extprocv3.ProcessingMode_FULL_DUPLEX_STREAMED))
		// The answering member and Envoy's attempts reach the picker with the
		// response, so a retried request is credited to its fallback.
		Expect(ep.GetResponseAttributes()).To(ConsistOf(wire.AttributeUpstreamAddress, wire.AttributeUpstreamAttempts))
		var svc corev1.Service
		Expect(k8s.Get(ctx, types.NamespacedName{Namespace: hubNS, Name: n.Picker}, &svc)).To(Succeed())
		Expect(endpointAddresses(dump, ep.GetGrpcService().GetEnvoyGrpc().GetClusterName())).To(ContainElement(svc.Spec.ClusterIP))
	}
	Expect(found).To(BeTrue(), "no filter "+picker)
}

// findRoute returns the xDS route called name.
func findRoute(rc *routev3.RouteConfiguration, name string) *routev3.Route {
	for _, vh := range rc.GetVirtualHosts() {
		for _, r := range vh.GetRoutes() {
			if r.GetName() == name {
				return r
			}
		}
	}
	return nil
}
