package controllers

import (
	"context"
	"reflect"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	igwv1 "github.com/igw-dev/igw/api/v1alpha1"
	"github.com/igw-dev/igw/pkg/render"
)

// Field indexes of ModelRoutes.
const (
	indexConfigRef    = "spec.configRef.name"
	indexRawConfigMap = "spec.scoring.configMapRef.name"
)

// Options configure the reconcilers.
type Options struct {
	Images                  render.Images
	MaxConcurrentReconciles int
	// Hook, when set, is watched for Envoy Gateway's calls of the extension
	// hook: configs on Envoy Gateway get ExtensionHookActive, False when a
	// change of their children goes HookBound (DefaultHookBound when zero) without a call.
	Hook      HookCalls
	HookBound time.Duration
	// PickerStatus reads a global picker's GET /status; nil: over HTTP by the
	// Service's cluster DNS name.
	PickerStatus PickerStatusReader
}

// Reconcilers are the operator's reconcilers, returned so that tests can drive them directly.
type Reconcilers struct {
	ModelRoute *ModelRouteReconciler
	Config     *InferenceGatewayConfigReconciler
	Global     *GlobalInferenceGatewayReconciler
}

// Setup registers the reconcilers with mgr.
func Setup(ctx context.Context, mgr ctrl.Manager, o Options) (*Reconcilers, error) {
	idx := mgr.GetFieldIndexer()
	if err := idx.IndexField(ctx, &igwv1.ModelRoute{}, indexConfigRef, func(o client.Object) []string {
		return []string{o.(*igwv1.ModelRoute).Spec.ConfigRef.Name}
	}); err != nil {
		return nil, err
	}
	if err := idx.IndexField(ctx, &igwv1.ModelRoute{}, indexRawConfigMap, func(o client.Object) []string {
		if s := o.(*igwv1.ModelRoute).Spec.Scoring; s != nil && s.ConfigMapRef != nil {
			return []string{s.ConfigMapRef.Name}
		}
		return nil
	}); err != nil {
		return nil, err
	}
	kinds := NewKinds(mgr.GetRESTMapper())
	common := Common{
		Client: mgr.GetClient(), APIReader: mgr.GetAPIReader(), Scheme: mgr.GetScheme(), Kinds: kinds, Images: o.Images,
		Applier: &Applier{Client: mgr.GetClient(), APIReader: mgr.GetAPIReader(), Scheme: mgr.GetScheme()},
		Events:  recorder{mgr.GetEventRecorder("igw-operator")},
		Hook:    o.Hook, HookBound: o.HookBound,
	}
	if common.HookBound <= 0 {
		common.HookBound = DefaultHookBound
	}
	mr := &ModelRouteReconciler{Common: common}
	cfg := &InferenceGatewayConfigReconciler{Common: common}
	opts := controller.Options{MaxConcurrentReconciles: max(1, o.MaxConcurrentReconciles)}
	if err := mr.setup(mgr, opts); err != nil {
		return nil, err
	}
	if err := cfg.setup(mgr, opts); err != nil {
		return nil, err
	}
	gig := &GlobalInferenceGatewayReconciler{Common: common, Status: o.PickerStatus}
	if gig.Status == nil {
		gig.Status = HTTPPickerStatus{}
	}
	if err := gig.setup(mgr, opts); err != nil {
		return nil, err
	}
	return &Reconcilers{ModelRoute: mr, Config: cfg, Global: gig}, nil
}

func (r *GlobalInferenceGatewayReconciler) setup(mgr ctrl.Manager, opts controller.Options) (err error) {
	r.watches, err = setupController(mgr, opts, r, r.Kinds, controllerSpec{
		name: "globalinferencegateway", owner: &igwv1.GlobalInferenceGateway{}, children: globalChildren,
		watches: func(b *builder.Builder) *builder.Builder {
			return b.Watches(&igwv1.InferenceGatewayConfig{}, handler.EnqueueRequestsFromMapFunc(r.globalsInNamespace),
				builder.WithPredicates(predicate.GenerationChangedPredicate{})).
				Watches(&corev1.ConfigMap{}, handler.EnqueueRequestsFromMapFunc(r.globalsForPipeline))
		},
		forCRD: r.globalsForCRD,
	})
	return err
}

