package bundle

import (
	"flag"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	"sigs.k8s.io/yaml"

	"github.com/igw-dev/igw/internal/testenv"
	"github.com/igw-dev/igw/pkg/manager"
)

// TestScorecardTestsPass runs the ported static scorecard tests that
// tests/scorecard/config.yaml configures on the committed bundle.
func TestScorecardTestsPass(t *testing.T) {
	configured, err := ConfiguredScorecardTests(committedBundle())
	if err != nil {
		t.Fatal(err)
	}
	if len(configured) != 6 {
		t.Errorf("config.yaml configures %d scorecard tests %v, want the 6 of the basic and olm suites", len(configured), configured)
	}
	b, err := Load(committedBundle())
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range configured {
		check, ok := ScorecardTests[name]
		if !ok {
			t.Errorf("scorecard test %s is configured but not ported", name)
			continue
		}
		for _, e := range check(b) {
			t.Errorf("%s: %s", name, e)
		}
	}
}

// TestScorecardTestsFail shows each ported scorecard test failing on the
// bundle broken the way it guards against.
func TestScorecardTestsFail(t *testing.T) {
	cases := map[string]func(b *Loaded){
		"basic-check-spec": func(b *Loaded) { b.Examples[0]["spec"] = map[string]any{} },
		"olm-crds-have-validation": func(b *Loaded) {
			b.Examples[0]["spec"].(map[string]any)["gatway"] = map[string]any{}
		},
		"olm-crds-have-resources": func(b *Loaded) { ownedOf(b, "ModelRoute")["resources"] = []any{} },
		"olm-spec-descriptors": func(b *Loaded) {
			o := ownedOf(b, "ModelRoute")
			o["specDescriptors"] = slices.DeleteFunc(o["specDescriptors"].([]any), func(d any) bool {
				return d.(map[string]any)["path"] == "selector"
			})
		},
		"olm-status-descriptors": func(b *Loaded) {
			b.Examples[0]["status"] = map[string]any{"observedGeneration": 1}
			ownedOf(b, b.Examples[0]["kind"].(string))["statusDescriptors"] = []any{}
		},
	}
	for name, breakIt := range cases {
		t.Run(name, func(t *testing.T) {
			b, err := Load(committedBundle())
			if err != nil {
				t.Fatal(err)
			}
			if errs := ScorecardTests[name](b); len(errs) > 0 {
				t.Fatalf("fails unbroken: %v", errs)
			}
			breakIt(b)
			if errs := ScorecardTests[name](b); len(errs) == 0 {
				t.Error("passes a broken bundle")
			}
		})
	}
}

// ownedOf is the CSV's own entry (not a copy) of the owned CRD of kind.
func ownedOf(b *Loaded, kind string) map[string]any {
	list := b.CSV.Object["spec"].(map[string]any)["customresourcedefinitions"].(map[string]any)["owned"].([]any)
	for _, o := range list {
		if om := o.(map[string]any); om["kind"] == kind {
			return om
		}
	}
	return nil
}

// TestEveryTopLevelFieldHasADescriptor goes beyond the scorecard (which looks
// only at the fields the examples set): every field directly below spec and
// status of each CRD has a descriptor, so a field added to the API without a
// marker fails here.
func TestEveryTopLevelFieldHasADescriptor(t *testing.T) {
	b, err := Load(committedBundle())
	if err != nil {
		t.Fatal(err)
	}
	for kind, crd := range b.CRDs {
		o := ownedOf(b, kind)
		schema := versionSchema(crd, o["version"].(string))
		for _, root := range []string{"spec", "status"} {
			props, _, _ := unstructured.NestedMap(schema, "properties", root, "properties")
			have := map[string]bool{}
			for _, d := range o[root+"Descriptors"].([]any) {
				have[d.(map[string]any)["path"].(string)] = true
			}
			for field := range props {
				if !have[field] {
					t.Errorf("%s %s.%s has no descriptor: add a +operator-sdk:csv:customresourcedefinitions:type=%s marker", kind, root, field, root)
				}
			}
		}
	}
}

