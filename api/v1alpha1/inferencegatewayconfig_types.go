package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// GatewayProvider says which gateway implementation carries the traffic.
// +kubebuilder:validation:Enum=EnvoyGateway;Native
type GatewayProvider string

const (
	// ProviderEnvoyGateway renders Envoy Gateway v1.9 policies (the HTTPRoute's
	// backend is a Service of the pool's pods with an endpoint override) and relies
	// on igw's Envoy Gateway extension server to keep each model's picker on its
	// requests (docs/envoy-gateway.md).
	ProviderEnvoyGateway GatewayProvider = "EnvoyGateway"
	// ProviderNative renders only Gateway API objects whose backendRefs name the
	// InferencePool, for gateways that implement InferencePool themselves.
	ProviderNative GatewayProvider = "Native"
)

// GatewayRef names an existing Gateway.
type GatewayRef struct {
	// Name of the Gateway.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	Name string `json:"name"`

	// Namespace of the Gateway; defaults to the config's namespace.
	// +optional
	// +kubebuilder:validation:MaxLength=63
	Namespace string `json:"namespace,omitempty"`

	// SectionName is the listener the routes attach to; all listeners when empty.
	// +optional
	// +kubebuilder:validation:MaxLength=253
	SectionName string `json:"sectionName,omitempty"`
}

// ManagedGateway asks the operator to create the Gateway.
type ManagedGateway struct {
	// GatewayClassName of the Gateway to create.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	// +operator-sdk:csv:customresourcedefinitions:type=spec,displayName="GatewayClass",xDescriptors={"urn:alm:descriptor:com.tectonic.ui:text"}
	GatewayClassName string `json:"gatewayClassName"`

	// Port of the HTTP (or HTTPS, with tls) listener.
	// +optional
	// +kubebuilder:default=80
	// +kubebuilder:validation:XValidation:rule="self >= 1 && self <= 65535",message="gateway.managed.port must be between 1 and 65535"
	Port int32 `json:"port,omitempty"`
}

// GatewaySpec says which Gateway serves the models.
// +kubebuilder:validation:XValidation:rule="has(self.ref) != has(self.managed)",message="set exactly one of gateway.ref (use an existing Gateway) or gateway.managed (let the operator create one)"
type GatewaySpec struct {
	// Ref names an existing Gateway.
	// +optional
	// +operator-sdk:csv:customresourcedefinitions:type=spec,displayName="Existing Gateway",xDescriptors={"urn:alm:descriptor:com.tectonic.ui:fieldGroup:Gateway"}
	Ref *GatewayRef `json:"ref,omitempty"`

	// Managed makes the operator create and own the Gateway.
	// +optional
	// +operator-sdk:csv:customresourcedefinitions:type=spec,displayName="Managed Gateway",xDescriptors={"urn:alm:descriptor:com.tectonic.ui:fieldGroup:Gateway"}
	Managed *ManagedGateway `json:"managed,omitempty"`

	// Provider is the gateway implementation.
	// +optional
	// +kubebuilder:default=EnvoyGateway
	// +operator-sdk:csv:customresourcedefinitions:type=spec,displayName="Gateway provider",xDescriptors={"urn:alm:descriptor:com.tectonic.ui:select:EnvoyGateway","urn:alm:descriptor:com.tectonic.ui:select:Native"}
	Provider GatewayProvider `json:"provider,omitempty"`
}

// BBRSpec configures the body-based router that reads the model from the request body.
type BBRSpec struct {
	// Enabled runs the body-based router. Without it, clients must send the
	// X-Gateway-Model-Name header themselves.
	// +optional
	// +kubebuilder:default=true
	// +operator-sdk:csv:customresourcedefinitions:type=spec,displayName="Run the body-based router",xDescriptors={"urn:alm:descriptor:com.tectonic.ui:booleanSwitch"}
	Enabled *bool `json:"enabled,omitempty"`

	PodSettings `json:",inline"`

	// MaxRequestBodyBytes is the largest request body accepted; larger bodies get 413.
	// +optional
	// +kubebuilder:default=4194304
	// +kubebuilder:validation:XValidation:rule="self >= 1024 && self <= 268435456",message="bbr.maxRequestBodyBytes must be between 1024 (1 KiB) and 268435456 (256 MiB)"
	// +operator-sdk:csv:customresourcedefinitions:type=spec,displayName="Largest request body (bytes)",xDescriptors={"urn:alm:descriptor:com.tectonic.ui:number"}
	MaxRequestBodyBytes int64 `json:"maxRequestBodyBytes,omitempty"`
}

