package controllers

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	gwapiv1 "sigs.k8s.io/gateway-api/apis/v1"

	igwv1 "github.com/igw-dev/igw/api/v1alpha1"
	eppconfig "github.com/igw-dev/igw/pkg/epp/config"
	"github.com/igw-dev/igw/pkg/epp/scheduling/plugins"
	"github.com/igw-dev/igw/pkg/render"
)

// Reasons of a ModelRoute's conditions. Each names what to look at.
const (
	ReasonAccepted                  = "Accepted"
	ReasonResolvedRefs              = "ResolvedRefs"
	ReasonReady                     = "Ready"
	ReasonAsExpected                = "AsExpected"
	ReasonConfigNotFound            = "ConfigNotFound"
	ReasonCRDsMissing               = "CRDsMissing"
	ReasonGatewayNotFound           = "GatewayNotFound"
	ReasonConfigMapNotFound         = "ConfigMapNotFound"
	ReasonConfigMapKeyMissing       = "ConfigMapKeyMissing"
	ReasonInvalidEPPConfig          = "InvalidEPPConfig"
	ReasonNameConflict              = "NameConflict"
	ReasonApplyFailed               = "ApplyFailed"
	ReasonRefsNotResolved           = "RefsNotResolved"
	ReasonNoMatchingPods            = "NoMatchingPods"
	ReasonNoReadyEndpoints          = "NoReadyEndpoints"
	ReasonEndpointPickerUnavailable = "EndpointPickerUnavailable"
	ReasonEndpointPickerDegraded    = "EndpointPickerDegraded"
	ReasonEndpointsNotReady         = "EndpointsNotReady"
)

// requeueWhileMissing re-checks a route whose CRDs or references are missing
// even when no event arrives (a CRD being installed sends none to this controller).
const requeueWhileMissing = 30 * time.Second

// ModelRouteReconciler turns a ModelRoute into its pool, picker and routes.
type ModelRouteReconciler struct {
	Client  client.Client
	Scheme  *runtime.Scheme
	Kinds   *Kinds
	Applier *Applier
	Images  render.Images
	Events  recorder
	watches *lazyWatches
}

// routeChildKinds are the kinds of a ModelRoute's children, for pruning.
var routeChildKinds = []schema.GroupVersionKind{
	corev1.SchemeGroupVersion.WithKind("ServiceAccount"),
	rbacv1.SchemeGroupVersion.WithKind("Role"),
	rbacv1.SchemeGroupVersion.WithKind("RoleBinding"),
	corev1.SchemeGroupVersion.WithKind("ConfigMap"),
	appsv1.SchemeGroupVersion.WithKind("Deployment"),
	corev1.SchemeGroupVersion.WithKind("Service"),
	GVKInferencePool, GVKHTTPRoute, GVKBackendTrafficPolicy, GVKEnvoyExtensionPolicy,
}

// requiredRouteKinds are the optional kinds a route's data path needs with cfg's provider.
func requiredRouteKinds(cfg *igwv1.InferenceGatewayConfig) []schema.GroupVersionKind {
	kinds := []schema.GroupVersionKind{GVKInferencePool, GVKGateway, GVKHTTPRoute}
	if cfg.Spec.Gateway.Provider != igwv1.ProviderNative {
		kinds = append(kinds, GVKBackendTrafficPolicy, GVKEnvoyExtensionPolicy)
	}
	return kinds
}

