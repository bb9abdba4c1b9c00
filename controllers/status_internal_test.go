package controllers

import (
	"errors"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	gwapiv1 "sigs.k8s.io/gateway-api/apis/v1"

	igwv1 "github.com/igw-dev/igw/api/v1alpha1"
)

const generation = 3

// conditionsOf is "Status/Reason" by condition type.
func conditionsOf(conds []metav1.Condition) map[string]string {
	out := map[string]string{}
	for _, c := range conds {
		out[c.Type] = string(c.Status) + "/" + c.Reason
	}
	return out
}

// checkConditions compares the conditions with want, and checks that every
// condition the reconcile set carries its generation.
func checkConditions(t *testing.T, prev, got []metav1.Condition, want map[string]string) {
	t.Helper()
	if have := conditionsOf(got); !equality.Semantic.DeepEqual(have, want) {
		t.Errorf("conditions %v, want %v", have, want)
	}
	for _, c := range got {
		if p := meta.FindStatusCondition(prev, c.Type); (p == nil || *p != c) && c.ObservedGeneration != generation {
			t.Errorf("%s was set with observedGeneration %d, want %d", c.Type, c.ObservedGeneration, generation)
		}
	}
}

func condition(typ string, status metav1.ConditionStatus, reason string) metav1.Condition {
	return metav1.Condition{Type: typ, Status: status, Reason: reason, ObservedGeneration: generation - 1}
}

func ptr[T any](v T) *T { return &v }

// errAPIDown is the API server failing a read or a write.
var errAPIDown = errors.New("the server is currently unable to handle the request")

// Conditions as conditionsOf writes them.
const (
	accepted = "True/" + igwv1.ReasonAccepted
	unknown  = "Unknown/" + igwv1.ReasonReconcileError
)

// problem is one reference problem of reason.
func problem(reason string) refProblems {
	var p refProblems
	p.add(reason, "why")
	return p
}

