package controllers_test

import (
	"maps"
	"slices"

	egv1a1 "github.com/envoyproxy/gateway/api/v1alpha1"
	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	extprocv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/ext_proc/v3"
	tlsv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/transport_sockets/tls/v3"
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"google.golang.org/protobuf/encoding/protojson"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	gwapiv1 "sigs.k8s.io/gateway-api/apis/v1"

	igwv1 "github.com/igw-dev/igw/api/v1alpha1"
	"github.com/igw-dev/igw/internal/servingtls/servingtlstest"
	"github.com/igw-dev/igw/pkg/render"
)

var _ = Describe("A config whose ext_proc is protected", Ordered, func() {
	const tlsNS, secret, caMap = "extproc-tls", "igw-extproc-tls", "igw-extproc-ca"
	bbr, epp := render.NamesForConfig("igw").BBR, render.NamesForRoute("llama").EPP

	BeforeAll(func() {
		namespace(tlsNS)
		gateway(tlsNS, "inference-gateway")
		ca := servingtlstest.NewCA(GinkgoT())
		Expect(k8s.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: tlsNS, Name: caMap},
			Data: map[string]string{render.CACertificateKey: string(ca.PEM)}})).To(Succeed())
		config(tlsNS, "igw", func(c *igwv1.InferenceGatewayConfig) {
			c.Spec.ExtProc = &igwv1.ExtProcSecurity{
				TLS:           &igwv1.ExtProcTLS{CertificateSecretName: secret, CACertificateConfigMapName: caMap},
				NetworkPolicy: &igwv1.ExtProcNetworkPolicy{Enabled: true},
			}
		})
		route(tlsNS, "llama", "igw", []igwv1.ModelName{"llama-3.1-8b"}, nil)
	})

	It("mounts the certificate in the router and the picker, with the flags that serve it", func() {
		for _, name := range []string{bbr, epp} {
			var d appsv1.Deployment
			Eventually(func() error { return k8s.Get(ctx, types.NamespacedName{Namespace: tlsNS, Name: name}, &d) }, eventually, poll).Should(Succeed())
			pod := d.Spec.Template.Spec
			Expect(pod.Containers[0].Args).To(ContainElements("--tls-cert-file=/etc/igw/tls/tls.crt", "--tls-key-file=/etc/igw/tls/tls.key"), name)
			Expect(pod.Volumes).To(ContainElement(HaveField("VolumeSource.Secret.SecretName", secret)), name)
			var np networkingv1.NetworkPolicy
			Eventually(func() error { return k8s.Get(ctx, types.NamespacedName{Namespace: tlsNS, Name: name}, &np) }, eventually, poll).Should(Succeed())
			Expect(np.Spec.PodSelector.MatchLabels).To(Equal(d.Spec.Selector.MatchLabels), name)
			Expect(np.Spec.Ingress[0].From[0].PodSelector.MatchLabels).To(HaveKeyWithValue("gateway.envoyproxy.io/owning-gateway-name", "inference-gateway"), name)
			var p gwapiv1.BackendTLSPolicy
			Eventually(func() error { return k8s.Get(ctx, types.NamespacedName{Namespace: tlsNS, Name: name}, &p) }, eventually, poll).Should(Succeed())
		}
	})

	It("is accepted by Envoy Gateway's translator, whose clusters for the router and the picker speak TLS verified against the CA", func() {
		// The route's policy comes after its BackendTLSPolicy: wait for it.
		Eventually(func() error {
			return k8s.Get(ctx, types.NamespacedName{Namespace: tlsNS, Name: render.NamesForRoute("llama").EPPPolicy}, &egv1a1.EnvoyExtensionPolicy{})
		}, eventually, poll).Should(Succeed())
		t := translate(envoyGatewayInput(tlsNS, "inference-gateway"))
		Expect(t.objects).To(HaveKey("backendTLSPolicies"))
		Expect(t.objects["backendTLSPolicies"]).To(HaveLen(2))
		for _, o := range t.objects["backendTLSPolicies"] {
			Expect(o.Status.Ancestors).NotTo(BeEmpty(), o.Metadata.Name)
			for _, a := range o.Status.Ancestors {
				for _, c := range a.Conditions {
					if c.Type == "Accepted" || c.Type == "ResolvedRefs" {
						Expect(c.Status).To(Equal("True"), "%s %s: %s", o.Metadata.Name, c.Type, c.Message)
					}
				}
			}
		}
		dump := decodeXDS(t.xds[tlsNS+"/inference-gateway"].Configs)
		hcm, _ := dump.httpConnectionManager()
		for filter, service := range map[string]string{
			extProcFilter(tlsNS, render.NamesForConfig("igw").BBRPolicy):  bbr,
			extProcFilter(tlsNS, render.NamesForRoute("llama").EPPPolicy): epp,
		} {
			By(service + "'s cluster carries a TLS transport socket")
			var ep extprocv3.ExternalProcessor
			found := false
			for _, hf := range hcm.GetHttpFilters() {
				if hf.GetName() == filter {
					Expect(hf.GetTypedConfig().UnmarshalTo(&ep)).To(Succeed())
					found = true
				}
			}
			Expect(found).To(BeTrue(), "no filter %s", filter)
			cl := dump.clusters[ep.GetGrpcService().GetEnvoyGrpc().GetClusterName()]
			Expect(cl).NotTo(BeNil(), "%s: cluster %q (filter %v) among %v", filter, ep.GetGrpcService().GetEnvoyGrpc().GetClusterName(), ep.GetGrpcService(), slices.Collect(maps.Keys(dump.clusters)))
			tlsCtx := upstreamTLS(cl)
			Expect(tlsCtx).NotTo(BeNil(), "%s's cluster has no TLS transport socket: %s", service, protojson.Format(cl))
			// Envoy Gateway verifies the server as the Service's host against
			// the BackendTLSPolicy's CA (served by SDS).
			Expect(tlsCtx.GetSni()).To(Equal(render.ServiceHost(service, tlsNS)), service)
			Expect(tlsCtx.GetCommonTlsContext().GetCombinedValidationContext().GetValidationContextSdsSecretConfig()).NotTo(BeNil(), service)
		}
	})
})

// upstreamTLS is a cluster's TLS context. Envoy Gateway puts it in the
// transport socket matches and leaves a placeholder ("dummy") socket as the
// cluster's own; nil when there is none.
func upstreamTLS(cl *clusterv3.Cluster) *tlsv3.UpstreamTlsContext {
	sockets := []*corev3.TransportSocket{cl.GetTransportSocket()}
	for _, m := range cl.GetTransportSocketMatches() {
		sockets = append(sockets, m.GetTransportSocket())
	}
	for _, ts := range sockets {
		var tlsCtx tlsv3.UpstreamTlsContext
		if ts.GetName() == "envoy.transport_sockets.tls" && ts.GetTypedConfig().UnmarshalTo(&tlsCtx) == nil {
			return &tlsCtx
		}
	}
	return nil
}
