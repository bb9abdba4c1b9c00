package controllers

import (
	"context"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/tools/events"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	igwv1 "github.com/igw-dev/igw/api/v1alpha1"
)

// The deferred status write warns about a condition that newly went wrong,
// comparing the status as read (prev) with the one written (next), once. The
// status write itself is the suite's to test against the API server; here an
// in-memory client only takes the patch, so the event is all that is asserted.
func TestStatusEndWarnsOnceOnANewlyWrongCondition(t *testing.T) {
	scheme := runtime.NewScheme()
	if err := igwv1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	route := &igwv1.ModelRoute{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "llama"}}
	k8s := fake.NewClientBuilder().WithScheme(scheme).WithObjects(route).WithStatusSubresource(route).Build()
	rec := events.NewFakeRecorder(8)
	c := &Common{Client: k8s, Events: recorder{rec}}

	ready := func(status metav1.ConditionStatus, reason string) igwv1.ModelRouteStatus {
		return igwv1.ModelRouteStatus{Conditions: []metav1.Condition{{Type: igwv1.ConditionReady, Status: status, Reason: reason,
			Message: "m", LastTransitionTime: metav1.Now()}}}
	}
	end := func(prev, next igwv1.ModelRouteStatus) {
		t.Helper()
		if _, wrote, err := routeStatusAccess.end(context.Background(), c, route, prev, next, true, nil); err != nil || !wrote {
			t.Fatalf("end: wrote %v, %v", wrote, err)
		}
	}
	end(ready(metav1.ConditionTrue, igwv1.ReasonReady), ready(metav1.ConditionFalse, igwv1.ReasonNoReadyEndpoints))
	select {
	case e := <-rec.Events:
		if !strings.HasPrefix(e, "Warning "+igwv1.ReasonNoReadyEndpoints+" Ready") {
			t.Errorf("event %q, want a warning naming the new reason and the condition", e)
		}
	default:
		t.Fatal("no warning when Ready went False")
	}
	if route.Status.Conditions[0].Reason != igwv1.ReasonNoReadyEndpoints {
		t.Errorf("the object holds %v after end, want the status written", route.Status.Conditions)
	}
	end(ready(metav1.ConditionFalse, igwv1.ReasonNoReadyEndpoints), ready(metav1.ConditionFalse, igwv1.ReasonNoReadyEndpoints))
	select {
	case e := <-rec.Events:
		t.Errorf("warned again for an unchanged reason: %q", e)
	default:
	}
}