func TestRouteStatus(t *testing.T) {
	mr := &igwv1.ModelRoute{ObjectMeta: metav1.ObjectMeta{Name: "llama", Namespace: "models", Generation: generation},
		Spec: igwv1.ModelRouteSpec{ConfigRef: igwv1.ObjectName{Name: "igw"}, Selector: igwv1.ModelServerSelector{MatchLabels: map[string]string{"app": "llama"}}}}
	// What the previous reconcile wrote: a route that worked.
	working := igwv1.ModelRouteStatus{ReadyEndpoints: 2, TotalEndpoints: 2, Rollout: igwv1.RolloutAvailable, Conditions: []metav1.Condition{
		condition(igwv1.ConditionAccepted, metav1.ConditionTrue, igwv1.ReasonAccepted),
		condition(igwv1.ConditionResolvedRefs, metav1.ConditionTrue, igwv1.ReasonResolvedRefs),
		condition(igwv1.ConditionReady, metav1.ConditionTrue, igwv1.ReasonReady),
		condition(igwv1.ConditionDegraded, metav1.ConditionFalse, igwv1.ReasonAsExpected),
	}}
	cfg := &igwv1.InferenceGatewayConfig{ObjectMeta: metav1.ObjectMeta{Name: "igw", Namespace: "models"}}
	noPods := &poolObservation{}
	ready := &poolObservation{Pods: 2, ReadyEndpoints: 2, TotalEndpoints: 2}
	halfReady := &poolObservation{Pods: 2, ReadyEndpoints: 1, TotalEndpoints: 2}
	picker := func(replicas, available int32) *appsv1.Deployment {
		return &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Generation: 1}, Spec: appsv1.DeploymentSpec{Replicas: &replicas},
			Status: appsv1.DeploymentStatus{ObservedGeneration: 1, UpdatedReplicas: replicas, AvailableReplicas: available}}
	}
	const (
		resolved   = "True/" + igwv1.ReasonResolvedRefs
		notRefs    = "False/" + igwv1.ReasonRefsNotResolved
		asExpected = "False/" + igwv1.ReasonAsExpected
	)

	for _, c := range []struct {
		name        string
		prev        igwv1.ModelRouteStatus
		o           routeObservation
		err         error
		want        map[string]string
		rollout     igwv1.RolloutState
		readyPoints int32
	}{
		{name: "the pods cannot be listed: Ready is Unknown, the rest as it was", prev: working, err: errAPIDown,
			want:    map[string]string{igwv1.ConditionAccepted: accepted, igwv1.ConditionResolvedRefs: resolved, igwv1.ConditionReady: unknown, igwv1.ConditionDegraded: asExpected},
			rollout: igwv1.RolloutAvailable, readyPoints: 2},
		{name: "the config cannot be read", prev: working, o: routeObservation{Pool: ready}, err: errAPIDown,
			want:    map[string]string{igwv1.ConditionAccepted: accepted, igwv1.ConditionResolvedRefs: resolved, igwv1.ConditionReady: unknown, igwv1.ConditionDegraded: asExpected},
			rollout: igwv1.RolloutAvailable, readyPoints: 2},
		{name: "no config", o: routeObservation{Pool: noPods, ConfigMissing: true},
			want: map[string]string{igwv1.ConditionAccepted: "False/" + igwv1.ReasonConfigNotFound, igwv1.ConditionResolvedRefs: "False/" + igwv1.ReasonConfigNotFound,
				igwv1.ConditionReady: notRefs, igwv1.ConditionDegraded: asExpected},
			rollout: igwv1.RolloutPending},
		{name: "the Gateway cannot be read: ResolvedRefs as it was", prev: working, o: routeObservation{Pool: ready, Config: cfg}, err: errAPIDown,
			want:    map[string]string{igwv1.ConditionAccepted: accepted, igwv1.ConditionResolvedRefs: resolved, igwv1.ConditionReady: unknown, igwv1.ConditionDegraded: asExpected},
			rollout: igwv1.RolloutAvailable, readyPoints: 2},
		{name: "the scoring ConfigMap cannot be read", prev: working, o: routeObservation{Pool: ready, Config: cfg, Refs: problem(igwv1.ReasonConfigMapUnreadable)}, err: errAPIDown,
			want: map[string]string{igwv1.ConditionAccepted: accepted, igwv1.ConditionResolvedRefs: "False/" + igwv1.ReasonConfigMapUnreadable,
				igwv1.ConditionReady: notRefs, igwv1.ConditionDegraded: asExpected},
			rollout: igwv1.RolloutDegraded, readyPoints: 2},
		{name: "a child cannot be applied", o: routeObservation{Pool: ready, Config: cfg, Refs: problem(igwv1.ReasonApplyFailed)}, err: errAPIDown,
			want: map[string]string{igwv1.ConditionAccepted: accepted, igwv1.ConditionResolvedRefs: "False/" + igwv1.ReasonApplyFailed,
				igwv1.ConditionReady: notRefs, igwv1.ConditionDegraded: asExpected},
			rollout: igwv1.RolloutPending, readyPoints: 2},
		{name: "the picker cannot be read after every child is applied", o: routeObservation{Pool: ready, Config: cfg, RefsDone: true}, err: errAPIDown,
			want: map[string]string{igwv1.ConditionAccepted: accepted, igwv1.ConditionResolvedRefs: resolved, igwv1.ConditionReady: unknown}, readyPoints: 2},
		{name: "CRDs missing", o: routeObservation{Pool: ready, Config: cfg, Refs: problem(igwv1.ReasonCRDsMissing), RefsDone: true, EPPChecked: true},
			want: map[string]string{igwv1.ConditionAccepted: accepted, igwv1.ConditionResolvedRefs: "False/" + igwv1.ReasonCRDsMissing,
				igwv1.ConditionReady: notRefs, igwv1.ConditionDegraded: asExpected},
			rollout: igwv1.RolloutPending, readyPoints: 2},
		{name: "no pods", o: routeObservation{Pool: noPods, Config: cfg, RefsDone: true, EPPChecked: true, EPP: picker(1, 1)},
			want: map[string]string{igwv1.ConditionAccepted: accepted, igwv1.ConditionResolvedRefs: resolved,
				igwv1.ConditionReady: "False/" + igwv1.ReasonNoMatchingPods, igwv1.ConditionDegraded: asExpected},
			rollout: igwv1.RolloutPending},
		{name: "pods but none ready", o: routeObservation{Pool: &poolObservation{Pods: 1, TotalEndpoints: 1}, Config: cfg, RefsDone: true, EPPChecked: true, EPP: picker(1, 1)},
			want: map[string]string{igwv1.ConditionAccepted: accepted, igwv1.ConditionResolvedRefs: resolved,
				igwv1.ConditionReady: "False/" + igwv1.ReasonNoReadyEndpoints, igwv1.ConditionDegraded: asExpected},
			rollout: igwv1.RolloutPending},
		{name: "no picker yet", o: routeObservation{Pool: ready, Config: cfg, RefsDone: true, EPPChecked: true},
			want: map[string]string{igwv1.ConditionAccepted: accepted, igwv1.ConditionResolvedRefs: resolved,
				igwv1.ConditionReady: "False/" + igwv1.ReasonEndpointPickerUnavailable, igwv1.ConditionDegraded: asExpected},
			rollout: igwv1.RolloutPending, readyPoints: 2},
		{name: "ready", o: routeObservation{Pool: ready, Config: cfg, RefsDone: true, EPPChecked: true, EPP: picker(1, 1)},
			want: map[string]string{igwv1.ConditionAccepted: accepted, igwv1.ConditionResolvedRefs: resolved,
				igwv1.ConditionReady: "True/" + igwv1.ReasonReady, igwv1.ConditionDegraded: asExpected},
			rollout: igwv1.RolloutAvailable, readyPoints: 2},
		{name: "ready with an endpoint down", o: routeObservation{Pool: halfReady, Config: cfg, RefsDone: true, EPPChecked: true, EPP: picker(1, 1)},
			want: map[string]string{igwv1.ConditionAccepted: accepted, igwv1.ConditionResolvedRefs: resolved,
				igwv1.ConditionReady: "True/" + igwv1.ReasonReady, igwv1.ConditionDegraded: "True/" + igwv1.ReasonEndpointsNotReady},
			rollout: igwv1.RolloutDegraded, readyPoints: 1},
		{name: "active-passive: the leader of two is enough", o: routeObservation{Pool: ready, Config: cfg, RefsDone: true, EPPChecked: true, EPP: picker(2, 1)},
			want: map[string]string{igwv1.ConditionAccepted: accepted, igwv1.ConditionResolvedRefs: resolved,
				igwv1.ConditionReady: "True/" + igwv1.ReasonReady, igwv1.ConditionDegraded: asExpected},
			rollout: igwv1.RolloutAvailable, readyPoints: 2},
		{name: "a picker rollout in progress", o: routeObservation{Pool: ready, Config: cfg, RefsDone: true, EPPChecked: true,
			EPP: &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Generation: 2}, Status: appsv1.DeploymentStatus{ObservedGeneration: 1, AvailableReplicas: 1}}},
			want: map[string]string{igwv1.ConditionAccepted: accepted, igwv1.ConditionResolvedRefs: resolved,
				igwv1.ConditionReady: "True/" + igwv1.ReasonReady, igwv1.ConditionDegraded: asExpected},
			rollout: igwv1.RolloutProgressing, readyPoints: 2},
		{name: "broken after it worked", prev: working, o: routeObservation{Pool: noPods, Config: cfg, RefsDone: true, EPPChecked: true, EPP: picker(1, 1)},
			want: map[string]string{igwv1.ConditionAccepted: accepted, igwv1.ConditionResolvedRefs: resolved,
				igwv1.ConditionReady: "False/" + igwv1.ReasonNoMatchingPods, igwv1.ConditionDegraded: asExpected},
			rollout: igwv1.RolloutDegraded},
	} {
		t.Run(c.name, func(t *testing.T) {
			route := mr.DeepCopy()
			route.Status = *c.prev.DeepCopy()
			st := routeStatus(route, c.o, c.err)
			checkConditions(t, c.prev.Conditions, st.Conditions, c.want)
			if st.Rollout != c.rollout || st.ReadyEndpoints != c.readyPoints || st.ObservedGeneration != generation || st.InferencePool != "llama" {
				t.Errorf("rollout %q, ready endpoints %d, observedGeneration %d, pool %q; want %q, %d, %d, llama",
					st.Rollout, st.ReadyEndpoints, st.ObservedGeneration, st.InferencePool, c.rollout, c.readyPoints, generation)
			}
			if r := meta.FindStatusCondition(st.Conditions, igwv1.ConditionReady); c.err != nil && r.Status == metav1.ConditionUnknown && !strings.Contains(r.Message, c.err.Error()) {
				t.Errorf("Ready says %q, not the error", r.Message)
			}
		})
	}
}