// EPPDefaults are the endpoint picker settings every ModelRoute starts from.
// +kubebuilder:validation:XValidation:rule="!has(self.metricsStaleness) || !has(self.scrapeInterval) || duration(self.metricsStaleness) >= duration(self.scrapeInterval)",message="epp.metricsStaleness must be at least epp.scrapeInterval, or every scrape would already be stale"
type EPPDefaults struct {
	PodSettings `json:",inline"`

	// ScrapeInterval is how often each model server's metrics are read.
	// +optional
	// +kubebuilder:default="50ms"
	// +kubebuilder:validation:XValidation:rule="duration(self) >= duration('10ms') && duration(self) <= duration('10s')",message="epp.scrapeInterval must be between 10ms and 10s"
	// +operator-sdk:csv:customresourcedefinitions:type=spec,displayName="Telemetry scrape interval",xDescriptors={"urn:alm:descriptor:com.tectonic.ui:text"}
	ScrapeInterval *metav1.Duration `json:"scrapeInterval,omitempty"`

	// MetricsStaleness is the age after which an endpoint's metrics no longer count.
	// +optional
	// +kubebuilder:default="200ms"
	// +kubebuilder:validation:XValidation:rule="duration(self) <= duration('60s')",message="epp.metricsStaleness must be at most 60s"
	// +operator-sdk:csv:customresourcedefinitions:type=spec,displayName="Telemetry staleness",xDescriptors={"urn:alm:descriptor:com.tectonic.ui:text"}
	MetricsStaleness *metav1.Duration `json:"metricsStaleness,omitempty"`

	// FailureMode applies when the endpoint picker is unreachable, fails or times out.
	// FailClose rejects the request (Envoy Gateway answers 5xx): a picker outage is a model outage.
	// FailOpen serves it by least request over the pool's ready pods, without cache, LoRA or
	// load-aware picking or shedding; on Envoy Gateway the picker then gets the request body
	// buffered and the response chunk by chunk.
	// +optional
	// +kubebuilder:default=FailClose
	FailureMode FailureMode `json:"failureMode,omitempty"`
}

// ScoringSpec is the default scoring of every model.
type ScoringSpec struct {
	// Weights per scorer; scorers not named keep the built-in default.
	// +optional
	Weights ScoringWeights `json:"weights,omitempty"`

	// AutoTune lets the operator adjust weights from what it observes (declared
	// LoRA adapters, mixed accelerator types). Weights named here always win.
	// +optional
	// +kubebuilder:default=true
	// +operator-sdk:csv:customresourcedefinitions:type=spec,displayName="Auto-tune weights",xDescriptors={"urn:alm:descriptor:com.tectonic.ui:booleanSwitch"}
	AutoTune *bool `json:"autoTune,omitempty"`
}

// TLSSpec terminates TLS at the gateway.
type TLSSpec struct {
	// CertificateSecretName is a kubernetes.io/tls Secret in the config's namespace.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	// +operator-sdk:csv:customresourcedefinitions:type=spec,displayName="Certificate Secret",xDescriptors={"urn:alm:descriptor:io.kubernetes:Secret"}
	CertificateSecretName string `json:"certificateSecretName"`
}

// ExtProcSecurity protects the ext_proc gRPC services the proxy calls: the
// body-based router's and the endpoint pickers' of the config's ModelRoutes.
type ExtProcSecurity struct {
	// TLS serves them over TLS, which the proxy verifies.
	// +optional
	TLS *ExtProcTLS `json:"tls,omitempty"`

	// NetworkPolicy admits only the proxy's pods to their ext_proc ports.
	// +optional
	NetworkPolicy *ExtProcNetworkPolicy `json:"networkPolicy,omitempty"`
}

