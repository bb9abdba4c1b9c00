package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// RegionName is a cloud region as the members report it, e.g. us-east-1.
// +kubebuilder:validation:MinLength=1
// +kubebuilder:validation:MaxLength=63
// +kubebuilder:validation:XValidation:rule="self.matches('^[a-z0-9]([-a-z0-9]*[a-z0-9])?$')",message="a region is lower-case letters, digits and dashes, e.g. us-east-1"
type RegionName string

// SecretKeyRef names a key of a Secret in the global gateway's namespace.
type SecretKeyRef struct {
	// Name of the Secret.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	Name string `json:"name"`

	// Key in the Secret.
	// +optional
	// +kubebuilder:default="token"
	// +kubebuilder:validation:MaxLength=253
	Key string `json:"key,omitempty"`
}

// GlobalMember is one member cluster: its inference gateway, where it is, and how the
// hub reads its summary.
type GlobalMember struct {
	// Name of the member, unique in the object; status and metrics use it.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	// +kubebuilder:validation:XValidation:rule="self.matches('^[a-z0-9]([-a-z0-9]*[a-z0-9])?$')",message="members[].name must be a DNS label: lower-case letters, digits and dashes"
	Name string `json:"name"`

	// Region the member's gateway runs in.
	Region RegionName `json:"region"`

	// Address of the member's inference gateway as host:port: where requests go.
	// +kubebuilder:validation:MaxLength=261
	// +kubebuilder:validation:XValidation:rule="self.matches('^[A-Za-z0-9.-]+:[0-9]{1,5}$') || self.matches('^\\\\[[0-9A-Fa-f:.]+\\\\]:[0-9]{1,5}$')",message="members[].address must be host:port (a DNS name or IP, and a port), e.g. gateway.use1.example.com:443"
	// +kubebuilder:validation:XValidation:rule="!self.matches('^.*:[0-9]{1,5}$') || int(self.substring(self.lastIndexOf(':') + 1)) >= 1 && int(self.substring(self.lastIndexOf(':') + 1)) <= 65535",message="the port in members[].address must be between 1 and 65535"
	Address string `json:"address"`

	// SummaryURL is where the member's pickers publish the summary the hub reads;
	// https://<address>/igw/v1/global-summary when unset.
	// +optional
	// +kubebuilder:validation:MaxLength=2048
	// +kubebuilder:validation:XValidation:rule="self.startsWith('https://') || self.startsWith('http://')",message="members[].summaryURL must be an http:// or https:// URL"
	SummaryURL string `json:"summaryURL,omitempty"`

	// CredentialsSecretRef holds the bearer token the member accepts for its summary. The
	// token itself never appears in this object.
	CredentialsSecretRef SecretKeyRef `json:"credentialsSecretRef"`

	// CASecretRef holds the CA bundle (PEM) that signs the member's serving certificate,
	// when it is not a public one.
	// +optional
	CASecretRef *SecretKeyRef `json:"caSecretRef,omitempty"`
}

// GlobalModel is a model served through the hub.
type GlobalModel struct {
	// Name clients send in the OpenAI "model" field.
	Name ModelName `json:"name"`

	// Regions pins the model to these regions (data residency): its requests are never
	// sent to a member elsewhere, failover included; with no member left there, clients
	// get a 503 saying why. Unset: any region.
	// +optional
	// +kubebuilder:validation:MaxItems=8
	// +listType=atomic
	// +kubebuilder:validation:XValidation:rule="self.all(r, self.exists_one(s, s == r))",message="models[].regions lists a region twice"
	Regions []RegionName `json:"regions,omitempty"`
}

// GlobalPolicy is a built-in global routing policy.
// +kubebuilder:validation:Enum=igw-global;global-blend
type GlobalPolicy string

const (
	// GlobalPolicyIGW ranks members by the time to first token predicted there, network
	// round trip and cached prefix included.
	GlobalPolicyIGW GlobalPolicy = "igw-global"
	// GlobalPolicyBlend is the four-weight blend: KV headroom, queue depth, region
	// proximity, error rate.
	GlobalPolicyBlend GlobalPolicy = "global-blend"
)

