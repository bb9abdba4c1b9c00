package controllers

import (
	"slices"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime/schema"
	gwapiv1 "sigs.k8s.io/gateway-api/apis/v1"

	igwv1 "github.com/igw-dev/igw/api/v1alpha1"
	"github.com/igw-dev/igw/pkg/render"
)

// configObservation is what one reconcile of a config found and did: the
// input of configStatus. A reconcile that fails leaves the later fields unset.
type configObservation struct {
	// Deleting: the config is being deleted; the reconcile only cleaned up.
	Deleting bool

	Routes       []igwv1.ModelRoute
	RoutesListed bool

	// Rendered: the children were rendered, with these adapter conflicts.
	Rendered         bool
	AdapterConflicts []string

	// Refs are the problems met applying the children; RefsDone, that every
	// child was applied or found in the way.
	Refs     refProblems
	RefsDone bool

	// GatewayChecked: the Gateway was looked up (if its kind is served); Gateway is nil when it does not exist.
	GatewayChecked bool
	GatewayServed  bool
	Gateway        *gwapiv1.Gateway

	// BBRChecked: the router's Deployment was looked up (if the router is on); BBR is nil when it does not exist.
	BBRChecked bool
	BBR        *appsv1.Deployment

	// Hook is what was seen of the extension hook once every child was applied; nil before.
	Hook *hookObservation
}

// configStatus is a config's status after a reconcile that observed o and
// ended with err. What the reconcile did not get to observe keeps its previous
// condition, and Ready says why it is Unknown.
func configStatus(cfg *igwv1.InferenceGatewayConfig, o configObservation, err error) (st igwv1.InferenceGatewayConfigStatus) {
	st = *cfg.Status.DeepCopy()
	conds := newConditions(st.Conditions, cfg.Generation)
	defer func() { st.Conditions = conds.list }()
	gw := render.ResolveGateway(cfg)
	if o.Deleting {
		if err != nil {
			conds.set(igwv1.ConditionReady, false, igwv1.ReasonCleanupFailed,
				"the config is being deleted, but deleting its policies beside Gateway %s failed (retrying): %v", gw, err)
		}
		return st
	}
	st.ObservedGeneration = cfg.Generation
	st.GatewayName = gw.String()
	if o.RoutesListed {
		st.Models = modelSummaries(o.Routes)
	}
	if o.Rendered {
		accepted := []string{"the config is valid"}
		if cfg.Spec.TLS != nil && !gw.Managed {
			accepted = append(accepted, "spec.tls applies to managed gateways only and is ignored: configure TLS on Gateway "+gw.String())
		}
		if len(o.AdapterConflicts) > 0 {
			accepted = append(accepted, "adapters declared with different base models by several ModelRoutes (the first route by name wins): "+strings.Join(o.AdapterConflicts, ", "))
		}
		conds.set(igwv1.ConditionAccepted, true, igwv1.ReasonAccepted, "%s", strings.Join(accepted, "; "))
	}
	if o.GatewayChecked {
		gatewayCondition(conds, cfg, gw, o.GatewayServed, o.Gateway)
	}
	if o.BBRChecked {
		bbrCondition(conds, cfg, o.BBR)
	}
	if o.Hook != nil {
		hookCondition(conds, *o.Hook)
	}
	switch {
	case !o.Refs.ok():
		conds.set(igwv1.ConditionReady, false, o.Refs.reason(), "%s", o.Refs.message())
	case err != nil:
		conds.setUnknown(igwv1.ConditionReady, igwv1.ReasonReconcileError, "%v (retrying)", err)
	case !conds.isTrue(igwv1.ConditionGatewayProgrammed):
		conds.set(igwv1.ConditionReady, false, meta.FindStatusCondition(conds.list, igwv1.ConditionGatewayProgrammed).Reason, "see the GatewayProgrammed condition")
	case !conds.isTrue(igwv1.ConditionBBRReady):
		conds.set(igwv1.ConditionReady, false, igwv1.ReasonBBRUnavailable, "see the BBRReady condition")
	default:
		conds.set(igwv1.ConditionReady, true, igwv1.ReasonReady, "the gateway is programmed and every gateway-wide child is applied")
	}
	return st
}

// gatewayCondition sets GatewayProgrammed from the config's Gateway (nil: not found).
func gatewayCondition(conds *conditions, cfg *igwv1.InferenceGatewayConfig, gw render.GatewayTarget, served bool, g *gwapiv1.Gateway) {
	if !served {
		conds.set(igwv1.ConditionGatewayProgrammed, false, igwv1.ReasonCRDsMissing, "%s", describeMissing([]schema.GroupVersionKind{GVKGateway}))
		return
	}
	if g == nil {
		conds.set(igwv1.ConditionGatewayProgrammed, false, igwv1.ReasonGatewayNotFound, "%s", gatewayNotFoundMessage(cfg, gw))
		return
	}
	p := meta.FindStatusCondition(g.Status.Conditions, string(gwapiv1.GatewayConditionProgrammed))
	switch {
	case p == nil:
		conds.set(igwv1.ConditionGatewayProgrammed, false, igwv1.ReasonGatewayNotProgrammed,
			"Gateway %s has no Programmed condition yet: check that a controller serves GatewayClass %s", gw, g.Spec.GatewayClassName)
	case p.Status != "True":
		conds.set(igwv1.ConditionGatewayProgrammed, false, igwv1.ReasonGatewayNotProgrammed, "Gateway %s is not programmed (%s): %s", gw, p.Reason, p.Message)
	default:
		conds.set(igwv1.ConditionGatewayProgrammed, true, igwv1.ReasonProgrammed, "Gateway %s is programmed", gw)
	}
}

// bbrCondition sets BBRReady from the router's Deployment (nil: not found).
func bbrCondition(conds *conditions, cfg *igwv1.InferenceGatewayConfig, d *appsv1.Deployment) {
	name := render.NamesForConfig(cfg.Name).BBR
	switch {
	case !render.BBREnabled(cfg):
		conds.set(igwv1.ConditionBBRReady, true, igwv1.ReasonBBRDisabled, "the body-based router is off: clients must send the %s header", "x-gateway-model-name")
	case d == nil:
		conds.set(igwv1.ConditionBBRReady, false, igwv1.ReasonBBRUnavailable, "the body-based router Deployment %s does not exist yet", name)
	case d.Status.AvailableReplicas == 0:
		conds.set(igwv1.ConditionBBRReady, false, igwv1.ReasonBBRUnavailable, "the body-based router Deployment %s has no available replica: check its Pods and events", name)
	default:
		conds.set(igwv1.ConditionBBRReady, true, igwv1.ReasonBBRAvailable, "%d replica(s) available", d.Status.AvailableReplicas)
	}
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
