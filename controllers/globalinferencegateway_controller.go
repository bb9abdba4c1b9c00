package controllers

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	igwv1 "github.com/igw-dev/igw/api/v1alpha1"
	"github.com/igw-dev/igw/pkg/global"
	"github.com/igw-dev/igw/pkg/render"
)

// GlobalInferenceGatewayReconciler runs the hub of a GlobalInferenceGateway:
// the global picker, the routes of the global models on the hub's Gateway
// and the Envoy Gateway objects that send each request to the member the
// picker chose. Its status reports each member as the picker sees it.
type GlobalInferenceGatewayReconciler struct {
	Common
	// Status reads the global picker's report.
	Status  PickerStatusReader
	watches *lazyWatches
}

// globalChildKinds are the kinds of a GlobalInferenceGateway's children, for pruning.
var globalChildKinds = []schema.GroupVersionKind{
	corev1.SchemeGroupVersion.WithKind("ConfigMap"),
	appsv1.SchemeGroupVersion.WithKind("Deployment"),
	corev1.SchemeGroupVersion.WithKind("Service"),
	GVKBackend, GVKHTTPRoute, GVKBackendTrafficPolicy, GVKEnvoyExtensionPolicy,
}

// requiredGlobalKinds are the optional kinds a hub's data path needs.
var requiredGlobalKinds = []schema.GroupVersionKind{GVKHTTPRoute, GVKBackend, GVKBackendTrafficPolicy, GVKEnvoyExtensionPolicy}

var globalStatusAccess = statusAccess[*igwv1.GlobalInferenceGateway, igwv1.GlobalInferenceGatewayStatus]{
	of:         func(g *igwv1.GlobalInferenceGateway) *igwv1.GlobalInferenceGatewayStatus { return &g.Status },
	conditions: func(s *igwv1.GlobalInferenceGatewayStatus) []metav1.Condition { return s.Conditions },
	warn:       []string{igwv1.ConditionReady},
}

// Reconcile renders, applies and reports one GlobalInferenceGateway. It is
// read from the API server, so that one already deleted gets no new
// children; its children name it as their controller, so the garbage
// collector deletes them with it. The status is written on every path,
// errors included.
func (r *GlobalInferenceGatewayReconciler) Reconcile(ctx context.Context, req ctrl.Request) (res ctrl.Result, err error) {
	if err := r.watches.ensure(); err != nil {
		return ctrl.Result{}, err
	}
	gig := &igwv1.GlobalInferenceGateway{}
	if err := r.APIReader.Get(ctx, req.NamespacedName, gig); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if gig.DeletionTimestamp != nil {
		return ctrl.Result{}, nil
	}
	prev := *gig.Status.DeepCopy()
	var o globalObservation
	defer func() {
		var wrote bool
		res, wrote, err = globalStatusAccess.end(ctx, &r.Common, gig, prev, globalStatus(gig, o, err), o.Refs.ok(), err)
		if wrote && err == nil && res.RequeueAfter == 0 && o.Picker != nil && o.Picker.Status.AvailableReplicas > 0 {
			res.RequeueAfter = globalStatusRefresh
		}
	}()
	return ctrl.Result{}, r.reconcile(ctx, gig, &o)
}

func (r *GlobalInferenceGatewayReconciler) reconcile(ctx context.Context, gig *igwv1.GlobalInferenceGateway, o *globalObservation) error {
	ns := gig.Spec.Namespace
	gw, err := r.hubGateway(ctx, gig, &o.Refs)
	if err != nil {
		return err
	}
	raw, usable, err := r.rawPipeline(ctx, gig, &o.Refs)
	if err != nil {
		return err
	}
	if o.MissingSecrets, err = r.missingSecrets(ctx, gig); err != nil {
		return err
	}
	for _, member := range gig.Spec.Members {
		if missing := o.MissingSecrets[member.Name]; len(missing) > 0 {
			o.Refs.add(igwv1.ReasonSecretNotFound, strings.Join(missing, "; "))
		}
	}
	if gw == nil || !usable {
		// Nothing to attach the routes to, or no pipeline the picker takes:
		// what runs keeps its last good configuration.
		return nil
	}
	out, err := render.Global(render.GlobalInput{Global: gig, Gateway: *gw, RawPipeline: raw, Images: r.Images})
	if err != nil {
		// A spec the API server took but no data path can serve: retrying cannot help, a change of the spec will.
		o.Invalid = err.Error()
		o.Refs.add(igwv1.ReasonInvalidSpec, err.Error())
		return nil
	}
	o.Rendered = true
	if missing := r.Kinds.Missing(requiredGlobalKinds...); len(missing) > 0 {
		o.Refs.add(igwv1.ReasonCRDsMissing, describeMissing(missing))
	}
	sel := labels.SelectorFromSet(labels.Set{render.LabelGlobal: render.LabelValue(gig.Name), render.LabelManagedBy: render.ManagedByValue})
	scopes := make([]PruneScope, len(globalChildKinds))
	for i, gvk := range globalChildKinds {
		// Every namespace: children stay behind in the old one when spec.namespace changes.
		scopes[i] = PruneScope{GVK: gvk, Selector: sel, Owned: controlledBy(gig.UID)}
	}
	if _, err := r.applyChildren(ctx, gig, out.Objects, scopes, &o.Refs); err != nil {
		return err
	}
	o.RefsDone = true

	d := &appsv1.Deployment{}
	if found, err := getIfExists(ctx, r.Client, types.NamespacedName{Namespace: ns, Name: out.Names.Picker}, d); err != nil {
		return err
	} else if found {
		o.Picker = d
	}
	o.PickerChecked = true
	if o.Picker != nil && o.Picker.Status.AvailableReplicas > 0 && r.Status != nil {
		o.Report, o.ReportErr = r.Status.Read(ctx, ns, out.Names.Picker)
	}
	return nil
}

