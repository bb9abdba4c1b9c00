package controllers

import (
	"errors"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	egv1a1 "github.com/envoyproxy/gateway/api/v1alpha1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime/schema"
	infv1 "sigs.k8s.io/gateway-api-inference-extension/api/v1"
	gwapiv1 "sigs.k8s.io/gateway-api/apis/v1"
	gwapiv1beta1 "sigs.k8s.io/gateway-api/apis/v1beta1"
)

// Optional kinds: their CRDs come with Gateway API, the inference extension and
// Envoy Gateway, any of which may be missing (or installed after the operator).
var (
	GVKInferencePool        = schema.GroupVersion(infv1.GroupVersion).WithKind("InferencePool")
	GVKGateway              = schema.GroupVersion(gwapiv1.GroupVersion).WithKind("Gateway")
	GVKHTTPRoute            = schema.GroupVersion(gwapiv1.GroupVersion).WithKind("HTTPRoute")
	GVKReferenceGrant       = schema.GroupVersion(gwapiv1beta1.GroupVersion).WithKind("ReferenceGrant")
	GVKBackendTLSPolicy     = schema.GroupVersion(gwapiv1.GroupVersion).WithKind("BackendTLSPolicy")
	GVKBackendTrafficPolicy = egv1a1.GroupVersion.WithKind(egv1a1.KindBackendTrafficPolicy)
	GVKEnvoyExtensionPolicy = egv1a1.GroupVersion.WithKind(egv1a1.KindEnvoyExtensionPolicy)
	GVKClientTrafficPolicy  = egv1a1.GroupVersion.WithKind(egv1a1.KindClientTrafficPolicy)
	GVKHTTPRouteFilter      = egv1a1.GroupVersion.WithKind(egv1a1.KindHTTPRouteFilter)
	GVKSecurityPolicy       = egv1a1.GroupVersion.WithKind(egv1a1.KindSecurityPolicy)
	GVKBackend              = egv1a1.GroupVersion.WithKind(egv1a1.KindBackend)
)

// Built-in kinds of children. NetworkPolicies admit only the proxy to the
// ext_proc servers.
var (
	GVKServiceAccount = corev1.SchemeGroupVersion.WithKind("ServiceAccount")
	GVKRole           = rbacv1.SchemeGroupVersion.WithKind("Role")
	GVKRoleBinding    = rbacv1.SchemeGroupVersion.WithKind("RoleBinding")
	GVKConfigMap      = corev1.SchemeGroupVersion.WithKind("ConfigMap")
	GVKDeployment     = appsv1.SchemeGroupVersion.WithKind("Deployment")
	GVKService        = corev1.SchemeGroupVersion.WithKind("Service")
	GVKNetworkPolicy  = networkingv1.SchemeGroupVersion.WithKind("NetworkPolicy")
)

// childKinds are the kinds of one owner kind's children, all pruned: the
// built-in ones, watched from the start by their controller reference, and the
// optional ones, watched once their CRDs are served.
type childKinds struct {
	builtin, optional []schema.GroupVersionKind
}

// all lists the built-in kinds, then the optional ones.
func (k childKinds) all() []schema.GroupVersionKind { return slices.Concat(k.builtin, k.optional) }

// crdSource names, for a person, where a missing kind's CRD comes from.
func crdSource(gvk schema.GroupVersionKind) string {
	switch gvk.Group {
	case gwapiv1.GroupName:
		return "Gateway API (standard channel)"
	case infv1.GroupVersion.Group:
		return "the Gateway API Inference Extension"
	case egv1a1.GroupName:
		return "Envoy Gateway v1.9"
	}
	return gvk.Group
}

// missingKindRecheck is how long a kind found missing stays missing before the
// API server is asked again, so that many reconciles do not each run discovery.
const missingKindRecheck = 10 * time.Second

// Kinds answers whether the API server serves a kind, through the manager's
// RESTMapper (which re-discovers a group it has not seen). A kind once found
// stays found: CRDs are rarely removed, and a removal surfaces as apply errors.
type Kinds struct {
	Mapper meta.RESTMapper
	now    func() time.Time

	mu      sync.Mutex
	found   map[schema.GroupVersionKind]bool
	missing map[schema.GroupVersionKind]time.Time
}

// NewKinds returns a Kinds over mapper.
func NewKinds(mapper meta.RESTMapper) *Kinds {
	return &Kinds{Mapper: mapper, now: time.Now,
		found: map[schema.GroupVersionKind]bool{}, missing: map[schema.GroupVersionKind]time.Time{}}
}

// Has reports whether gvk is served.
func (k *Kinds) Has(gvk schema.GroupVersionKind) bool {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.found[gvk] {
		return true
	}
	if at, ok := k.missing[gvk]; ok && k.now().Sub(at) < missingKindRecheck {
		return false
	}
	_, err := k.Mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
	if err == nil {
		k.found[gvk] = true
		delete(k.missing, gvk)
		return true
	}
	k.missing[gvk] = k.now()
	return false
}

// Missing returns those of gvks that are not served.
func (k *Kinds) Missing(gvks ...schema.GroupVersionKind) []schema.GroupVersionKind {
	var out []schema.GroupVersionKind
	for _, g := range gvks {
		if !k.Has(g) {
			out = append(out, g)
		}
	}
	return out
}

// Forget makes the next Has ask the API server again (after an apply failed
// because a kind went away).
func (k *Kinds) Forget(gvk schema.GroupVersionKind) {
	k.mu.Lock()
	defer k.mu.Unlock()
	delete(k.found, gvk)
	delete(k.missing, gvk)
}

// ForgetMissing makes every kind found missing be asked about again (a CRD was just installed).
func (k *Kinds) ForgetMissing() {
	k.mu.Lock()
	defer k.mu.Unlock()
	clear(k.missing)
}

// watchedGroups are the API groups whose CRDs the operator waits for.
var watchedGroups = []string{gwapiv1.GroupName, infv1.GroupVersion.Group, egv1a1.GroupName}

// isWatchedCRD reports whether a CRD's name ("plural.group") is of a watched group.
func isWatchedCRD(name string) bool {
	_, group, ok := strings.Cut(name, ".")
	return ok && slices.Contains(watchedGroups, group)
}

// describeMissing says which CRDs to install, grouped by where they come from.
func describeMissing(gvks []schema.GroupVersionKind) string {
	bySource := map[string][]string{}
	for _, g := range gvks {
		s := crdSource(g)
		bySource[s] = append(bySource[s], g.Kind)
	}
	sources := make([]string, 0, len(bySource))
	for s := range bySource {
		sources = append(sources, s)
	}
	sort.Strings(sources)
	parts := make([]string, len(sources))
	for i, s := range sources {
		parts[i] = strings.Join(bySource[s], ", ") + " (" + s + ")"
	}
	return "the API server does not serve " + strings.Join(parts, "; ") + ": install those CRDs; the operator picks them up without a restart"
}

// isNoMatch reports an error caused by a kind the API server does not serve.
func isNoMatch(err error) bool {
	return meta.IsNoMatchError(err) || errors.Is(err, &meta.NoKindMatchError{})
}
