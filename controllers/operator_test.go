package controllers_test

import (
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	infv1 "sigs.k8s.io/gateway-api-inference-extension/api/v1"
	gwapiv1 "sigs.k8s.io/gateway-api/apis/v1"
	gwapiv1beta1 "sigs.k8s.io/gateway-api/apis/v1beta1"

	egv1a1 "github.com/envoyproxy/gateway/api/v1alpha1"

	igwv1 "github.com/igw-dev/igw/api/v1alpha1"
	"github.com/igw-dev/igw/controllers"
	"github.com/igw-dev/igw/internal/testenv"
	"github.com/igw-dev/igw/pkg/openaimodels"
	"github.com/igw-dev/igw/pkg/render"
	"github.com/igw-dev/igw/pkg/wire"
)

const ns = "models"

// modelList is the served-model file in the router ConfigMap of config "igw" in ns.
func modelList() ([]openaimodels.Entry, error) {
	var cm corev1.ConfigMap
	if err := k8s.Get(ctx, types.NamespacedName{Namespace: ns, Name: render.NamesForConfig("igw").AdapterMapping}, &cm); err != nil {
		return nil, err
	}
	return openaimodels.ParseFile([]byte(cm.Data[render.ModelListKey]))
}

// routeChildren are the children the operator must have created for a route,
// named by the pure rendering of the live objects.
func routeChildren(mrName string) []child {
	mr := getRoute(ns, mrName)
	cfg := getConfig(ns, mr.Spec.ConfigRef.Name)
	out, err := render.Route(render.RouteInput{Route: mr, Config: cfg, Images: testImages})
	Expect(err).NotTo(HaveOccurred())
	return childrenOf(out.Objects)
}

func configChildren(cfgName string) []child {
	cfg := getConfig(ns, cfgName)
	out, err := render.Config(render.ConfigInput{Config: cfg, Images: testImages})
	Expect(err).NotTo(HaveOccurred())
	return childrenOf(out.Objects)
}

func childrenOf(objs []client.Object) []child {
	var out []child
	for _, o := range objs {
		gvks, _, err := scheme.ObjectKinds(o)
		Expect(err).NotTo(HaveOccurred())
		out = append(out, child{GVK: gvks[0], Namespace: o.GetNamespace(), Name: o.GetName()})
	}
	return out
}

func allExist(children []child) error {
	for _, c := range children {
		if _, err := c.fetch(); err != nil {
			return err
		}
	}
	return nil
}

// resourceVersions of the children: any write changes one.
func resourceVersions(children []child) map[string]string {
	rv := map[string]string{}
	for _, c := range children {
		obj, err := c.fetch()
		Expect(err).NotTo(HaveOccurred())
		rv[c.String()] = obj.GetResourceVersion()
	}
	return rv
}

// quiesce waits until the operator has stopped writing.
func quiesce() {
	last, _ := writes.snapshot()
	Eventually(func() bool {
		time.Sleep(time.Second)
		n, _ := writes.snapshot()
		settled := n == last
		last = n
		return settled
	}, eventually, poll).Should(BeTrue())
}