// hubGateway is the Gateway of the one InferenceGatewayConfig in
// spec.namespace: its body-based router sets the model header the global
// routes match. nil, with the problem noted, when there is none or several.
func (r *GlobalInferenceGatewayReconciler) hubGateway(ctx context.Context, gig *igwv1.GlobalInferenceGateway, refs *refProblems) (*render.GatewayTarget, error) {
	var cfgs igwv1.InferenceGatewayConfigList
	if err := r.Client.List(ctx, &cfgs, client.InNamespace(gig.Spec.Namespace)); err != nil {
		return nil, err
	}
	var names []string
	for _, c := range cfgs.Items {
		if c.DeletionTimestamp == nil {
			names = append(names, c.Name)
		}
	}
	switch len(names) {
	case 0:
		refs.add(igwv1.ReasonConfigNotFound, fmt.Sprintf("namespace %q has no InferenceGatewayConfig: create one there; the global routes attach to its Gateway, and its body-based router sets the model header they match", gig.Spec.Namespace))
		return nil, nil
	case 1:
	default:
		slices.Sort(names)
		refs.add(igwv1.ReasonConfigNotFound, fmt.Sprintf("namespace %q has several InferenceGatewayConfigs (%s), so the hub's Gateway is ambiguous: keep one there", gig.Spec.Namespace, strings.Join(names, ", ")))
		return nil, nil
	}
	for i := range cfgs.Items {
		if cfgs.Items[i].Name == names[0] {
			gw := render.ResolveGateway(&cfgs.Items[i])
			return &gw, nil
		}
	}
	return nil, nil
}

// rawPipeline reads routing.configMapRef and checks that the global picker
// accepts it; usable is false when one is named that cannot be used.
func (r *GlobalInferenceGatewayReconciler) rawPipeline(ctx context.Context, gig *igwv1.GlobalInferenceGateway, refs *refProblems) (data []byte, usable bool, err error) {
	if gig.Spec.Routing == nil || gig.Spec.Routing.ConfigMapRef == nil {
		return nil, true, nil
	}
	ref := gig.Spec.Routing.ConfigMapRef
	key := cmp.Or(ref.Key, render.GlobalConfigKey)
	var cm corev1.ConfigMap
	if err := r.Client.Get(ctx, types.NamespacedName{Namespace: gig.Spec.Namespace, Name: ref.Name}, &cm); err != nil {
		if apierrors.IsNotFound(err) {
			refs.add(igwv1.ReasonConfigMapNotFound, fmt.Sprintf("ConfigMap %q of routing.configMapRef not found in namespace %q: create it or drop configMapRef", ref.Name, gig.Spec.Namespace))
			return nil, false, nil
		}
		refs.add(igwv1.ReasonConfigMapUnreadable, fmt.Sprintf("ConfigMap %q of routing.configMapRef cannot be read (the picker keeps its last good configuration): %v", ref.Name, err))
		return nil, false, fmt.Errorf("reading ConfigMap %s of routing.configMapRef: %w", ref.Name, err)
	}
	content, ok := cm.Data[key]
	if !ok {
		refs.add(igwv1.ReasonConfigMapKeyMissing, fmt.Sprintf("ConfigMap %q has no key %q: add it or set routing.configMapRef.key", ref.Name, key))
		return nil, false, nil
	}
	if _, err := global.LoadPipeline([]byte(content)); err != nil {
		refs.add(igwv1.ReasonInvalidEPPConfig, fmt.Sprintf("ConfigMap %q key %q is not a pipeline the global picker accepts (it keeps its last good one): %v", ref.Name, key, err))
		return nil, false, nil
	}
	return []byte(content), true, nil
}

// missingSecrets are, by member, the Secrets it names that do not exist. Only
// their metadata is read, from the API server: the operator never holds a
// member's token, nor watches Secrets; a missing one is looked for again at
// the next re-check.
func (r *GlobalInferenceGatewayReconciler) missingSecrets(ctx context.Context, gig *igwv1.GlobalInferenceGateway) (map[string][]string, error) {
	out := map[string][]string{}
	for _, m := range gig.Spec.Members {
		refs := []struct {
			field string
			ref   *igwv1.SecretKeyRef
		}{{"credentialsSecretRef", &m.CredentialsSecretRef}, {"caSecretRef", m.CASecretRef}}
		for _, ref := range refs {
			if ref.ref == nil {
				continue
			}
			s := &metav1.PartialObjectMetadata{}
			s.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("Secret"))
			found, err := getIfExists(ctx, r.APIReader, types.NamespacedName{Namespace: gig.Spec.Namespace, Name: ref.ref.Name}, s)
			if err != nil {
				return nil, fmt.Errorf("reading Secret %s of members[%s].%s: %w", ref.ref.Name, m.Name, ref.field, err)
			}
			if !found {
				out[m.Name] = append(out[m.Name], fmt.Sprintf("Secret %s/%s of members[%s].%s does not exist: create it with key %q",
					gig.Spec.Namespace, ref.ref.Name, m.Name, ref.field, cmp.Or(ref.ref.Key, "token")))
			}
		}
	}
	return out, nil
}
