package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Engine is the model server software of the pool's pods; it decides which metric
// names the endpoint picker reads.
// +kubebuilder:validation:Enum=vllm;sglang;trtllm
type Engine string

const (
	EngineVLLM   Engine = "vllm"
	EngineSGLang Engine = "sglang"
	EngineTRTLLM Engine = "trtllm"
)

// ModelName is a name clients send in the OpenAI "model" field.
// +kubebuilder:validation:MinLength=1
// +kubebuilder:validation:MaxLength=253
// +kubebuilder:validation:XValidation:rule="!self.matches('[\\\\s,]')",message="model names must not contain whitespace or commas"
type ModelName string

// LoRAAdapter is an adapter the pool's model servers can serve.
type LoRAAdapter struct {
	// Name clients send in the "model" field to use the adapter.
	Name ModelName `json:"name"`

	// BaseModel is the served model the adapter applies to. It may be omitted when the
	// route serves exactly one model.
	// +optional
	BaseModel ModelName `json:"baseModel,omitempty"`

	// Source the model server loads the adapter from (a path or URI as the engine takes it).
	// +optional
	// +kubebuilder:validation:MaxLength=2048
	Source string `json:"source,omitempty"`
}

// ModelServerSelector selects the model server pods of the pool.
type ModelServerSelector struct {
	// MatchLabels the pods must carry.
	// +kubebuilder:validation:MaxProperties=32
	// +kubebuilder:validation:XValidation:rule="size(self) > 0",message="selector.matchLabels must name at least one label, or the pool would take every pod in the namespace"
	MatchLabels map[string]string `json:"matchLabels"`
}

// TargetPort is a port on which the model servers answer.
type TargetPort struct {
	// Number of the port.
	// +kubebuilder:validation:XValidation:rule="self >= 1 && self <= 65535",message="targetPorts[].number must be between 1 and 65535"
	Number int32 `json:"number"`
}

// ConfigMapKeyRef names a key of a ConfigMap in the route's namespace.
type ConfigMapKeyRef struct {
	// Name of the ConfigMap.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	Name string `json:"name"`

	// Key holding the EPP configuration YAML.
	// +optional
	// +kubebuilder:default="config.yaml"
	// +kubebuilder:validation:MaxLength=253
	Key string `json:"key,omitempty"`
}

// ModelScoring overrides the config's scoring for one model.
// +kubebuilder:validation:XValidation:rule="!(has(self.configMapRef) && has(self.weights))",message="scoring.configMapRef replaces the whole EPP configuration, so it cannot be combined with scoring.weights: put the weights in the ConfigMap or drop configMapRef"
// +kubebuilder:validation:XValidation:rule="!(has(self.configMapRef) && has(self.autoTune) && self.autoTune)",message="scoring.autoTune cannot adjust a raw EPP configuration from scoring.configMapRef: drop one of them"
type ModelScoring struct {
	// Weights per scorer; these win over the config's weights and over auto-tuning.
	// +optional
	Weights ScoringWeights `json:"weights,omitempty"`

	// ConfigMapRef supplies a complete raw EPP configuration instead of rendered weights.
	// +optional
	ConfigMapRef *ConfigMapKeyRef `json:"configMapRef,omitempty"`

	// AutoTune overrides the config's autoTune for this model.
	// +optional
	AutoTune *bool `json:"autoTune,omitempty"`
}

// EPPOverrides overrides the config's endpoint picker defaults for one model.
type EPPOverrides struct {
	PodSettings `json:",inline"`

	// FailureMode applies when the endpoint picker is unreachable, fails or times out.
	// FailClose rejects the request (Envoy Gateway answers 5xx): a picker outage is a model outage.
	// FailOpen serves it by least request over the pool's ready pods, without cache, LoRA or
	// load-aware picking or shedding; on Envoy Gateway the picker then gets the request body
	// buffered and the response chunk by chunk.
	// +optional
	// +operator-sdk:csv:customresourcedefinitions:type=spec,displayName="Failure mode",xDescriptors={"urn:alm:descriptor:com.tectonic.ui:select:FailOpen","urn:alm:descriptor:com.tectonic.ui:select:FailClose"}
	FailureMode FailureMode `json:"failureMode,omitempty"`
}