var _ = Describe("Two ModelRoutes behind one InferenceGatewayConfig", Ordered, func() {
	var llama, qwen *igwv1.ModelRoute

	BeforeAll(func() {
		// The pickers and the router start unready: each spec lets them pass when its state needs them.
		heldNamespace(ns)
		gateway(ns, "inference-gateway")
		config(ns, "igw", nil)
		llama = route(ns, "llama", "igw", []igwv1.ModelName{"meta-llama/Llama-3.1-8B-Instruct", "llama-3.1-8b"}, nil)
		qwen = route(ns, "qwen", "igw", []igwv1.ModelName{"qwen3-32b"}, func(mr *igwv1.ModelRoute) {
			mr.Spec.Engine = igwv1.EngineSGLang
			mr.Spec.Adapters = []igwv1.LoRAAdapter{{Name: "qwen3-32b-sql"}, {Name: "qwen3-32b-support", BaseModel: "qwen3-32b"}}
			mr.Spec.EPP = &igwv1.EPPOverrides{PodSettings: igwv1.PodSettings{Replicas: ptr[int32](2)}, FailureMode: igwv1.FailOpen}
			mr.Spec.RequestTimeout = &metav1.Duration{Duration: 1500 * time.Millisecond} // Go writes 1.5s, which the HTTPRoute schema refuses
		})
	})

	It("creates every child with the golden content, owner references and labels", func() {
		for _, name := range []string{"llama", "qwen"} {
			Eventually(func() error { return allExist(routeChildren(name)) }, eventually, poll).Should(Succeed())
		}
		Eventually(func() error { return allExist(configChildren("igw")) }, eventually, poll).Should(Succeed())
		// The adapter mapping follows the routes; wait for both routes' adapters to be in it.
		Eventually(func() string {
			var cm corev1.ConfigMap
			_ = k8s.Get(ctx, types.NamespacedName{Namespace: ns, Name: render.NamesForConfig("igw").AdapterMapping}, &cm)
			return cm.Data[render.AdapterMappingKey]
		}, eventually, poll).Should(ContainSubstring("qwen3-32b-sql: qwen3-32b"))
		By("the router's model list holds every model and adapter of both routes, adapters with their base model")
		Eventually(modelList, eventually, poll).Should(Equal([]openaimodels.Entry{
			{ID: "meta-llama/Llama-3.1-8B-Instruct"}, {ID: "llama-3.1-8b"},
			{ID: "qwen3-32b"}, {ID: "qwen3-32b-sql", Parent: "qwen3-32b"}, {ID: "qwen3-32b-support", Parent: "qwen3-32b"},
		}))
		By("and one route, for the whole config, sends GET /v1/models to the router's model list port")
		var list gwapiv1.HTTPRoute
		Expect(k8s.Get(ctx, types.NamespacedName{Namespace: ns, Name: render.NamesForConfig("igw").ModelList}, &list)).To(Succeed())
		Expect(list.Spec.Rules).To(HaveLen(1))
		Expect(list.Spec.Rules[0].Matches).To(ConsistOf(HaveField("Path", And(
			HaveField("Type", HaveValue(Equal(gwapiv1.PathMatchPathPrefix))), HaveField("Value", HaveValue(Equal(wire.ModelsPath)))))))
		Expect(list.Spec.Rules[0].BackendRefs).To(ConsistOf(HaveField("BackendRef.BackendObjectReference", And(
			HaveField("Name", BeEquivalentTo(render.NamesForConfig("igw").BBR)), HaveField("Port", HaveValue(BeEquivalentTo(render.BBRModelsPort)))))))
		quiesce()

		for _, mr := range []*igwv1.ModelRoute{llama, qwen} {
			want := render.RouteLabels(mr)
			for _, c := range routeChildren(mr.Name) {
				obj, err := c.fetch()
				Expect(err).NotTo(HaveOccurred())
				Expect(obj.GetLabels()).To(Equal(want), c.String())
				ref := metav1.GetControllerOf(obj)
				Expect(ref).NotTo(BeNil(), c.String())
				Expect(ref.UID).To(Equal(getRoute(ns, mr.Name).UID), c.String())
				Expect(*ref.BlockOwnerDeletion).To(BeTrue(), c.String())
			}
		}
		By("telling what it did in one event per reconcile")
		Eventually(func() []string {
			var evs eventsv1.EventList
			_ = k8s.List(ctx, &evs, client.InNamespace(ns))
			var notes []string
			for _, e := range evs.Items {
				if e.Regarding.Name == "llama" && e.Regarding.Kind == "ModelRoute" && e.Reason == "Applied" {
					notes = append(notes, e.Note)
				}
			}
			return notes
		}, eventually, poll).Should(ContainElement(And(ContainSubstring("created"), ContainSubstring("Deployment llama-epp"), ContainSubstring("HTTPRoute llama"))))

		checkGolden("route-llama", routeChildren("llama"))
		checkGolden("route-qwen", routeChildren("qwen"))
		checkGolden("config-igw", configChildren("igw"))
	})

	It("reports progress as the pods and the picker become ready", func() {
		Eventually(routeCondition(ns, "llama", igwv1.ConditionResolvedRefs), eventually, poll).Should(Equal("True/ResolvedRefs"))
		Expect(routeCondition(ns, "llama", igwv1.ConditionAccepted)()).To(Equal("True/Accepted"))
		Eventually(routeCondition(ns, "llama", igwv1.ConditionReady), eventually, poll).Should(Equal("False/" + igwv1.ReasonNoMatchingPods))
		Expect(getRoute(ns, "llama").Status.Rollout).To(Equal(igwv1.RolloutPending))

		modelPod(ns, "llama-0", map[string]string{"app": "llama"}, "")
		Eventually(routeCondition(ns, "llama", igwv1.ConditionReady), eventually, poll).Should(Equal("False/" + igwv1.ReasonNoReadyEndpoints))
		Expect(getRoute(ns, "llama").Status.TotalEndpoints).To(BeEquivalentTo(1))

		setPodsReady(ns, "llama-0")
		Eventually(routeCondition(ns, "llama", igwv1.ConditionReady), eventually, poll).Should(Equal("False/" + igwv1.ReasonEndpointPickerUnavailable))
		Expect(getRoute(ns, "llama").Status.ReadyEndpoints).To(BeEquivalentTo(1))

		passReadinessProbes(ns, "llama-epp")
		Eventually(routeCondition(ns, "llama", igwv1.ConditionReady), eventually, poll).Should(Equal("True/Ready"))
		st := getRoute(ns, "llama").Status
		Expect(st.Rollout).To(Equal(igwv1.RolloutAvailable))
		Expect(condition(st.Conditions, igwv1.ConditionDegraded)).To(Equal("False/" + igwv1.ReasonAsExpected))
		for _, c := range st.Conditions {
			Expect(c.ObservedGeneration).To(Equal(getRoute(ns, "llama").Generation), c.Type)
		}

		By("writing its own entry in the InferencePool's status parents")
		var pool infv1.InferencePool
		Expect(k8s.Get(ctx, types.NamespacedName{Namespace: ns, Name: "llama"}, &pool)).To(Succeed())
		Expect(pool.Status.Parents).To(HaveLen(1))
		p := pool.Status.Parents[0]
		Expect(string(p.ControllerName)).To(Equal(controllers.ControllerName))
		Expect(string(p.ParentRef.Name)).To(Equal("inference-gateway"))
		Expect(condition(p.Conditions, "Accepted")).To(Equal("True/Accepted"))
		Expect(condition(p.Conditions, "ResolvedRefs")).To(Equal("True/ResolvedRefs"))
		out, err := env.Kubectl("get", "inferencepools", "-n", ns)
		Expect(err).NotTo(HaveOccurred())
		GinkgoWriter.Println(out)

		By("and the config follows its Gateway and router")
		Eventually(configCondition(ns, "igw", igwv1.ConditionGatewayProgrammed), eventually, poll).Should(Equal("False/" + igwv1.ReasonGatewayNotProgrammed))
		programGateway(ns, "inference-gateway")
		Eventually(configCondition(ns, "igw", igwv1.ConditionGatewayProgrammed), eventually, poll).Should(Equal("True/" + igwv1.ReasonProgrammed))
		Expect(configCondition(ns, "igw", igwv1.ConditionReady)()).To(Equal("False/" + igwv1.ReasonBBRUnavailable))
		passReadinessProbes(ns, render.NamesForConfig("igw").BBR)
		Eventually(configCondition(ns, "igw", igwv1.ConditionReady), eventually, poll).Should(Equal("True/Ready"))
		Eventually(func() []igwv1.ModelSummary { return getConfig(ns, "igw").Status.Models }, eventually, poll).Should(ContainElement(
			igwv1.ModelSummary{Name: "llama-3.1-8b", ModelRoute: "llama", Ready: true}))
		Expect(getConfig(ns, "igw").Status.GatewayName).To(Equal(ns + "/inference-gateway"))
	})

	It("tunes scoring from adapters and mixed accelerators, and reloads the picker without a rollout", func() {
		Eventually(func() map[string]int32 { return getRoute(ns, "qwen").Status.Scoring.Weights }, eventually, poll).Should(
			HaveKeyWithValue(igwv1.ScorerLoRAAffinity, int32(render.AutoLoRAAffinityWeight)))
		var before appsv1.Deployment
		Expect(k8s.Get(ctx, types.NamespacedName{Namespace: ns, Name: "qwen-epp"}, &before)).To(Succeed())

		// One pod says its GPU itself, the other only through its node. The
		// node is kept for that pod alone (a taint keeps kube-scheduler from
		// placing other specs' pods there), which is bound to it by name.
		h100 := testenv.NewNode("gpu-node-h100", map[string]string{render.LabelGPUProduct: "NVIDIA-H100-80GB-HBM3"})
		h100.Spec.Taints = []corev1.Taint{{Key: "igw.test/reserved", Effect: corev1.TaintEffectNoSchedule}}
		Expect(k8s.Create(ctx, h100)).To(Succeed())
		modelPod(ns, "qwen-0", map[string]string{"app": "qwen", render.LabelGPUProduct: "NVIDIA-A10G"}, "")
		modelPod(ns, "qwen-1", map[string]string{"app": "qwen"}, "gpu-node-h100")

		Eventually(func() *igwv1.ScoringStatus { return getRoute(ns, "qwen").Status.Scoring }, eventually, poll).Should(And(
			HaveField("Source", render.ScoringSourceRendered),
			HaveField("Weights", HaveKeyWithValue(igwv1.ScorerPredictedLatency, 2*render.BuiltinWeights[igwv1.ScorerPredictedLatency])),
			HaveField("Adjustments", ContainElement(HaveField("Reason", ContainSubstring("NVIDIA-A10G, NVIDIA-H100-80GB-HBM3")))),
		))
		Eventually(func() string {
			var cm corev1.ConfigMap
			_ = k8s.Get(ctx, types.NamespacedName{Namespace: ns, Name: "qwen-epp"}, &cm)
			return cm.Data[render.EPPConfigKey]
		}, eventually, poll).Should(ContainSubstring("plugin: predicted-latency\n  weight: 4"))

		var after appsv1.Deployment
		Expect(k8s.Get(ctx, types.NamespacedName{Namespace: ns, Name: "qwen-epp"}, &after)).To(Succeed())
		Expect(after.Generation).To(Equal(before.Generation), "a weight change must not roll the pickers")
		Expect(after.Spec.Template).To(Equal(before.Spec.Template))

		By("manual weights win over auto-tuning")
		Eventually(func() error {
			mr := getRoute(ns, "qwen")
			mr.Spec.Scoring = &igwv1.ModelScoring{Weights: igwv1.ScoringWeights{igwv1.ScorerPredictedLatency: 7}}
			return k8s.Update(ctx, mr)
		}, eventually, poll).Should(Succeed())
		Eventually(func() *igwv1.ScoringStatus { return getRoute(ns, "qwen").Status.Scoring }, eventually, poll).Should(And(
			HaveField("Weights", HaveKeyWithValue(igwv1.ScorerPredictedLatency, int32(7))),
			HaveField("Adjustments", Not(ContainElement(HaveField("Scorer", igwv1.ScorerPredictedLatency)))),
		))
		var spec igwv1.ModelRoute
		Expect(k8s.Get(ctx, client.ObjectKeyFromObject(qwen), &spec)).To(Succeed())
		Expect(spec.Spec.Scoring.Weights).To(Equal(igwv1.ScoringWeights{igwv1.ScorerPredictedLatency: 7}), "the operator never writes a spec")

		setPodsReady(ns, "qwen-0", "qwen-1")
		passReadinessProbes(ns, "qwen-epp")
		Eventually(routeCondition(ns, "qwen", igwv1.ConditionReady), eventually, poll).Should(Equal("True/Ready"))
	})

	It("reconciles unchanged objects without a single write", func() {
		quiesce()
		children := append(append(routeChildren("llama"), routeChildren("qwen")...), configChildren("igw")...)
		rvBefore := resourceVersions(children)
		n0, paths0 := ownWrites.snapshot()
		const rounds = 3
		for i := 0; i < rounds; i++ {
			for _, name := range []string{"llama", "qwen"} {
				_, err := recs.ModelRoute.Reconcile(reconcileCtx(), ctrl.Request{NamespacedName: types.NamespacedName{Namespace: ns, Name: name}})
				Expect(err).NotTo(HaveOccurred())
			}
			_, err := recs.Config.Reconcile(reconcileCtx(), ctrl.Request{NamespacedName: types.NamespacedName{Namespace: ns, Name: "igw"}})
			Expect(err).NotTo(HaveOccurred())
		}
		n1, _ := ownWrites.snapshot()
		AddReportEntry("idempotence", map[string]int{"reconciles": rounds * 3, "writes": n1 - n0, "children checked": len(children)})
		Expect(n1-n0).To(BeZero(), "writes during reconciles of unchanged objects:\n"+ownWrites.since(paths0))
		// The parents' status may move on a timer (the extension-hook wait);
		// the children change only with the specs.
		Expect(resourceVersions(children)).To(Equal(rvBefore))
	})

	It("runs a multi-replica picker active-passive: leader election, its Lease in the Role the operator may grant, one available replica is Ready", func() {
		checkLeaderElection()
	})

	It("is accepted by Envoy Gateway's translator, and the hooked xDS routes each model through BBR and its picker", func() {
		checkEnvoyGatewayTranslation(ns, []string{"llama", "qwen"}, "igw")
		By("the FailOpen route's status carries no caveat: it does fail open")
		accepted := meta.FindStatusCondition(getRoute(ns, "qwen").Status.Conditions, igwv1.ConditionAccepted)
		Expect(accepted).NotTo(BeNil())
		Expect(accepted.Message).To(Equal("the route is served through InferenceGatewayConfig igw"))
	})

	It("repairs a deleted or edited child", func() {
		var d appsv1.Deployment
		Expect(k8s.Get(ctx, types.NamespacedName{Namespace: ns, Name: "llama-epp"}, &d)).To(Succeed())
		oldUID := d.UID
		Expect(k8s.Delete(ctx, &d)).To(Succeed())
		Eventually(func() types.UID {
			var now appsv1.Deployment
			_ = k8s.Get(ctx, types.NamespacedName{Namespace: ns, Name: "llama-epp"}, &now)
			return now.UID
		}, eventually, poll).ShouldNot(Or(BeEmpty(), Equal(oldUID)))

		var hr gwapiv1.HTTPRoute
		Expect(k8s.Get(ctx, types.NamespacedName{Namespace: ns, Name: "llama"}, &hr)).To(Succeed())
		hr.Spec.Rules[0].Matches[0].Headers[0].Value = "someone-elses-model"
		Expect(k8s.Update(ctx, &hr)).To(Succeed())
		Eventually(func() string {
			_ = k8s.Get(ctx, types.NamespacedName{Namespace: ns, Name: "llama"}, &hr)
			return hr.Spec.Rules[0].Matches[0].Headers[0].Value
		}, eventually, poll).Should(Equal("meta-llama/Llama-3.1-8B-Instruct"))

		var cm corev1.ConfigMap
		Expect(k8s.Get(ctx, types.NamespacedName{Namespace: ns, Name: "llama-epp"}, &cm)).To(Succeed())
		want := cm.Data[render.EPPConfigKey]
		cm.Data[render.EPPConfigKey] = "scorers: []\n"
		Expect(k8s.Update(ctx, &cm)).To(Succeed())
		Eventually(func() string {
			_ = k8s.Get(ctx, types.NamespacedName{Namespace: ns, Name: "llama-epp"}, &cm)
			return cm.Data[render.EPPConfigKey]
		}, eventually, poll).Should(Equal(want))

		var btp egv1a1.BackendTrafficPolicy
		Expect(k8s.Get(ctx, types.NamespacedName{Namespace: ns, Name: "llama"}, &btp)).To(Succeed())
		Expect(k8s.Delete(ctx, &btp)).To(Succeed())
		Eventually(exists(&egv1a1.BackendTrafficPolicy{}, ns, "llama"), eventually, poll).Should(Succeed())
	})

	It("lets a deleted route's children go to the garbage collector and drops it from shared state", func() {
		deleted := getRoute(ns, "qwen")
		children := routeChildren("qwen")
		By("every child is controlled by the route")
		for _, c := range children {
			obj, err := c.fetch()
			Expect(err).NotTo(HaveOccurred(), c.String())
			Expect(metav1.GetControllerOf(obj).UID).To(Equal(deleted.UID), c.String())
		}
		Expect(k8s.Delete(ctx, deleted)).To(Succeed())
		Eventually(gone(&igwv1.ModelRoute{}, ns, "qwen"), eventually, poll).Should(BeTrue(), "a route needs no finalizer")

		By("so the garbage collector removes every child")
		for _, c := range children {
			Eventually(func() bool { _, err := c.fetch(); return apierrors.IsNotFound(err) }, eventually, poll).Should(BeTrue(), c.String())
		}
		By("what the route contributed to the config's children and status is gone")
		Eventually(func() string {
			var cm corev1.ConfigMap
			_ = k8s.Get(ctx, types.NamespacedName{Namespace: ns, Name: render.NamesForConfig("igw").AdapterMapping}, &cm)
			return cm.Data[render.AdapterMappingKey]
		}, eventually, poll).Should(Equal("adapters: {}\n"))
		Eventually(modelList, eventually, poll).Should(Equal([]openaimodels.Entry{{ID: "meta-llama/Llama-3.1-8B-Instruct"}, {ID: "llama-3.1-8b"}}))
		Eventually(func() []igwv1.ModelSummary { return getConfig(ns, "igw").Status.Models }, eventually, poll).ShouldNot(
			ContainElement(HaveField("ModelRoute", "qwen")))
	})
})

