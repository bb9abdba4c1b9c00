package controllers

import (
	"context"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"

	igwv1 "github.com/igw-dev/igw/api/v1alpha1"
)

// HookCalls tells when Envoy Gateway last called igw's extension hook
// (pkg/egext's Liveness), and runs a function after each call.
type HookCalls interface {
	LastCall() time.Time
	OnCall(func())
}

// DefaultHookBound is how long after a change of a config's children Envoy
// Gateway may take to call the hook before ExtensionHookActive turns False.
// Envoy Gateway translates within seconds of a change; the margin covers a
// busy controller.
const DefaultHookBound = 2 * time.Minute

// hookObservation is what a config's reconcile saw of the extension hook.
type hookObservation struct {
	// Applies: the config's gateway is Envoy Gateway and the operator watches
	// the hook; otherwise the condition is removed.
	Applies bool
	// Changed: this reconcile created, updated or deleted a child, which
	// makes Envoy Gateway translate again, and so call the hook.
	Changed  bool
	LastCall time.Time
	Now      time.Time
	Bound    time.Duration
}

// hookCondition sets ExtensionHookActive. A change (or a config without the
// condition yet) starts a wait, recorded as the Unknown condition's
// lastTransitionTime; a call at or after that time makes it True, none within
// the bound False. True and False hold until the next change or call, so a
// reconcile of an unchanged config writes nothing. lastTransitionTime keeps
// whole seconds only, so a call in the second before a change counts as after it.
func hookCondition(conds *conditions, h hookObservation) {
	if !h.Applies {
		meta.RemoveStatusCondition(&conds.list, igwv1.ConditionExtensionHookActive)
		return
	}
	prev := meta.FindStatusCondition(conds.list, igwv1.ConditionExtensionHookActive)
	awaiting := prev != nil && prev.Status == metav1.ConditionUnknown && prev.Reason == igwv1.ReasonAwaitingHookCall
	switch {
	case prev == nil || (h.Changed && !awaiting):
		conds.setUnknown(igwv1.ConditionExtensionHookActive, igwv1.ReasonAwaitingHookCall,
			"the config's children changed; waiting up to %s for Envoy Gateway to call igw's extension hook", h.Bound)
		if c := meta.FindStatusCondition(conds.list, igwv1.ConditionExtensionHookActive); c != nil {
			// The wait starts now, also when the condition was Unknown for another reason.
			c.LastTransitionTime = metav1.NewTime(h.Now)
		}
	case prev.Status == metav1.ConditionTrue:
		conds.set(igwv1.ConditionExtensionHookActive, true, prev.Reason, "%s", prev.Message)
	case !h.LastCall.Before(prev.LastTransitionTime.Time):
		conds.set(igwv1.ConditionExtensionHookActive, true, igwv1.ReasonHookCalled,
			"Envoy Gateway called igw's extension hook after the config's children last changed")
	case awaiting && h.Now.Sub(prev.LastTransitionTime.Time) < h.Bound:
		conds.setUnknown(igwv1.ConditionExtensionHookActive, prev.Reason, "%s", prev.Message)
	default:
		conds.set(igwv1.ConditionExtensionHookActive, false, igwv1.ReasonHookNotCalled,
			"Envoy Gateway has not called igw's extension hook (PostTranslateModify) within %s of the config's children changing, "+
				"so requests may skip the endpoint pickers: set Envoy Gateway's config.envoyGateway.extensionManager as in "+
				"charts/igw/envoy-gateway-values.yaml (hooks.xdsTranslator.post [Translation], translation listener and route includeAll, "+
				"service.fqdn naming the operator's extension server Service and port 5005), restart Envoy Gateway, and check that it "+
				"reaches that Service (docs/envoy-gateway.md, \"Envoy Gateway settings\")", h.Bound)
	}
}

// hookRequeue is when to look again at a config that waits for a call: when
// its bound runs out (a call before that reconciles it through the hook's
// watch). Zero otherwise.
func hookRequeue(conds []metav1.Condition, now time.Time, bound time.Duration) time.Duration {
	c := meta.FindStatusCondition(conds, igwv1.ConditionExtensionHookActive)
	if c == nil || c.Status != metav1.ConditionUnknown || c.Reason != igwv1.ReasonAwaitingHookCall {
		return 0
	}
	// A second more: the stored time lost its fraction of a second.
	return max(c.LastTransitionTime.Add(bound).Sub(now), 0) + time.Second
}

// earliest is the sooner of two requeue delays, zero meaning none.
func earliest(a, b time.Duration) time.Duration {
	if a == 0 || (b != 0 && b < a) {
		return b
	}
	return a
}

// hookSource reconciles, after each call of the hook, the configs whose
// condition is not True yet. A burst of calls queues one round.
func (r *InferenceGatewayConfigReconciler) hookSource(calls HookCalls) source.Source {
	ch := make(chan event.GenericEvent, 1)
	calls.OnCall(func() {
		select {
		case ch <- event.GenericEvent{Object: &igwv1.InferenceGatewayConfig{}}:
		default:
		}
	})
	return source.Channel(ch, handler.EnqueueRequestsFromMapFunc(r.configsAwaitingHook))
}

func (r *InferenceGatewayConfigReconciler) configsAwaitingHook(ctx context.Context, _ client.Object) []reconcile.Request {
	var list igwv1.InferenceGatewayConfigList
	if err := r.Client.List(ctx, &list); err != nil {
		log.FromContext(ctx).Error(err, "listing configs after an extension hook call")
		return nil
	}
	var reqs []reconcile.Request
	for i := range list.Items {
		c := &list.Items[i]
		if cond := meta.FindStatusCondition(c.Status.Conditions, igwv1.ConditionExtensionHookActive); cond != nil && cond.Status != metav1.ConditionTrue {
			reqs = append(reqs, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(c)})
		}
	}
	return reqs
}