// Reconcile renders, applies and reports one ModelRoute.
func (r *ModelRouteReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	if err := r.watches.ensure(); err != nil {
		return ctrl.Result{}, err
	}
	mr := &igwv1.ModelRoute{}
	if err := r.Client.Get(ctx, req.NamespacedName, mr); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if mr.DeletionTimestamp != nil {
		return ctrl.Result{}, nil // owner references hand the children to the garbage collector
	}
	orig := mr.DeepCopy()
	conds := newConditions(mr.Status.Conditions, mr.Generation)
	status := igwv1.ModelRouteStatus{ObservedGeneration: mr.Generation, InferencePool: render.NamesForRoute(mr.Name).Pool,
		Scoring: mr.Status.Scoring, Rollout: mr.Status.Rollout}

	obs, err := observePool(ctx, r.Client, mr)
	if err != nil {
		return ctrl.Result{}, err
	}
	status.ReadyEndpoints, status.TotalEndpoints = obs.ReadyEndpoints, obs.TotalEndpoints

	cfg := &igwv1.InferenceGatewayConfig{}
	if err := r.Client.Get(ctx, types.NamespacedName{Namespace: mr.Namespace, Name: mr.Spec.ConfigRef.Name}, cfg); err != nil {
		if !apierrors.IsNotFound(err) {
			return ctrl.Result{}, err
		}
		msg := fmt.Sprintf("InferenceGatewayConfig %q not found in namespace %q: create it or fix spec.configRef.name", mr.Spec.ConfigRef.Name, mr.Namespace)
		conds.set(igwv1.ConditionAccepted, false, ReasonConfigNotFound, "%s", msg)
		conds.set(igwv1.ConditionResolvedRefs, false, ReasonConfigNotFound, "%s", msg)
		r.finishStatus(conds, &status, obs, nil, nil)
		return ctrl.Result{}, r.writeStatus(ctx, orig, mr, status, conds)
	}
	accepted := "the route is served through InferenceGatewayConfig " + cfg.Name
	if cfg.Spec.Gateway.Provider != igwv1.ProviderNative && render.EPPFailureMode(mr, cfg) == igwv1.FailOpen {
		accepted += "; Envoy Gateway v1.9 cannot fail open with full-duplex ext_proc, so requests fail closed when the picker is down (the InferencePool keeps FailOpen for native gateways)"
	}
	conds.set(igwv1.ConditionAccepted, true, ReasonAccepted, "%s", accepted)

	refs := refProblems{}
	missing := r.Kinds.Missing(requiredRouteKinds(cfg)...)
	if len(missing) > 0 {
		refs.add(ReasonCRDsMissing, describeMissing(missing))
	}
	gw := render.ResolveGateway(cfg)
	if r.Kinds.Has(GVKGateway) {
		if err := r.Client.Get(ctx, types.NamespacedName{Namespace: gw.Namespace, Name: gw.Name}, &gwapiv1.Gateway{}); apierrors.IsNotFound(err) {
			refs.add(ReasonGatewayNotFound, gatewayNotFoundMessage(cfg, gw))
		} else if err != nil {
			return ctrl.Result{}, err
		}
	}

	raw, reason, msg := r.rawConfig(ctx, mr)
	var eppDeploy *appsv1.Deployment
	if reason != "" {
		// Keep the picker on its last good configuration: render nothing new.
		refs.add(reason, msg)
	} else {
		out, err := render.Route(render.RouteInput{Route: mr, Config: cfg, Images: r.Images, Observations: obs.Observations, RawConfig: raw})
		if err != nil {
			return ctrl.Result{}, err
		}
		status.Scoring = &out.Scoring
		if err := r.applyChildren(ctx, mr, out, &refs); err != nil {
			return ctrl.Result{}, err
		}
		if r.Kinds.Has(GVKInferencePool) {
			if err := r.reportPoolParent(ctx, mr, out, refs.ok()); err != nil {
				return ctrl.Result{}, err
			}
		}
		eppDeploy = &appsv1.Deployment{}
		if err := r.Client.Get(ctx, types.NamespacedName{Namespace: mr.Namespace, Name: out.Names.EPP}, eppDeploy); err != nil {
			if !apierrors.IsNotFound(err) {
				return ctrl.Result{}, err
			}
			eppDeploy = nil
		}
	}
	if refs.ok() {
		conds.set(igwv1.ConditionResolvedRefs, true, ReasonResolvedRefs, "every reference resolved and every child is applied")
	} else {
		conds.set(igwv1.ConditionResolvedRefs, false, refs.reason(), "%s", refs.message())
	}
	r.finishStatus(conds, &status, obs, eppDeploy, mr)
	if err := r.writeStatus(ctx, orig, mr, status, conds); err != nil {
		return ctrl.Result{}, err
	}
	if !refs.ok() {
		return ctrl.Result{RequeueAfter: requeueWhileMissing}, nil
	}
	return ctrl.Result{}, nil
}

func gatewayNotFoundMessage(cfg *igwv1.InferenceGatewayConfig, gw render.GatewayTarget) string {
	if gw.Managed {
		return fmt.Sprintf("the managed Gateway %s is not created yet: see InferenceGatewayConfig %s's status", gw, cfg.Name)
	}
	return fmt.Sprintf("Gateway %s named by InferenceGatewayConfig %s does not exist: create it, fix spec.gateway.ref, or use spec.gateway.managed", gw, cfg.Name)
}

