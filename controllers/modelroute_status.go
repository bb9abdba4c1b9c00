package controllers

import (
	"fmt"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	"k8s.io/apimachinery/pkg/labels"

	igwv1 "github.com/igw-dev/igw/api/v1alpha1"
	"github.com/igw-dev/igw/pkg/render"
)

// routeObservation is what one reconcile of a ModelRoute found and did: the
// input of routeStatus. A reconcile that fails leaves the later fields unset.
type routeObservation struct {
	// Pool counts the selected pods' endpoints; nil when they could not be listed.
	Pool *poolObservation
	// Config is the route's config; ConfigMissing says it does not exist.
	Config        *igwv1.InferenceGatewayConfig
	ConfigMissing bool
	// Refs are the references that do not resolve and the children not
	// applied; RefsDone, that every reference was checked and every child applied.
	Refs     refProblems
	RefsDone bool
	// Scoring is the scoring in effect, when the route was rendered.
	Scoring *igwv1.ScoringStatus
	// EPPChecked: the picker's Deployment was looked up; EPP is nil when it does not exist.
	EPPChecked bool
	EPP        *appsv1.Deployment
}

// routeStatus is a route's status after a reconcile that observed o and ended
// with err. What the reconcile did not get to observe keeps its previous value,
// and Ready says why it is Unknown.
func routeStatus(mr *igwv1.ModelRoute, o routeObservation, err error) (st igwv1.ModelRouteStatus) {
	st = *mr.Status.DeepCopy()
	st.ObservedGeneration = mr.Generation
	st.InferencePool = render.NamesForRoute(mr.Name).Pool
	conds := newConditions(st.Conditions, mr.Generation)
	defer func() { st.Conditions = conds.list }()
	if o.Pool != nil {
		st.ReadyEndpoints, st.TotalEndpoints = o.Pool.ReadyEndpoints, o.Pool.TotalEndpoints
	}
	if o.Scoring != nil {
		st.Scoring = o.Scoring
	}
	switch {
	case o.ConfigMissing:
		msg := fmt.Sprintf("InferenceGatewayConfig %q not found in namespace %q: create it or fix spec.configRef.name", mr.Spec.ConfigRef.Name, mr.Namespace)
		conds.set(igwv1.ConditionAccepted, false, igwv1.ReasonConfigNotFound, "%s", msg)
		conds.set(igwv1.ConditionResolvedRefs, false, igwv1.ReasonConfigNotFound, "%s", msg)
	case o.Config != nil:
		conds.set(igwv1.ConditionAccepted, true, igwv1.ReasonAccepted, "the route is served through InferenceGatewayConfig %s", o.Config.Name)
		switch {
		case !o.Refs.ok():
			conds.set(igwv1.ConditionResolvedRefs, false, o.Refs.reason(), "%s", o.Refs.message())
		case o.RefsDone:
			conds.set(igwv1.ConditionResolvedRefs, true, igwv1.ReasonResolvedRefs, "every reference resolved and every child is applied")
		}
	}
	// After a failure, Ready is known only if the endpoints were counted and
	// either a reference failed or the picker was looked up.
	if known := o.Pool != nil && (err == nil || o.ConfigMissing || !o.Refs.ok() || o.EPPChecked); !known {
		conds.setUnknown(igwv1.ConditionReady, igwv1.ReasonReconcileError, "%v (retrying)", err)
		return st
	}
	readiness(conds, &st, mr, *o.Pool, o.EPP)
	return st
}

// readiness sets Ready, Degraded and the rollout state from the endpoints and
// the picker's Deployment (nil: none).
func readiness(conds *conditions, st *igwv1.ModelRouteStatus, mr *igwv1.ModelRoute, pool poolObservation, epp *appsv1.Deployment) {
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
		conds.set(igwv1.ConditionReady, false, igwv1.ReasonRefsNotResolved, "see the ResolvedRefs condition")
	case pool.Pods == 0:
		conds.set(igwv1.ConditionReady, false, igwv1.ReasonNoMatchingPods, "no Pod in namespace %s matches spec.selector.matchLabels %s: check it against the model server Pods' labels",
			mr.Namespace, labels.SelectorFromSet(mr.Spec.Selector.MatchLabels))
	case pool.ReadyEndpoints == 0:
		conds.set(igwv1.ConditionReady, false, igwv1.ReasonNoReadyEndpoints, "%d Pod(s) match the selector but none is Ready with an IP: check the model servers' readiness", pool.Pods)
	case available == 0:
		conds.set(igwv1.ConditionReady, false, igwv1.ReasonEndpointPickerUnavailable, "the endpoint picker Deployment %s has no available replica: check its Pods and events",
			render.NamesForRoute(mr.Name).EPP)
	case expected < desired:
		conds.set(igwv1.ConditionReady, true, igwv1.ReasonReady, "%d of %d endpoints ready; endpoint picker leader available, %d replicas (active-passive: standbys report not ready)",
			pool.ReadyEndpoints, pool.TotalEndpoints, desired)
	default:
		conds.set(igwv1.ConditionReady, true, igwv1.ReasonReady, "%d of %d endpoints ready; endpoint picker %d/%d available", pool.ReadyEndpoints, pool.TotalEndpoints, available, desired)
	}
	ready := conds.isTrue(igwv1.ConditionReady)
	switch {
	case ready && pool.ReadyEndpoints < pool.TotalEndpoints:
		conds.set(igwv1.ConditionDegraded, true, igwv1.ReasonEndpointsNotReady, "%d of %d endpoints are not ready", pool.TotalEndpoints-pool.ReadyEndpoints, pool.TotalEndpoints)
	case ready && available < expected:
		conds.set(igwv1.ConditionDegraded, true, igwv1.ReasonEndpointPickerDegraded, "endpoint picker %d/%d replicas available", available, desired)
	default:
		conds.set(igwv1.ConditionDegraded, false, igwv1.ReasonAsExpected, "no degradation observed")
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

// refProblems collects why references do not resolve; the first reason is reported.
type refProblems struct{ reasons, messages []string }

func (p *refProblems) add(reason, message string) {
	p.reasons = append(p.reasons, reason)
	p.messages = append(p.messages, message)
}
func (p *refProblems) ok() bool        { return len(p.reasons) == 0 }
func (p *refProblems) reason() string  { return p.reasons[0] }
func (p *refProblems) message() string { return strings.Join(p.messages, "; ") }
