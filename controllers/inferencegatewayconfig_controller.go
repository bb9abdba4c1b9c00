package controllers

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	gwapiv1 "sigs.k8s.io/gateway-api/apis/v1"

	igwv1 "github.com/igw-dev/igw/api/v1alpha1"
	"github.com/igw-dev/igw/pkg/render"
)

// Reasons of an InferenceGatewayConfig's conditions (besides the shared ones).
const (
	ReasonProgrammed           = "Programmed"
	ReasonGatewayNotProgrammed = "GatewayNotProgrammed"
	ReasonBBRDisabled          = "Disabled"
	ReasonBBRUnavailable       = "BBRUnavailable"
	ReasonBBRAvailable         = "Available"
)

// FinalizerCrossNamespace is set on a config only while it has children in the
// Gateway's namespace, which no owner reference can cover: the operator deletes
// them itself before the config goes.
const FinalizerCrossNamespace = "gateway.igw.dev/cross-namespace-cleanup"

// InferenceGatewayConfigReconciler provisions the gateway-wide pieces: the
// body-based router, the catch-all route, Envoy Gateway policies on the
// Gateway, and the Gateway itself when it is managed.
type InferenceGatewayConfigReconciler struct {
	Client  client.Client
	Scheme  *runtime.Scheme
	Kinds   *Kinds
	Applier *Applier
	Images  render.Images
	Events  recorder
	watches *lazyWatches
}

// configChildKinds are the kinds of a config's children in its own namespace.
var configChildKinds = []schema.GroupVersionKind{
	corev1.SchemeGroupVersion.WithKind("ConfigMap"),
	appsv1.SchemeGroupVersion.WithKind("Deployment"),
	corev1.SchemeGroupVersion.WithKind("Service"),
	GVKGateway, GVKHTTPRoute, GVKReferenceGrant, GVKHTTPRouteFilter,
	GVKEnvoyExtensionPolicy, GVKClientTrafficPolicy, GVKSecurityPolicy,
}

// gatewayPolicyKinds are the kinds a config may place in a Gateway's namespace.
var gatewayPolicyKinds = []schema.GroupVersionKind{GVKEnvoyExtensionPolicy, GVKClientTrafficPolicy, GVKSecurityPolicy}

func requiredConfigKinds(cfg *igwv1.InferenceGatewayConfig) []schema.GroupVersionKind {
	kinds := []schema.GroupVersionKind{GVKGateway, GVKHTTPRoute}
	if cfg.Spec.Gateway.Provider != igwv1.ProviderNative {
		kinds = append(kinds, GVKHTTPRouteFilter, GVKEnvoyExtensionPolicy, GVKClientTrafficPolicy)
		if cfg.Spec.Auth != nil && cfg.Spec.Auth.JWT != nil {
			kinds = append(kinds, GVKSecurityPolicy)
		}
		if gw := render.ResolveGateway(cfg); gw.Namespace != cfg.Namespace {
			kinds = append(kinds, GVKReferenceGrant)
		}
	}
	return kinds
}