// ObjectName is the name of an object in the same namespace.
type ObjectName struct {
	// Name of the object.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	Name string `json:"name"`
}

// RouteSLO is what a route promises its requests, in the endpoint picker's
// terms (its configuration's admission.slo): the time to the first token and
// between tokens. The picker's overload bounds follow it: a request is shed
// (429) when every pod would make it wait more than three quarters of
// ttftSeconds for its first token, or give it tokens more than 0.65 of
// tpotSeconds apart (up to 0.9 of it on a pod whose slow streams are learned
// to run close to its mean). Numbers of seconds, so that a promise such as 0.05 s
// between tokens is written as the picker's configuration writes it.
type RouteSLO struct {
	// TTFTSeconds is the time to the first token the route promises, in seconds.
	// +kubebuilder:validation:XValidation:rule="self > 0.0 && self <= 3600.0",message="slo.ttftSeconds must be more than 0 and at most 3600 seconds, for example 2 for an interactive route"
	// +operator-sdk:csv:customresourcedefinitions:type=spec,displayName="Time to first token (s)",xDescriptors={"urn:alm:descriptor:com.tectonic.ui:number"}
	TTFTSeconds float64 `json:"ttftSeconds"`

	// TPOTSeconds is the time per output token (between tokens) the route promises, in seconds.
	// +kubebuilder:validation:XValidation:rule="self > 0.0 && self <= 60.0",message="slo.tpotSeconds must be more than 0 and at most 60 seconds, for example 0.1 (ten tokens a second)"
	// +operator-sdk:csv:customresourcedefinitions:type=spec,displayName="Time per output token (s)",xDescriptors={"urn:alm:descriptor:com.tectonic.ui:number"}
	TPOTSeconds float64 `json:"tpotSeconds"`
}

