// Package nocrds_test runs the operator on an API server that has only igw's
// own CRDs, then installs Gateway API, the inference extension and Envoy
// Gateway while it runs: a missing optional CRD must be a condition that says
// what to install, never a crash loop, and installing it must need no restart.
package nocrds_test

import (
	"context"
	"testing"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	infv1 "sigs.k8s.io/gateway-api-inference-extension/api/v1"
	gwapiv1 "sigs.k8s.io/gateway-api/apis/v1"

	igwv1 "github.com/igw-dev/igw/api/v1alpha1"
	"github.com/igw-dev/igw/internal/testenv"
	"github.com/igw-dev/igw/pkg/manager"
	"github.com/igw-dev/igw/pkg/render"
)

func TestOptionalCRDs(t *testing.T) {
	RegisterFailHandler(Fail)
	RunSpecs(t, "igw operator without optional CRDs")
}

const (
	ns         = "default"
	eventually = 45 * time.Second
	poll       = 100 * time.Millisecond
)

var (
	env     *testenv.Env
	k8s     client.Client
	ctx     context.Context
	cancel  context.CancelFunc
	stopped = make(chan error, 1)
)

var _ = BeforeSuite(func() {
	ctrl.SetLogger(zap.New(zap.WriteTo(GinkgoWriter), zap.UseDevMode(true)))
	var err error
	env, err = testenv.Start(testenv.Options{})
	Expect(err).NotTo(HaveOccurred())
	scheme, err := manager.NewScheme()
	Expect(err).NotTo(HaveOccurred())
	k8s, err = client.New(env.Config, client.Options{Scheme: scheme})
	Expect(err).NotTo(HaveOccurred())
	op, err := manager.New(env.Config, &manager.Options{MetricsAddr: "0", ProbeAddr: "0", SyncPeriod: time.Hour,
		EPPImage: "epp:test", BBRImage: "bbr:test", MaxConcurrentReconciles: 2})
	Expect(err).NotTo(HaveOccurred(), "the operator must start without the optional CRDs")
	ctx, cancel = context.WithCancel(context.Background())
	go func() { stopped <- op.Start(ctx) }()
})

var _ = AfterSuite(func() {
	if cancel != nil {
		cancel()
	}
	if env != nil {
		Expect(env.Stop()).To(Succeed())
	}
})

func condition(conds []metav1.Condition, typ string) string {
	c := meta.FindStatusCondition(conds, typ)
	if c == nil {
		return ""
	}
	return string(c.Status) + "/" + c.Reason + ": " + c.Message
}

func routeCondition(typ string) func() string {
	return func() string {
		var mr igwv1.ModelRoute
		Expect(k8s.Get(ctx, types.NamespacedName{Namespace: ns, Name: "llama"}, &mr)).To(Succeed())
		return condition(mr.Status.Conditions, typ)
	}
}

func configCondition(typ string) func() string {
	return func() string {
		var c igwv1.InferenceGatewayConfig
		Expect(k8s.Get(ctx, types.NamespacedName{Namespace: ns, Name: "igw"}, &c)).To(Succeed())
		return condition(c.Status.Conditions, typ)
	}
}

var _ = Describe("Optional CRDs", Ordered, func() {
	It("reports what to install and keeps running", func() {
		Expect(k8s.Create(ctx, &igwv1.InferenceGatewayConfig{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "igw"},
			Spec: igwv1.InferenceGatewayConfigSpec{Gateway: igwv1.GatewaySpec{Ref: &igwv1.GatewayRef{Name: "gw"}}}})).To(Succeed())
		Expect(k8s.Create(ctx, &igwv1.ModelRoute{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "llama"},
			Spec: igwv1.ModelRouteSpec{ConfigRef: igwv1.ObjectName{Name: "igw"}, Models: []igwv1.ModelName{"llama"},
				Selector: igwv1.ModelServerSelector{MatchLabels: map[string]string{"app": "llama"}}}})).To(Succeed())

		Eventually(routeCondition(igwv1.ConditionResolvedRefs), eventually, poll).Should(And(
			HavePrefix("False/"+igwv1.ReasonCRDsMissing),
			ContainSubstring("InferencePool (the Gateway API Inference Extension)"),
			ContainSubstring("Gateway, HTTPRoute (Gateway API (standard channel))"),
			ContainSubstring("BackendTrafficPolicy, EnvoyExtensionPolicy (Envoy Gateway v1.9)"),
			ContainSubstring("install those CRDs"),
		))
		Expect(routeCondition(igwv1.ConditionAccepted)()).To(HavePrefix("True/"))
		Eventually(configCondition(igwv1.ConditionGatewayProgrammed), eventually, poll).Should(HavePrefix("False/" + igwv1.ReasonCRDsMissing))
		Eventually(configCondition(igwv1.ConditionReady), eventually, poll).Should(HavePrefix("False/" + igwv1.ReasonCRDsMissing))

		By("the children of built-in kinds exist all the same")
		Expect(k8s.Get(ctx, types.NamespacedName{Namespace: ns, Name: render.NamesForRoute("llama").EPP}, &appsv1.Deployment{})).To(Succeed())
		Expect(k8s.Get(ctx, types.NamespacedName{Namespace: ns, Name: render.NamesForConfig("igw").BBR}, &appsv1.Deployment{})).To(Succeed())
		Consistently(stopped, 2*time.Second).ShouldNot(Receive(), "the operator stopped")
	})

	It("picks the CRDs up when they are installed, without a restart", func() {
		Expect(env.InstallCRDs(testenv.ExternalCRDDirs...)).To(Succeed())

		Eventually(routeCondition(igwv1.ConditionResolvedRefs), eventually, poll).Should(HavePrefix("False/" + igwv1.ReasonGatewayNotFound))
		Expect(k8s.Get(ctx, types.NamespacedName{Namespace: ns, Name: "llama"}, &infv1.InferencePool{})).To(Succeed())
		Expect(k8s.Get(ctx, types.NamespacedName{Namespace: ns, Name: "llama"}, &gwapiv1.HTTPRoute{})).To(Succeed())

		Expect(k8s.Create(ctx, &gwapiv1.Gateway{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "gw"},
			Spec: gwapiv1.GatewaySpec{GatewayClassName: "eg", Listeners: []gwapiv1.Listener{{Name: "http", Protocol: gwapiv1.HTTPProtocolType, Port: 80}}}})).To(Succeed())
		Eventually(routeCondition(igwv1.ConditionResolvedRefs), eventually, poll).Should(HavePrefix("True/"))
		Eventually(configCondition(igwv1.ConditionGatewayProgrammed), eventually, poll).Should(HavePrefix("False/" + igwv1.ReasonGatewayNotProgrammed))
		Consistently(stopped, time.Second).ShouldNot(Receive(), "the operator stopped")
	})
})