// globals lists the GlobalInferenceGateways keep selects.
func (r *GlobalInferenceGatewayReconciler) globals(ctx context.Context, keep func(*igwv1.GlobalInferenceGateway) bool) []reconcile.Request {
	var gigs igwv1.GlobalInferenceGatewayList
	if err := r.Client.List(ctx, &gigs); err != nil {
		return nil
	}
	var out []reconcile.Request
	for i := range gigs.Items {
		if keep(&gigs.Items[i]) {
			out = append(out, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(&gigs.Items[i])})
		}
	}
	return out
}

// globalsInNamespace maps an InferenceGatewayConfig to the hubs in its namespace, whose Gateway it gives.
func (r *GlobalInferenceGatewayReconciler) globalsInNamespace(ctx context.Context, obj client.Object) []reconcile.Request {
	return r.globals(ctx, func(g *igwv1.GlobalInferenceGateway) bool { return g.Spec.Namespace == obj.GetNamespace() })
}

// globalsForPipeline maps a ConfigMap to the hubs whose routing.configMapRef names it.
func (r *GlobalInferenceGatewayReconciler) globalsForPipeline(ctx context.Context, obj client.Object) []reconcile.Request {
	return r.globals(ctx, func(g *igwv1.GlobalInferenceGateway) bool {
		return g.Spec.Namespace == obj.GetNamespace() && g.Spec.Routing != nil && g.Spec.Routing.ConfigMapRef != nil &&
			g.Spec.Routing.ConfigMapRef.Name == obj.GetName()
	})
}

func (r *GlobalInferenceGatewayReconciler) globalsForCRD(ctx context.Context, _ client.Object) []reconcile.Request {
	r.Kinds.ForgetMissing()
	return r.globals(ctx, func(*igwv1.GlobalInferenceGateway) bool { return true })
}

func (r *ModelRouteReconciler) setup(mgr ctrl.Manager, opts controller.Options) (err error) {
	r.watches, err = setupController(mgr, opts, r, r.Kinds, controllerSpec{
		name: "modelroute", owner: &igwv1.ModelRoute{}, children: routeChildren,
		watches: func(b *builder.Builder) *builder.Builder {
			return b.Watches(&corev1.Pod{}, handler.EnqueueRequestsFromMapFunc(r.routesForPod), builder.WithPredicates(endpointChange)).
				Watches(&igwv1.InferenceGatewayConfig{}, handler.EnqueueRequestsFromMapFunc(r.routesForConfig),
					builder.WithPredicates(predicate.GenerationChangedPredicate{})).
				Watches(&corev1.ConfigMap{}, handler.EnqueueRequestsFromMapFunc(r.routesForRawConfig))
		},
		forCRD:     r.routesForCRD,
		forGateway: r.routesForGateway,
	})
	return err
}

func (r *InferenceGatewayConfigReconciler) setup(mgr ctrl.Manager, opts controller.Options) (err error) {
	r.watches, err = setupController(mgr, opts, r, r.Kinds, controllerSpec{
		name: "inferencegatewayconfig", owner: &igwv1.InferenceGatewayConfig{}, children: configChildren,
		watches: func(b *builder.Builder) *builder.Builder {
			b = b.Watches(&igwv1.ModelRoute{}, handler.EnqueueRequestsFromMapFunc(configOfRoute))
			if r.Hook != nil {
				b = b.WatchesRawSource(r.hookSource(r.Hook))
			}
			return b
		},
		forCRD: r.configsForCRD,
		// Policies beside a Gateway in another namespace can have no owner
		// reference (configsForChild).
		optionalEvents: handler.EnqueueRequestsFromMapFunc(r.configsForChild),
		forGateway:     r.configsForGateway,
	})
	return err
}

// controllerSpec is what a reconciler's controller watches.
type controllerSpec struct {
	name string
	// owner is the kind reconciled, watched for changes of its spec.
	owner    client.Object
	children childKinds
	// watches adds the watches of the other objects an owner depends on.
	watches func(*builder.Builder) *builder.Builder
	// forCRD maps a CRD's installation or removal to the owners to reconcile.
	forCRD handler.MapFunc
	// optionalEvents handles the events of the children of optional kinds
	// (nil: they go to their controller, the owner).
	optionalEvents handler.EventHandler
	// forGateway, when set, maps a Gateway's events (Gateway is then watched,
	// child or not) to the owners to reconcile.
	forGateway handler.MapFunc
}

