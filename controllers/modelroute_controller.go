package controllers

import (
	"cmp"
	"context"
	"fmt"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/labels"
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

// requeueWhileMissing re-checks a route whose CRDs or references are missing
// even when no event arrives (a CRD being installed sends none to this controller).
const requeueWhileMissing = 30 * time.Second

// ModelRouteReconciler turns a ModelRoute into its pool, picker and routes.
type ModelRouteReconciler struct {
	Common
	watches *lazyWatches
}

// routeChildren are the kinds of a ModelRoute's children.
var routeChildren = childKinds{
	builtin:  []schema.GroupVersionKind{GVKServiceAccount, GVKRole, GVKRoleBinding, GVKConfigMap, GVKDeployment, GVKService, GVKNetworkPolicy},
	optional: []schema.GroupVersionKind{GVKInferencePool, GVKHTTPRoute, GVKBackendTrafficPolicy, GVKEnvoyExtensionPolicy, GVKBackendTLSPolicy},
}

// requiredRouteKinds are the optional kinds a route's data path needs with cfg's provider.
func requiredRouteKinds(cfg *igwv1.InferenceGatewayConfig) []schema.GroupVersionKind {
	kinds := []schema.GroupVersionKind{GVKInferencePool, GVKGateway, GVKHTTPRoute}
	if render.ExtProcTLS(cfg) != nil {
		kinds = append(kinds, GVKBackendTLSPolicy)
	}
	if cfg.Spec.Gateway.Provider != igwv1.ProviderNative {
		kinds = append(kinds, GVKBackendTrafficPolicy, GVKEnvoyExtensionPolicy)
	}
	return kinds
}

var routeStatusAccess = statusAccess[*igwv1.ModelRoute, igwv1.ModelRouteStatus]{
	of:   func(mr *igwv1.ModelRoute) *igwv1.ModelRouteStatus { return &mr.Status },
	warn: []string{igwv1.ConditionResolvedRefs, igwv1.ConditionReady},
}

// Reconcile renders, applies and reports one ModelRoute (reconcileOwner): a
// route already deleted gets no new children.
func (r *ModelRouteReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	return reconcileOwner(ctx, &r.Common, r.watches, req.NamespacedName, &igwv1.ModelRoute{}, routeStatusAccess, r.reconcile, routeStatus,
		ownerHooks[*igwv1.ModelRoute, routeObservation]{})
}

func (o *routeObservation) refsResolved() bool { return o.Refs.ok() }

func (r *ModelRouteReconciler) reconcile(ctx context.Context, mr *igwv1.ModelRoute, o *routeObservation) error {
	pool, err := observePool(ctx, r.Client, mr)
	if err != nil {
		return err
	}
	o.Pool = &pool

	cfg := &igwv1.InferenceGatewayConfig{}
	if err := r.Client.Get(ctx, types.NamespacedName{Namespace: mr.Namespace, Name: mr.Spec.ConfigRef.Name}, cfg); err != nil {
		o.ConfigMissing = apierrors.IsNotFound(err)
		return client.IgnoreNotFound(err)
	}
	o.Config = cfg

	if missing := r.Kinds.Missing(requiredRouteKinds(cfg)...); len(missing) > 0 {
		o.Refs.add(igwv1.ReasonCRDsMissing, describeMissing(missing))
	}
	if r.Kinds.Has(GVKGateway) {
		gw := render.ResolveGateway(cfg)
		if found, err := getIfExists(ctx, r.Client, types.NamespacedName{Namespace: gw.Namespace, Name: gw.Name}, &gwapiv1.Gateway{}); err != nil {
			return err
		} else if !found {
			o.Refs.add(igwv1.ReasonGatewayNotFound, gatewayNotFoundMessage(cfg, gw))
		}
	}

	raw, usable, err := r.rawConfig(ctx, mr, &o.Refs)
	if err != nil || !usable {
		// Keep the picker on its last good configuration: render nothing new.
		o.RefsDone = err == nil
		return err
	}
	out, err := render.Route(render.RouteInput{Route: mr, Config: cfg, Images: r.Images, Observations: pool.Observations, RawConfig: raw})
	if err != nil {
		o.Refs.add(igwv1.ReasonApplyFailed, err.Error())
		return err
	}
	o.Scoring = &out.Scoring
	sel := labels.SelectorFromSet(labels.Set{render.LabelModelRoute: render.LabelValue(mr.Name), render.LabelManagedBy: render.ManagedByValue})
	kinds := routeChildren.all()
	scopes := make([]PruneScope, len(kinds))
	for i, gvk := range kinds {
		scopes[i] = PruneScope{GVK: gvk, Namespace: mr.Namespace, Selector: sel, Owned: controlledBy(mr.UID)}
	}
	if _, err := r.applyChildren(ctx, mr, out.Objects, scopes, &o.Refs); err != nil {
		return err
	}
	o.RefsDone = true
	if r.Kinds.Has(GVKInferencePool) {
		if err := r.reportPoolParent(ctx, mr, out, o.Refs.ok()); err != nil {
			return err
		}
	}
	epp, err := existing[appsv1.Deployment](ctx, r.Client, types.NamespacedName{Namespace: mr.Namespace, Name: out.Names.EPP})
	if err != nil {
		return err
	}
	o.EPP, o.EPPChecked = epp, true
	return nil
}

func gatewayNotFoundMessage(cfg *igwv1.InferenceGatewayConfig, gw render.GatewayTarget) string {
	if gw.Managed {
		return fmt.Sprintf("the managed Gateway %s is not created yet: see InferenceGatewayConfig %s's status", gw, cfg.Name)
	}
	return fmt.Sprintf("Gateway %s named by InferenceGatewayConfig %s does not exist: create it, fix spec.gateway.ref, or use spec.gateway.managed", gw, cfg.Name)
}

func usesRawConfig(mr *igwv1.ModelRoute) bool {
	return mr.Spec.Scoring != nil && mr.Spec.Scoring.ConfigMapRef != nil
}

// rawConfig reads spec.scoring.configMapRef and checks that the picker accepts
// it; usable is false when the route names one that cannot be used. A
// ConfigMap that is missing or unusable is a reference problem; one that
// cannot be read is one too, and its error is returned for a retry with backoff.
func (r *ModelRouteReconciler) rawConfig(ctx context.Context, mr *igwv1.ModelRoute, refs *refProblems) (data []byte, usable bool, err error) {
	if !usesRawConfig(mr) {
		return nil, true, nil
	}
	ref := mr.Spec.Scoring.ConfigMapRef
	return r.readRawConfigMap(ctx, refs, rawConfigMapRef{
		field: "spec.scoring.configMapRef", namespace: mr.Namespace, name: ref.Name, key: cmp.Or(ref.Key, render.EPPConfigKey),
		invalid: "a valid endpoint picker configuration (the picker keeps its last good one)",
		check: func(data []byte) error {
			_, err := eppconfig.Load(data, plugins.NewRegistry())
			return err
		},
	})
}
