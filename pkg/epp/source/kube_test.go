package source

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	infv1 "sigs.k8s.io/gateway-api-inference-extension/api/v1"
)

// TestEndpointsFromPods covers the mapping alone; TestKubeSourceAgainstAPIServer
// runs the watch.
func TestEndpointsFromPods(t *testing.T) {
	pool := &infv1.InferencePool{Spec: infv1.InferencePoolSpec{TargetPorts: []infv1.Port{{Number: 8000}, {Number: 8001}}}}
	pod := func(name, ip string, phase corev1.PodPhase, ready corev1.ConditionStatus, deleting bool) corev1.Pod {
		p := corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"gpu": "h100"}},
			Status: corev1.PodStatus{PodIP: ip, Phase: phase, Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: ready}}}}
		if deleting {
			now := metav1.Now()
			p.DeletionTimestamp = &now
		}
		return p
	}
	eps := Endpoints(pool, []corev1.Pod{
		pod("ok", "10.0.0.1", corev1.PodRunning, corev1.ConditionTrue, false),
		pod("not-ready", "10.0.0.2", corev1.PodRunning, corev1.ConditionFalse, false),
		pod("no-ip", "", corev1.PodRunning, corev1.ConditionTrue, false),
		pod("pending", "10.0.0.4", corev1.PodPending, corev1.ConditionTrue, false),
		pod("terminating", "10.0.0.5", corev1.PodRunning, corev1.ConditionTrue, true),
	})
	if len(eps) != 2 || eps[0].Key() != "10.0.0.1:8000" || eps[1].Key() != "10.0.0.1:8001" || eps[0].Labels["gpu"] != "h100" {
		t.Fatalf("%+v", eps)
	}
}