// GlobalRouting chooses how the hub picks a member.
// +kubebuilder:validation:XValidation:rule="!(has(self.configMapRef) && has(self.weights))",message="routing.configMapRef replaces the whole pipeline, so it cannot be combined with routing.weights: put the weights in the ConfigMap or drop configMapRef"
type GlobalRouting struct {
	// Policy the weights start from.
	// +optional
	// +kubebuilder:default=igw-global
	Policy GlobalPolicy `json:"policy,omitempty"`

	// Weights per scorer (member-predicted-ttft, member-prefix-locality, member-headroom,
	// member-error-rate, region-proximity, queue, kv-cache-utilization), in thousandths;
	// these replace the policy's weight for the scorers named.
	// +optional
	// +kubebuilder:validation:MaxProperties=16
	// +kubebuilder:validation:XValidation:rule="self.all(k, k in ['member-predicted-ttft', 'member-prefix-locality', 'member-headroom', 'member-error-rate', 'region-proximity', 'queue', 'kv-cache-utilization'])",message="routing.weights names an unknown scorer; known: member-predicted-ttft, member-prefix-locality, member-headroom, member-error-rate, region-proximity, queue, kv-cache-utilization"
	// +kubebuilder:validation:XValidation:rule="self.all(k, self[k] >= 0 && self[k] <= 1000)",message="routing.weights must be between 0 and 1000 (thousandths)"
	Weights map[string]int32 `json:"weights,omitempty"`

	// ConfigMapRef supplies a complete raw pipeline in the endpoint picker's schema,
	// with the global plugins, in the global gateway's namespace.
	// +optional
	ConfigMapRef *ConfigMapKeyRef `json:"configMapRef,omitempty"`
}

// RegionShaping shapes the traffic whose clients are in one region.
type RegionShaping struct {
	// Region of the clients (the hub's edge sets x-igw-client-region; else the hub's own).
	Region RegionName `json:"region"`

	// SpillOver lists, in order, the regions whose members take this region's requests
	// when its own members cannot (out of rotation, or no room); regions not listed are
	// not used. Unset: every region, nearest first.
	// +optional
	// +kubebuilder:validation:MaxItems=8
	// +listType=atomic
	SpillOver []RegionName `json:"spillOver,omitempty"`

	// MaxShare caps, in percent, the share of this region's requests sent out of the
	// region while its own members are in rotation.
	// +optional
	// +kubebuilder:validation:XValidation:rule="self >= 0 && self <= 100",message="regions[].maxShare is a percentage between 0 and 100"
	MaxShare *int32 `json:"maxShare,omitempty"`
}

// GlobalHealth tunes how the hub takes members out of rotation and back.
// +kubebuilder:validation:XValidation:rule="!has(self.probeInterval) || !has(self.probeTimeout) || duration(self.probeTimeout) <= duration(self.probeInterval)",message="health.probeTimeout must not exceed health.probeInterval"
// +kubebuilder:validation:XValidation:rule="!has(self.baseEjectionTime) || !has(self.maxEjectionTime) || duration(self.baseEjectionTime) <= duration(self.maxEjectionTime)",message="health.baseEjectionTime must not exceed health.maxEjectionTime"
type GlobalHealth struct {
	// ProbeInterval between summary fetches, each an active health check.
	// +optional
	// +kubebuilder:validation:XValidation:rule="duration(self) >= duration('100ms') && duration(self) <= duration('1m')",message="health.probeInterval must be between 100ms and 1m"
	ProbeInterval *metav1.Duration `json:"probeInterval,omitempty"`

	// ProbeTimeout of one summary fetch.
	// +optional
	// +kubebuilder:validation:XValidation:rule="duration(self) >= duration('50ms') && duration(self) <= duration('1m')",message="health.probeTimeout must be between 50ms and 1m"
	ProbeTimeout *metav1.Duration `json:"probeTimeout,omitempty"`

	// FailedProbes in a row that take a member out of rotation (and good ones that bring
	// it back).
	// +optional
	// +kubebuilder:validation:XValidation:rule="self >= 1 && self <= 10",message="health.failedProbes must be between 1 and 10"
	FailedProbes *int32 `json:"failedProbes,omitempty"`

	// ConsecutiveErrors of requests (5xx, resets, timeouts) that eject a member.
	// +optional
	// +kubebuilder:validation:XValidation:rule="self >= 1 && self <= 100",message="health.consecutiveErrors must be between 1 and 100"
	ConsecutiveErrors *int32 `json:"consecutiveErrors,omitempty"`

	// BaseEjectionTime of a first ejection; it doubles with each ejection in a row.
	// +optional
	// +kubebuilder:validation:XValidation:rule="duration(self) >= duration('100ms') && duration(self) <= duration('10m')",message="health.baseEjectionTime must be between 100ms and 10m"
	BaseEjectionTime *metav1.Duration `json:"baseEjectionTime,omitempty"`

	// MaxEjectionTime bounds the doubling.
	// +optional
	// +kubebuilder:validation:XValidation:rule="duration(self) >= duration('100ms') && duration(self) <= duration('1h')",message="health.maxEjectionTime must be between 100ms and 1h"
	MaxEjectionTime *metav1.Duration `json:"maxEjectionTime,omitempty"`

	// SlowStart is how long a member back in rotation takes to reach its full share.
	// +optional
	// +kubebuilder:validation:XValidation:rule="duration(self) >= duration('0s') && duration(self) <= duration('10m')",message="health.slowStart must be between 0s and 10m"
	SlowStart *metav1.Duration `json:"slowStart,omitempty"`
}

