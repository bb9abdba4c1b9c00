package controllers

import (
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	igwv1 "github.com/igw-dev/igw/api/v1alpha1"
)

func TestHookCondition(t *testing.T) {
	const bound = 2 * time.Minute
	change := time.Date(2026, 12, 3, 8, 0, 0, 0, time.UTC)
	hookCond := func(status metav1.ConditionStatus, reason string, since time.Time) []metav1.Condition {
		return []metav1.Condition{{Type: igwv1.ConditionExtensionHookActive, Status: status, Reason: reason,
			Message: "before", ObservedGeneration: generation - 1, LastTransitionTime: metav1.NewTime(since)}}
	}
	awaiting := hookCond(metav1.ConditionUnknown, igwv1.ReasonAwaitingHookCall, change)
	for _, tc := range []struct {
		name string
		prev []metav1.Condition
		obs  hookObservation
		want string // Status/Reason, "" for no condition
		// wantSince is the expected lastTransitionTime (zero: not checked).
		wantSince   time.Time
		wantRequeue time.Duration
	}{
		{name: "first reconcile waits", obs: hookObservation{Applies: true, Changed: true, Now: change},
			want: "Unknown/AwaitingHookCall", wantSince: change, wantRequeue: bound + time.Second},
		{name: "a config without the condition waits even without a change", obs: hookObservation{Applies: true, Now: change},
			want: "Unknown/AwaitingHookCall", wantSince: change, wantRequeue: bound + time.Second},
		{name: "a call after the change makes it True", prev: awaiting,
			obs:  hookObservation{Applies: true, LastCall: change.Add(time.Second), Now: change.Add(2 * time.Second)},
			want: "True/HookCalled"},
		{name: "a call before the change does not count", prev: awaiting,
			obs:  hookObservation{Applies: true, LastCall: change.Add(-time.Minute), Now: change.Add(time.Minute)},
			want: "Unknown/AwaitingHookCall", wantSince: change, wantRequeue: time.Minute + time.Second},
		{name: "no call within the bound makes it False", prev: awaiting,
			obs:  hookObservation{Applies: true, LastCall: change.Add(-time.Minute), Now: change.Add(bound)},
			want: "False/HookNotCalled"},
		{name: "a later change while waiting keeps the earlier start", prev: awaiting,
			obs:  hookObservation{Applies: true, Changed: true, Now: change.Add(time.Minute)},
			want: "Unknown/AwaitingHookCall", wantSince: change, wantRequeue: time.Minute + time.Second},
		{name: "True holds without a change", prev: hookCond(metav1.ConditionTrue, igwv1.ReasonHookCalled, change),
			obs:  hookObservation{Applies: true, Now: change.Add(time.Hour)},
			want: "True/HookCalled", wantSince: change},
		{name: "a change of a True config waits again", prev: hookCond(metav1.ConditionTrue, igwv1.ReasonHookCalled, change),
			obs:  hookObservation{Applies: true, Changed: true, LastCall: change.Add(time.Minute), Now: change.Add(time.Hour)},
			want: "Unknown/AwaitingHookCall", wantSince: change.Add(time.Hour), wantRequeue: bound + time.Second},
		{name: "False holds without a call", prev: hookCond(metav1.ConditionFalse, igwv1.ReasonHookNotCalled, change),
			obs:  hookObservation{Applies: true, LastCall: change.Add(-time.Second), Now: change.Add(time.Hour)},
			want: "False/HookNotCalled", wantSince: change},
		{name: "a call turns False into True", prev: hookCond(metav1.ConditionFalse, igwv1.ReasonHookNotCalled, change),
			obs:  hookObservation{Applies: true, LastCall: change.Add(time.Second), Now: change.Add(time.Hour)},
			want: "True/HookCalled"},
		{name: "native gateways have no hook", prev: awaiting, obs: hookObservation{Changed: true, Now: change}, want: ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.obs.Bound = bound
			conds := newConditions(tc.prev, generation)
			hookCondition(conds, tc.obs)
			got := meta.FindStatusCondition(conds.list, igwv1.ConditionExtensionHookActive)
			if tc.want == "" {
				if got != nil {
					t.Fatalf("condition %s/%s, want none", got.Status, got.Reason)
				}
				return
			}
			if got == nil {
				t.Fatalf("no condition, want %s", tc.want)
			}
			if have := string(got.Status) + "/" + got.Reason; have != tc.want {
				t.Errorf("condition %s (%s), want %s", have, got.Message, tc.want)
			}
			if got.ObservedGeneration != generation {
				t.Errorf("observedGeneration %d, want %d", got.ObservedGeneration, generation)
			}
			if !tc.wantSince.IsZero() && !got.LastTransitionTime.Time.Equal(tc.wantSince) {
				t.Errorf("lastTransitionTime %s, want %s", got.LastTransitionTime.Time, tc.wantSince)
			}
			if got.Status == metav1.ConditionFalse && !strings.Contains(got.Message, "extensionManager") {
				t.Errorf("False message does not say what to set: %s", got.Message)
			}
			if r := hookRequeue(conds.list, tc.obs.Now, bound); r != tc.wantRequeue {
				t.Errorf("requeue after %s, want %s", r, tc.wantRequeue)
			}
		})
	}
}

func TestEarliest(t *testing.T) {
	for _, tc := range []struct{ a, b, want time.Duration }{
		{0, 0, 0}, {0, time.Second, time.Second}, {time.Second, 0, time.Second}, {2 * time.Second, time.Second, time.Second},
	} {
		if got := earliest(tc.a, tc.b); got != tc.want {
			t.Errorf("earliest(%s, %s) = %s, want %s", tc.a, tc.b, got, tc.want)
		}
	}
}