// rawConfig reads spec.scoring.configMapRef and checks that the picker accepts
// it; a non-empty reason says why it cannot be used.
func (r *ModelRouteReconciler) rawConfig(ctx context.Context, mr *igwv1.ModelRoute) (data []byte, reason, message string) {
	if mr.Spec.Scoring == nil || mr.Spec.Scoring.ConfigMapRef == nil {
		return nil, "", ""
	}
	ref := mr.Spec.Scoring.ConfigMapRef
	key := ref.Key
	if key == "" {
		key = render.EPPConfigKey
	}
	var cm corev1.ConfigMap
	if err := r.Client.Get(ctx, types.NamespacedName{Namespace: mr.Namespace, Name: ref.Name}, &cm); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, ReasonConfigMapNotFound, fmt.Sprintf("ConfigMap %q of spec.scoring.configMapRef not found in namespace %q: create it or drop configMapRef", ref.Name, mr.Namespace)
		}
		return nil, ReasonApplyFailed, err.Error()
	}
	content, ok := cm.Data[key]
	if !ok {
		return nil, ReasonConfigMapKeyMissing, fmt.Sprintf("ConfigMap %q has no key %q: add it or set spec.scoring.configMapRef.key", ref.Name, key)
	}
	if _, err := eppconfig.Load([]byte(content), plugins.NewRegistry()); err != nil {
		return nil, ReasonInvalidEPPConfig, fmt.Sprintf("ConfigMap %q key %q is not a valid endpoint picker configuration (the picker keeps its last good one): %v", ref.Name, key, err)
	}
	return []byte(content), "", ""
}

// applyChildren applies the rendered children whose kinds are served and
// deletes children the rendering no longer has.
func (r *ModelRouteReconciler) applyChildren(ctx context.Context, mr *igwv1.ModelRoute, out render.RouteOutput, refs *refProblems) error {
	changes := &changeLog{}
	defer changes.emit(r.Events, mr)
	keep := map[ChildKey]bool{}
	for _, obj := range out.Objects {
		gvk, err := gvkOf(r.Scheme, obj)
		if err != nil {
			return err
		}
		if !r.Kinds.Has(gvk) {
			continue
		}
		keep[ChildKey{gvk, client.ObjectKeyFromObject(obj)}] = true
		res, err := r.Applier.Apply(ctx, obj)
		var conflict *ConflictError
		switch {
		case errors.As(err, &conflict):
			refs.add(ReasonNameConflict, conflict.Error())
			continue
		case isNoMatch(err):
			r.Kinds.Forget(gvk)
			refs.add(ReasonCRDsMissing, describeMissing([]schema.GroupVersionKind{gvk}))
			continue
		case err != nil:
			return fmt.Errorf("applying %s %s: %w", gvk.Kind, obj.GetName(), err)
		}
		changes.applied(res, gvk.Kind, obj)
	}
	sel := labels.SelectorFromSet(labels.Set{render.LabelModelRoute: render.LabelValue(mr.Name), render.LabelManagedBy: render.ManagedByValue})
	for _, gvk := range routeChildKinds {
		if !r.Kinds.Has(gvk) {
			continue
		}
		deleted, err := r.Applier.Prune(ctx, PruneScope{GVK: gvk, Namespace: mr.Namespace, Selector: sel, Owned: controlledBy(mr.UID)}, keep)
		changes.deleted = append(changes.deleted, deleted...)
		if err != nil {
			return err
		}
	}
	return nil
}

func gvkOf(scheme *runtime.Scheme, obj client.Object) (schema.GroupVersionKind, error) {
	if gvk := obj.GetObjectKind().GroupVersionKind(); !gvk.Empty() {
		return gvk, nil
	}
	gvks, _, err := scheme.ObjectKinds(obj)
	if err != nil || len(gvks) == 0 {
		return schema.GroupVersionKind{}, fmt.Errorf("no kind for %T: %w", obj, err)
	}
	return gvks[0], nil
}

