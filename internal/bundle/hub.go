package bundle

import (
	"encoding/base64"
	"fmt"
	"net/mail"
	"net/url"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// Ports of operator-framework/api's OperatorHub validator and of the CSV
// validator's install mode and required-field checks (the module the proxy
// serves is from 2021, older than the checks OLM applies today), plus the
// checks igw's own install depends on: descriptors that name real fields,
// images all listed in relatedImages, and target namespaces wired to
// --watch-namespace.

var hubCapabilities = []string{"Basic Install", "Seamless Upgrades", "Full Lifecycle", "Deep Insights", "Auto Pilot"}

var hubMediatypes = []string{"image/gif", "image/jpeg", "image/png", "image/svg+xml"}

var hubCategories = []string{"AI/Machine Learning", "Application Runtime", "Big Data", "Cloud Provider", "Developer Tools",
	"Database", "Integration & Delivery", "Logging & Tracing", "Monitoring", "Networking", "OpenShift Optional",
	"Security", "Storage", "Streaming & Messaging"}

var installModeTypes = []string{"OwnNamespace", "SingleNamespace", "MultiNamespace", "AllNamespaces"}

// checker collects errors and warnings under a prefix.
type checker struct {
	prefix      string
	errs, warns []error
}

func (c *checker) fail(format string, args ...any) {
	c.errs = append(c.errs, fmt.Errorf(c.prefix+format, args...))
}

func (c *checker) warn(format string, args ...any) {
	c.warns = append(c.warns, fmt.Errorf(c.prefix+format, args...))
}

// checkNamed checks that every entry of spec.<list> has a name and a field
// (what names it in the message), and that the field's value passes valid.
func checkNamed(c *checker, csv *unstructured.Unstructured, list, field, what string, valid func(string) error) {
	entries, _, _ := unstructured.NestedSlice(csv.Object, "spec", list)
	for _, e := range entries {
		m, _ := e.(map[string]any)
		name, _ := m["name"].(string)
		value, _ := m[field].(string)
		if name == "" || value == "" {
			c.fail("spec.%s entries need a name and %s", list, what)
		}
		if value != "" {
			if err := valid(value); err != nil {
				c.fail("spec.%s %s %q is invalid: %v", list, field, value, err)
			}
		}
	}
}

// checkHub is the OperatorHub validator's CSV checks.
func checkHub(c *checker, csv *unstructured.Unstructured, channels []string) {
	str := func(fields ...string) string { s, _, _ := unstructured.NestedString(csv.Object, fields...); return s }
	if str("spec", "provider", "name") == "" {
		c.fail("spec.provider.name is empty")
	}
	checkNamed(c, csv, "maintainers", "email", "an email", func(s string) error { _, err := mail.ParseAddress(s); return err })
	checkNamed(c, csv, "links", "url", "a url", func(s string) error { _, err := url.ParseRequestURI(s); return err })
	ann := csv.GetAnnotations()
	if capability, ok := ann["capabilities"]; ok && !slices.Contains(hubCapabilities, capability) {
		c.fail("metadata.annotations.capabilities %q is not a capability level (%s)", capability, strings.Join(hubCapabilities, ", "))
	}
	if categories, ok := ann["categories"]; ok {
		for _, cat := range strings.Split(categories, ",") {
			if !slices.Contains(hubCategories, strings.TrimSpace(cat)) {
				c.fail("metadata.annotations.categories: %q is not an OperatorHub category", strings.TrimSpace(cat))
			}
		}
	}
	if v := str("spec", "version"); v == "" || v == "0.0.0" {
		c.fail("spec.version must be set")
	}
	icons, found, _ := unstructured.NestedSlice(csv.Object, "spec", "icon")
	switch {
	case !found:
		c.warn("spec.icon is not set")
	case len(icons) != 1:
		c.fail("spec.icon must have exactly one element, has %d", len(icons))
	default:
		icon, _ := icons[0].(map[string]any)
		data, _ := icon["base64data"].(string)
		media, _ := icon["mediatype"].(string)
		if data == "" || media == "" {
			c.fail("spec.icon needs both base64data and mediatype")
		}
		if media != "" && !slices.Contains(hubMediatypes, media) {
			c.fail("spec.icon mediatype %q is not one of %v", media, hubMediatypes)
		}
		if raw, err := base64.StdEncoding.DecodeString(data); data != "" && (err != nil || len(raw) == 0) {
			c.fail("spec.icon base64data does not decode: %v", err)
		} else if media == "image/svg+xml" && !strings.Contains(string(raw), "<svg") {
			c.fail("spec.icon is declared image/svg+xml but holds no <svg> element")
		}
	}
	if str("spec", "minKubeVersion") == "" {
		c.warn("spec.minKubeVersion is not set: the operator could be installed on any cluster version")
	}
	if name := csv.GetName(); len(strings.Split(name, ".v")) < 2 {
		c.warn("metadata.name %q does not follow <operator>.v<semver>", name)
	}
	for _, ch := range channels {
		// The convention's prefixes; candidate is the other common name
		// (OpenShift's candidate/fast/stable), which the validator only warns about.
		if !strings.HasPrefix(ch, "preview") && !strings.HasPrefix(ch, "stable") && !strings.HasPrefix(ch, "fast") {
			c.warn("channel %q does not follow the recommended naming (preview, fast, stable)", ch)
		}
	}
}

// checkRequiredFields is the CSV validator's check of the fields the CSV
// type declares without omitempty (errors) and of the optional ones a
// catalog shows (warnings).
func checkRequiredFields(c *checker, csv *unstructured.Unstructured) {
	for _, f := range []string{"displayName", "version"} {
		if s, _, _ := unstructured.NestedString(csv.Object, "spec", f); s == "" {
			c.fail("spec.%s is required", f)
		}
	}
	if _, ok, _ := unstructured.NestedMap(csv.Object, "spec", "install"); !ok {
		c.fail("spec.install is required")
	}
	for _, f := range []string{"description", "keywords", "maintainers", "provider", "links", "maturity", "icon"} {
		if v, ok, _ := unstructured.NestedFieldNoCopy(csv.Object, "spec", f); !ok || v == nil || v == "" {
			c.warn("spec.%s is empty", f)
		}
	}
	owned, _, _ := unstructured.NestedSlice(csv.Object, "spec", "customresourcedefinitions", "owned")
	for _, o := range owned {
		om, _ := o.(map[string]any)
		for _, f := range []string{"name", "version", "kind"} {
			if s, _ := om[f].(string); s == "" {
				c.fail("an owned CRD has no %s: %v", f, om["name"])
			}
		}
	}
}

// checkInstallModes is the CSV validator's install mode check, and that the
// modes the CSV supports are ones the operator can run in.
func checkInstallModes(c *checker, csv *unstructured.Unstructured, deployments []any) {
	modes, _, _ := unstructured.NestedSlice(csv.Object, "spec", "installModes")
	if len(modes) == 0 {
		c.fail("spec.installModes is empty")
		return
	}
	seen := map[string]bool{}
	supported := map[string]bool{}
	for _, m := range modes {
		mm, _ := m.(map[string]any)
		typ, _ := mm["type"].(string)
		if !slices.Contains(installModeTypes, typ) {
			c.fail("spec.installModes has an unknown type %q", typ)
		}
		if seen[typ] {
			c.fail("spec.installModes lists %s twice", typ)
		}
		seen[typ] = true
		if s, _ := mm["supported"].(bool); s {
			supported[typ] = true
		}
	}
	if len(supported) == 0 {
		c.fail("spec.installModes supports no install mode")
	}
	if supported["MultiNamespace"] {
		c.fail("spec.installModes supports MultiNamespace, but --watch-namespace takes one namespace")
	}
	if (supported["OwnNamespace"] || supported["SingleNamespace"]) && !watchesTargetNamespaces(deployments) {
		c.fail("spec.installModes supports OwnNamespace/SingleNamespace, but no deployment passes the olm.targetNamespaces annotation to --watch-namespace")
	}
}

// watchesTargetNamespaces reports whether a manager container reads the
// pod's olm.targetNamespaces annotation into an environment variable that
// its --watch-namespace argument expands.
func watchesTargetNamespaces(deployments []any) bool {
	for _, d := range deployments {
		dm, _ := d.(map[string]any)
		containers, _, _ := unstructured.NestedSlice(dm, "spec", "template", "spec", "containers")
		for _, ct := range containers {
			cm, _ := ct.(map[string]any)
			envs, _, _ := unstructured.NestedSlice(cm, "env")
			for _, e := range envs {
				em, _ := e.(map[string]any)
				path, _, _ := unstructured.NestedString(em, "valueFrom", "fieldRef", "fieldPath")
				if path != "metadata.annotations['olm.targetNamespaces']" {
					continue
				}
				args, _, _ := unstructured.NestedStringSlice(cm, "args")
				if slices.Contains(args, fmt.Sprintf("--watch-namespace=$(%s)", em["name"])) {
					return true
				}
			}
		}
	}
	return false
}

// checkRelatedImages: every image the deployments run or pass on (an
// --*-image= argument) is in spec.relatedImages, so that a mirrored
// (disconnected) install has them all; none is :latest or untagged.
func checkRelatedImages(c *checker, csv *unstructured.Unstructured, deployments []any) {
	related := map[string]bool{}
	list, _, _ := unstructured.NestedSlice(csv.Object, "spec", "relatedImages")
	for _, r := range list {
		rm, _ := r.(map[string]any)
		img, _ := rm["image"].(string)
		name, _ := rm["name"].(string)
		if img == "" || name == "" {
			c.fail("spec.relatedImages entries need a name and an image")
		}
		related[img] = true
	}
	var used []string
	for _, d := range deployments {
		dm, _ := d.(map[string]any)
		containers, _, _ := unstructured.NestedSlice(dm, "spec", "template", "spec", "containers")
		for _, ct := range containers {
			cm, _ := ct.(map[string]any)
			if img, _ := cm["image"].(string); img != "" {
				used = append(used, img)
			}
			args, _, _ := unstructured.NestedStringSlice(cm, "args")
			for _, a := range args {
				if k, v, ok := strings.Cut(a, "="); ok && strings.HasPrefix(k, "--") && strings.HasSuffix(k, "-image") {
					used = append(used, v)
				}
			}
		}
	}
	if ann := csv.GetAnnotations()["containerImage"]; ann != "" {
		used = append(used, ann)
	}
	for _, img := range used {
		if !related[img] {
			c.fail("image %s is used but not listed in spec.relatedImages", img)
		}
		if tag := img[len(untagged(img)):]; tag == "" || tag == ":latest" {
			c.fail("image %s is not pinned to a version", img)
		}
	}
}

// checkDescriptors: every descriptor's path is a field of the CRD's schema
// below spec or status, and its x-descriptors are OLM's URNs.
func checkDescriptors(c *checker, owned map[string]any, crd *unstructured.Unstructured) {
	name, _ := owned["name"].(string)
	version, _ := owned["version"].(string)
	schema := versionSchema(crd, version)
	for key, root := range map[string]string{"specDescriptors": "spec", "statusDescriptors": "status"} {
		list, _ := owned[key].([]any)
		for _, d := range list {
			dm, _ := d.(map[string]any)
			path, _ := dm["path"].(string)
			if path == "" {
				c.fail("owned CRD %s: a %s entry has no path", name, key)
				continue
			}
			if !schemaHas(schema, root, path) {
				c.fail("owned CRD %s: %s path %q is not a field of %s in the CRD's schema", name, key, path, root)
			}
			xs, _ := dm["x-descriptors"].([]any)
			for _, x := range xs {
				if s, _ := x.(string); !strings.HasPrefix(s, "urn:alm:descriptor:") {
					c.fail("owned CRD %s: %s %q has x-descriptor %q, not an urn:alm:descriptor: URN", name, key, path, s)
				}
			}
		}
	}
}

func versionSchema(crd *unstructured.Unstructured, version string) map[string]any {
	versions, _, _ := unstructured.NestedSlice(crd.Object, "spec", "versions")
	for _, v := range versions {
		vm, _ := v.(map[string]any)
		if vm["name"] == version {
			s, _, _ := unstructured.NestedMap(vm, "schema", "openAPIV3Schema")
			return s
		}
	}
	return nil
}

// schemaHas walks a dotted descriptor path ("gateway.ref.name",
// "adapters[0].name") through the schema's properties below root.
func schemaHas(schema map[string]any, root, path string) bool {
	node, ok, _ := unstructured.NestedMap(schema, "properties", root)
	if !ok {
		return false
	}
	for _, part := range strings.Split(path, ".") {
		field, array := strings.CutSuffix(part, "[0]")
		next, ok, _ := unstructured.NestedMap(node, "properties", field)
		if !ok {
			return false
		}
		if array {
			if next, ok, _ = unstructured.NestedMap(next, "items"); !ok {
				return false
			}
		}
		node = next
	}
	return true
}
