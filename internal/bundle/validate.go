package bundle

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"
)

// The checks below are those of operator-framework/api's bundle, CSV and CRD
// validators that an OLM install depends on.

// kindsOLMInstalls are the manifest kinds a registry+v1 bundle may carry.
var kindsOLMInstalls = []string{
	"ClusterServiceVersion", "CustomResourceDefinition", "Secret", "ClusterRole", "ClusterRoleBinding",
	"ConfigMap", "ServiceAccount", "Service", "Role", "RoleBinding", "PrometheusRule", "ServiceMonitor",
	"PodDisruptionBudget", "PriorityClass", "VerticalPodAutoscaler", "ConsoleYAMLSample",
	"ConsoleQuickStart", "ConsoleCLIDownload", "ConsoleLink",
}

// maxBundleBytes is the size above which OLM cannot unpack a bundle into a ConfigMap.
const maxBundleBytes = 1 << 20

var semver = regexp.MustCompile(`^(0|[1-9]\d*)\.(0|[1-9]\d*)\.(0|[1-9]\d*)(-[0-9A-Za-z.-]+)?(\+[0-9A-Za-z.-]+)?$`)

// Validate checks the bundle in dir and returns every error found.
func Validate(dir string) []error {
	errs, _ := Check(dir)
	return errs
}

// Check checks the bundle in dir and returns every error and warning found.
func Check(dir string) (errs, warns []error) {
	fail := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }

	var meta struct {
		Annotations map[string]string `json:"annotations"`
	}
	if err := readYAML(filepath.Join(dir, "metadata", "annotations.yaml"), &meta); err != nil {
		return []error{err}, nil
	}
	a := meta.Annotations
	for key, want := range map[string]string{
		"operators.operatorframework.io.bundle.mediatype.v1": "registry+v1",
		"operators.operatorframework.io.bundle.manifests.v1": "manifests/",
		"operators.operatorframework.io.bundle.metadata.v1":  "metadata/",
	} {
		if a[key] != want {
			fail("annotations.yaml: %s is %q, want %q", key, a[key], want)
		}
	}
	pkg := a["operators.operatorframework.io.bundle.package.v1"]
	if pkg == "" {
		fail("annotations.yaml: no package name")
	}
	channels := splitComma(a["operators.operatorframework.io.bundle.channels.v1"])
	if len(channels) == 0 {
		fail("annotations.yaml: no channels")
	}
	if def := a["operators.operatorframework.io.bundle.channel.default.v1"]; def != "" && !slices.Contains(channels, def) {
		fail("annotations.yaml: default channel %q is not one of the channels %v", def, channels)
	}

	entries, err := os.ReadDir(filepath.Join(dir, "manifests"))
	if err != nil {
		return append(errs, err), nil
	}
	var csvs []*unstructured.Unstructured
	crds := map[string]*unstructured.Unstructured{}
	total := 0
	for _, e := range entries {
		path := filepath.Join(dir, "manifests", e.Name())
		data, err := os.ReadFile(path)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		total += len(data)
		o := &unstructured.Unstructured{}
		if err := yaml.Unmarshal(data, &o.Object); err != nil {
			fail("%s: %v", e.Name(), err)
			continue
		}
		switch kind := o.GetKind(); {
		case kind == "ClusterServiceVersion":
			csvs = append(csvs, o)
		case kind == "CustomResourceDefinition":
			crds[o.GetName()] = o
			errs = append(errs, validateCRD(e.Name(), o)...)
		case !slices.Contains(kindsOLMInstalls, kind):
			fail("%s: OLM does not install objects of kind %q from a bundle", e.Name(), kind)
		}
	}
	if total > maxBundleBytes {
		fail("manifests are %d bytes; OLM unpacks at most %d", total, maxBundleBytes)
	}
	if len(csvs) != 1 {
		return append(errs, fmt.Errorf("manifests/ must hold exactly one ClusterServiceVersion, found %d", len(csvs))), nil
	}
	errs = append(errs, validateCSV(csvs[0], pkg, crds)...)
	c := &checker{prefix: "CSV: "}
	deployments, _, _ := unstructured.NestedSlice(csvs[0].Object, "spec", "install", "spec", "deployments")
	checkHub(c, csvs[0], channels)
	checkRequiredFields(c, csvs[0])
	checkInstallModes(c, csvs[0], deployments)
	checkRelatedImages(c, csvs[0], deployments)
	checkOwnedResources(c, csvs[0])
	owned, _, _ := unstructured.NestedSlice(csvs[0].Object, "spec", "customresourcedefinitions", "owned")
	for _, o := range owned {
		om, _ := o.(map[string]any)
		if crd := crds[om["name"].(string)]; crd != nil {
			checkDescriptors(c, om, crd)
		}
	}
	return append(errs, c.errs...), c.warns
}