// ExtProcTLS names the serving certificate of the router and the pickers and
// the CA the proxy verifies it with; the operator mounts the certificate,
// which the servers re-read when the Secret changes, and renders a
// BackendTLSPolicy for each of their Services.
type ExtProcTLS struct {
	// CertificateSecretName is a kubernetes.io/tls Secret in the config's
	// namespace (keys tls.crt and tls.key). The certificate must name each
	// Service's host name, NAME.NAMESPACE.svc: a certificate for
	// *.NAMESPACE.svc serves them all.
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:XValidation:rule="self.matches('^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$')",message="extProc.tls.certificateSecretName must be a Secret's name: lowercase letters, digits, '-' and '.', for example igw-extproc-tls"
	CertificateSecretName string `json:"certificateSecretName"`

	// CACertificateConfigMapName is a ConfigMap in the config's namespace
	// whose key ca.crt holds the CA certificate that issued the serving
	// certificate (cert-manager's trust bundle, or the CA's Secret's ca.crt
	// copied into a ConfigMap).
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:XValidation:rule="self.matches('^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$')",message="extProc.tls.caCertificateConfigMapName must be a ConfigMap's name: lowercase letters, digits, '-' and '.', for example igw-extproc-ca"
	CACertificateConfigMapName string `json:"caCertificateConfigMapName"`
}

// ExtProcNetworkPolicy renders a NetworkPolicy for the router's and each
// picker's pods: their ext_proc port (and the router's model list port)
// admits only the proxy's pods; health and metrics ports stay open.
type ExtProcNetworkPolicy struct {
	// Enabled renders the policies. Off by default: a policy that does not
	// match the proxy's pods cuts every request off.
	Enabled bool `json:"enabled"`

	// ProxyPodLabels select the proxy's pods, in any namespace. Empty: the
	// labels Envoy Gateway gives the proxy of the config's Gateway
	// (gateway.envoyproxy.io/owning-gateway-name and -namespace).
	// +optional
	// +kubebuilder:validation:MaxProperties=8
	ProxyPodLabels map[string]string `json:"proxyPodLabels,omitempty"`
}

// JWTAuthSpec requires a valid JWT on every request.
type JWTAuthSpec struct {
	// Issuer the tokens must carry in "iss".
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=1024
	Issuer string `json:"issuer"`

	// JWKSURI serves the issuer's signing keys.
	// +kubebuilder:validation:MaxLength=2048
	// +kubebuilder:validation:XValidation:rule="self.startsWith('https://')",message="auth.jwt.jwksURI must be an https:// URL"
	JWKSURI string `json:"jwksURI"`

	// Audiences accepted in "aud"; any when empty.
	// +optional
	// +listType=set
	// +kubebuilder:validation:MaxItems=16
	Audiences []string `json:"audiences,omitempty"`
}

// AuthSpec is optional client authentication at the gateway.
type AuthSpec struct {
	// JWT authentication.
	// +optional
	JWT *JWTAuthSpec `json:"jwt,omitempty"`
}

// InferenceGatewayConfigSpec is the gateway-wide configuration that ModelRoutes refer to.
type InferenceGatewayConfigSpec struct {
	// Gateway that serves the models.
	// +operator-sdk:csv:customresourcedefinitions:type=spec,displayName="Gateway",xDescriptors={"urn:alm:descriptor:com.tectonic.ui:fieldGroup:Gateway"}
	Gateway GatewaySpec `json:"gateway"`

	// BBR is the body-based router.
	// +optional
	// +kubebuilder:default={}
	// +operator-sdk:csv:customresourcedefinitions:type=spec,displayName="Body-based router",xDescriptors={"urn:alm:descriptor:com.tectonic.ui:fieldGroup:Body-based router"}
	BBR BBRSpec `json:"bbr,omitempty"`

	// EPP holds the endpoint picker defaults.
	// +optional
	// +kubebuilder:default={}
	// +operator-sdk:csv:customresourcedefinitions:type=spec,displayName="Endpoint picker defaults",xDescriptors={"urn:alm:descriptor:com.tectonic.ui:fieldGroup:Endpoint picker"}
	EPP EPPDefaults `json:"epp,omitempty"`

	// Scoring is the default scoring.
	// +optional
	// +kubebuilder:default={}
	// +operator-sdk:csv:customresourcedefinitions:type=spec,displayName="Scoring",xDescriptors={"urn:alm:descriptor:com.tectonic.ui:fieldGroup:Scoring"}
	Scoring ScoringSpec `json:"scoring,omitempty"`

	// TLS at the gateway listener (managed gateways only).
	// +optional
	// +operator-sdk:csv:customresourcedefinitions:type=spec,displayName="TLS",xDescriptors={"urn:alm:descriptor:com.tectonic.ui:advanced"}
	TLS *TLSSpec `json:"tls,omitempty"`

	// ExtProc protects the gRPC between the proxy and the body-based router
	// and endpoint pickers: TLS and a NetworkPolicy admitting the proxy only.
	// +optional
	// +operator-sdk:csv:customresourcedefinitions:type=spec,displayName="ext_proc security",xDescriptors={"urn:alm:descriptor:com.tectonic.ui:advanced"}
	ExtProc *ExtProcSecurity `json:"extProc,omitempty"`

	// Auth of clients at the gateway.
	// +optional
	// +operator-sdk:csv:customresourcedefinitions:type=spec,displayName="Client authentication",xDescriptors={"urn:alm:descriptor:com.tectonic.ui:advanced"}
	Auth *AuthSpec `json:"auth,omitempty"`

	// PodDefaults apply to every pod the operator runs.
	// +optional
	// +operator-sdk:csv:customresourcedefinitions:type=spec,displayName="Pod defaults",xDescriptors={"urn:alm:descriptor:com.tectonic.ui:advanced"}
	PodDefaults PodPlacement `json:"podDefaults,omitempty"`
}

