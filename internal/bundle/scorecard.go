package bundle

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"
)

// The operator-sdk scorecard's static tests (basic and olm suites), ported:
// they need no cluster, so the tests of this package run them on the bundle
// for every test tests/scorecard/config.yaml configures.

// ScorecardTests maps a scorecard test name (the entrypoint's argument) to its check.
var ScorecardTests = map[string]func(b *Loaded) []string{
	"basic-check-spec":         basicCheckSpec,
	"olm-bundle-validation":    olmBundleValidation,
	"olm-crds-have-validation": olmCRDsHaveValidation,
	"olm-crds-have-resources":  olmCRDsHaveResources,
	"olm-spec-descriptors":     func(b *Loaded) []string { return olmDescriptors(b, "spec") },
	"olm-status-descriptors":   func(b *Loaded) []string { return olmDescriptors(b, "status") },
}

// Loaded is a bundle read from disk.
type Loaded struct {
	Dir      string
	CSV      *unstructured.Unstructured
	CRDs     map[string]*unstructured.Unstructured // by kind
	Examples []map[string]any
}

// Load reads the CSV, CRDs and alm-examples of the bundle in dir.
func Load(dir string) (*Loaded, error) {
	b := &Loaded{Dir: dir, CRDs: map[string]*unstructured.Unstructured{}}
	entries, err := os.ReadDir(filepath.Join(dir, "manifests"))
	if err != nil {
		return nil, err
	}
	for _, e := range entries {
		o := &unstructured.Unstructured{}
		if err := readYAML(filepath.Join(dir, "manifests", e.Name()), &o.Object); err != nil {
			return nil, err
		}
		switch o.GetKind() {
		case "ClusterServiceVersion":
			b.CSV = o
		case "CustomResourceDefinition":
			kind, _, _ := unstructured.NestedString(o.Object, "spec", "names", "kind")
			b.CRDs[kind] = o
		}
	}
	if b.CSV == nil {
		return nil, fmt.Errorf("%s: no ClusterServiceVersion", dir)
	}
	if err := json.Unmarshal([]byte(b.CSV.GetAnnotations()["alm-examples"]), &b.Examples); err != nil {
		return nil, fmt.Errorf("alm-examples: %w", err)
	}
	return b, nil
}

// ConfiguredScorecardTests lists the tests tests/scorecard/config.yaml runs.
func ConfiguredScorecardTests(dir string) ([]string, error) {
	var cfg struct {
		Serial struct {
			Stages []struct {
				Tests []struct {
					Entrypoint []string `json:"entrypoint"`
				} `json:"tests"`
			} `json:"stages"`
		} `json:"serial"`
		Stages []struct {
			Tests []struct {
				Entrypoint []string `json:"entrypoint"`
			} `json:"tests"`
		} `json:"stages"`
	}
	data, err := os.ReadFile(filepath.Join(dir, "tests", "scorecard", "config.yaml"))
	if err != nil {
		return nil, err
	}
	if err := yaml.Unmarshal(data, &cfg); err != nil {
		return nil, err
	}
	var out []string
	for _, st := range append(cfg.Stages, cfg.Serial.Stages...) {
		for _, t := range st.Tests {
			if len(t.Entrypoint) == 2 && t.Entrypoint[0] == "scorecard-test" {
				out = append(out, t.Entrypoint[1])
			} else {
				return nil, fmt.Errorf("scorecard test %v is not one of scorecard-test's", t.Entrypoint)
			}
		}
	}
	return out, nil
}

func owned(b *Loaded, kind string) map[string]any {
	list, _, _ := unstructured.NestedSlice(b.CSV.Object, "spec", "customresourcedefinitions", "owned")
	for _, o := range list {
		if om, _ := o.(map[string]any); om["kind"] == kind {
			return om
		}
	}
	return nil
}

// basicCheckSpec: every example has a spec.
func basicCheckSpec(b *Loaded) []string {
	var errs []string
	for _, e := range b.Examples {
		if spec, _ := e["spec"].(map[string]any); len(spec) == 0 {
			errs = append(errs, fmt.Sprintf("example %s %v has no spec", e["kind"], name(e)))
		}
	}
	return errs
}

func olmBundleValidation(b *Loaded) []string {
	var errs []string
	for _, err := range Validate(b.Dir) {
		errs = append(errs, err.Error())
	}
	return errs
}

// olmCRDsHaveValidation: every spec and status key of every example is a
// property of its CRD's schema.
func olmCRDsHaveValidation(b *Loaded) []string {
	var errs []string
	for _, e := range b.Examples {
		kind, _ := e["kind"].(string)
		crd := b.CRDs[kind]
		if crd == nil {
			errs = append(errs, fmt.Sprintf("example %s %v: no CRD of that kind", kind, name(e)))
			continue
		}
		apiVersion, _ := e["apiVersion"].(string)
		schema := versionSchema(crd, apiVersion[strings.LastIndex(apiVersion, "/")+1:])
		for _, root := range []string{"spec", "status"} {
			block, _ := e[root].(map[string]any)
			for key := range block {
				if !schemaHas(schema, root, key) {
					errs = append(errs, fmt.Sprintf("example %s %v: %s.%s has no validation in the CRD", kind, name(e), root, key))
				}
			}
		}
	}
	return errs
}

// olmCRDsHaveResources: every owned CRD lists the resources it creates.
func olmCRDsHaveResources(b *Loaded) []string {
	list, _, _ := unstructured.NestedSlice(b.CSV.Object, "spec", "customresourcedefinitions", "owned")
	for _, o := range list {
		om, _ := o.(map[string]any)
		if r, _ := om["resources"].([]any); len(r) == 0 {
			return []string{fmt.Sprintf("owned CRD %v does not list resources", om["name"])}
		}
	}
	return nil
}

// olmDescriptors: for spec, every top-level spec key of every example has a
// spec descriptor of that path; for status, an example with a status needs
// its owned CRD to have status descriptors.
func olmDescriptors(b *Loaded, root string) []string {
	var errs []string
	for _, e := range b.Examples {
		kind, _ := e["kind"].(string)
		o := owned(b, kind)
		if o == nil {
			errs = append(errs, fmt.Sprintf("example %s %v: no owned CRD of that kind", kind, name(e)))
			continue
		}
		list, _ := o[root+"Descriptors"].([]any)
		paths := map[string]bool{}
		for _, d := range list {
			dm, _ := d.(map[string]any)
			p, _ := dm["path"].(string)
			paths[p] = true
		}
		block, _ := e[root].(map[string]any)
		if root == "status" {
			if len(block) > 0 && len(list) == 0 {
				errs = append(errs, fmt.Sprintf("%v has a status but no status descriptor", o["name"]))
			}
			continue
		}
		for key := range block {
			if !paths[key] {
				errs = append(errs, fmt.Sprintf("example %s %v: %s has no spec descriptor", kind, name(e), key))
			}
		}
	}
	return errs
}

func name(e map[string]any) any {
	md, _ := e["metadata"].(map[string]any)
	return md["name"]
}