// ModelRouteSpec is one model (with its adapters) served by a pool of model server pods.
// +kubebuilder:validation:XValidation:rule="!has(self.adapters) || self.adapters.all(a, !(a.name in self.models))",message="an adapter name must differ from every served model name; rename the adapter or drop the model"
// +kubebuilder:validation:XValidation:rule="!has(self.adapters) || size(self.models) == 1 || self.adapters.all(a, has(a.baseModel))",message="adapters[].baseModel is required when the route serves more than one model: name the model each adapter applies to"
// +kubebuilder:validation:XValidation:rule="!has(self.adapters) || self.adapters.all(a, !has(a.baseModel) || a.baseModel in self.models)",message="adapters[].baseModel must be one of spec.models"
type ModelRouteSpec struct {
	// ConfigRef is the InferenceGatewayConfig (same namespace) this model is served through.
	// +operator-sdk:csv:customresourcedefinitions:type=spec,displayName="InferenceGatewayConfig",xDescriptors={"urn:alm:descriptor:com.tectonic.ui:text"}
	ConfigRef ObjectName `json:"configRef"`

	// Models are the names clients send in the OpenAI "model" field for the base model.
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=16
	// +listType=atomic
	// +kubebuilder:validation:XValidation:rule="self.all(m, self.exists_one(n, n == m))",message="spec.models lists a model name twice; each served name must appear once"
	// +operator-sdk:csv:customresourcedefinitions:type=spec,displayName="Served model names",xDescriptors={"urn:alm:descriptor:com.tectonic.ui:text"}
	Models []ModelName `json:"models"`

	// Adapters are the LoRA adapters served on top of the models.
	// +optional
	// +kubebuilder:validation:MaxItems=64
	// +listType=atomic
	// +kubebuilder:validation:XValidation:rule="self.all(a, self.exists_one(b, b.name == a.name))",message="spec.adapters lists an adapter name twice; each adapter must appear once"
	// +operator-sdk:csv:customresourcedefinitions:type=spec,displayName="LoRA adapters",xDescriptors={"urn:alm:descriptor:com.tectonic.ui:arrayFieldGroup:Adapters"}
	Adapters []LoRAAdapter `json:"adapters,omitempty"`

	// Selector of the model server pods.
	// +operator-sdk:csv:customresourcedefinitions:type=spec,displayName="Model server pods",xDescriptors={"urn:alm:descriptor:com.tectonic.ui:selector:core:v1:Pod"}
	Selector ModelServerSelector `json:"selector"`

	// TargetPorts on which the model servers answer; each ready pod is one endpoint per port.
	// +optional
	// +kubebuilder:default={{number: 8000}}
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=8
	// +listType=atomic
	// +kubebuilder:validation:XValidation:rule="self.all(p, self.exists_one(q, q.number == p.number))",message="spec.targetPorts lists a port twice"
	// +operator-sdk:csv:customresourcedefinitions:type=spec,displayName="Model server ports",xDescriptors={"urn:alm:descriptor:com.tectonic.ui:arrayFieldGroup:Ports"}
	TargetPorts []TargetPort `json:"targetPorts,omitempty"`

	// Engine of the model servers.
	// +optional
	// +kubebuilder:default=vllm
	// +operator-sdk:csv:customresourcedefinitions:type=spec,displayName="Engine",xDescriptors={"urn:alm:descriptor:com.tectonic.ui:select:vllm","urn:alm:descriptor:com.tectonic.ui:select:sglang","urn:alm:descriptor:com.tectonic.ui:select:trtllm"}
	Engine Engine `json:"engine,omitempty"`

	// Scoring overrides for this model.
	// +optional
	// +operator-sdk:csv:customresourcedefinitions:type=spec,displayName="Scoring overrides",xDescriptors={"urn:alm:descriptor:com.tectonic.ui:advanced"}
	Scoring *ModelScoring `json:"scoring,omitempty"`

	// EPP overrides for this model's endpoint picker.
	// +optional
	// +operator-sdk:csv:customresourcedefinitions:type=spec,displayName="Endpoint picker overrides",xDescriptors={"urn:alm:descriptor:com.tectonic.ui:advanced"}
	EPP *EPPOverrides `json:"epp,omitempty"`

	// RequestTimeout bounds a whole request at the gateway; unbounded when unset.
	// +optional
	// +kubebuilder:validation:XValidation:rule="duration(self) >= duration('1s') && duration(self) <= duration('24h')",message="requestTimeout must be between 1s and 24h"
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:MaxLength=32
	// +kubebuilder:validation:XValidation:rule="self.matches('^([0-9]+(h|m|ms)|[0-9]+([.][0-9]{1,3})?s)+$')",message="requestTimeout must be whole milliseconds, the finest unit of a Gateway API duration: use h, m, s and ms with at most 3 decimals on seconds only, for example 1500ms, 1.5s or 1m30s"
	// +operator-sdk:csv:customresourcedefinitions:type=spec,displayName="Request timeout",xDescriptors={"urn:alm:descriptor:com.tectonic.ui:text"}
	RequestTimeout *metav1.Duration `json:"requestTimeout,omitempty"`

	// SLO is the route's latency promise. The endpoint picker sheds load that
	// would break it; unset, it assumes 2 s to the first token and 0.1 s
	// between tokens. A raw configuration (scoring.configMapRef) that names
	// its own admission.slo keeps it.
	// +optional
	// +operator-sdk:csv:customresourcedefinitions:type=spec,displayName="Latency SLO",xDescriptors={"urn:alm:descriptor:com.tectonic.ui:advanced"}
	SLO *RouteSLO `json:"slo,omitempty"`
}

// RolloutState summarises the model's data path.
// +kubebuilder:validation:Enum=Pending;Progressing;Available;Degraded
type RolloutState string

const (
	RolloutPending     RolloutState = "Pending"
	RolloutProgressing RolloutState = "Progressing"
	RolloutAvailable   RolloutState = "Available"
	RolloutDegraded    RolloutState = "Degraded"
)

// ScoringAdjustment is one change the operator made to the weights, and why.
type ScoringAdjustment struct {
	// Scorer whose weight changed.
	Scorer string `json:"scorer"`
	// Weight now in effect.
	Weight int32 `json:"weight"`
	// Reason in words, naming the observation.
	Reason string `json:"reason"`
}

// ScoringStatus is the scoring the model's endpoint picker runs with.
type ScoringStatus struct {
	// Source of the configuration: Rendered (weights) or ConfigMap (raw).
	// +optional
	Source string `json:"source,omitempty"`
	// Weights in effect.
	// +optional
	Weights map[string]int32 `json:"weights,omitempty"`
	// Adjustments auto-tuning made.
	// +optional
	// +listType=atomic
	Adjustments []ScoringAdjustment `json:"adjustments,omitempty"`
}

