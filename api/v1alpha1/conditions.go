package v1alpha1

import metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

// GetConditions returns the route's status conditions, so that code may
// handle every igw kind's conditions alike.
func (m *ModelRoute) GetConditions() []metav1.Condition { return m.Status.Conditions }

// GetConditions returns the config's status conditions.
func (c *InferenceGatewayConfig) GetConditions() []metav1.Condition { return c.Status.Conditions }

// GetConditions returns the gateway's status conditions.
func (g *GlobalInferenceGateway) GetConditions() []metav1.Condition { return g.Status.Conditions }

// Condition types. Each condition carries the observedGeneration it was
// computed for; a status stays Unknown until the operator could observe what
// the condition says.
const (
	// ConditionAccepted says the object is valid and taken into account (both kinds).
	ConditionAccepted = "Accepted"
	// ConditionReady says the data path works end to end (both kinds).
	ConditionReady = "Ready"
	// ConditionResolvedRefs says every reference of a ModelRoute resolves and every child is applied.
	ConditionResolvedRefs = "ResolvedRefs"
	// ConditionDegraded says a ready ModelRoute runs short of endpoints or picker replicas.
	ConditionDegraded = "Degraded"
	// ConditionGatewayProgrammed says an InferenceGatewayConfig's Gateway reports Programmed.
	ConditionGatewayProgrammed = "GatewayProgrammed"
	// ConditionBBRReady says an InferenceGatewayConfig's body-based router is available, or off.
	ConditionBBRReady = "BBRReady"
	// ConditionExtensionHookActive says Envoy Gateway called igw's extension
	// hook after the operator last changed an InferenceGatewayConfig's
	// children (Envoy Gateway configs only; absent on native gateways and when
	// the operator runs without the extension server). Without the hook, requests
	// are served without the pickers.
	ConditionExtensionHookActive = "ExtensionHookActive"

	// Conditions of each member in a GlobalInferenceGateway's status.members,
	// as the global picker reports them; Unknown while it cannot say.

	// ConditionReachable says the hub's last summary fetch from the member got an answer.
	ConditionReachable = "Reachable"
	// ConditionSummaryValid says the member's last summary decoded and passed the checks.
	ConditionSummaryValid = "SummaryValid"
	// ConditionInRotation says the hub sends the member requests now (slow start included).
	ConditionInRotation = "InRotation"
)