// GlobalInferenceGatewaySpec turns member clusters into one inference fabric.
// +kubebuilder:validation:XValidation:rule="self.models.all(m, !has(m.regions) || m.regions.all(r, self.members.exists(x, x.region == r)))",message="models[].regions names a region no member is in: add a member there or fix the region"
// +kubebuilder:validation:XValidation:rule="!has(self.regions) || self.regions.all(s, !has(s.spillOver) || s.spillOver.all(r, self.members.exists(x, x.region == r)))",message="regions[].spillOver names a region no member is in: add a member there or fix the region"
type GlobalInferenceGatewaySpec struct {
	// Namespace of the hub where the global picker runs and the Secrets live.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	// +operator-sdk:csv:customresourcedefinitions:type=spec,displayName="Namespace",xDescriptors={"urn:alm:descriptor:io.kubernetes:Namespace"}
	Namespace string `json:"namespace"`

	// Members are the member clusters' inference gateways.
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=32
	// +listType=atomic
	// +kubebuilder:validation:XValidation:rule="self.all(m, self.exists_one(n, n.name == m.name))",message="members lists a name twice; each member must appear once"
	// +kubebuilder:validation:XValidation:rule="self.all(m, self.exists_one(n, n.address == m.address))",message="members lists an address twice; two members cannot be the same gateway"
	// +operator-sdk:csv:customresourcedefinitions:type=spec,displayName="Member clusters",xDescriptors={"urn:alm:descriptor:com.tectonic.ui:arrayFieldGroup:Members"}
	Members []GlobalMember `json:"members"`

	// Models served through the hub.
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=32
	// +listType=atomic
	// +kubebuilder:validation:XValidation:rule="self.all(m, self.exists_one(n, n.name == m.name))",message="models lists a model twice; each model must appear once"
	// +operator-sdk:csv:customresourcedefinitions:type=spec,displayName="Models",xDescriptors={"urn:alm:descriptor:com.tectonic.ui:arrayFieldGroup:Models"}
	Models []GlobalModel `json:"models"`

	// Routing policy and weights.
	// +optional
	// +operator-sdk:csv:customresourcedefinitions:type=spec,displayName="Routing",xDescriptors={"urn:alm:descriptor:com.tectonic.ui:advanced"}
	Routing *GlobalRouting `json:"routing,omitempty"`

	// Regions shapes traffic per client region: spill-over order and caps.
	// +optional
	// +kubebuilder:validation:MaxItems=16
	// +listType=atomic
	// +kubebuilder:validation:XValidation:rule="self.all(s, self.exists_one(t, t.region == s.region))",message="regions lists a region twice"
	// +operator-sdk:csv:customresourcedefinitions:type=spec,displayName="Region shaping",xDescriptors={"urn:alm:descriptor:com.tectonic.ui:advanced"}
	Regions []RegionShaping `json:"regions,omitempty"`

	// Health tunes failure detection and return.
	// +optional
	// +operator-sdk:csv:customresourcedefinitions:type=spec,displayName="Health",xDescriptors={"urn:alm:descriptor:com.tectonic.ui:advanced"}
	Health *GlobalHealth `json:"health,omitempty"`

	// Picker settings of the global picker's pods.
	// +optional
	// +operator-sdk:csv:customresourcedefinitions:type=spec,displayName="Global picker",xDescriptors={"urn:alm:descriptor:com.tectonic.ui:advanced"}
	Picker *PodSettings `json:"picker,omitempty"`
}

