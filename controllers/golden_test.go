package controllers_test

import (
	"bytes"
	"fmt"
	"path/filepath"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/igw-dev/igw/controllers"
	"github.com/igw-dev/igw/internal/golden"
)

// child names one expected child.
type child struct {
	GVK       schema.GroupVersionKind
	Namespace string
	Name      string
}

func (c child) String() string { return fmt.Sprintf("%s %s/%s", c.GVK.Kind, c.Namespace, c.Name) }

// fetch reads a child from the API server.
func (c child) fetch() (client.Object, error) {
	o, err := scheme.New(c.GVK)
	if err != nil {
		return nil, err
	}
	obj := o.(client.Object)
	return obj, k8s.Get(ctx, types.NamespacedName{Namespace: c.Namespace, Name: c.Name}, obj)
}

// deploymentRevision is the annotation the deployment controller numbers a
// Deployment's rollouts with.
const deploymentRevision = "deployment.kubernetes.io/revision"

// goldenForm is a child as stored, minus what differs between runs: server
// and controller bookkeeping, UIDs (owner references say which owner by name), assigned
// cluster IPs and the digest annotation (it covers the owner's UID).
func goldenForm(obj client.Object, gvk schema.GroupVersionKind) map[string]any {
	m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(obj)
	Expect(err).NotTo(HaveOccurred())
	u := &unstructured.Unstructured{Object: m}
	u.SetGroupVersionKind(gvk)
	u.SetUID("")
	u.SetResourceVersion("")
	u.SetGeneration(0)
	u.SetManagedFields(nil)
	unstructured.RemoveNestedField(m, "metadata", "creationTimestamp")
	unstructured.RemoveNestedField(m, "status")
	if ann := u.GetAnnotations(); len(ann) > 0 {
		if ann[controllers.AnnotationAppliedHash] != "" {
			ann[controllers.AnnotationAppliedHash] = "<digest>"
		}
		// The deployment controller's count of a Deployment's rollouts.
		delete(ann, deploymentRevision)
		if len(ann) == 0 {
			ann = nil
		}
		u.SetAnnotations(ann)
	}
	refs := u.GetOwnerReferences()
	for i := range refs {
		refs[i].UID = types.UID("<uid of " + refs[i].Name + ">")
	}
	u.SetOwnerReferences(refs)
	if gvk.Kind == "Service" {
		if ip, _, _ := unstructured.NestedString(m, "spec", "clusterIP"); ip != "None" {
			unstructured.RemoveNestedField(m, "spec", "clusterIP")
			unstructured.RemoveNestedField(m, "spec", "clusterIPs")
		}
	}
	return m
}

// checkGolden compares the children in the API server with testdata/NAME.golden.yaml
// (go test ./controllers -update rewrites it).
func checkGolden(name string, children []child) {
	var b bytes.Buffer
	for _, c := range children {
		obj, err := c.fetch()
		Expect(err).NotTo(HaveOccurred(), c.String())
		data, err := yaml.Marshal(goldenForm(obj, c.GVK))
		Expect(err).NotTo(HaveOccurred())
		b.WriteString("---\n")
		b.Write(data)
	}
	golden.Check(GinkgoT(), filepath.Join("testdata", name+".golden.yaml"), b.Bytes())
}