func TestConfigStatus(t *testing.T) {
	base := &igwv1.InferenceGatewayConfig{ObjectMeta: metav1.ObjectMeta{Name: "igw", Namespace: "models", Generation: generation},
		Spec: igwv1.InferenceGatewayConfigSpec{Gateway: igwv1.GatewaySpec{Ref: &igwv1.GatewayRef{Name: "gw"}}, BBR: igwv1.BBRSpec{Enabled: ptr(true)}}}
	working := igwv1.InferenceGatewayConfigStatus{GatewayName: "models/gw", Conditions: []metav1.Condition{
		condition(igwv1.ConditionAccepted, metav1.ConditionTrue, igwv1.ReasonAccepted),
		condition(igwv1.ConditionGatewayProgrammed, metav1.ConditionTrue, igwv1.ReasonProgrammed),
		condition(igwv1.ConditionBBRReady, metav1.ConditionTrue, igwv1.ReasonBBRAvailable),
		condition(igwv1.ConditionReady, metav1.ConditionTrue, igwv1.ReasonReady),
	}}
	gateway := func(programmed *metav1.ConditionStatus) *gwapiv1.Gateway {
		g := &gwapiv1.Gateway{}
		if programmed != nil {
			g.Status.Conditions = []metav1.Condition{{Type: string(gwapiv1.GatewayConditionProgrammed), Status: *programmed, Reason: "Pending"}}
		}
		return g
	}
	bbr := func(available int32) *appsv1.Deployment {
		return &appsv1.Deployment{Status: appsv1.DeploymentStatus{AvailableReplicas: available}}
	}
	checked := func(o configObservation) configObservation {
		o.RoutesListed, o.Rendered, o.RefsDone, o.GatewayChecked, o.BBRChecked = true, true, true, true, true
		if o.Refs.ok() {
			o.GatewayServed = true
		}
		return o
	}
	const (
		programmed = "True/" + igwv1.ReasonProgrammed
		available  = "True/" + igwv1.ReasonBBRAvailable
	)

	for _, c := range []struct {
		name   string
		mutate func(*igwv1.InferenceGatewayConfig)
		prev   igwv1.InferenceGatewayConfigStatus
		o      configObservation
		err    error
		want   map[string]string
		// accepted is a part of Accepted's message.
		accepted string
	}{
		{name: "deleted and cleaned up: the status stays", prev: working, o: configObservation{Deleting: true},
			want: map[string]string{igwv1.ConditionAccepted: accepted, igwv1.ConditionGatewayProgrammed: programmed, igwv1.ConditionBBRReady: available, igwv1.ConditionReady: "True/" + igwv1.ReasonReady}},
		{name: "deleted, the cleanup failed", prev: working, o: configObservation{Deleting: true}, err: errAPIDown,
			want: map[string]string{igwv1.ConditionAccepted: accepted, igwv1.ConditionGatewayProgrammed: programmed, igwv1.ConditionBBRReady: available, igwv1.ConditionReady: "False/" + igwv1.ReasonCleanupFailed}},
		{name: "the routes cannot be listed", prev: working, err: errAPIDown,
			want: map[string]string{igwv1.ConditionAccepted: accepted, igwv1.ConditionGatewayProgrammed: programmed, igwv1.ConditionBBRReady: available, igwv1.ConditionReady: unknown}},
		{name: "a child cannot be applied", prev: working, o: configObservation{RoutesListed: true, Rendered: true, Refs: problem(igwv1.ReasonApplyFailed)}, err: errAPIDown,
			want: map[string]string{igwv1.ConditionAccepted: accepted, igwv1.ConditionGatewayProgrammed: programmed, igwv1.ConditionBBRReady: available, igwv1.ConditionReady: "False/" + igwv1.ReasonApplyFailed}},
		{name: "the Gateway cannot be read", prev: working, o: configObservation{RoutesListed: true, Rendered: true, RefsDone: true}, err: errAPIDown,
			want: map[string]string{igwv1.ConditionAccepted: accepted, igwv1.ConditionGatewayProgrammed: programmed, igwv1.ConditionBBRReady: available, igwv1.ConditionReady: unknown}},
		{name: "no Gateway API", o: checked(configObservation{Refs: problem(igwv1.ReasonCRDsMissing), BBR: bbr(1)}),
			want: map[string]string{igwv1.ConditionAccepted: accepted, igwv1.ConditionGatewayProgrammed: "False/" + igwv1.ReasonCRDsMissing,
				igwv1.ConditionBBRReady: available, igwv1.ConditionReady: "False/" + igwv1.ReasonCRDsMissing}},
		{name: "no Gateway", o: checked(configObservation{BBR: bbr(1)}),
			want: map[string]string{igwv1.ConditionAccepted: accepted, igwv1.ConditionGatewayProgrammed: "False/" + igwv1.ReasonGatewayNotFound,
				igwv1.ConditionBBRReady: available, igwv1.ConditionReady: "False/" + igwv1.ReasonGatewayNotFound}},
		{name: "a Gateway no controller programmed", o: checked(configObservation{Gateway: gateway(nil), BBR: bbr(1)}),
			want: map[string]string{igwv1.ConditionAccepted: accepted, igwv1.ConditionGatewayProgrammed: "False/" + igwv1.ReasonGatewayNotProgrammed,
				igwv1.ConditionBBRReady: available, igwv1.ConditionReady: "False/" + igwv1.ReasonGatewayNotProgrammed}},
		{name: "a Gateway not programmed yet", o: checked(configObservation{Gateway: gateway(ptr(metav1.ConditionFalse)), BBR: bbr(1)}),
			want: map[string]string{igwv1.ConditionAccepted: accepted, igwv1.ConditionGatewayProgrammed: "False/" + igwv1.ReasonGatewayNotProgrammed,
				igwv1.ConditionBBRReady: available, igwv1.ConditionReady: "False/" + igwv1.ReasonGatewayNotProgrammed}},
		{name: "no router yet", o: checked(configObservation{Gateway: gateway(ptr(metav1.ConditionTrue))}),
			want: map[string]string{igwv1.ConditionAccepted: accepted, igwv1.ConditionGatewayProgrammed: programmed,
				igwv1.ConditionBBRReady: "False/" + igwv1.ReasonBBRUnavailable, igwv1.ConditionReady: "False/" + igwv1.ReasonBBRUnavailable}},
		{name: "a router without available replicas", o: checked(configObservation{Gateway: gateway(ptr(metav1.ConditionTrue)), BBR: bbr(0)}),
			want: map[string]string{igwv1.ConditionAccepted: accepted, igwv1.ConditionGatewayProgrammed: programmed,
				igwv1.ConditionBBRReady: "False/" + igwv1.ReasonBBRUnavailable, igwv1.ConditionReady: "False/" + igwv1.ReasonBBRUnavailable}},
		{name: "ready", o: checked(configObservation{Gateway: gateway(ptr(metav1.ConditionTrue)), BBR: bbr(1)}),
			want: map[string]string{igwv1.ConditionAccepted: accepted, igwv1.ConditionGatewayProgrammed: programmed,
				igwv1.ConditionBBRReady: available, igwv1.ConditionReady: "True/" + igwv1.ReasonReady}},
		{name: "ready without a router, TLS ignored, adapters in conflict", mutate: func(c *igwv1.InferenceGatewayConfig) {
			c.Spec.BBR.Enabled = ptr(false)
			c.Spec.TLS = &igwv1.TLSSpec{CertificateSecretName: "s"}
		}, o: checked(configObservation{Gateway: gateway(ptr(metav1.ConditionTrue)), AdapterConflicts: []string{"sql"}}),
			want: map[string]string{igwv1.ConditionAccepted: accepted, igwv1.ConditionGatewayProgrammed: programmed,
				igwv1.ConditionBBRReady: "True/" + igwv1.ReasonBBRDisabled, igwv1.ConditionReady: "True/" + igwv1.ReasonReady},
			accepted: "spec.tls applies to managed gateways only and is ignored: configure TLS on Gateway models/gw; adapters declared with different base models by several ModelRoutes (the first route by name wins): sql"},
	} {
		t.Run(c.name, func(t *testing.T) {
			cfg := base.DeepCopy()
			if c.mutate != nil {
				c.mutate(cfg)
			}
			cfg.Status = *c.prev.DeepCopy()
			st := configStatus(cfg, c.o, c.err)
			checkConditions(t, c.prev.Conditions, st.Conditions, c.want)
			if c.o.Deleting && c.err == nil && !equality.Semantic.DeepEqual(st, c.prev) {
				t.Errorf("a deleted config's status changed: %+v", st)
			}
			if a := meta.FindStatusCondition(st.Conditions, igwv1.ConditionAccepted); !strings.Contains(a.Message, c.accepted) {
				t.Errorf("Accepted says %q, want it to say %q", a.Message, c.accepted)
			}
			if r := meta.FindStatusCondition(st.Conditions, igwv1.ConditionReady); c.err != nil && r.Status != metav1.ConditionTrue && r.Reason != igwv1.ReasonApplyFailed && !strings.Contains(r.Message, c.err.Error()) {
				t.Errorf("Ready says %q, not the error", r.Message)
			}
		})
	}
}
