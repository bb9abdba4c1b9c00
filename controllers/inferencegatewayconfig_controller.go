package controllers

import (
	"context"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/log"
	gwapiv1 "sigs.k8s.io/gateway-api/apis/v1"

	igwv1 "github.com/igw-dev/igw/api/v1alpha1"
	"github.com/igw-dev/igw/pkg/render"
)

// FinalizerCrossNamespace is set on a config only while it has children in the
// Gateway's namespace, which no owner reference can cover: the operator deletes
// them itself before the config goes.
const FinalizerCrossNamespace = "gateway.igw.dev/cross-namespace-cleanup"

// InferenceGatewayConfigReconciler provisions the gateway-wide pieces: the
// body-based router, the catch-all route, Envoy Gateway policies on the
// Gateway, and the Gateway itself when it is managed.
type InferenceGatewayConfigReconciler struct {
	Common
	watches *lazyWatches
}

// configChildren are the kinds of a config's children in its own namespace.
var configChildren = childKinds{
	builtin: []schema.GroupVersionKind{GVKConfigMap, GVKDeployment, GVKService, GVKNetworkPolicy},
	optional: []schema.GroupVersionKind{GVKGateway, GVKHTTPRoute, GVKReferenceGrant, GVKHTTPRouteFilter, GVKBackendTLSPolicy,
		GVKEnvoyExtensionPolicy, GVKClientTrafficPolicy, GVKSecurityPolicy},
}

// gatewayPolicyKinds are the kinds a config may place in a Gateway's namespace.
var gatewayPolicyKinds = []schema.GroupVersionKind{GVKEnvoyExtensionPolicy, GVKClientTrafficPolicy, GVKSecurityPolicy}