var _ = Describe("A config whose Gateway lives in another namespace", Ordered, func() {
	const team, gateways = "team", "gateways"

	It("keeps its policies beside the Gateway, labelled, and deletes them itself", func() {
		namespace(team)
		namespace(gateways)
		gateway(gateways, "shared")
		config(team, "igw", func(c *igwv1.InferenceGatewayConfig) {
			c.Spec.Gateway.Ref = &igwv1.GatewayRef{Name: "shared", Namespace: gateways}
		})
		n := render.NamesForConfig("igw")
		Eventually(exists(&egv1a1.EnvoyExtensionPolicy{}, gateways, n.BBRPolicy), eventually, poll).Should(Succeed())
		Eventually(exists(&egv1a1.ClientTrafficPolicy{}, gateways, n.BufferLimit), eventually, poll).Should(Succeed())
		var eep egv1a1.EnvoyExtensionPolicy
		Expect(k8s.Get(ctx, types.NamespacedName{Namespace: gateways, Name: n.BBRPolicy}, &eep)).To(Succeed())
		Expect(eep.OwnerReferences).To(BeEmpty())
		Expect(eep.Labels).To(HaveKeyWithValue(render.LabelConfigNamespace, team))
		Expect(string(*eep.Spec.ExtProc[0].BackendRefs[0].Namespace)).To(Equal(team))
		Eventually(exists(&gwapiv1beta1.ReferenceGrant{}, team, n.ReferenceGrant), eventually, poll).Should(Succeed())
		Expect(getConfig(team, "igw").Finalizers).To(ContainElement(controllers.FinalizerCrossNamespace))

		Expect(k8s.Delete(ctx, getConfig(team, "igw"))).To(Succeed())
		Eventually(gone(&egv1a1.EnvoyExtensionPolicy{}, gateways, n.BBRPolicy), eventually, poll).Should(BeTrue())
		Eventually(gone(&egv1a1.ClientTrafficPolicy{}, gateways, n.BufferLimit), eventually, poll).Should(BeTrue())
		Eventually(gone(&igwv1.InferenceGatewayConfig{}, team, "igw"), eventually, poll).Should(BeTrue())
	})

	It("deletes a policy beside the Gateway whose config is gone without its cleanup", func() {
		// What a deletion that races with the finalizer being added leaves
		// behind: the API server removes the config although the finalizer was set.
		orphan := foreignPolicy(gateways, "orphan-igw-bbr")
		orphan.Labels = map[string]string{render.LabelConfig: "orphan", render.LabelConfigNamespace: team, render.LabelManagedBy: render.ManagedByValue}
		Expect(k8s.Create(ctx, orphan)).To(Succeed())
		Eventually(gone(&egv1a1.EnvoyExtensionPolicy{}, gateways, orphan.Name), eventually, poll).Should(BeTrue())

		By("a policy that only looks alike (not the operator's) stays")
		lookalike := foreignPolicy(gateways, "lookalike")
		lookalike.Labels = map[string]string{render.LabelConfig: "orphan", render.LabelConfigNamespace: team}
		Expect(k8s.Create(ctx, lookalike)).To(Succeed())
		Consistently(exists(&egv1a1.EnvoyExtensionPolicy{}, gateways, lookalike.Name), 2*time.Second, poll).Should(Succeed())
	})
})

