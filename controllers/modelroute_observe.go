package controllers

import (
	"context"
	"slices"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	igwv1 "github.com/igw-dev/igw/api/v1alpha1"
	"github.com/igw-dev/igw/pkg/render"
)

// poolObservation is what the operator sees of a route's model server pods.
type poolObservation struct {
	Pods           int
	ReadyEndpoints int32
	TotalEndpoints int32
	render.Observations
}

// observePool counts the selected pods' endpoints (one per target port) and
// collects their accelerator types, from the pod's label or else its node's.
func observePool(ctx context.Context, c client.Client, mr *igwv1.ModelRoute) (poolObservation, error) {
	var pods corev1.PodList
	if err := c.List(ctx, &pods, client.InNamespace(mr.Namespace), client.MatchingLabels(mr.Spec.Selector.MatchLabels)); err != nil {
		return poolObservation{}, err
	}
	ports := int32(len(mr.Spec.TargetPorts))
	var obs poolObservation
	types := map[string]bool{}
	for i := range pods.Items {
		p := &pods.Items[i]
		if p.DeletionTimestamp != nil || p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed {
			continue
		}
		obs.Pods++
		obs.TotalEndpoints += ports
		if podReady(p) {
			obs.ReadyEndpoints += ports
		}
		if t := acceleratorType(ctx, c, p); t != "" {
			types[t] = true
		}
	}
	for t := range types {
		obs.AcceleratorTypes = append(obs.AcceleratorTypes, t)
	}
	slices.Sort(obs.AcceleratorTypes)
	return obs, nil
}

// podReady is what makes a pod an endpoint: an IP and the Ready condition.
func podReady(p *corev1.Pod) bool {
	if p.Status.PodIP == "" {
		return false
	}
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

func acceleratorType(ctx context.Context, c client.Client, p *corev1.Pod) string {
	if t := p.Labels[render.LabelGPUProduct]; t != "" {
		return t
	}
	if p.Spec.NodeName == "" {
		return ""
	}
	var node corev1.Node
	if err := c.Get(ctx, types.NamespacedName{Name: p.Spec.NodeName}, &node); err != nil {
		return ""
	}
	return node.Labels[render.LabelGPUProduct]
}

// selects reports whether a route's selector matches a pod's labels.
func selects(mr *igwv1.ModelRoute, podLabels map[string]string) bool {
	if len(mr.Spec.Selector.MatchLabels) == 0 {
		return false
	}
	for k, v := range mr.Spec.Selector.MatchLabels {
		if podLabels[k] != v {
			return false
		}
	}
	return true
}