func TestReadMarkers(t *testing.T) {
	dir := t.TempDir()
	src := `package v1

import metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

// Settings are shared.
type Settings struct {
	// Replicas of it.
	// +operator-sdk:csv:customresourcedefinitions:type=spec,displayName="Replicas",xDescriptors={"urn:alm:descriptor:com.tectonic.ui:podCount"}
	Replicas *int32 ` + "`json:\"replicas,omitempty\"`" + `
}

type Item struct {
	// Name of the item, with a comma, and "quotes".
	// +kubebuilder:validation:MinLength=1
	// +operator-sdk:csv:customresourcedefinitions:type=spec,displayName="Item, named"
	Name string ` + "`json:\"name\"`" + `
}

type WidgetSpec struct {
	Settings ` + "`json:\",inline\"`" + `
	// +operator-sdk:csv:customresourcedefinitions:type=spec
	Items []Item ` + "`json:\"items,omitempty\"`" + `
	// Inner is not a descriptor itself.
	Inner *Settings ` + "`json:\"inner,omitempty\"`" + `
}

type WidgetStatus struct {
	// Ready count.
	// +operator-sdk:csv:customresourcedefinitions:type=status,xDescriptors={"urn:alm:descriptor:text","urn:alm:descriptor:io.kubernetes.conditions"}
	Ready int32 ` + "`json:\"ready\"`" + `
}

// +kubebuilder:object:root=true

// +operator-sdk:csv:customresourcedefinitions:displayName="Widget",resources={{Service,v1,""},{Deployment,v1,"widget-{name}"}}
// Widget is a kind.
type Widget struct {
	metav1.TypeMeta   ` + "`json:\",inline\"`" + `
	metav1.ObjectMeta ` + "`json:\"metadata,omitempty\"`" + `
	Spec   WidgetSpec   ` + "`json:\"spec\"`" + `
	Status WidgetStatus ` + "`json:\"status,omitempty\"`" + `
}
`
	if err := os.WriteFile(filepath.Join(dir, "types.go"), []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	got, err := ReadMarkers(dir)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]KindMarkers{"Widget": {
		DisplayName: "Widget",
		Resources:   []Resource{{Kind: "Deployment", Version: "v1", Name: "widget-{name}"}, {Kind: "Service", Version: "v1"}},
		Spec: []Descriptor{
			{Path: "replicas", DisplayName: "Replicas", Description: "Replicas of it.", XDescriptors: []string{"urn:alm:descriptor:com.tectonic.ui:podCount"}},
			{Path: "items"},
			{Path: "items[0].name", DisplayName: "Item, named", Description: `Name of the item, with a comma, and "quotes".`},
			{Path: "inner.replicas", DisplayName: "Replicas", Description: "Replicas of it.", XDescriptors: []string{"urn:alm:descriptor:com.tectonic.ui:podCount"}},
		},
		Status: []Descriptor{{Path: "ready", Description: "Ready count.",
			XDescriptors: []string{"urn:alm:descriptor:text", "urn:alm:descriptor:io.kubernetes.conditions"}}},
	}}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("markers:\n got %+v\nwant %+v", got, want)
	}

	bad := strings.Replace(src, "type=status,", "type=state,", 1)
	if err := os.WriteFile(filepath.Join(dir, "types.go"), []byte(bad), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := ReadMarkers(dir); err == nil || !strings.Contains(err.Error(), `type="state"`) {
		t.Errorf("a marker of type state: %v", err)
	}
}

// TestTargetNamespacesReachTheOperator expands the CSV deployment's
// arguments as the kubelet does, with the olm.targetNamespaces annotation OLM
// writes for each supported install mode, and parses them with the
// operator's own flags.
func TestTargetNamespacesReachTheOperator(t *testing.T) {
	b, err := Load(committedBundle())
	if err != nil {
		t.Fatal(err)
	}
	deployments, _, _ := unstructured.NestedSlice(b.CSV.Object, "spec", "install", "spec", "deployments")
	containers, _, _ := unstructured.NestedSlice(deployments[0].(map[string]any), "spec", "template", "spec", "containers")
	c := containers[0].(map[string]any)
	args, _, _ := unstructured.NestedStringSlice(c, "args")
	envs, _, _ := unstructured.NestedSlice(c, "env")
	for mode, annotation := range map[string]string{"AllNamespaces": "", "OwnNamespace": "igw-system", "SingleNamespace": "team-a"} {
		vars := map[string]string{}
		for _, e := range envs {
			em := e.(map[string]any)
			if p, _, _ := unstructured.NestedString(em, "valueFrom", "fieldRef", "fieldPath"); p == "metadata.annotations['olm.targetNamespaces']" {
				vars[em["name"].(string)] = annotation
			}
		}
		expanded := make([]string, len(args))
		for i, a := range args {
			expanded[i] = regexp.MustCompile(`\$\(([A-Za-z_][A-Za-z0-9_]*)\)`).ReplaceAllStringFunc(a, func(ref string) string {
				if v, ok := vars[ref[2:len(ref)-1]]; ok {
					return v
				}
				return ref
			})
		}
		opts := manager.NewOptions()
		fs := flag.NewFlagSet("manager", flag.ContinueOnError)
		fs.SetOutput(io.Discard)
		opts.AddFlags(fs)
		(&zap.Options{}).BindFlags(fs)
		if err := fs.Parse(expanded); err != nil {
			t.Fatalf("%s: the operator rejects %q: %v", mode, expanded, err)
		}
		if err := opts.Validate(); err != nil {
			t.Fatalf("%s: %v", mode, err)
		}
		if opts.WatchNamespace != annotation {
			t.Errorf("%s: the operator watches %q, OLM's target namespaces are %q", mode, opts.WatchNamespace, annotation)
		}
	}
}

