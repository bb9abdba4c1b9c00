// Package v1alpha1 holds the igw API: InferenceGatewayConfig and ModelRoute.
// +kubebuilder:object:generate=true
// +groupName=gateway.igw.dev
package v1alpha1

import (
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/scheme"
)

var (
	// GroupVersion is the group and version of the igw API.
	GroupVersion = schema.GroupVersion{Group: "gateway.igw.dev", Version: "v1alpha1"}

	// SchemeBuilder registers the igw types with a runtime.Scheme.
	//lint:ignore SA1019 kubebuilder's layout for API packages; the types' init functions register through it.
	SchemeBuilder = &scheme.Builder{GroupVersion: GroupVersion}

	// AddToScheme adds the igw types to a scheme.
	AddToScheme = SchemeBuilder.AddToScheme
)
