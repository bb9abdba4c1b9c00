package render

import (
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	gwapiv1 "sigs.k8s.io/gateway-api/apis/v1"

	igwv1 "github.com/igw-dev/igw/api/v1alpha1"
	"github.com/igw-dev/igw/internal/servingtls"
)

// The ext_proc servers' serving certificate inside their pods, and the key of
// the CA ConfigMap the proxy verifies it with.
const (
	extProcTLSMountPath = "/etc/igw/tls"
	extProcTLSVolume    = "serving-cert"
	CACertificateKey    = "ca.crt"
	// Labels Envoy Gateway gives the proxy pods of a Gateway.
	envoyProxyGatewayNameLabel      = "gateway.envoyproxy.io/owning-gateway-name"
	envoyProxyGatewayNamespaceLabel = "gateway.envoyproxy.io/owning-gateway-namespace"
)

// ExtProcTLS returns the config's ext_proc TLS settings; nil for plaintext.
func ExtProcTLS(cfg *igwv1.InferenceGatewayConfig) *igwv1.ExtProcTLS {
	if cfg.Spec.ExtProc == nil {
		return nil
	}
	return cfg.Spec.ExtProc.TLS
}

// extProcNetworkPolicyEnabled reports whether the config asks for the
// policies admitting only the proxy.
func extProcNetworkPolicyEnabled(cfg *igwv1.InferenceGatewayConfig) bool {
	return cfg.Spec.ExtProc != nil && cfg.Spec.ExtProc.NetworkPolicy != nil && cfg.Spec.ExtProc.NetworkPolicy.Enabled
}

// withServingCertificate makes an ext_proc server serve TLS: the Secret is
// mounted (the kubelet updates the files when it changes, and the server
// re-reads them) and the flags name its files. A no-op for plaintext.
func withServingCertificate(cfg *igwv1.InferenceGatewayConfig, c *corev1.Container, volumes []corev1.Volume) []corev1.Volume {
	t := ExtProcTLS(cfg)
	if t == nil {
		return volumes
	}
	c.Args = append(c.Args,
		"--"+servingtls.CertFileFlag+"="+extProcTLSMountPath+"/"+corev1.TLSCertKey,
		"--"+servingtls.KeyFileFlag+"="+extProcTLSMountPath+"/"+corev1.TLSPrivateKeyKey)
	return append(volumes, mountReadOnly(c, extProcTLSVolume, extProcTLSMountPath, corev1.VolumeSource{
		Secret: &corev1.SecretVolumeSource{SecretName: t.CertificateSecretName}}))
}

// extProcAppProtocol is the ext_proc Service port's appProtocol: h2c
// (cleartext HTTP/2) unless the port serves TLS, which the proxy learns from
// the BackendTLSPolicy.
func extProcAppProtocol(cfg *igwv1.InferenceGatewayConfig) string {
	if ExtProcTLS(cfg) != nil {
		return ""
	}
	return AppProtocolH2C
}

// extProcTLSPolicy tells the proxy to speak TLS to an ext_proc Service's gRPC
// port and to verify the server as the Service's cluster host name against
// the config's CA. nil for plaintext.
func extProcTLSPolicy(cfg *igwv1.InferenceGatewayConfig, m metav1.ObjectMeta, service string) *gwapiv1.BackendTLSPolicy {
	t := ExtProcTLS(cfg)
	if t == nil {
		return nil
	}
	section := gwapiv1.SectionName(PortNameGRPC)
	return &gwapiv1.BackendTLSPolicy{
		TypeMeta:   typeMeta(gwapiv1.GroupVersion.String(), "BackendTLSPolicy"),
		ObjectMeta: m,
		Spec: gwapiv1.BackendTLSPolicySpec{
			TargetRefs: []gwapiv1.LocalPolicyTargetReferenceWithSectionName{{
				LocalPolicyTargetReference: gwapiv1.LocalPolicyTargetReference{Group: "", Kind: "Service", Name: gwapiv1.ObjectName(service)},
				SectionName:                &section,
			}},
			Validation: gwapiv1.BackendTLSPolicyValidation{
				CACertificateRefs: []gwapiv1.LocalObjectReference{{Group: "", Kind: KindConfigMap, Name: gwapiv1.ObjectName(t.CACertificateConfigMapName)}},
				Hostname:          gwapiv1.PreciseHostname(ServiceHost(service, m.Namespace)),
			},
		},
	}
}

// ServiceHost is a Service's host name inside the cluster, which the
// serving certificate must name.
func ServiceHost(service, namespace string) string { return service + "." + namespace + ".svc" }

// extProcNetworkPolicy admits only the proxy's pods, in any namespace, to an
// ext_proc server's proxyPorts; its other ports (health, metrics) stay open
// to all. nil unless the config asks for it.
func extProcNetworkPolicy(cfg *igwv1.InferenceGatewayConfig, m metav1.ObjectMeta, pods map[string]string, proxyPorts, openPorts []int32) *networkingv1.NetworkPolicy {
	if !extProcNetworkPolicyEnabled(cfg) {
		return nil
	}
	proxy := cfg.Spec.ExtProc.NetworkPolicy.ProxyPodLabels
	if len(proxy) == 0 {
		gw := ResolveGateway(cfg)
		proxy = map[string]string{envoyProxyGatewayNameLabel: gw.Name, envoyProxyGatewayNamespaceLabel: gw.Namespace}
	}
	ports := func(ps []int32) []networkingv1.NetworkPolicyPort {
		out := make([]networkingv1.NetworkPolicyPort, len(ps))
		for i, p := range ps {
			tcp, port := corev1.ProtocolTCP, intstr.FromInt32(p)
			out[i] = networkingv1.NetworkPolicyPort{Protocol: &tcp, Port: &port}
		}
		return out
	}
	return &networkingv1.NetworkPolicy{
		TypeMeta:   typeMeta("networking.k8s.io/v1", "NetworkPolicy"),
		ObjectMeta: m,
		Spec: networkingv1.NetworkPolicySpec{
			PodSelector: metav1.LabelSelector{MatchLabels: copyMap(pods)},
			PolicyTypes: []networkingv1.PolicyType{networkingv1.PolicyTypeIngress},
			Ingress: []networkingv1.NetworkPolicyIngressRule{
				{Ports: ports(proxyPorts), From: []networkingv1.NetworkPolicyPeer{{
					NamespaceSelector: &metav1.LabelSelector{},
					PodSelector:       &metav1.LabelSelector{MatchLabels: copyMap(proxy)},
				}}},
				{Ports: ports(openPorts)},
			},
		},
	}
}
