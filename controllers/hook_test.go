package controllers_test

import (
	"time"

	"github.com/envoyproxy/gateway/proto/extension"
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"

	igwv1 "github.com/igw-dev/igw/api/v1alpha1"
)

var _ = Describe("ExtensionHookActive", Ordered, func() {
	const ns = "hook"

	BeforeAll(func() {
		// Envoy Gateway stops calling for this spec, as when its extensionManager is not set.
		envoyGatewayCalls.Store(false)
		DeferCleanup(func() { envoyGatewayCalls.Store(true) })
		// The change time is kept to the second, so a call in the second
		// before a change counts as after it: let that second pass.
		time.Sleep(1100 * time.Millisecond)
		namespace(ns)
		gateway(ns, "inference-gateway")
	})

	It("turns False with what to set in Envoy Gateway when the hook is not called after a change, without another event", func() {
		config(ns, "igw", nil)
		Eventually(configCondition(ns, "igw", igwv1.ConditionExtensionHookActive), eventually, poll).
			Should(Equal("Unknown/AwaitingHookCall"))
		// Nothing changes from here on: only the operator's requeue can turn it False.
		Eventually(configCondition(ns, "igw", igwv1.ConditionExtensionHookActive), 4*hookBound+eventually, poll).
			Should(Equal("False/HookNotCalled"))
		c := meta.FindStatusCondition(getConfig(ns, "igw").Status.Conditions, igwv1.ConditionExtensionHookActive)
		Expect(c.Message).To(ContainSubstring("extensionManager"))
		Expect(c.Message).To(ContainSubstring("charts/igw/envoy-gateway-values.yaml"))
		Expect(c.Message).To(ContainSubstring("docs/envoy-gateway.md"))
		Expect(c.ObservedGeneration).To(Equal(getConfig(ns, "igw").Generation))
	})

	It("turns True once the extension server's gRPC handler is called", func() {
		_, err := hook.PostTranslateModify(ctx, &extension.PostTranslateModifyRequest{})
		Expect(err).NotTo(HaveOccurred())
		Eventually(configCondition(ns, "igw", igwv1.ConditionExtensionHookActive), eventually, poll).
			Should(Equal("True/HookCalled"))
	})

	It("writes nothing when an unchanged config is reconciled again", func() {
		quiesce()
		n0, paths0 := ownWrites.snapshot()
		for range 3 {
			_, err := recs.Config.Reconcile(reconcileCtx(), ctrl.Request{NamespacedName: types.NamespacedName{Namespace: ns, Name: "igw"}})
			Expect(err).NotTo(HaveOccurred())
		}
		n1, _ := ownWrites.snapshot()
		Expect(n1-n0).To(BeZero(), "writes during reconciles of an unchanged config:\n"+ownWrites.since(paths0))
	})

	It("waits again after a change of the children, and stays True with Envoy Gateway calling", func() {
		cfg := getConfig(ns, "igw")
		cfg.Spec.BBR.MaxRequestBodyBytes = 16 << 20 // changes the buffer limit policy
		Expect(k8s.Update(ctx, cfg)).To(Succeed())
		Eventually(configCondition(ns, "igw", igwv1.ConditionExtensionHookActive), eventually, poll).
			Should(Equal("Unknown/AwaitingHookCall"))
		envoyGatewayCalls.Store(true)
		Eventually(configCondition(ns, "igw", igwv1.ConditionExtensionHookActive), eventually, poll).
			Should(Equal("True/HookCalled"))
		Consistently(configCondition(ns, "igw", igwv1.ConditionExtensionHookActive), 2*hookBound, time.Second).
			Should(Equal("True/HookCalled"))
	})

	It("has no such condition on a native gateway", func() {
		config(ns, "native", func(c *igwv1.InferenceGatewayConfig) { c.Spec.Gateway.Provider = igwv1.ProviderNative })
		Eventually(configCondition(ns, "native", igwv1.ConditionReady), eventually, poll).ShouldNot(BeEmpty())
		Expect(configCondition(ns, "native", igwv1.ConditionExtensionHookActive)()).To(BeEmpty())
	})
})