// setupController builds the controller of r as s says and returns its watches
// of the optional kinds, started on those already served.
func setupController(mgr ctrl.Manager, opts controller.Options, r reconcile.Reconciler, kinds *Kinds, s controllerSpec) (*lazyWatches, error) {
	b := ctrl.NewControllerManagedBy(mgr).
		Named(s.name).
		For(s.owner, builder.WithPredicates(predicate.GenerationChangedPredicate{})).
		WatchesMetadata(crdMetadata(), handler.EnqueueRequestsFromMapFunc(s.forCRD), builder.WithPredicates(watchedCRD))
	for _, gvk := range s.children.builtin {
		obj, err := mgr.GetScheme().New(gvk)
		if err != nil {
			return nil, err
		}
		b = b.Owns(obj.(client.Object))
	}
	c, err := s.watches(b).WithOptions(opts).Build(r)
	if err != nil {
		return nil, err
	}
	optional := s.optionalEvents
	if optional == nil {
		optional = handler.EnqueueRequestForOwner(mgr.GetScheme(), mgr.GetRESTMapper(), s.owner, handler.OnlyControllerOwner())
	}
	want, gateway := s.children.optional, handler.EventHandler(nil)
	if s.forGateway != nil {
		gateway = handler.EnqueueRequestsFromMapFunc(s.forGateway)
		if !slices.Contains(want, GVKGateway) {
			want = append(slices.Clip(want), GVKGateway)
		}
	}
	w := &lazyWatches{ctrl: c, cache: mgr.GetCache(), scheme: mgr.GetScheme(), kinds: kinds, want: want,
		handler: func(gvk schema.GroupVersionKind) handler.EventHandler {
			if gvk == GVKGateway && gateway != nil {
				return gateway
			}
			return optional
		}}
	return w, w.ensure()
}

// crdMetadata is the object of a metadata-only watch on CRDs: installing Gateway
// API, the inference extension or Envoy Gateway then reaches every object at once,
// instead of at its next periodic re-check.
func crdMetadata() *metav1.PartialObjectMetadata {
	m := &metav1.PartialObjectMetadata{}
	m.SetGroupVersionKind(schema.GroupVersionKind{Group: "apiextensions.k8s.io", Version: "v1", Kind: "CustomResourceDefinition"})
	return m
}

var watchedCRD = predicate.NewPredicateFuncs(func(o client.Object) bool { return isWatchedCRD(o.GetName()) })

func (r *ModelRouteReconciler) routesForCRD(ctx context.Context, _ client.Object) []reconcile.Request {
	r.Kinds.ForgetMissing()
	var routes igwv1.ModelRouteList
	if err := r.Client.List(ctx, &routes); err != nil {
		return nil
	}
	return routeRequests(routes.Items)
}

func (r *InferenceGatewayConfigReconciler) configsForCRD(ctx context.Context, _ client.Object) []reconcile.Request {
	r.Kinds.ForgetMissing()
	var cfgs igwv1.InferenceGatewayConfigList
	if err := r.Client.List(ctx, &cfgs); err != nil {
		return nil
	}
	ptrs := make([]*igwv1.InferenceGatewayConfig, len(cfgs.Items))
	for i := range cfgs.Items {
		ptrs[i] = &cfgs.Items[i]
	}
	return requestsFor(ptrs)
}

// endpointChange passes pod events that can change a route's endpoints or
// accelerator types, and drops the frequent status updates that cannot.
var endpointChange = predicate.Funcs{UpdateFunc: func(e event.UpdateEvent) bool {
	o, n := e.ObjectOld.(*corev1.Pod), e.ObjectNew.(*corev1.Pod)
	return !reflect.DeepEqual(o.Labels, n.Labels) || o.Status.PodIP != n.Status.PodIP || podReady(o) != podReady(n) ||
		o.Spec.NodeName != n.Spec.NodeName || o.Status.Phase != n.Status.Phase || (o.DeletionTimestamp == nil) != (n.DeletionTimestamp == nil)
}}

func requestsFor[T client.Object](items []T) []reconcile.Request {
	out := make([]reconcile.Request, len(items))
	for i, o := range items {
		out[i] = reconcile.Request{NamespacedName: client.ObjectKeyFromObject(o)}
	}
	return out
}

func routeRequests(routes []igwv1.ModelRoute) []reconcile.Request {
	ptrs := make([]*igwv1.ModelRoute, len(routes))
	for i := range routes {
		ptrs[i] = &routes[i]
	}
	return requestsFor(ptrs)
}

