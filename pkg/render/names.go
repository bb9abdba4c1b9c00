package render

import (
	"crypto/sha256"
	"encoding/hex"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	igwv1 "github.com/igw-dev/igw/api/v1alpha1"
)

// Labels every child carries. The set is the same on every child of one owner,
// so `kubectl get all,httproutes,inferencepools -l gateway.igw.dev/model-route=NAME`
// lists a model's whole data path.
const (
	LabelManagedBy  = "app.kubernetes.io/managed-by"
	LabelPartOf     = "app.kubernetes.io/part-of"
	LabelName       = "app.kubernetes.io/name"
	LabelInstance   = "app.kubernetes.io/instance"
	LabelConfig     = "gateway.igw.dev/config"
	LabelModelRoute = "gateway.igw.dev/model-route"
	// LabelConfigNamespace marks children that live outside their config's
	// namespace (policies attached to a Gateway elsewhere): no owner reference can
	// point across namespaces, so the operator finds and deletes them by label.
	LabelConfigNamespace = "gateway.igw.dev/config-namespace"

	ManagedByValue = "igw-operator"
	PartOfValue    = "igw"

	// Values of LabelName on the pods the operator runs.
	NameEPP = "igw-epp"
	NameBBR = "igw-bbr"
)

// Name suffixes. The Envoy Gateway extension recognises igw's ext_proc filters by
// the names of the EnvoyExtensionPolicies that produce them, so those two
// suffixes are part of the contract with pkg/egext.
const (
	SuffixEPP            = "-epp"
	SuffixPool           = "-pool"
	SuffixBBR            = "-bbr"
	SuffixEPPPolicy      = "-igw-epp"
	SuffixBBRPolicy      = "-igw-bbr"
	SuffixCatchAll       = "-catch-all"
	SuffixModelList      = "-model-list"
	SuffixModelNotFound  = "-model-not-found"
	SuffixBufferLimit    = "-igw-buffer"
	SuffixAuth           = "-igw-auth"
	SuffixAdapterMapping = "-bbr-adapters"
	SuffixReferenceGrant = "-igw-bbr"
	maxNameLength        = 63
	hashLength           = 8
)

// ChildName is owner+suffix when that fits in a DNS label (63 characters, what
// Service names and label values allow); otherwise the owner part is cut and a
// short hash of the full owner name keeps names of different owners apart.
func ChildName(owner, suffix string) string {
	if len(owner)+len(suffix) <= maxNameLength {
		return owner + suffix
	}
	sum := sha256.Sum256([]byte(owner))
	h := hex.EncodeToString(sum[:])[:hashLength]
	keep := maxNameLength - len(suffix) - hashLength - 1
	cut := owner[:keep]
	for len(cut) > 0 && (cut[len(cut)-1] == '-' || cut[len(cut)-1] == '.') {
		cut = cut[:len(cut)-1]
	}
	return cut + "-" + h + suffix
}

// LabelValue is a name shortened to what a label value allows.
func LabelValue(name string) string { return ChildName(name, "") }

// Names of a ModelRoute's children.
type RouteNames struct {
	Pool, PoolService, EPP, HTTPRoute, TrafficPolicy, EPPPolicy string
}

// NamesForRoute returns the child names of the route called name.
func NamesForRoute(name string) RouteNames {
	return RouteNames{
		// The pool keeps the route's name: `kubectl get inferencepools` then lists models.
		Pool:          name,
		PoolService:   ChildName(name, SuffixPool),
		EPP:           ChildName(name, SuffixEPP),
		HTTPRoute:     name,
		TrafficPolicy: name,
		EPPPolicy:     ChildName(name, SuffixEPPPolicy),
	}
}

// Names of an InferenceGatewayConfig's children.
type ConfigNames struct {
	BBR, AdapterMapping, BBRPolicy, ReferenceGrant, CatchAll, ModelList, ModelNotFound, BufferLimit, Auth, ManagedGateway string
}

// NamesForConfig returns the child names of the config called name.
func NamesForConfig(name string) ConfigNames {
	return ConfigNames{
		BBR:            ChildName(name, SuffixBBR),
		AdapterMapping: ChildName(name, SuffixAdapterMapping),
		BBRPolicy:      ChildName(name, SuffixBBRPolicy),
		ReferenceGrant: ChildName(name, SuffixReferenceGrant),
		CatchAll:       ChildName(name, SuffixCatchAll),
		ModelList:      ChildName(name, SuffixModelList),
		ModelNotFound:  ChildName(name, SuffixModelNotFound),
		BufferLimit:    ChildName(name, SuffixBufferLimit),
		Auth:           ChildName(name, SuffixAuth),
		ManagedGateway: LabelValue(name),
	}
}

// RouteLabels are the labels of every child of a ModelRoute.
func RouteLabels(mr *igwv1.ModelRoute) map[string]string {
	return map[string]string{
		LabelManagedBy:  ManagedByValue,
		LabelPartOf:     PartOfValue,
		LabelConfig:     LabelValue(mr.Spec.ConfigRef.Name),
		LabelModelRoute: LabelValue(mr.Name),
	}
}

// ConfigLabels are the labels of every child of an InferenceGatewayConfig.
func ConfigLabels(cfg *igwv1.InferenceGatewayConfig) map[string]string {
	return map[string]string{
		LabelManagedBy: ManagedByValue,
		LabelPartOf:    PartOfValue,
		LabelConfig:    LabelValue(cfg.Name),
	}
}

// ownerReference makes owner the controller of a child in its namespace.
func ownerReference(owner metav1.Object, kind string) metav1.OwnerReference {
	t := true
	return metav1.OwnerReference{
		APIVersion:         igwv1.GroupVersion.String(),
		Kind:               kind,
		Name:               owner.GetName(),
		UID:                owner.GetUID(),
		Controller:         &t,
		BlockOwnerDeletion: &t,
	}
}

// meta is the metadata of a child: same-namespace children get owner as their
// controller; children elsewhere get LabelConfigNamespace instead.
func meta(name, namespace string, labels map[string]string, owner metav1.Object, ownerKind string) metav1.ObjectMeta {
	m := metav1.ObjectMeta{Name: name, Namespace: namespace, Labels: copyMap(labels)}
	if namespace == owner.GetNamespace() {
		m.OwnerReferences = []metav1.OwnerReference{ownerReference(owner, ownerKind)}
	} else {
		m.Labels[LabelConfigNamespace] = owner.GetNamespace()
	}
	return m
}

func copyMap(in map[string]string) map[string]string {
	out := make(map[string]string, len(in))
	for k, v := range in {
		out[k] = v
	}
	return out
}
