package render

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	gwapiv1 "sigs.k8s.io/gateway-api/apis/v1"

	igwv1 "github.com/igw-dev/igw/api/v1alpha1"
)

// API groups and kinds the rendered objects refer to.
const (
	GroupGatewayAPI   = gwapiv1.GroupName
	GroupInference    = "inference.networking.k8s.io"
	GroupEnvoyGateway = "gateway.envoyproxy.io"
	KindGateway       = "Gateway"
	KindHTTPRoute     = "HTTPRoute"
	KindInferencePool = "InferencePool"
	KindService       = "Service"
	KindConfigMap     = "ConfigMap"
	KindModelRoute    = "ModelRoute"
	KindConfig        = "InferenceGatewayConfig"
	KindHTTPRouteFilt = "HTTPRouteFilter"
	KindEEP           = "EnvoyExtensionPolicy"
)

func typeMeta(apiVersion, kind string) metav1.TypeMeta {
	return metav1.TypeMeta{APIVersion: apiVersion, Kind: kind}
}

// GatewayTarget is the Gateway a config's routes attach to.
type GatewayTarget struct {
	Name, Namespace, SectionName string
	Managed                      bool
}

// ResolveGateway returns the Gateway of cfg: the referenced one, or the one the
// operator manages (named after the config, in its namespace).
func ResolveGateway(cfg *igwv1.InferenceGatewayConfig) GatewayTarget {
	if ref := cfg.Spec.Gateway.Ref; ref != nil {
		ns := ref.Namespace
		if ns == "" {
			ns = cfg.Namespace
		}
		return GatewayTarget{Name: ref.Name, Namespace: ns, SectionName: ref.SectionName}
	}
	return GatewayTarget{Name: NamesForConfig(cfg.Name).ManagedGateway, Namespace: cfg.Namespace, Managed: true}
}

// String is namespace/name, as status.gatewayName shows it.
func (g GatewayTarget) String() string { return g.Namespace + "/" + g.Name }

// parentRef attaches a route to the gateway.
func (g GatewayTarget) parentRef() gwapiv1.ParentReference {
	group := gwapiv1.Group(GroupGatewayAPI)
	kind := gwapiv1.Kind(KindGateway)
	ns := gwapiv1.Namespace(g.Namespace)
	p := gwapiv1.ParentReference{Group: &group, Kind: &kind, Namespace: &ns, Name: gwapiv1.ObjectName(g.Name)}
	if g.SectionName != "" {
		s := gwapiv1.SectionName(g.SectionName)
		p.SectionName = &s
	}
	return p
}

// policyTarget attaches an Envoy Gateway policy to the gateway (or one listener).
func (g GatewayTarget) policyTarget() gwapiv1.LocalPolicyTargetReferenceWithSectionName {
	t := gwapiv1.LocalPolicyTargetReferenceWithSectionName{LocalPolicyTargetReference: gwapiv1.LocalPolicyTargetReference{
		Group: GroupGatewayAPI, Kind: KindGateway, Name: gwapiv1.ObjectName(g.Name)}}
	if g.SectionName != "" {
		s := gwapiv1.SectionName(g.SectionName)
		t.SectionName = &s
	}
	return t
}

// routeTargets attach a policy to HTTPRoutes of its namespace.
func routeTargets(names []string) []gwapiv1.LocalPolicyTargetReferenceWithSectionName {
	out := make([]gwapiv1.LocalPolicyTargetReferenceWithSectionName, len(names))
	for i, name := range names {
		out[i] = gwapiv1.LocalPolicyTargetReferenceWithSectionName{LocalPolicyTargetReference: gwapiv1.LocalPolicyTargetReference{
			Group: GroupGatewayAPI, Kind: KindHTTPRoute, Name: gwapiv1.ObjectName(name)}}
	}
	return out
}

// service is a ClusterIP Service of the pods selector matches.
func service(m metav1.ObjectMeta, selector map[string]string, ports ...corev1.ServicePort) *corev1.Service {
	return &corev1.Service{TypeMeta: typeMeta("v1", KindService), ObjectMeta: m,
		Spec: corev1.ServiceSpec{Selector: selector, Ports: ports}}
}

func servicePort(name string, port int32, appProtocol string) corev1.ServicePort {
	p := corev1.ServicePort{Name: name, Port: port, Protocol: corev1.ProtocolTCP, TargetPort: intstr.FromString(name)}
	if appProtocol != "" {
		p.AppProtocol = &appProtocol
	}
	return p
}