// TestOneVersion: the chart, the kustomize image, the bundle and the Makefile
// name the same release, and bundle.Dockerfile's labels are the annotations.
func TestOneVersion(t *testing.T) {
	root := testenv.RepoRoot()
	read := func(p string) string {
		data, err := os.ReadFile(filepath.Join(root, p))
		if err != nil {
			t.Fatal(err)
		}
		return string(data)
	}
	var chart struct{ Version, AppVersion string }
	if err := yaml.Unmarshal([]byte(read("charts/igw/Chart.yaml")), &chart); err != nil {
		t.Fatal(err)
	}
	var kust struct {
		Images []struct{ NewName, NewTag string } `json:"images"`
	}
	if err := yaml.Unmarshal([]byte(read("config/manager/kustomization.yaml")), &kust); err != nil {
		t.Fatal(err)
	}
	makeVersion := regexp.MustCompile(`(?m)^VERSION \?= (\S+)$`).FindStringSubmatch(read("Makefile"))
	versions := map[string]string{"bundle.DefaultVersion": DefaultVersion, "Chart.yaml appVersion": chart.AppVersion}
	if len(kust.Images) == 1 {
		versions["config/manager image tag"] = kust.Images[0].NewTag
	}
	if len(makeVersion) == 2 {
		versions["Makefile VERSION"] = makeVersion[1]
	}
	if len(versions) != 4 {
		t.Fatalf("could not read every version: %v", versions)
	}
	for what, v := range versions {
		if v != DefaultVersion {
			t.Errorf("%s is %q, bundle.DefaultVersion %q", what, v, DefaultVersion)
		}
	}
	var meta struct {
		Annotations map[string]string `json:"annotations"`
	}
	if err := yaml.Unmarshal([]byte(read("bundle/metadata/annotations.yaml")), &meta); err != nil {
		t.Fatal(err)
	}
	labels := map[string]string{}
	for _, m := range regexp.MustCompile(`(?m)^LABEL (\S+)=(\S+)$`).FindAllStringSubmatch(read("bundle.Dockerfile"), -1) {
		labels[m[1]] = m[2]
	}
	if !reflect.DeepEqual(labels, meta.Annotations) {
		t.Errorf("bundle.Dockerfile's labels %v differ from bundle/metadata/annotations.yaml %v", labels, meta.Annotations)
	}
}

func TestCommittedCatalogIsFreshAndValid(t *testing.T) {
	root := testenv.RepoRoot()
	fresh := t.TempDir()
	if err := GenerateCatalog(committedBundle(), fresh, BundleRepository+":"+DefaultVersion); err != nil {
		t.Fatal(err)
	}
	want, _ := os.ReadFile(filepath.Join(fresh, CatalogFile))
	got, err := os.ReadFile(filepath.Join(root, "catalog", CatalogFile))
	if err != nil || string(got) != string(want) {
		t.Errorf("catalog/%s is stale or missing: run 'make catalog' and commit the result", CatalogFile)
	}
	for _, err := range ValidateCatalog(filepath.Join(root, "catalog")) {
		t.Error(err)
	}
	var channels []string
	for _, m := range regexp.MustCompile(`(?m)^name: (\S+)\npackage: igw\nschema: olm.channel$`).FindAllStringSubmatch(string(got), -1) {
		channels = append(channels, m[1])
	}
	if !reflect.DeepEqual(channels, DefaultChannels) {
		t.Errorf("catalog channels %v, want %v", channels, DefaultChannels)
	}
}

func TestValidateCatalogRejectsBrokenCatalogs(t *testing.T) {
	for name, c := range map[string]struct{ old, new, want string }{
		"default channel missing": {"defaultChannel: stable", "defaultChannel: fast", `default channel "fast"`},
		"entry of no bundle":      {"entries:\n- name: igw.v0.1.0\nname: stable", "entries:\n- name: igw.v0.2.0\nname: stable", "entry igw.v0.2.0 is not a bundle"},
		"two heads": {"entries:\n- name: igw.v0.1.0\nname: candidate",
			"entries:\n- name: igw.v0.1.0\n- name: igw.v0.0.9\nname: candidate", "2 heads"},
		"version not semver":   {"    version: 0.1.0", "    version: one", `version "one" is not semver`},
		"name against version": {"    version: 0.1.0", "    version: 0.1.1", "the name does not match version 0.1.1"},
		"unknown field":        {"schema: olm.bundle", "schema: olm.bundle\nreplace: x", "unknown field"},
	} {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			if err := GenerateCatalog(committedBundle(), dir, "x/bundle:1"); err != nil {
				t.Fatal(err)
			}
			if errs := ValidateCatalog(dir); len(errs) > 0 {
				t.Fatalf("the unbroken catalog fails: %v", errs)
			}
			replace(t, dir, CatalogFile, c.old, c.new)
			var msgs []string
			for _, err := range ValidateCatalog(dir) {
				msgs = append(msgs, err.Error())
			}
			if !strings.Contains(strings.Join(msgs, "\n"), c.want) {
				t.Errorf("want an error containing %q, got %q", c.want, msgs)
			}
		})
	}
}