// ModelRouteStatus is the observed state of a ModelRoute.
type ModelRouteStatus struct {
	// ObservedGeneration is the generation the status describes.
	// +optional
	// +operator-sdk:csv:customresourcedefinitions:type=status,displayName="Observed generation",xDescriptors={"urn:alm:descriptor:text"}
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`

	// Conditions: Accepted, ResolvedRefs, Ready, Degraded.
	// +optional
	// +listType=map
	// +listMapKey=type
	// +operator-sdk:csv:customresourcedefinitions:type=status,displayName="Conditions",xDescriptors={"urn:alm:descriptor:io.kubernetes.conditions"}
	Conditions []metav1.Condition `json:"conditions,omitempty"`

	// ReadyEndpoints is the number of ready pod:port endpoints.
	// +optional
	// +operator-sdk:csv:customresourcedefinitions:type=status,displayName="Ready endpoints",xDescriptors={"urn:alm:descriptor:text"}
	ReadyEndpoints int32 `json:"readyEndpoints"`

	// TotalEndpoints is the number of pod:port endpoints the selector matches.
	// +optional
	// +operator-sdk:csv:customresourcedefinitions:type=status,displayName="Endpoints",xDescriptors={"urn:alm:descriptor:text"}
	TotalEndpoints int32 `json:"totalEndpoints"`

	// InferencePool is the name of the pool created for the route.
	// +optional
	// +operator-sdk:csv:customresourcedefinitions:type=status,displayName="InferencePool",xDescriptors={"urn:alm:descriptor:text"}
	InferencePool string `json:"inferencePool,omitempty"`

	// Scoring in effect, and why.
	// +optional
	// +operator-sdk:csv:customresourcedefinitions:type=status,displayName="Scoring in effect",xDescriptors={"urn:alm:descriptor:text"}
	Scoring *ScoringStatus `json:"scoring,omitempty"`

	// Rollout state of the data path.
	// +optional
	// +operator-sdk:csv:customresourcedefinitions:type=status,displayName="Rollout",xDescriptors={"urn:alm:descriptor:text"}
	Rollout RolloutState `json:"rollout,omitempty"`
}

// +kubebuilder:validation:XValidation:rule="self.metadata.name.matches('^[a-z]([-a-z0-9]*[a-z0-9])?$')",message="a ModelRoute's name must be lowercase letters, digits and '-', starting with a letter and ending with a letter or digit, because its Services are named after it: for example llama-3-8b rather than llama.3.8b or 8b"
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:shortName=mr,categories=igw
// +kubebuilder:printcolumn:name="Models",type=string,JSONPath=`.spec.models`
// +kubebuilder:printcolumn:name="Config",type=string,JSONPath=`.spec.configRef.name`
// +kubebuilder:printcolumn:name="Endpoints",type=integer,JSONPath=`.status.readyEndpoints`,description="Ready endpoints"
// +kubebuilder:printcolumn:name="Total",type=integer,JSONPath=`.status.totalEndpoints`,priority=1
// +kubebuilder:printcolumn:name="Ready",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].status`
// +kubebuilder:printcolumn:name="Rollout",type=string,JSONPath=`.status.rollout`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`

// +operator-sdk:csv:customresourcedefinitions:displayName="Model Route",resources={{InferencePool,v1,""},{HTTPRoute,v1,""},{Deployment,v1,""},{Service,v1,""},{ConfigMap,v1,""},{ServiceAccount,v1,""},{Role,v1,""},{RoleBinding,v1,""},{BackendTrafficPolicy,v1alpha1,""},{EnvoyExtensionPolicy,v1alpha1,""},{BackendTLSPolicy,v1,""},{NetworkPolicy,v1,""}}
// ModelRoute serves one model, and its LoRA adapters, from a pool of model server pods
// through the gateway of an InferenceGatewayConfig.
type ModelRoute struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   ModelRouteSpec   `json:"spec"`
	Status ModelRouteStatus `json:"status,omitempty"`
}

// +kubebuilder:object:root=true

// ModelRouteList is a list of ModelRoutes.
type ModelRouteList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []ModelRoute `json:"items"`
}

func init() {
	SchemeBuilder.Register(&ModelRoute{}, &ModelRouteList{})
}