func validateCSV(csv *unstructured.Unstructured, pkg string, crds map[string]*unstructured.Unstructured) []error {
	var errs []error
	fail := func(format string, args ...any) { errs = append(errs, fmt.Errorf("CSV: "+format, args...)) }
	str := func(fields ...string) string { s, _, _ := unstructured.NestedString(csv.Object, fields...); return s }

	version := str("spec", "version")
	if !semver.MatchString(version) {
		fail("spec.version %q is not semver", version)
	}
	if want := pkg + ".v" + version; csv.GetName() != want {
		fail("metadata.name is %q, want %q", csv.GetName(), want)
	}
	if v := str("spec", "minKubeVersion"); v != "" && !semver.MatchString(v) {
		fail("spec.minKubeVersion %q is not semver", v)
	}
	for _, f := range []string{"displayName", "description"} {
		if str("spec", f) == "" {
			fail("spec.%s is empty", f)
		}
	}
	if str("spec", "provider", "name") == "" {
		fail("spec.provider.name is empty")
	}
	if s := str("spec", "install", "strategy"); s != "deployment" {
		fail("spec.install.strategy is %q, want deployment", s)
	}
	deployments, _, _ := unstructured.NestedSlice(csv.Object, "spec", "install", "spec", "deployments")
	if len(deployments) == 0 {
		fail("spec.install.spec.deployments is empty")
	}
	accounts := map[string]bool{}
	for i, d := range deployments {
		dm, _ := d.(map[string]any)
		if _, ok, _ := unstructured.NestedMap(dm, "spec", "selector"); !ok {
			fail("deployment %d has no spec.selector", i)
		}
		sa, _, _ := unstructured.NestedString(dm, "spec", "template", "spec", "serviceAccountName")
		if sa == "" {
			fail("deployment %d runs without a serviceAccountName", i)
		}
		accounts[sa] = true
	}
	for _, kind := range []string{"permissions", "clusterPermissions"} {
		perms, _, _ := unstructured.NestedSlice(csv.Object, "spec", "install", "spec", kind)
		for _, p := range perms {
			sa, _ := p.(map[string]any)["serviceAccountName"].(string)
			if !accounts[sa] {
				fail("%s grant rules to service account %q that no deployment uses", kind, sa)
			}
		}
	}

	owned, _, _ := unstructured.NestedSlice(csv.Object, "spec", "customresourcedefinitions", "owned")
	ownedKinds := map[string]bool{}
	ownedNames := map[string]bool{}
	for _, o := range owned {
		om, _ := o.(map[string]any)
		name, _ := om["name"].(string)
		kind, _ := om["kind"].(string)
		version, _ := om["version"].(string)
		ownedKinds[kind], ownedNames[name] = true, true
		crd, ok := crds[name]
		if !ok {
			fail("owns CRD %s, but the bundle does not carry it", name)
			continue
		}
		if k, _, _ := unstructured.NestedString(crd.Object, "spec", "names", "kind"); k != kind {
			fail("owned CRD %s has kind %q, the CRD says %q", name, kind, k)
		}
		if !servesVersion(crd, version) {
			fail("owned CRD %s names version %q, which the CRD does not serve", name, version)
		}
		for _, f := range []string{"displayName", "description"} {
			if s, _ := om[f].(string); s == "" {
				fail("owned CRD %s has no %s", name, f)
			}
		}
	}
	for name := range crds {
		if !ownedNames[name] {
			fail("the bundle carries CRD %s, but the CSV does not own it", name)
		}
	}

	if raw := csv.GetAnnotations()["alm-examples"]; raw != "" {
		var examples []map[string]any
		if err := json.Unmarshal([]byte(raw), &examples); err != nil {
			fail("alm-examples is not a JSON array of objects: %v", err)
		}
		for _, e := range examples {
			if kind, _ := e["kind"].(string); !ownedKinds[kind] {
				fail("alm-examples has a %q, which is not an owned kind", kind)
			}
		}
	} else {
		fail("metadata.annotations.alm-examples is missing")
	}
	return errs
}

func validateCRD(file string, crd *unstructured.Unstructured) []error {
	var errs []error
	if crd.GetAPIVersion() != "apiextensions.k8s.io/v1" {
		errs = append(errs, fmt.Errorf("%s: CRD apiVersion %q, want apiextensions.k8s.io/v1", file, crd.GetAPIVersion()))
	}
	plural, _, _ := unstructured.NestedString(crd.Object, "spec", "names", "plural")
	group, _, _ := unstructured.NestedString(crd.Object, "spec", "group")
	if want := plural + "." + group; crd.GetName() != want {
		errs = append(errs, fmt.Errorf("%s: CRD is named %q, want %q", file, crd.GetName(), want))
	}
	versions, _, _ := unstructured.NestedSlice(crd.Object, "spec", "versions")
	storage := 0
	for _, v := range versions {
		vm, _ := v.(map[string]any)
		if s, _ := vm["storage"].(bool); s {
			storage++
		}
		if _, ok, _ := unstructured.NestedMap(vm, "schema", "openAPIV3Schema"); !ok {
			errs = append(errs, fmt.Errorf("%s: version %v has no schema", file, vm["name"]))
		}
	}
	if storage != 1 {
		errs = append(errs, fmt.Errorf("%s: %d storage versions, want 1", file, storage))
	}
	return errs
}

func servesVersion(crd *unstructured.Unstructured, version string) bool {
	versions, _, _ := unstructured.NestedSlice(crd.Object, "spec", "versions")
	for _, v := range versions {
		vm, _ := v.(map[string]any)
		if vm["name"] == version && vm["served"] == true {
			return true
		}
	}
	return false
}

func readYAML(path string, into any) error {
	data, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	if err := yaml.Unmarshal(data, into); err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	return nil
}

func splitComma(s string) []string {
	var out []string
	for _, part := range regexp.MustCompile(`\s*,\s*`).Split(s, -1) {
		if part != "" {
			out = append(out, part)
		}
	}
	return out
}