var _ = Describe("A reconcile holding a copy of its config read before the config went", Ordered, func() {
	const team, gateways = "stale-team", "stale-gateways"

	// staleApply renders the config as a reconcile would have from the copy it
	// read, and applies the children through the operator's own applier.
	staleApply := func(stale *igwv1.InferenceGatewayConfig) error {
		out, err := render.Config(render.ConfigInput{Config: stale, Images: testImages})
		Expect(err).NotTo(HaveOccurred())
		return recs.Config.ApplyChildren(ctx, stale, out.Objects)
	}
	policy := render.NamesForConfig("igw").BBRPolicy

	BeforeAll(func() {
		namespace(team)
		namespace(gateways)
		gateway(gateways, "shared")
	})

	It("writes no child once the config is being deleted", func() {
		config(team, "igw", func(c *igwv1.InferenceGatewayConfig) {
			c.Spec.Gateway.Ref = &igwv1.GatewayRef{Name: "shared", Namespace: gateways}
			c.Finalizers = []string{"test.igw.dev/hold"} // keeps it in deletion after the operator's cleanup
		})
		Eventually(exists(&egv1a1.EnvoyExtensionPolicy{}, gateways, policy), eventually, poll).Should(Succeed())
		Eventually(func() []string { return getConfig(team, "igw").Finalizers }, eventually, poll).Should(ContainElement(controllers.FinalizerCrossNamespace))
		stale := getConfig(team, "igw")
		Expect(k8s.Delete(ctx, stale.DeepCopy())).To(Succeed())
		Eventually(gone(&egv1a1.EnvoyExtensionPolicy{}, gateways, policy), eventually, poll).Should(BeTrue())
		Eventually(func() []string { return getConfig(team, "igw").Finalizers }, eventually, poll).ShouldNot(ContainElement(controllers.FinalizerCrossNamespace))

		Expect(staleApply(stale)).To(MatchError(controllers.ErrOwnerGone))
		Expect(gone(&egv1a1.EnvoyExtensionPolicy{}, gateways, policy)()).To(BeTrue(), "a policy was placed beside the Gateway for a config being deleted")

		held := getConfig(team, "igw")
		held.Finalizers = nil
		Expect(k8s.Update(ctx, held)).To(Succeed())
		Eventually(gone(&igwv1.InferenceGatewayConfig{}, team, "igw"), eventually, poll).Should(BeTrue())
		By("nor once it is gone")
		Expect(staleApply(stale)).To(MatchError(controllers.ErrOwnerGone))
		Expect(gone(&egv1a1.EnvoyExtensionPolicy{}, gateways, policy)()).To(BeTrue())
	})

	It("writes no child for a config recreated under the same name", func() {
		config(team, "igw", func(c *igwv1.InferenceGatewayConfig) {
			c.Spec.Gateway.Ref = &igwv1.GatewayRef{Name: "shared", Namespace: gateways}
		})
		Eventually(exists(&egv1a1.EnvoyExtensionPolicy{}, gateways, policy), eventually, poll).Should(Succeed())
		stale := getConfig(team, "igw")
		Expect(k8s.Delete(ctx, stale.DeepCopy())).To(Succeed())
		Eventually(gone(&igwv1.InferenceGatewayConfig{}, team, "igw"), eventually, poll).Should(BeTrue())
		config(team, "igw", func(c *igwv1.InferenceGatewayConfig) {
			c.Spec.Gateway.Ref = &igwv1.GatewayRef{Name: "local"} // its policies stay in its own namespace
		})
		Expect(staleApply(stale)).To(MatchError(controllers.ErrOwnerGone))
		Consistently(gone(&egv1a1.EnvoyExtensionPolicy{}, gateways, policy), 2*time.Second, poll).Should(BeTrue())
		Expect(k8s.Delete(ctx, getConfig(team, "igw"))).To(Succeed())
		Eventually(gone(&igwv1.InferenceGatewayConfig{}, team, "igw"), eventually, poll).Should(BeTrue())
	})
})

