// Package controllers holds igw's reconcilers, one per kind. Rendering of child
// objects is kept in pure functions; the reconcilers apply, own and report.
package controllers

// The manager reads its own kinds and writes their status.
// +kubebuilder:rbac:groups=gateway.igw.dev,resources=inferencegatewayconfigs;modelroutes,verbs=get;list;watch
// +kubebuilder:rbac:groups=gateway.igw.dev,resources=inferencegatewayconfigs/status;modelroutes/status,verbs=get;update;patch
// +kubebuilder:rbac:groups=core,resources=events,verbs=create;patch
// +kubebuilder:rbac:groups=events.k8s.io,resources=events,verbs=create;patch
