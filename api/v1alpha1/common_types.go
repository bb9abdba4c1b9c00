package v1alpha1

import (
	corev1 "k8s.io/api/core/v1"
)

// FailureMode says what the gateway does with a request when the endpoint picker cannot answer
// (unreachable, an error, or past its message timeout).
// +kubebuilder:validation:Enum=FailOpen;FailClose
type FailureMode string

const (
	// FailOpen sends the request on unpicked, to an endpoint chosen by the proxy's own load
	// balancer among the pool's ready pods (least request on Envoy Gateway). While the picker is
	// down there is no prefix-cache, LoRA or load-aware picking, no admission control and no
	// learning. On Envoy Gateway it costs the picker's full-duplex streaming: the request body is
	// buffered in Envoy before the pick, and each response chunk waits for the picker's reply.
	FailOpen FailureMode = "FailOpen"
	// FailClose rejects the request (Envoy answers 500, 504 on a timeout): a picker outage is an outage of
	// its model.
	FailClose FailureMode = "FailClose"
)

// Scorer names that weights may be given for. They are the EPP's scorer plugin types.
const (
	ScorerQueue              = "queue"
	ScorerKVCacheUtilization = "kv-cache-utilization"
	ScorerRunningRequests    = "running-requests"
	ScorerPrefixCache        = "prefix-cache"
	ScorerLoRAAffinity       = "lora-affinity"
	ScorerPredictedLatency   = "predicted-latency"
)

// Scorers lists every scorer name in the order the EPP configuration renders them.
var Scorers = []string{
	ScorerQueue, ScorerKVCacheUtilization, ScorerRunningRequests,
	ScorerPrefixCache, ScorerLoRAAffinity, ScorerPredictedLatency,
}

// ScoringWeights maps a scorer name to its weight. A weight of 0 turns the scorer off.
// +kubebuilder:validation:MaxProperties=16
// +kubebuilder:validation:XValidation:rule="self.all(k, k in ['queue', 'kv-cache-utilization', 'running-requests', 'prefix-cache', 'lora-affinity', 'predicted-latency'])",message="unknown scorer in weights: use queue, kv-cache-utilization, running-requests, prefix-cache, lora-affinity or predicted-latency"
// +kubebuilder:validation:XValidation:rule="self.all(k, self[k] >= 0 && self[k] <= 100)",message="scoring weights must be between 0 and 100; use 0 to turn a scorer off"
type ScoringWeights map[string]int32

// PodSettings are scheduling and sizing settings for the pods the operator runs.
type PodSettings struct {
	// Replicas of the Deployment. More than one endpoint picker runs active-passive: the
	// replicas elect a leader through a Lease, only the leader serves, the others stay warm
	// and take over when it goes.
	// +optional
	// +kubebuilder:validation:XValidation:rule="self >= 0 && self <= 50",message="replicas must be between 0 and 50"
	// +operator-sdk:csv:customresourcedefinitions:type=spec,displayName="Replicas",xDescriptors={"urn:alm:descriptor:com.tectonic.ui:podCount"}
	Replicas *int32 `json:"replicas,omitempty"`

	// Image overrides the operator's default image for this component.
	// +optional
	// +kubebuilder:validation:MaxLength=512
	Image string `json:"image,omitempty"`

	// Resources of the component's container.
	// +optional
	// +operator-sdk:csv:customresourcedefinitions:type=spec,displayName="Resources",xDescriptors={"urn:alm:descriptor:com.tectonic.ui:resourceRequirements"}
	Resources *corev1.ResourceRequirements `json:"resources,omitempty"`
}

// PodPlacement places the operator-managed pods (BBR, EPP) on nodes.
type PodPlacement struct {
	// NodeSelector for every operator-managed pod.
	// +optional
	NodeSelector map[string]string `json:"nodeSelector,omitempty"`

	// Tolerations for every operator-managed pod.
	// +optional
	// +listType=atomic
	Tolerations []corev1.Toleration `json:"tolerations,omitempty"`

	// Resources used when a component sets none.
	// +optional
	Resources *corev1.ResourceRequirements `json:"resources,omitempty"`
}
