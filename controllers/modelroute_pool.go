package controllers

import (
	"context"

	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	infv1 "sigs.k8s.io/gateway-api-inference-extension/api/v1"

	igwv1 "github.com/igw-dev/igw/api/v1alpha1"
	"github.com/igw-dev/igw/pkg/render"
)

// ControllerName identifies igw's entry in an InferencePool's status.parents.
// Each controller edits only its own entry, so the list is read, changed in
// that one place and written back with optimistic locking.
const ControllerName = "gateway.igw.dev/operator"

// reportPoolParent writes igw's status.parents entry of the route's pool: the
// Gateway the pool is served through, Accepted and ResolvedRefs.
func (r *ModelRouteReconciler) reportPoolParent(ctx context.Context, mr *igwv1.ModelRoute, out render.RouteOutput, resolved bool) error {
	pool := &infv1.InferencePool{}
	if err := r.Client.Get(ctx, types.NamespacedName{Namespace: mr.Namespace, Name: out.Names.Pool}, pool); err != nil {
		if apierrors.IsNotFound(err) {
			return nil // just created: the watch brings it back
		}
		return err
	}
	if !controlledBy(mr.UID)(pool) {
		return nil
	}
	group := infv1.Group(render.GroupGatewayAPI)
	ref := infv1.ParentReference{Group: &group, Kind: render.KindGateway,
		Name: infv1.ObjectName(out.Gateway.Name), Namespace: infv1.Namespace(out.Gateway.Namespace)}

	// Our entry stays where it is, so that controllers editing theirs never reorder the list.
	var parents []infv1.ParentStatus
	mine := -1
	for _, p := range pool.Status.Parents {
		if p.ControllerName != ControllerName {
			parents = append(parents, p)
		} else if mine < 0 && equality.Semantic.DeepEqual(p.ParentRef, ref) {
			mine = len(parents)
			parents = append(parents, *p.DeepCopy())
		} // else: ours for a Gateway the config no longer names, dropped
	}
	if mine < 0 {
		mine = len(parents)
		parents = append(parents, infv1.ParentStatus{ParentRef: ref, ControllerName: ControllerName})
	}
	conds := newConditions(parents[mine].Conditions, pool.Generation)
	conds.set(string(infv1.InferencePoolConditionAccepted), true, string(infv1.InferencePoolReasonAccepted),
		"served by igw through Gateway %s by HTTPRoute %s", out.Gateway, out.Names.HTTPRoute)
	if resolved {
		conds.set(string(infv1.InferencePoolConditionResolvedRefs), true, string(infv1.InferencePoolReasonResolvedRefs),
			"endpoint picker Service %s", out.Names.EPP)
	} else {
		conds.set(string(infv1.InferencePoolConditionResolvedRefs), false, string(infv1.InferencePoolReasonInvalidExtensionRef),
			"see the ResolvedRefs condition of ModelRoute %s", mr.Name)
	}
	parents[mine].Conditions = conds.list
	if equality.Semantic.DeepEqual(parents, pool.Status.Parents) {
		return nil
	}
	pool.Status.Parents = parents
	return r.Client.Status().Update(ctx, pool)
}