// Reasons of the conditions. Each names what to look at; the condition's
// message says what to do.
const (
	// ReasonAccepted: the object is valid (Accepted True).
	ReasonAccepted = "Accepted"
	// ReasonResolvedRefs: every reference resolved and every child is applied (ResolvedRefs True).
	ReasonResolvedRefs = "ResolvedRefs"
	// ReasonReady: the data path works (Ready True).
	ReasonReady = "Ready"
	// ReasonAsExpected: nothing is degraded (Degraded False).
	ReasonAsExpected = "AsExpected"

	// ReasonConfigNotFound: a ModelRoute's spec.configRef names no
	// InferenceGatewayConfig in its namespace, or a GlobalInferenceGateway's
	// spec.namespace has none (or several) whose Gateway its routes can attach to.
	ReasonConfigNotFound = "ConfigNotFound"
	// ReasonInvalidSpec: the API server accepted a GlobalInferenceGateway
	// that no data path can serve (Accepted False); the message says what to change.
	ReasonInvalidSpec = "InvalidSpec"
	// ReasonSecretNotFound: a Secret a GlobalInferenceGateway member names
	// (credentialsSecretRef, caSecretRef) does not exist in spec.namespace.
	ReasonSecretNotFound = "SecretNotFound"
	// ReasonCRDsMissing: the API server does not serve a kind the object needs
	// (Gateway API, the inference extension or Envoy Gateway is not installed).
	ReasonCRDsMissing = "CRDsMissing"
	// ReasonGatewayNotFound: the Gateway the config names does not exist (yet).
	ReasonGatewayNotFound = "GatewayNotFound"
	// ReasonConfigMapNotFound: spec.scoring.configMapRef names no ConfigMap.
	ReasonConfigMapNotFound = "ConfigMapNotFound"
	// ReasonConfigMapKeyMissing: the ConfigMap of spec.scoring.configMapRef lacks the key.
	ReasonConfigMapKeyMissing = "ConfigMapKeyMissing"
	// ReasonConfigMapUnreadable: the ConfigMap of spec.scoring.configMapRef
	// could not be read (for example, access denied); the operator retries
	// with backoff and the picker keeps its last good configuration.
	ReasonConfigMapUnreadable = "ConfigMapUnreadable"
	// ReasonInvalidEPPConfig: the ConfigMap's content is not a configuration the picker accepts.
	ReasonInvalidEPPConfig = "InvalidEPPConfig"
	// ReasonNameConflict: a child's name is taken by an object the operator does not own.
	ReasonNameConflict = "NameConflict"
	// ReasonApplyFailed: writing or deleting a child failed; the operator retries with backoff.
	ReasonApplyFailed = "ApplyFailed"
	// ReasonReconcileError: the operator could not read or write what the
	// condition depends on; the message holds the error, and it retries with
	// backoff (the condition is Unknown meanwhile).
	ReasonReconcileError = "ReconcileError"
	// ReasonCleanupFailed: deleting an InferenceGatewayConfig's children beside
	// a Gateway in another namespace failed, so the config stays until a retry succeeds.
	ReasonCleanupFailed = "CleanupFailed"

	// ReasonRefsNotResolved: Ready is False because ResolvedRefs is.
	ReasonRefsNotResolved = "RefsNotResolved"
	// ReasonNoMatchingPods: no Pod matches the ModelRoute's selector.
	ReasonNoMatchingPods = "NoMatchingPods"
	// ReasonNoReadyEndpoints: Pods match, but none is Ready with an IP.
	ReasonNoReadyEndpoints = "NoReadyEndpoints"
	// ReasonEndpointPickerUnavailable: the picker Deployment has no available replica.
	ReasonEndpointPickerUnavailable = "EndpointPickerUnavailable"
	// ReasonEndpointPickerDegraded: fewer picker replicas are available than expected.
	ReasonEndpointPickerDegraded = "EndpointPickerDegraded"
	// ReasonEndpointsNotReady: some of the route's endpoints are not ready.
	ReasonEndpointsNotReady = "EndpointsNotReady"

	// ReasonNoMemberInRotation: the global picker runs but takes no member
	// (Ready False); each member's conditions say why.
	ReasonNoMemberInRotation = "NoMemberInRotation"
	// ReasonPickerStatusUnreadable: the global picker's GET /status did not
	// answer with its JSON document; the member conditions are Unknown.
	ReasonPickerStatusUnreadable = "PickerStatusUnreadable"
	// ReasonMemberNotReported: the global picker's status lists no such member
	// (its config has not reloaded yet); the member's conditions are Unknown.
	ReasonMemberNotReported = "MemberNotReported"
	// ReasonSummaryFetched, ReasonUnreachable: Reachable True, False.
	ReasonSummaryFetched = "SummaryFetched"
	ReasonUnreachable    = "Unreachable"
	// ReasonSummaryValid, ReasonInvalidSummary: SummaryValid True, False.
	ReasonSummaryValid   = "Valid"
	ReasonInvalidSummary = "InvalidSummary"
	// ReasonInRotation, ReasonOutOfRotation: InRotation True, False; the
	// message carries the picker's reason (ejection, failed probes, slow start).
	ReasonInRotation    = "InRotation"
	ReasonOutOfRotation = "OutOfRotation"

	// ReasonProgrammed: the config's Gateway is programmed.
	ReasonProgrammed = "Programmed"
	// ReasonGatewayNotProgrammed: the config's Gateway is not (yet) programmed by its controller.
	ReasonGatewayNotProgrammed = "GatewayNotProgrammed"
	// ReasonBBRDisabled: the body-based router is off (BBRReady True).
	ReasonBBRDisabled = "Disabled"
	// ReasonBBRUnavailable: the body-based router Deployment has no available replica.
	ReasonBBRUnavailable = "BBRUnavailable"
	// ReasonBBRAvailable: the body-based router has available replicas.
	ReasonBBRAvailable = "Available"

	// ReasonHookCalled: Envoy Gateway called the extension hook after the last change (ExtensionHookActive True).
	ReasonHookCalled = "HookCalled"
	// ReasonAwaitingHookCall: the children changed and the operator waits,
	// up to its --extension-hook-bound, for Envoy Gateway to call the hook
	// (ExtensionHookActive Unknown); the condition's lastTransitionTime is the change.
	ReasonAwaitingHookCall = "AwaitingHookCall"
	// ReasonHookNotCalled: Envoy Gateway did not call the hook within the
	// bound after a change (ExtensionHookActive False); the message says what
	// to set in Envoy Gateway's extensionManager.
	ReasonHookNotCalled = "HookNotCalled"
)
