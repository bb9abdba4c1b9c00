package bundle

import (
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// operatorVerbs are what the operator does with the objects it creates: it
// applies them server-side (create, patch), caches them (get, list, watch)
// and deletes them.
var operatorVerbs = []string{"create", "delete", "get", "list", "patch", "watch"}

// checkOwnedResources checks that the CSV's RBAC lets the operator create
// every kind its owned CRDs list as their resources, and that each native
// API it requires is one of those kinds: an object the operator renders and
// may not apply, or a requirement nothing uses, is noticed in the bundle.
func checkOwnedResources(c *checker, csv *unstructured.Unstructured) {
	granted := grantedVerbs(csv)
	created := map[string]bool{} // kind/version
	owned, _, _ := unstructured.NestedSlice(csv.Object, "spec", "customresourcedefinitions", "owned")
	for _, o := range owned {
		om, _ := o.(map[string]any)
		resources, _ := om["resources"].([]any)
		for _, r := range resources {
			rm, _ := r.(map[string]any)
			kind, _ := rm["kind"].(string)
			version, _ := rm["version"].(string)
			created[kind+"/"+version] = true
			resource := pluralResource(kind)
			var missing []string
			for _, v := range operatorVerbs {
				if !granted[resource][v] && !granted[resource]["*"] {
					missing = append(missing, v)
				}
			}
			if len(missing) > 0 {
				c.fail("owned CRD %v lists resource %s, but the operator's permissions lack %s on %s", om["name"], kind, strings.Join(missing, ", "), resource)
			}
		}
	}
	natives, _, _ := unstructured.NestedSlice(csv.Object, "spec", "nativeAPIs")
	for _, n := range natives {
		nm, _ := n.(map[string]any)
		kind, _ := nm["kind"].(string)
		version, _ := nm["version"].(string)
		group, _ := nm["group"].(string)
		if kind == "" || version == "" {
			c.fail("spec.nativeAPIs entries need a kind and a version")
			continue
		}
		if !created[kind+"/"+version] {
			c.fail("spec.nativeAPIs requires %s/%s %s, which no owned CRD lists among its resources: list it there or drop the requirement", group, version, kind)
		}
	}
}

// grantedVerbs maps each resource the install's permissions and cluster
// permissions name to the verbs granted on it (any API group).
func grantedVerbs(csv *unstructured.Unstructured) map[string]map[string]bool {
	out := map[string]map[string]bool{}
	for _, kind := range []string{"permissions", "clusterPermissions"} {
		perms, _, _ := unstructured.NestedSlice(csv.Object, "spec", "install", "spec", kind)
		for _, p := range perms {
			rules, _ := p.(map[string]any)["rules"].([]any)
			for _, r := range rules {
				rm, _ := r.(map[string]any)
				for _, res := range stringsOf(rm["resources"]) {
					if out[res] == nil {
						out[res] = map[string]bool{}
					}
					for _, v := range stringsOf(rm["verbs"]) {
						out[res][v] = true
					}
				}
			}
		}
	}
	return out
}

func stringsOf(v any) []string {
	list, _ := v.([]any)
	out := make([]string, 0, len(list))
	for _, e := range list {
		if s, ok := e.(string); ok {
			out = append(out, s)
		}
	}
	return out
}

// pluralResource is the resource name of kind as the API server names it
// (lower case, plural), for the kinds igw creates.
func pluralResource(kind string) string {
	k := strings.ToLower(kind)
	switch {
	case strings.HasSuffix(k, "y") && !slices.Contains([]string{"a", "e", "i", "o", "u"}, k[len(k)-2:len(k)-1]):
		return k[:len(k)-1] + "ies"
	case strings.HasSuffix(k, "s"):
		return k + "es"
	}
	return k + "s"
}