var _ = Describe("Conditions a person can act on", Ordered, func() {
	const edge = "edge"

	BeforeAll(func() { namespace(edge) })

	It("names a missing config, then a missing Gateway, until both exist", func() {
		route(edge, "orphan", "nowhere", []igwv1.ModelName{"m"}, nil)
		Eventually(routeCondition(edge, "orphan", igwv1.ConditionAccepted), eventually, poll).Should(Equal("False/" + igwv1.ReasonConfigNotFound))
		Expect(meta.FindStatusCondition(getRoute(edge, "orphan").Status.Conditions, igwv1.ConditionAccepted).Message).To(
			ContainSubstring(`InferenceGatewayConfig "nowhere" not found`))

		config(edge, "nowhere", func(c *igwv1.InferenceGatewayConfig) { c.Spec.Gateway.Ref.Name = "not-yet" })
		Eventually(routeCondition(edge, "orphan", igwv1.ConditionResolvedRefs), eventually, poll).Should(Equal("False/" + igwv1.ReasonGatewayNotFound))
		Eventually(configCondition(edge, "nowhere", igwv1.ConditionGatewayProgrammed), eventually, poll).Should(Equal("False/" + igwv1.ReasonGatewayNotFound))
		Expect(meta.FindStatusCondition(getRoute(edge, "orphan").Status.Conditions, igwv1.ConditionResolvedRefs).Message).To(
			ContainSubstring("create it, fix spec.gateway.ref, or use spec.gateway.managed"))

		gateway(edge, "not-yet")
		Eventually(routeCondition(edge, "orphan", igwv1.ConditionResolvedRefs), eventually, poll).Should(Equal("True/ResolvedRefs"))
		Eventually(routeCondition(edge, "orphan", igwv1.ConditionReady), eventually, poll).Should(Equal("False/" + igwv1.ReasonNoMatchingPods))
	})

	It("checks a raw picker configuration before handing it over", func() {
		route(edge, "raw", "nowhere", []igwv1.ModelName{"raw-model"}, func(mr *igwv1.ModelRoute) {
			mr.Spec.Scoring = &igwv1.ModelScoring{ConfigMapRef: &igwv1.ConfigMapKeyRef{Name: "raw-scoring"}}
		})
		Eventually(routeCondition(edge, "raw", igwv1.ConditionResolvedRefs), eventually, poll).Should(Equal("False/" + igwv1.ReasonConfigMapNotFound))

		cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: edge, Name: "raw-scoring"},
			Data: map[string]string{render.EPPConfigKey: "scorers:\n- {plugin: no-such-scorer, weight: 1}\n"}}
		Expect(k8s.Create(ctx, cm)).To(Succeed())
		Eventually(routeCondition(edge, "raw", igwv1.ConditionResolvedRefs), eventually, poll).Should(Equal("False/" + igwv1.ReasonInvalidEPPConfig))

		raw := "scorers:\n- {plugin: queue, weight: 3}\npicker: max-score-picker\n"
		cm.Data[render.EPPConfigKey] = raw
		Expect(k8s.Update(ctx, cm)).To(Succeed())
		Eventually(routeCondition(edge, "raw", igwv1.ConditionResolvedRefs), eventually, poll).Should(Equal("True/ResolvedRefs"))
		Eventually(func() string {
			var epp corev1.ConfigMap
			_ = k8s.Get(ctx, types.NamespacedName{Namespace: edge, Name: render.NamesForRoute("raw").EPP}, &epp)
			return epp.Data[render.EPPConfigKey]
		}, eventually, poll).Should(Equal(raw))
		Expect(getRoute(edge, "raw").Status.Scoring.Source).To(Equal(render.ScoringSourceConfigMap))
	})

	It("hands the route's SLO to its picker, and a new SLO without a rollout", func() {
		route(edge, "slo", "nowhere", []igwv1.ModelName{"slo-model"}, func(mr *igwv1.ModelRoute) {
			mr.Spec.SLO = &igwv1.RouteSLO{TTFTSeconds: 4, TPOTSeconds: 0.05}
		})
		eppConfig := func() string {
			var epp corev1.ConfigMap
			_ = k8s.Get(ctx, types.NamespacedName{Namespace: edge, Name: render.NamesForRoute("slo").EPP}, &epp)
			return epp.Data[render.EPPConfigKey]
		}
		Eventually(eppConfig, eventually, poll).Should(ContainSubstring("admission:\n  slo:\n    tpotSeconds: 0.05\n    ttftSeconds: 4\n"))
		// The ConfigMap is applied before the Deployment: wait for both.
		var before appsv1.Deployment
		Eventually(func() error {
			return k8s.Get(ctx, types.NamespacedName{Namespace: edge, Name: render.NamesForRoute("slo").EPP}, &before)
		}, eventually, poll).Should(Succeed())

		Eventually(func() error {
			mr := getRoute(edge, "slo")
			mr.Spec.SLO.TTFTSeconds = 1.5
			return k8s.Update(ctx, mr)
		}, eventually, poll).Should(Succeed())
		Eventually(eppConfig, eventually, poll).Should(ContainSubstring("ttftSeconds: 1.5\n"))
		var after appsv1.Deployment
		Expect(k8s.Get(ctx, types.NamespacedName{Namespace: edge, Name: render.NamesForRoute("slo").EPP}, &after)).To(Succeed())
		Expect(after.Spec.Template).To(Equal(before.Spec.Template), "a new SLO is a configuration reload, not a rollout")

		Eventually(func() error {
			mr := getRoute(edge, "slo")
			mr.Spec.SLO = nil
			return k8s.Update(ctx, mr)
		}, eventually, poll).Should(Succeed())
		Eventually(eppConfig, eventually, poll).ShouldNot(ContainSubstring("admission"))
	})

	It("switches to a native InferencePool backend and removes the Envoy Gateway wiring", func() {
		Eventually(exists(&egv1a1.BackendTrafficPolicy{}, edge, "orphan"), eventually, poll).Should(Succeed())
		Eventually(func() error {
			c := getConfig(edge, "nowhere")
			c.Spec.Gateway.Provider = igwv1.ProviderNative
			return k8s.Update(ctx, c)
		}, eventually, poll).Should(Succeed())
		Eventually(func() string {
			var hr gwapiv1.HTTPRoute
			_ = k8s.Get(ctx, types.NamespacedName{Namespace: edge, Name: "orphan"}, &hr)
			if len(hr.Spec.Rules) == 0 || len(hr.Spec.Rules[0].BackendRefs) == 0 || hr.Spec.Rules[0].BackendRefs[0].Kind == nil {
				return ""
			}
			return string(*hr.Spec.Rules[0].BackendRefs[0].Kind) + "/" + string(hr.Spec.Rules[0].BackendRefs[0].Name)
		}, eventually, poll).Should(Equal("InferencePool/orphan"))
		Eventually(gone(&egv1a1.BackendTrafficPolicy{}, edge, "orphan"), eventually, poll).Should(BeTrue())
		Eventually(gone(&egv1a1.EnvoyExtensionPolicy{}, edge, render.NamesForRoute("orphan").EPPPolicy), eventually, poll).Should(BeTrue())
		Eventually(gone(&corev1.Service{}, edge, render.NamesForRoute("orphan").PoolService), eventually, poll).Should(BeTrue())
		Eventually(gone(&egv1a1.EnvoyExtensionPolicy{}, edge, render.NamesForConfig("nowhere").BBRPolicy), eventually, poll).Should(BeTrue())
		By("the model list route stays: its backend is a plain Service port, which any gateway can reach")
		Expect(exists(&gwapiv1.HTTPRoute{}, edge, render.NamesForConfig("nowhere").ModelList)()).To(Succeed())
	})
})