// Reconcile renders, applies and reports one InferenceGatewayConfig.
func (r *InferenceGatewayConfigReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	if err := r.watches.ensure(); err != nil {
		return ctrl.Result{}, err
	}
	cfg := &igwv1.InferenceGatewayConfig{}
	if err := r.Client.Get(ctx, req.NamespacedName, cfg); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if cfg.DeletionTimestamp != nil {
		return ctrl.Result{}, r.cleanUp(ctx, cfg)
	}
	gw := render.ResolveGateway(cfg)
	crossNamespace := gw.Namespace != cfg.Namespace && cfg.Spec.Gateway.Provider != igwv1.ProviderNative
	if crossNamespace && !controllerutil.ContainsFinalizer(cfg, FinalizerCrossNamespace) {
		patch := client.MergeFrom(cfg.DeepCopy())
		controllerutil.AddFinalizer(cfg, FinalizerCrossNamespace)
		if err := r.Client.Patch(ctx, cfg, patch); err != nil {
			return ctrl.Result{}, err
		}
	}
	orig := cfg.DeepCopy()
	conds := newConditions(cfg.Status.Conditions, cfg.Generation)

	var routes igwv1.ModelRouteList
	if err := r.Client.List(ctx, &routes, client.InNamespace(cfg.Namespace), client.MatchingFields{indexConfigRef: cfg.Name}); err != nil {
		return ctrl.Result{}, err
	}
	out, err := render.Config(render.ConfigInput{Config: cfg, Routes: routes.Items, Images: r.Images})
	if err != nil {
		return ctrl.Result{}, err
	}
	refs := refProblems{}
	if missing := r.Kinds.Missing(requiredConfigKinds(cfg)...); len(missing) > 0 {
		refs.add(ReasonCRDsMissing, describeMissing(missing))
	}
	if err := r.applyChildren(ctx, cfg, out, &refs); err != nil {
		return ctrl.Result{}, err
	}
	if !crossNamespace && controllerutil.ContainsFinalizer(cfg, FinalizerCrossNamespace) {
		// The Gateway moved to the config's namespace: the pruning above removed what was elsewhere.
		patch := client.MergeFrom(cfg.DeepCopy())
		controllerutil.RemoveFinalizer(cfg, FinalizerCrossNamespace)
		if err := r.Client.Patch(ctx, cfg, patch); err != nil {
			return ctrl.Result{}, err
		}
		orig = cfg.DeepCopy()
	}

	accepted := []string{"the config is valid"}
	if cfg.Spec.TLS != nil && !gw.Managed {
		accepted = append(accepted, "spec.tls applies to managed gateways only and is ignored: configure TLS on Gateway "+gw.String())
	}
	if len(out.AdapterConflicts) > 0 {
		accepted = append(accepted, "adapters declared with different base models by several ModelRoutes (the first route by name wins): "+strings.Join(out.AdapterConflicts, ", "))
	}
	conds.set(igwv1.ConditionAccepted, true, ReasonAccepted, "%s", strings.Join(accepted, "; "))
	if err := r.gatewayCondition(ctx, cfg, gw, conds); err != nil {
		return ctrl.Result{}, err
	}
	if err := r.bbrCondition(ctx, cfg, out.Names, conds); err != nil {
		return ctrl.Result{}, err
	}
	switch {
	case !refs.ok():
		conds.set(igwv1.ConditionReady, false, refs.reason(), "%s", refs.message())
	case !conds.isTrue(igwv1.ConditionGatewayProgrammed):
		conds.set(igwv1.ConditionReady, false, meta.FindStatusCondition(conds.list, igwv1.ConditionGatewayProgrammed).Reason, "see the GatewayProgrammed condition")
	case !conds.isTrue(igwv1.ConditionBBRReady):
		conds.set(igwv1.ConditionReady, false, ReasonBBRUnavailable, "see the BBRReady condition")
	default:
		conds.set(igwv1.ConditionReady, true, ReasonReady, "the gateway is programmed and every gateway-wide child is applied")
	}

	status := igwv1.InferenceGatewayConfigStatus{ObservedGeneration: cfg.Generation, Conditions: conds.list,
		GatewayName: gw.String(), Models: modelSummaries(routes.Items)}
	warnOnNewReason(r.Events, cfg, orig.Status.Conditions, status.Conditions, igwv1.ConditionReady)
	cfg.Status = status
	if err := patchStatus(ctx, r.Client, orig, cfg, orig.Status, cfg.Status); err != nil {
		return ctrl.Result{}, err
	}
	if !refs.ok() {
		return ctrl.Result{RequeueAfter: requeueWhileMissing}, nil
	}
	return ctrl.Result{}, nil
}

func (r *InferenceGatewayConfigReconciler) applyChildren(ctx context.Context, cfg *igwv1.InferenceGatewayConfig, out render.ConfigOutput, refs *refProblems) error {
	changes := &changeLog{}
	defer changes.emit(r.Events, cfg)
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
	deleted, err := r.prune(ctx, cfg, keep)
	changes.deleted = deleted
	return err
}

// prune deletes children the rendering no longer has: those in the config's
// namespace by owner reference, those at a Gateway elsewhere by label.
func (r *InferenceGatewayConfigReconciler) prune(ctx context.Context, cfg *igwv1.InferenceGatewayConfig, keep map[ChildKey]bool) ([]string, error) {
	var scopes []PruneScope
	local := labels.SelectorFromSet(labels.Set{render.LabelConfig: render.LabelValue(cfg.Name), render.LabelManagedBy: render.ManagedByValue})
	for _, gvk := range configChildKinds {
		scopes = append(scopes, PruneScope{GVK: gvk, Namespace: cfg.Namespace, Selector: local, Owned: controlledBy(cfg.UID)})
	}
	remote := labels.SelectorFromSet(labels.Set{render.LabelConfig: render.LabelValue(cfg.Name),
		render.LabelConfigNamespace: cfg.Namespace, render.LabelManagedBy: render.ManagedByValue})
	for _, gvk := range gatewayPolicyKinds {
		scopes = append(scopes, PruneScope{GVK: gvk, Selector: remote, Owned: func(client.Object) bool { return true }})
	}
	var all []string
	for _, s := range scopes {
		if !r.Kinds.Has(s.GVK) {
			continue
		}
		deleted, err := r.Applier.Prune(ctx, s, keep)
		all = append(all, deleted...)
		if err != nil {
			return all, err
		}
	}
	return all, nil
}

