package controllers

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
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

// globalChildren are the kinds of a GlobalInferenceGateway's children.
var globalChildren = childKinds{
	builtin:  []schema.GroupVersionKind{GVKConfigMap, GVKDeployment, GVKService},
	optional: []schema.GroupVersionKind{GVKBackend, GVKHTTPRoute, GVKBackendTrafficPolicy, GVKEnvoyExtensionPolicy},
}

// requiredGlobalKinds are the optional kinds a hub's data path needs.
var requiredGlobalKinds = []schema.GroupVersionKind{GVKHTTPRoute, GVKBackend, GVKBackendTrafficPolicy, GVKEnvoyExtensionPolicy}

var globalStatusAccess = statusAccess[*igwv1.GlobalInferenceGateway, igwv1.GlobalInferenceGatewayStatus]{
	of:   func(g *igwv1.GlobalInferenceGateway) *igwv1.GlobalInferenceGatewayStatus { return &g.Status },
	warn: []string{igwv1.ConditionReady},
}

// Reconcile renders, applies and reports one GlobalInferenceGateway
// (reconcileOwner). One already deleted gets no new children: they name it
// as their controller, so the garbage collector deletes them with it. While
// its picker runs, the members' state in the status is refreshed.
func (r *GlobalInferenceGatewayReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	return reconcileOwner(ctx, &r.Common, r.watches, req.NamespacedName, &igwv1.GlobalInferenceGateway{}, globalStatusAccess, r.reconcile, globalStatus,
		ownerHooks[*igwv1.GlobalInferenceGateway, globalObservation]{written: func(_ *igwv1.GlobalInferenceGateway, o *globalObservation, res *ctrl.Result) {
			if res.RequeueAfter == 0 && o.Picker != nil && o.Picker.Status.AvailableReplicas > 0 {
				res.RequeueAfter = globalStatusRefresh
			}
		}})
}

func (o *globalObservation) refsResolved() bool { return o.Refs.ok() }

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
	kinds := globalChildren.all()
	scopes := make([]PruneScope, len(kinds))
	for i, gvk := range kinds {
		// Every namespace: children stay behind in the old one when spec.namespace changes.
		scopes[i] = PruneScope{GVK: gvk, Selector: sel, Owned: controlledBy(gig.UID)}
	}
	if _, err := r.applyChildren(ctx, gig, out.Objects, scopes, &o.Refs); err != nil {
		return err
	}
	o.RefsDone = true

	picker, err := existing[appsv1.Deployment](ctx, r.Client, types.NamespacedName{Namespace: ns, Name: out.Names.Picker})
	if err != nil {
		return err
	}
	o.Picker, o.PickerChecked = picker, true
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
	return r.readRawConfigMap(ctx, refs, rawConfigMapRef{
		field: "routing.configMapRef", namespace: gig.Spec.Namespace, name: ref.Name, key: cmp.Or(ref.Key, render.GlobalConfigKey),
		invalid: "a pipeline the global picker accepts (it keeps its last good one)",
		check: func(data []byte) error {
			_, err := global.LoadPipeline(data)
			return err
		},
	})
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
