package render

import (
	"encoding/json"
	"time"

	egv1a1 "github.com/envoyproxy/gateway/api/v1alpha1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	gwapiv1 "sigs.k8s.io/gateway-api/apis/v1"

	igwv1 "github.com/igw-dev/igw/api/v1alpha1"
	"github.com/igw-dev/igw/pkg/wire"
)

// Timeouts of one ext_proc message exchange. The picker answers once it has the
// whole body, so its limit covers a slow upload of a large prompt.
var (
	eppMessageTimeout = mustGatewayDuration(10 * time.Second)
	bbrMessageTimeout = mustGatewayDuration(5 * time.Second)
)

// bufferHeadroom is added to the largest body for headers and ext_proc framing
// when the gateway's per-connection buffer is raised.
const bufferHeadroom = 64 << 10

var egAPIVersion = egv1a1.GroupVersion.String()

// RetriedStatusCodes are the server errors a model route retries on another
// pod before the first byte.
var RetriedStatusCodes = []egv1a1.HTTPStatus{500, 502, 503, 504}

// endpointOverridePolicy makes the route's cluster send each request to the
// endpoint the picker wrote in the destination header (fallbacks after the
// first), and balance by least request when the header is absent or names no
// ready pod of the pool. Endpoint routing puts the pods themselves in the
// cluster, which the override can only choose from.
//
// A pod that fails before the response headers (connection refused or
// reset, a server error another pod may not share) costs the client
// nothing: Envoy retries once, and the override sends the retry to the
// header's next endpoint, the picker's first fallback (Envoy Gateway adds
// the previous-hosts predicate, so it is never the failed pod). Envoy never
// retries once it has sent response headers on, so nothing is retried after
// the first byte; 501 would fail on every pod alike.
func endpointOverridePolicy(m metav1.ObjectMeta, routes ...string) *egv1a1.BackendTrafficPolicy {
	header := wire.HeaderDestinationEndpoint
	endpoints := egv1a1.EndpointRoutingType
	retries := int32(1)
	return &egv1a1.BackendTrafficPolicy{
		TypeMeta:   typeMeta(egAPIVersion, egv1a1.KindBackendTrafficPolicy),
		ObjectMeta: m,
		Spec: egv1a1.BackendTrafficPolicySpec{
			PolicyTargetReferences: egv1a1.PolicyTargetReferences{TargetRefs: routeTargets(routes)},
			RoutingType:            &endpoints,
			ClusterSettings: egv1a1.ClusterSettings{
				LoadBalancer: &egv1a1.LoadBalancer{
					Type:             egv1a1.LeastRequestLoadBalancerType,
					EndpointOverride: &egv1a1.EndpointOverride{ExtractFrom: []egv1a1.EndpointOverrideExtractFrom{{Header: &header}}},
				},
				Retry: &egv1a1.Retry{NumRetries: &retries, RetryOn: &egv1a1.RetryOn{
					Triggers:        []egv1a1.TriggerEnum{egv1a1.ConnectFailure, egv1a1.Reset, egv1a1.RetriableStatusCodes},
					HTTPStatusCodes: RetriedStatusCodes,
				}},
			},
		},
	}
}

// eppExtensionPolicy attaches the route's picker as ext_proc. Failing closed,
// both bodies stream full-duplex: the request so the picker sees the prompt,
// the response so it learns each pod's speed from the token stream. Envoy
// refuses failure_mode_allow with full-duplex streaming, so failing open
// buffers the request body (the picker answers from the body message, as the
// body-based router does) and streams the response one chunk at a time; with
// the picker unreachable or past its message timeout, Envoy then skips it and
// the route's least-request fallback picks among the pool's pods.
func eppExtensionPolicy(m metav1.ObjectMeta, n RouteNames, mode igwv1.FailureMode) *egv1a1.EnvoyExtensionPolicy {
	return pickerExtensionPolicy(m, n.EPP, EPPGRPCPort, mode, n.HTTPRoute)
}

// pickerExtensionPolicy attaches a picker's Service as ext_proc to routes,
// with the body modes of its failure mode (see eppExtensionPolicy).
func pickerExtensionPolicy(m metav1.ObjectMeta, service string, grpcPort int32, mode igwv1.FailureMode, routes ...string) *egv1a1.EnvoyExtensionPolicy {
	request, response := egv1a1.FullDuplexStreamedExtBodyProcessingMode, egv1a1.FullDuplexStreamedExtBodyProcessingMode
	failOpen := mode == igwv1.FailOpen
	if failOpen {
		request, response = egv1a1.BufferedExtProcBodyProcessingMode, egv1a1.StreamedExtProcBodyProcessingMode
	}
	port := gwapiv1.PortNumber(grpcPort)
	timeout := eppMessageTimeout
	return &egv1a1.EnvoyExtensionPolicy{
		TypeMeta:   typeMeta(egAPIVersion, egv1a1.KindEnvoyExtensionPolicy),
		ObjectMeta: m,
		Spec: egv1a1.EnvoyExtensionPolicySpec{
			PolicyTargetReferences: egv1a1.PolicyTargetReferences{TargetRefs: routeTargets(routes)},
			ExtProc: []egv1a1.ExtProc{{
				BackendCluster: egv1a1.BackendCluster{BackendRefs: []egv1a1.BackendRef{{BackendObjectReference: gwapiv1.BackendObjectReference{
					Name: gwapiv1.ObjectName(service), Port: &port}}}},
				MessageTimeout: &timeout,
				FailOpen:       &failOpen,
				ProcessingMode: &egv1a1.ExtProcProcessingMode{
					Request:  &egv1a1.ProcessingModeOptions{Body: &request},
					Response: &egv1a1.ProcessingModeOptions{Body: &response},
				},
				Metadata: &egv1a1.ExtProcMetadata{WritableNamespaces: []string{wire.MetadataNamespaceLB}},
			}},
		},
	}
}