// cleanUp deletes the children at a Gateway in another namespace, then lets the config go.
func (r *InferenceGatewayConfigReconciler) cleanUp(ctx context.Context, cfg *igwv1.InferenceGatewayConfig) error {
	if !controllerutil.ContainsFinalizer(cfg, FinalizerCrossNamespace) {
		return nil
	}
	remote := labels.SelectorFromSet(labels.Set{render.LabelConfig: render.LabelValue(cfg.Name),
		render.LabelConfigNamespace: cfg.Namespace, render.LabelManagedBy: render.ManagedByValue})
	for _, gvk := range gatewayPolicyKinds {
		if !r.Kinds.Has(gvk) {
			continue
		}
		if _, err := r.Applier.Prune(ctx, PruneScope{GVK: gvk, Selector: remote, Owned: func(client.Object) bool { return true }}, nil); err != nil {
			return err
		}
	}
	patch := client.MergeFrom(cfg.DeepCopy())
	controllerutil.RemoveFinalizer(cfg, FinalizerCrossNamespace)
	return r.Client.Patch(ctx, cfg, patch)
}

func (r *InferenceGatewayConfigReconciler) gatewayCondition(ctx context.Context, cfg *igwv1.InferenceGatewayConfig, gw render.GatewayTarget, conds *conditions) error {
	if !r.Kinds.Has(GVKGateway) {
		conds.set(igwv1.ConditionGatewayProgrammed, false, ReasonCRDsMissing, "%s", describeMissing([]schema.GroupVersionKind{GVKGateway}))
		return nil
	}
	var g gwapiv1.Gateway
	if err := r.Client.Get(ctx, types.NamespacedName{Namespace: gw.Namespace, Name: gw.Name}, &g); err != nil {
		if !apierrors.IsNotFound(err) {
			return err
		}
		conds.set(igwv1.ConditionGatewayProgrammed, false, ReasonGatewayNotFound, "%s", gatewayNotFoundMessage(cfg, gw))
		return nil
	}
	p := meta.FindStatusCondition(g.Status.Conditions, string(gwapiv1.GatewayConditionProgrammed))
	switch {
	case p == nil:
		conds.set(igwv1.ConditionGatewayProgrammed, false, ReasonGatewayNotProgrammed,
			"Gateway %s has no Programmed condition yet: check that a controller serves GatewayClass %s", gw, g.Spec.GatewayClassName)
	case p.Status != "True":
		conds.set(igwv1.ConditionGatewayProgrammed, false, ReasonGatewayNotProgrammed, "Gateway %s is not programmed (%s): %s", gw, p.Reason, p.Message)
	default:
		conds.set(igwv1.ConditionGatewayProgrammed, true, ReasonProgrammed, "Gateway %s is programmed", gw)
	}
	return nil
}

func (r *InferenceGatewayConfigReconciler) bbrCondition(ctx context.Context, cfg *igwv1.InferenceGatewayConfig, n render.ConfigNames, conds *conditions) error {
	if !render.BBREnabled(cfg) {
		conds.set(igwv1.ConditionBBRReady, true, ReasonBBRDisabled, "the body-based router is off: clients must send the %s header", "x-gateway-model-name")
		return nil
	}
	var d appsv1.Deployment
	if err := r.Client.Get(ctx, types.NamespacedName{Namespace: cfg.Namespace, Name: n.BBR}, &d); err != nil {
		if !apierrors.IsNotFound(err) {
			return err
		}
		conds.set(igwv1.ConditionBBRReady, false, ReasonBBRUnavailable, "the body-based router Deployment %s does not exist yet", n.BBR)
		return nil
	}
	if d.Status.AvailableReplicas == 0 {
		conds.set(igwv1.ConditionBBRReady, false, ReasonBBRUnavailable, "the body-based router Deployment %s has no available replica: check its Pods and events", n.BBR)
		return nil
	}
	conds.set(igwv1.ConditionBBRReady, true, ReasonBBRAvailable, "%d replica(s) available", d.Status.AvailableReplicas)
	return nil
}

// modelSummaries lists every served name with its route and readiness, sorted.
func modelSummaries(routes []igwv1.ModelRoute) []igwv1.ModelSummary {
	var out []igwv1.ModelSummary
	for i := range routes {
		mr := &routes[i]
		if mr.DeletionTimestamp != nil {
			continue
		}
		ready := meta.IsStatusConditionTrue(mr.Status.Conditions, igwv1.ConditionReady)
		for _, name := range render.ServedNames(mr) {
			out = append(out, igwv1.ModelSummary{Name: name, ModelRoute: mr.Name, Ready: ready})
		}
	}
	slices.SortFunc(out, func(a, b igwv1.ModelSummary) int {
		return strings.Compare(a.Name+"\x00"+a.ModelRoute, b.Name+"\x00"+b.ModelRoute)
	})
	return out
}