// finishStatus sets Ready, Degraded and the rollout state from the endpoints
// and the picker's Deployment.
func (r *ModelRouteReconciler) finishStatus(conds *conditions, st *igwv1.ModelRouteStatus, obs poolObservation, epp *appsv1.Deployment, mr *igwv1.ModelRoute) {
	var desired, available, expected int32
	progressing := false
	if epp != nil {
		desired = 1
		if epp.Spec.Replicas != nil {
			desired = *epp.Spec.Replicas
		}
		expected = desired
		if render.EPPLeaderElection(desired) {
			// Active-passive: only the leader is ready (and so available);
			// standbys report not ready by design.
			expected = 1
		}
		available = epp.Status.AvailableReplicas
		progressing = epp.Status.ObservedGeneration < epp.Generation || epp.Status.UpdatedReplicas < desired
	}
	switch {
	case !conds.isTrue(igwv1.ConditionResolvedRefs):
		conds.set(igwv1.ConditionReady, false, ReasonRefsNotResolved, "see the ResolvedRefs condition")
	case obs.Pods == 0:
		conds.set(igwv1.ConditionReady, false, ReasonNoMatchingPods, "no Pod in namespace %s matches spec.selector.matchLabels %s: check it against the model server Pods' labels",
			mr.Namespace, labels.SelectorFromSet(mr.Spec.Selector.MatchLabels))
	case obs.ReadyEndpoints == 0:
		conds.set(igwv1.ConditionReady, false, ReasonNoReadyEndpoints, "%d Pod(s) match the selector but none is Ready with an IP: check the model servers' readiness", obs.Pods)
	case available == 0:
		conds.set(igwv1.ConditionReady, false, ReasonEndpointPickerUnavailable, "the endpoint picker Deployment %s has no available replica: check its Pods and events",
			render.NamesForRoute(mr.Name).EPP)
	case expected < desired:
		conds.set(igwv1.ConditionReady, true, ReasonReady, "%d of %d endpoints ready; endpoint picker leader available, %d replicas (active-passive: standbys report not ready)",
			obs.ReadyEndpoints, obs.TotalEndpoints, desired)
	default:
		conds.set(igwv1.ConditionReady, true, ReasonReady, "%d of %d endpoints ready; endpoint picker %d/%d available", obs.ReadyEndpoints, obs.TotalEndpoints, available, desired)
	}
	ready := conds.isTrue(igwv1.ConditionReady)
	switch {
	case ready && obs.ReadyEndpoints < obs.TotalEndpoints:
		conds.set(igwv1.ConditionDegraded, true, ReasonEndpointsNotReady, "%d of %d endpoints are not ready", obs.TotalEndpoints-obs.ReadyEndpoints, obs.TotalEndpoints)
	case ready && available < expected:
		conds.set(igwv1.ConditionDegraded, true, ReasonEndpointPickerDegraded, "endpoint picker %d/%d replicas available", available, desired)
	default:
		conds.set(igwv1.ConditionDegraded, false, ReasonAsExpected, "no degradation observed")
	}
	// Progressing is a change rolling out over a working data path; before the
	// path first works the route is Pending, and after it broke, Degraded.
	wasUp := st.Rollout != "" && st.Rollout != igwv1.RolloutPending
	switch {
	case ready && progressing:
		st.Rollout = igwv1.RolloutProgressing
	case ready && conds.isTrue(igwv1.ConditionDegraded):
		st.Rollout = igwv1.RolloutDegraded
	case ready:
		st.Rollout = igwv1.RolloutAvailable
	case wasUp:
		st.Rollout = igwv1.RolloutDegraded
	default:
		st.Rollout = igwv1.RolloutPending
	}
}

func (r *ModelRouteReconciler) writeStatus(ctx context.Context, orig, mr *igwv1.ModelRoute, st igwv1.ModelRouteStatus, conds *conditions) error {
	st.Conditions = conds.list
	warnOnNewReason(r.Events, mr, orig.Status.Conditions, st.Conditions, igwv1.ConditionResolvedRefs, igwv1.ConditionReady)
	mr.Status = st
	return patchStatus(ctx, r.Client, orig, mr, orig.Status, mr.Status)
}

// refProblems collects why references do not resolve; the first reason is reported.
type refProblems struct{ reasons, messages []string }

func (p *refProblems) add(reason, message string) {
	p.reasons = append(p.reasons, reason)
	p.messages = append(p.messages, message)
}
func (p *refProblems) ok() bool        { return len(p.reasons) == 0 }
func (p *refProblems) reason() string  { return p.reasons[0] }
func (p *refProblems) message() string { return strings.Join(p.messages, "; ") }
