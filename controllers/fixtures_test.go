package controllers_test

import (
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	gwapiv1 "sigs.k8s.io/gateway-api/apis/v1"

	igwv1 "github.com/igw-dev/igw/api/v1alpha1"
	"github.com/igw-dev/igw/internal/testenv"
	"github.com/igw-dev/igw/internal/testenv/fixtures"
)

const (
	eventually = 30 * time.Second
	poll       = 50 * time.Millisecond
	// gatewayClassName is served by Envoy Gateway in a real cluster; here nothing serves it.
	gatewayClassName = fixtures.GatewayClassName
)

func ptr[T any](v T) *T { return &v }

func namespace(name string) { Expect(fixtures.Namespace(ctx, k8s, name)).To(Succeed()) }

// heldNamespace creates a namespace whose Pods start with their readiness
// probes failing: the operator's Deployments there stay unavailable, their
// Pods running but not Ready, until a spec lets their probes pass
// (passReadinessProbes), as pickers that have not started yet.
func heldNamespace(name string) { Expect(testenv.StartPodsUnready(ctx, k8s, name)).To(Succeed()) }

// gateway creates a Gateway with one HTTP listener open to routes from every namespace.
func gateway(ns, name string) *gwapiv1.Gateway {
	gw, err := fixtures.Gateway(ctx, k8s, ns, name)
	Expect(err).NotTo(HaveOccurred())
	return gw
}

// programGateway plays Envoy Gateway: it marks the Gateway Programmed.
func programGateway(ns, name string) {
	Expect(fixtures.ProgramGateway(ctx, k8s, ns, name)).To(Succeed())
}

func config(ns, name string, mutate func(*igwv1.InferenceGatewayConfig)) *igwv1.InferenceGatewayConfig {
	c := &igwv1.InferenceGatewayConfig{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: igwv1.InferenceGatewayConfigSpec{
			Gateway: igwv1.GatewaySpec{Ref: &igwv1.GatewayRef{Name: "inference-gateway"}},
			BBR:     igwv1.BBRSpec{MaxRequestBodyBytes: 8 << 20},
		}}
	if mutate != nil {
		mutate(c)
	}
	Expect(k8s.Create(ctx, c)).To(Succeed())
	return c
}

func route(ns, name, cfg string, models []igwv1.ModelName, mutate func(*igwv1.ModelRoute)) *igwv1.ModelRoute {
	mr := &igwv1.ModelRoute{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: igwv1.ModelRouteSpec{
			ConfigRef: igwv1.ObjectName{Name: cfg},
			Models:    models,
			Selector:  igwv1.ModelServerSelector{MatchLabels: map[string]string{"app": name}},
		}}
	if mutate != nil {
		mutate(mr)
	}
	Expect(k8s.Create(ctx, mr)).To(Succeed())
	return mr
}

// modelPod creates a model server pod the way a Deployment would, on node
// or where kube-scheduler places it: kwok runs it with an IP, not ready
// until setPodsReady.
func modelPod(ns, name string, labels map[string]string, node string) *corev1.Pod {
	p, err := fixtures.ModelPod(ctx, k8s, ns, name, labels, node)
	Expect(err).NotTo(HaveOccurred())
	return p
}

// setPodsReady lets the readiness probes of the model pods pass, and
// returns once kwok, playing the kubelet, reports every one Ready.
func setPodsReady(ns string, names ...string) {
	GinkgoHelper()
	for _, name := range names {
		Expect(testenv.SetReadinessProbe(ctx, k8s, ns, name, true)).To(Succeed())
	}
	for _, name := range names {
		Expect(testenv.WaitForPodReady(ctx, k8s, ns, name, true)).To(Succeed())
	}
}

// passReadinessProbes lets the readiness probes of Deployment ns/name's
// Pods pass, and returns once the deployment controller reports it rolled
// out and available.
func passReadinessProbes(ns, name string) {
	GinkgoHelper()
	Expect(testenv.PassReadinessProbes(ctx, k8s, ns, name)).To(Succeed())
}

func getRoute(ns, name string) *igwv1.ModelRoute {
	var mr igwv1.ModelRoute
	Expect(k8s.Get(ctx, types.NamespacedName{Namespace: ns, Name: name}, &mr)).To(Succeed())
	return &mr
}

func getConfig(ns, name string) *igwv1.InferenceGatewayConfig {
	var c igwv1.InferenceGatewayConfig
	Expect(k8s.Get(ctx, types.NamespacedName{Namespace: ns, Name: name}, &c)).To(Succeed())
	return &c
}

// condition is "Status/Reason" of a condition, or "" when it is absent.
func condition(conds []metav1.Condition, typ string) string { return fixtures.Condition(conds, typ) }

func routeCondition(ns, name, typ string) func() string {
	return func() string { return condition(getRoute(ns, name).Status.Conditions, typ) }
}

func configCondition(ns, name, typ string) func() string {
	return func() string { return condition(getConfig(ns, name).Status.Conditions, typ) }
}

func exists(obj client.Object, ns, name string) func() error {
	return func() error { return k8s.Get(ctx, types.NamespacedName{Namespace: ns, Name: name}, obj) }
}

func gone(obj client.Object, ns, name string) func() bool {
	return func() bool {
		return apierrors.IsNotFound(k8s.Get(ctx, types.NamespacedName{Namespace: ns, Name: name}, obj))
	}
}