func (r *ModelRouteReconciler) routesForPod(ctx context.Context, obj client.Object) []reconcile.Request {
	var routes igwv1.ModelRouteList
	if err := r.Client.List(ctx, &routes, client.InNamespace(obj.GetNamespace())); err != nil {
		return nil
	}
	var out []reconcile.Request
	for i := range routes.Items {
		if selects(&routes.Items[i], obj.GetLabels()) {
			out = append(out, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(&routes.Items[i])})
		}
	}
	return out
}

func (r *ModelRouteReconciler) routesForConfig(ctx context.Context, obj client.Object) []reconcile.Request {
	return r.routesByIndex(ctx, obj.GetNamespace(), indexConfigRef, obj.GetName())
}

func (r *ModelRouteReconciler) routesForRawConfig(ctx context.Context, obj client.Object) []reconcile.Request {
	return r.routesByIndex(ctx, obj.GetNamespace(), indexRawConfigMap, obj.GetName())
}

func (r *ModelRouteReconciler) routesByIndex(ctx context.Context, namespace, index, value string) []reconcile.Request {
	var routes igwv1.ModelRouteList
	if err := r.Client.List(ctx, &routes, client.InNamespace(namespace), client.MatchingFields{index: value}); err != nil {
		return nil
	}
	return routeRequests(routes.Items)
}

func (r *ModelRouteReconciler) routesForGateway(ctx context.Context, obj client.Object) []reconcile.Request {
	var out []reconcile.Request
	for _, cfg := range configsServedBy(ctx, r.Client, obj) {
		out = append(out, r.routesByIndex(ctx, cfg.Namespace, indexConfigRef, cfg.Name)...)
	}
	return out
}

// configsServedBy lists the configs whose Gateway is gw.
func configsServedBy(ctx context.Context, c client.Client, gw client.Object) []igwv1.InferenceGatewayConfig {
	var cfgs igwv1.InferenceGatewayConfigList
	if err := c.List(ctx, &cfgs); err != nil {
		return nil
	}
	var out []igwv1.InferenceGatewayConfig
	for _, cfg := range cfgs.Items {
		if t := render.ResolveGateway(&cfg); t.Name == gw.GetName() && t.Namespace == gw.GetNamespace() {
			out = append(out, cfg)
		}
	}
	return out
}

func (r *InferenceGatewayConfigReconciler) configsForGateway(ctx context.Context, obj client.Object) []reconcile.Request {
	cfgs := configsServedBy(ctx, r.Client, obj)
	ptrs := make([]*igwv1.InferenceGatewayConfig, len(cfgs))
	for i := range cfgs {
		ptrs[i] = &cfgs[i]
	}
	return requestsFor(ptrs)
}

// configsForChild maps a child to its config: by controller reference in the
// config's namespace, by the config-namespace label elsewhere (a child whose
// config is gone still maps to a reconcile, which deletes it).
func (r *InferenceGatewayConfigReconciler) configsForChild(ctx context.Context, obj client.Object) []reconcile.Request {
	if ref := metav1.GetControllerOfNoCopy(obj); ref != nil {
		if ref.Kind == render.KindConfig && ref.APIVersion == igwv1.GroupVersion.String() {
			return []reconcile.Request{{NamespacedName: types.NamespacedName{Namespace: obj.GetNamespace(), Name: ref.Name}}}
		}
		return nil
	}
	l := obj.GetLabels()
	ns, label := l[render.LabelConfigNamespace], l[render.LabelConfig]
	if ns == "" || label == "" || l[render.LabelManagedBy] != render.ManagedByValue {
		return nil
	}
	var cfgs igwv1.InferenceGatewayConfigList
	if err := r.Client.List(ctx, &cfgs, client.InNamespace(ns)); err != nil {
		return nil
	}
	var out []reconcile.Request
	for i := range cfgs.Items {
		if render.LabelValue(cfgs.Items[i].Name) == label {
			out = append(out, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(&cfgs.Items[i])})
		}
	}
	if len(out) == 0 {
		// No config has it: the reconcile of its label value finds none
		// either (read live) and deletes it as an orphan.
		out = append(out, reconcile.Request{NamespacedName: types.NamespacedName{Namespace: ns, Name: label}})
	}
	return out
}

func configOfRoute(_ context.Context, obj client.Object) []reconcile.Request {
	mr := obj.(*igwv1.ModelRoute)
	return []reconcile.Request{{NamespacedName: types.NamespacedName{Namespace: mr.Namespace, Name: mr.Spec.ConfigRef.Name}}}
}