// GlobalMemberStatus is what the hub sees of one member.
type GlobalMemberStatus struct {
	// Name of the member.
	// +kubebuilder:validation:MaxLength=63
	Name string `json:"name"`

	// Region of the member.
	// +kubebuilder:validation:MaxLength=63
	Region string `json:"region"`

	// Conditions: Reachable, SummaryValid, InRotation.
	// +optional
	// +listType=map
	// +listMapKey=type
	Conditions []metav1.Condition `json:"conditions,omitempty"`

	// LastSummaryTime is when the hub last received a valid summary.
	// +optional
	LastSummaryTime *metav1.Time `json:"lastSummaryTime,omitempty"`

	// RoundTrip is the hub's smoothed round trip to the member.
	// +optional
	RoundTrip *metav1.Duration `json:"roundTrip,omitempty"`
}

// GlobalInferenceGatewayStatus is the observed state of a GlobalInferenceGateway.
type GlobalInferenceGatewayStatus struct {
	// ObservedGeneration is the generation the status describes.
	// +optional
	// +operator-sdk:csv:customresourcedefinitions:type=status,displayName="Observed generation",xDescriptors={"urn:alm:descriptor:text"}
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`

	// Conditions: Accepted, Ready.
	// +optional
	// +listType=map
	// +listMapKey=type
	// +operator-sdk:csv:customresourcedefinitions:type=status,displayName="Conditions",xDescriptors={"urn:alm:descriptor:io.kubernetes.conditions"}
	Conditions []metav1.Condition `json:"conditions,omitempty"`

	// Members, one entry per member of the spec.
	// +optional
	// +kubebuilder:validation:MaxItems=32
	// +listType=map
	// +listMapKey=name
	// +operator-sdk:csv:customresourcedefinitions:type=status,displayName="Members",xDescriptors={"urn:alm:descriptor:text"}
	Members []GlobalMemberStatus `json:"members,omitempty"`

	// MemberCount is the number of members in the spec.
	// +optional
	// +operator-sdk:csv:customresourcedefinitions:type=status,displayName="Member count",xDescriptors={"urn:alm:descriptor:text"}
	MemberCount int32 `json:"memberCount"`

	// MembersInRotation is the number of members that take requests now.
	// +optional
	// +operator-sdk:csv:customresourcedefinitions:type=status,displayName="Members in rotation",xDescriptors={"urn:alm:descriptor:text"}
	MembersInRotation int32 `json:"membersInRotation"`
}

// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:scope=Cluster,shortName=gig,categories=igw
// +kubebuilder:printcolumn:name="Members",type=integer,JSONPath=`.status.memberCount`
// +kubebuilder:printcolumn:name="In rotation",type=integer,JSONPath=`.status.membersInRotation`
// +kubebuilder:printcolumn:name="Models",type=string,JSONPath=`.spec.models[*].name`
// +kubebuilder:printcolumn:name="Ready",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].status`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`

// +operator-sdk:csv:customresourcedefinitions:displayName="Global Inference Gateway",resources={{Deployment,v1,""},{ConfigMap,v1,""},{Service,v1,""},{HTTPRoute,v1,""},{Backend,v1alpha1,""},{BackendTrafficPolicy,v1alpha1,""},{EnvoyExtensionPolicy,v1alpha1,""}}
// GlobalInferenceGateway, in a hub cluster, routes each request to one of several member
// clusters' inference gateways: the cluster that will answer first, with its prefix
// cache, region pins and health taken into account.
type GlobalInferenceGateway struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   GlobalInferenceGatewaySpec   `json:"spec"`
	Status GlobalInferenceGatewayStatus `json:"status,omitempty"`
}

// +kubebuilder:object:root=true

// GlobalInferenceGatewayList contains a list of GlobalInferenceGateway.
type GlobalInferenceGatewayList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []GlobalInferenceGateway `json:"items"`
}

func init() {
	SchemeBuilder.Register(&GlobalInferenceGateway{}, &GlobalInferenceGatewayList{})
}