// ModelSummary is one model served through the config.
type ModelSummary struct {
	// Name is the served model name.
	Name string `json:"name"`
	// ModelRoute that serves it.
	ModelRoute string `json:"modelRoute"`
	// Ready says whether the route has ready endpoints.
	Ready bool `json:"ready"`
}

// InferenceGatewayConfigStatus is the observed state of the config.
type InferenceGatewayConfigStatus struct {
	// ObservedGeneration is the generation the status describes.
	// +optional
	// +operator-sdk:csv:customresourcedefinitions:type=status,displayName="Observed generation",xDescriptors={"urn:alm:descriptor:text"}
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`

	// Conditions: Accepted, Ready, GatewayProgrammed, BBRReady.
	// +optional
	// +listType=map
	// +listMapKey=type
	// +operator-sdk:csv:customresourcedefinitions:type=status,displayName="Conditions",xDescriptors={"urn:alm:descriptor:io.kubernetes.conditions"}
	Conditions []metav1.Condition `json:"conditions,omitempty"`

	// GatewayName is the Gateway in use, as namespace/name.
	// +optional
	// +operator-sdk:csv:customresourcedefinitions:type=status,displayName="Gateway",xDescriptors={"urn:alm:descriptor:text"}
	GatewayName string `json:"gatewayName,omitempty"`

	// Models served through this config.
	// +optional
	// +listType=atomic
	// +operator-sdk:csv:customresourcedefinitions:type=status,displayName="Models",xDescriptors={"urn:alm:descriptor:text"}
	Models []ModelSummary `json:"models,omitempty"`
}

// +kubebuilder:validation:XValidation:rule="self.metadata.name.matches('^[a-z]([-a-z0-9]*[a-z0-9])?$')",message="an InferenceGatewayConfig's name must be lowercase letters, digits and '-', starting with a letter and ending with a letter or digit, because its router's Service is named after it: for example igw-prod rather than igw.prod"
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:shortName=igwc,categories=igw
// +kubebuilder:printcolumn:name="Gateway",type=string,JSONPath=`.status.gatewayName`
// +kubebuilder:printcolumn:name="Provider",type=string,JSONPath=`.spec.gateway.provider`
// +kubebuilder:printcolumn:name="BBR",type=string,JSONPath=`.status.conditions[?(@.type=="BBRReady")].status`
// +kubebuilder:printcolumn:name="Ready",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].status`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`

// +operator-sdk:csv:customresourcedefinitions:displayName="Inference Gateway Config",resources={{Gateway,v1,""},{HTTPRoute,v1,""},{Deployment,v1,""},{Service,v1,""},{ConfigMap,v1,""},{EnvoyExtensionPolicy,v1alpha1,""},{ClientTrafficPolicy,v1alpha1,""},{SecurityPolicy,v1alpha1,""},{HTTPRouteFilter,v1alpha1,""},{ReferenceGrant,v1beta1,""},{BackendTLSPolicy,v1,""},{NetworkPolicy,v1,""}}
// InferenceGatewayConfig is the gateway-wide configuration of igw: which Gateway,
// the body-based router, and the endpoint picker defaults every ModelRoute starts from.
type InferenceGatewayConfig struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   InferenceGatewayConfigSpec   `json:"spec"`
	Status InferenceGatewayConfigStatus `json:"status,omitempty"`
}

// +kubebuilder:object:root=true

// InferenceGatewayConfigList is a list of InferenceGatewayConfigs.
type InferenceGatewayConfigList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []InferenceGatewayConfig `json:"items"`
}

func init() {
	SchemeBuilder.Register(&InferenceGatewayConfig{}, &InferenceGatewayConfigList{})
}