func requiredConfigKinds(cfg *igwv1.InferenceGatewayConfig) []schema.GroupVersionKind {
	kinds := []schema.GroupVersionKind{GVKGateway, GVKHTTPRoute}
	if render.ExtProcTLS(cfg) != nil {
		kinds = append(kinds, GVKBackendTLSPolicy)
	}
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

// crossNamespace reports whether cfg places policies beside a Gateway in another namespace.
func crossNamespace(cfg *igwv1.InferenceGatewayConfig) bool {
	return render.ResolveGateway(cfg).Namespace != cfg.Namespace && cfg.Spec.Gateway.Provider != igwv1.ProviderNative
}

var configStatusAccess = statusAccess[*igwv1.InferenceGatewayConfig, igwv1.InferenceGatewayConfigStatus]{
	of:   func(c *igwv1.InferenceGatewayConfig) *igwv1.InferenceGatewayConfigStatus { return &c.Status },
	warn: []string{igwv1.ConditionReady},
}

// Reconcile renders, applies and reports one InferenceGatewayConfig
// (reconcileOwner). A config that is gone has what is left of its children
// beside a Gateway deleted; one being deleted is reconciled, to clean up
// beside the Gateway before its finalizer goes; a written status whose
// extension-hook wait runs requeues for the wait's end.
func (r *InferenceGatewayConfigReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	return reconcileOwner(ctx, &r.Common, r.watches, req.NamespacedName, &igwv1.InferenceGatewayConfig{}, configStatusAccess, r.reconcile, configStatus,
		ownerHooks[*igwv1.InferenceGatewayConfig, configObservation]{
			gone:        func() error { return r.deleteOrphans(ctx, req.Namespace, render.LabelValue(req.Name)) },
			runDeleting: true,
			written: func(cfg *igwv1.InferenceGatewayConfig, _ *configObservation, res *ctrl.Result) {
				res.RequeueAfter = earliest(res.RequeueAfter, hookRequeue(cfg.Status.Conditions, time.Now(), r.HookBound))
			},
		})
}

func (o *configObservation) refsResolved() bool { return o.Refs.ok() }

func (r *InferenceGatewayConfigReconciler) reconcile(ctx context.Context, cfg *igwv1.InferenceGatewayConfig, o *configObservation) error {
	if cfg.DeletionTimestamp != nil {
		o.Deleting = true
		return r.cleanUp(ctx, cfg)
	}
	cross := crossNamespace(cfg)
	if cross && !controllerutil.ContainsFinalizer(cfg, FinalizerCrossNamespace) {
		// The finalizer comes before the first child beside the Gateway, and
		// the optimistic lock keeps a concurrent change (or a deletion) from
		// being overwritten with this copy's finalizers.
		patch := client.MergeFromWithOptions(cfg.DeepCopy(), client.MergeFromWithOptimisticLock{})
		controllerutil.AddFinalizer(cfg, FinalizerCrossNamespace)
		if err := r.Client.Patch(ctx, cfg, patch); err != nil {
			return err
		}
	}

	var routes igwv1.ModelRouteList
	if err := r.Client.List(ctx, &routes, client.InNamespace(cfg.Namespace), client.MatchingFields{indexConfigRef: cfg.Name}); err != nil {
		return err
	}
	o.Routes, o.RoutesListed = routes.Items, true
	out, err := render.Config(render.ConfigInput{Config: cfg, Routes: routes.Items, Images: r.Images})
	if err != nil {
		o.Refs.add(igwv1.ReasonApplyFailed, err.Error())
		return err
	}
	o.AdapterConflicts, o.Rendered = out.AdapterConflicts, true
	if missing := r.Kinds.Missing(requiredConfigKinds(cfg)...); len(missing) > 0 {
		o.Refs.add(igwv1.ReasonCRDsMissing, describeMissing(missing))
	}
	changed, err := r.applyChildren(ctx, cfg, out.Objects, r.pruneScopes(cfg), &o.Refs)
	if err != nil {
		return err
	}
	if !cross && controllerutil.ContainsFinalizer(cfg, FinalizerCrossNamespace) {
		// The Gateway moved to the config's namespace (or to a native
		// provider): whatever is still beside the old one goes, then the finalizer.
		if err := r.cleanUp(ctx, cfg); err != nil {
			o.Refs.add(igwv1.ReasonApplyFailed, err.Error())
			return err
		}
	}
	o.RefsDone = true
	o.Hook = &hookObservation{Applies: r.Hook != nil && r.HookBound > 0 && cfg.Spec.Gateway.Provider != igwv1.ProviderNative,
		Changed: changed, Now: time.Now(), Bound: r.HookBound}
	if o.Hook.Applies {
		o.Hook.LastCall = r.Hook.LastCall()
	}

	gw := render.ResolveGateway(cfg)
	if o.GatewayServed = r.Kinds.Has(GVKGateway); o.GatewayServed {
		g, err := existing[gwapiv1.Gateway](ctx, r.Client, types.NamespacedName{Namespace: gw.Namespace, Name: gw.Name})
		if err != nil {
			return err
		}
		o.Gateway = g
	}
	o.GatewayChecked = true

	if render.BBREnabled(cfg) {
		bbr, err := existing[appsv1.Deployment](ctx, r.Client, types.NamespacedName{Namespace: cfg.Namespace, Name: out.Names.BBR})
		if err != nil {
			return err
		}
		o.BBR = bbr
	}
	o.BBRChecked = true
	return nil
}

// pruneScopes say where a config's children are: in its namespace by owner
// reference, beside a Gateway elsewhere by label.
func (r *InferenceGatewayConfigReconciler) pruneScopes(cfg *igwv1.InferenceGatewayConfig) []PruneScope {
	local := labels.SelectorFromSet(labels.Set{render.LabelConfig: render.LabelValue(cfg.Name), render.LabelManagedBy: render.ManagedByValue})
	var scopes []PruneScope
	for _, gvk := range configChildren.all() {
		scopes = append(scopes, PruneScope{GVK: gvk, Namespace: cfg.Namespace, Selector: local, Owned: controlledBy(cfg.UID)})
	}
	return append(scopes, remoteScopes(cfg.Namespace, render.LabelValue(cfg.Name), false)...)
}

// remoteScopes find the children in other namespaces of the config of
// namespace whose name has the label value label.
func remoteScopes(namespace, label string, live bool) []PruneScope {
	remote := labels.SelectorFromSet(labels.Set{render.LabelConfig: label,
		render.LabelConfigNamespace: namespace, render.LabelManagedBy: render.ManagedByValue})
	scopes := make([]PruneScope, len(gatewayPolicyKinds))
	for i, gvk := range gatewayPolicyKinds {
		scopes[i] = PruneScope{GVK: gvk, Selector: remote, Owned: func(client.Object) bool { return true }, Live: live}
	}
	return scopes
}

// cleanUp deletes every child at a Gateway in another namespace, then drops the
// finalizer. The children are listed from the API server: a child created
// moments ago may not be in the cache yet, and would otherwise stay forever.
func (r *InferenceGatewayConfigReconciler) cleanUp(ctx context.Context, cfg *igwv1.InferenceGatewayConfig) error {
	if !controllerutil.ContainsFinalizer(cfg, FinalizerCrossNamespace) {
		return nil
	}
	if _, err := r.prune(ctx, remoteScopes(cfg.Namespace, render.LabelValue(cfg.Name), true), nil); err != nil {
		return err
	}
	patch := client.MergeFromWithOptions(cfg.DeepCopy(), client.MergeFromWithOptimisticLock{})
	controllerutil.RemoveFinalizer(cfg, FinalizerCrossNamespace)
	return client.IgnoreNotFound(r.Client.Patch(ctx, cfg, patch))
}

// deleteOrphans deletes the children beside a Gateway of a config of namespace
// that is gone (label is its name's label value), unless a config there still
// has that label value. The finalizer normally deletes them before the config
// goes, but a deletion that races with the finalizer being added removes the
// config regardless (kubernetes/kubernetes#77988), and an operator that was not
// running saw no deletion at all.
func (r *InferenceGatewayConfigReconciler) deleteOrphans(ctx context.Context, namespace, label string) error {
	var cfgs igwv1.InferenceGatewayConfigList
	if err := r.APIReader.List(ctx, &cfgs, client.InNamespace(namespace)); err != nil {
		return err
	}
	for i := range cfgs.Items {
		if render.LabelValue(cfgs.Items[i].Name) == label {
			return nil
		}
	}
	deleted, err := r.prune(ctx, remoteScopes(namespace, label, true), nil)
	if len(deleted) > 0 {
		log.FromContext(ctx).Info("deleted the children of a config that is gone", "deleted", deleted)
	}
	return err
}
