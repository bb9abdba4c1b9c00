package v1alpha1_test

import "k8s.io/apimachinery/pkg/types"

func keyOf(namespace, name string) types.NamespacedName {
	return types.NamespacedName{Namespace: namespace, Name: name}
}