// bbrExtensionPolicy runs the body-based router on every route of the gateway.
// Buffered mode is what makes Envoy re-match routes on the header the router
// sets from the body (a streamed body's header changes do not re-route).
func bbrExtensionPolicy(m metav1.ObjectMeta, gw GatewayTarget, service, serviceNamespace string) *egv1a1.EnvoyExtensionPolicy {
	buffered := egv1a1.BufferedExtProcBodyProcessingMode
	port := gwapiv1.PortNumber(BBRGRPCPort)
	timeout := bbrMessageTimeout
	ref := gwapiv1.BackendObjectReference{Name: gwapiv1.ObjectName(service), Port: &port}
	if serviceNamespace != m.Namespace {
		ns := gwapiv1.Namespace(serviceNamespace)
		ref.Namespace = &ns
	}
	return &egv1a1.EnvoyExtensionPolicy{
		TypeMeta:   typeMeta(egAPIVersion, egv1a1.KindEnvoyExtensionPolicy),
		ObjectMeta: m,
		Spec: egv1a1.EnvoyExtensionPolicySpec{
			PolicyTargetReferences: egv1a1.PolicyTargetReferences{TargetRefs: []gwapiv1.LocalPolicyTargetReferenceWithSectionName{gw.policyTarget()}},
			ExtProc: []egv1a1.ExtProc{{
				BackendCluster: egv1a1.BackendCluster{BackendRefs: []egv1a1.BackendRef{{BackendObjectReference: ref}}},
				MessageTimeout: &timeout,
				ProcessingMode: &egv1a1.ExtProcProcessingMode{Request: &egv1a1.ProcessingModeOptions{Body: &buffered}},
			}},
		},
	}
}

// bufferLimitPolicy raises the gateway's per-connection buffer (32 KiB by
// default) so that a buffered body up to the configured maximum is not
// rejected with 413 before the router sees it.
func bufferLimitPolicy(m metav1.ObjectMeta, gw GatewayTarget, maxBody int64) *egv1a1.ClientTrafficPolicy {
	limit := resource.NewQuantity(maxBody+bufferHeadroom, resource.BinarySI)
	return &egv1a1.ClientTrafficPolicy{
		TypeMeta:   typeMeta(egAPIVersion, egv1a1.KindClientTrafficPolicy),
		ObjectMeta: m,
		Spec: egv1a1.ClientTrafficPolicySpec{
			PolicyTargetReferences: egv1a1.PolicyTargetReferences{TargetRefs: []gwapiv1.LocalPolicyTargetReferenceWithSectionName{gw.policyTarget()}},
			Connection:             &egv1a1.ClientConnection{BufferLimit: limit},
		},
	}
}

// modelNotFoundFilter answers a request whose model no route serves the way
// OpenAI does, so clients see the usual error instead of a bare 404.
func modelNotFoundFilter(m metav1.ObjectMeta) *egv1a1.HTTPRouteFilter {
	body := ModelNotFoundBody()
	inline := egv1a1.ResponseValueTypeInline
	contentType := "application/json"
	status := 404
	return &egv1a1.HTTPRouteFilter{
		TypeMeta:   typeMeta(egAPIVersion, egv1a1.KindHTTPRouteFilter),
		ObjectMeta: m,
		Spec: egv1a1.HTTPRouteFilterSpec{DirectResponse: &egv1a1.HTTPDirectResponseFilter{
			ContentType: &contentType,
			StatusCode:  &status,
			Body:        &egv1a1.CustomResponseBody{Type: &inline, Inline: &body},
		}},
	}
}

// ModelNotFoundBody is the OpenAI-style error for an unknown model.
func ModelNotFoundBody() string {
	b, _ := json.Marshal(map[string]any{"error": map[string]any{
		"message": "The model does not exist or is not served by this gateway.",
		"type":    "invalid_request_error",
		"param":   "model",
		"code":    "model_not_found",
	}})
	return string(b)
}

// jwtPolicy requires a valid token from the configured issuer on every route of the gateway.
func jwtPolicy(m metav1.ObjectMeta, gw GatewayTarget, jwt *igwv1.JWTAuthSpec) *egv1a1.SecurityPolicy {
	return &egv1a1.SecurityPolicy{
		TypeMeta:   typeMeta(egAPIVersion, egv1a1.KindSecurityPolicy),
		ObjectMeta: m,
		Spec: egv1a1.SecurityPolicySpec{
			PolicyTargetReferences: egv1a1.PolicyTargetReferences{TargetRefs: []gwapiv1.LocalPolicyTargetReferenceWithSectionName{gw.policyTarget()}},
			JWT: &egv1a1.JWT{Providers: []egv1a1.JWTProvider{{
				Name:       "igw",
				Issuer:     jwt.Issuer,
				Audiences:  jwt.Audiences,
				RemoteJWKS: &egv1a1.RemoteJWKS{URI: jwt.JWKSURI},
			}}},
		},
	}
}
