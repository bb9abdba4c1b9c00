package controllers_test

import (
	"fmt"
	"time"

	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	gwapiv1 "sigs.k8s.io/gateway-api/apis/v1"

	igwv1 "github.com/igw-dev/igw/api/v1alpha1"
)

const (
	eventually = 30 * time.Second
	poll       = 50 * time.Millisecond
	// gatewayClassName is served by Envoy Gateway in a real cluster; here nothing serves it.
	gatewayClassName = "eg"
)

func ptr[T any](v T) *T { return &v }

func namespace(name string) {
	err := k8s.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}})
	if !apierrors.IsAlreadyExists(err) {
		Expect(err).NotTo(HaveOccurred())
	}
}

func gatewayClass() {
	gc := &gwapiv1.GatewayClass{ObjectMeta: metav1.ObjectMeta{Name: gatewayClassName},
		Spec: gwapiv1.GatewayClassSpec{ControllerName: "gateway.envoyproxy.io/gatewayclass-controller"}}
	if err := k8s.Create(ctx, gc); !apierrors.IsAlreadyExists(err) {
		Expect(err).NotTo(HaveOccurred())
	}
}

// gateway creates a Gateway with one HTTP listener open to routes from every namespace.
func gateway(ns, name string) *gwapiv1.Gateway {
	gatewayClass()
	all := gwapiv1.NamespacesFromAll
	gw := &gwapiv1.Gateway{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Spec: gwapiv1.GatewaySpec{
		GatewayClassName: gatewayClassName,
		Listeners: []gwapiv1.Listener{{Name: "http", Protocol: gwapiv1.HTTPProtocolType, Port: 80,
			AllowedRoutes: &gwapiv1.AllowedRoutes{Namespaces: &gwapiv1.RouteNamespaces{From: &all}}}},
	}}
	Expect(k8s.Create(ctx, gw)).To(Succeed())
	return gw
}

// programGateway plays Envoy Gateway: it marks the Gateway Programmed.
func programGateway(ns, name string) {
	Eventually(func() error {
		var gw gwapiv1.Gateway
		if err := k8s.Get(ctx, types.NamespacedName{Namespace: ns, Name: name}, &gw); err != nil {
			return err
		}
		meta.SetStatusCondition(&gw.Status.Conditions, metav1.Condition{Type: string(gwapiv1.GatewayConditionProgrammed),
			Status: metav1.ConditionTrue, Reason: "Programmed", ObservedGeneration: gw.Generation})
		return k8s.Status().Update(ctx, &gw)
	}, eventually, poll).Should(Succeed())
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

// modelPod creates a model server pod the way a Deployment would, without status.
func modelPod(ns, name string, labels map[string]string, node string) *corev1.Pod {
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: labels},
		Spec: corev1.PodSpec{NodeName: node, Containers: []corev1.Container{{Name: "vllm", Image: "vllm/vllm-openai:latest",
			Ports: []corev1.ContainerPort{{ContainerPort: 8000}}}}}}
	Expect(k8s.Create(ctx, p)).To(Succeed())
	return p
}

// setPodReady plays the kubelet: an IP and the Ready condition, through the status subresource.
func setPodReady(ns, name, ip string) {
	Eventually(func() error {
		var p corev1.Pod
		if err := k8s.Get(ctx, types.NamespacedName{Namespace: ns, Name: name}, &p); err != nil {
			return err
		}
		p.Status.Phase = corev1.PodRunning
		p.Status.PodIP = ip
		p.Status.PodIPs = []corev1.PodIP{{IP: ip}}
		p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue, LastTransitionTime: metav1.Now()}}
		return k8s.Status().Update(ctx, &p)
	}, eventually, poll).Should(Succeed())
}

// setDeploymentAvailable plays the deployment controller: every replica updated and available.
func setDeploymentAvailable(ns, name string) {
	Eventually(func() error {
		var d appsv1.Deployment
		if err := k8s.Get(ctx, types.NamespacedName{Namespace: ns, Name: name}, &d); err != nil {
			return err
		}
		return markAvailable(&d)
	}, eventually, poll).Should(Succeed())
}

func markAvailable(d *appsv1.Deployment) error {
	n := int32(1)
	if d.Spec.Replicas != nil {
		n = *d.Spec.Replicas
	}
	d.Status = appsv1.DeploymentStatus{ObservedGeneration: d.Generation, Replicas: n, UpdatedReplicas: n,
		ReadyReplicas: n, AvailableReplicas: n,
		Conditions: []appsv1.DeploymentCondition{{Type: appsv1.DeploymentAvailable, Status: corev1.ConditionTrue, Reason: "MinimumReplicasAvailable"}}}
	return k8s.Status().Update(ctx, d)
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
func condition(conds []metav1.Condition, typ string) string {
	c := meta.FindStatusCondition(conds, typ)
	if c == nil {
		return ""
	}
	return fmt.Sprintf("%s/%s", c.Status, c.Reason)
}

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
