package bundle

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/yaml"

	"github.com/igw-dev/igw/internal/testenv"
)

func committedBundle() string { return filepath.Join(testenv.RepoRoot(), "bundle") }

func generateInto(t *testing.T) string {
	t.Helper()
	out := t.TempDir()
	if err := Generate(Options{Root: testenv.RepoRoot(), OutDir: out, Version: DefaultVersion, Channels: DefaultChannels}); err != nil {
		t.Fatal(err)
	}
	return out
}

func TestCommittedBundleIsFresh(t *testing.T) {
	fresh := generateInto(t)
	err := filepath.WalkDir(fresh, func(path string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		rel, _ := filepath.Rel(fresh, path)
		want, _ := os.ReadFile(path)
		got, readErr := os.ReadFile(filepath.Join(committedBundle(), rel))
		if readErr != nil || string(got) != string(want) {
			t.Errorf("bundle/%s is stale or missing: run 'make bundle' and commit the result", rel)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

func TestCommittedBundleValidates(t *testing.T) {
	for _, err := range Validate(committedBundle()) {
		t.Error(err)
	}
}

func TestValidateRejectsBrokenBundles(t *testing.T) {
	csvFile := filepath.Join("manifests", PackageName+".clusterserviceversion.yaml")
	cases := []struct {
		name    string
		breakIt breaker
		want    string
	}{
		{"owned CRD missing", removing("manifests/modelroutes.gateway.igw.dev.yaml"), "owns CRD modelroutes.gateway.igw.dev, but the bundle does not carry it"},
		{"version not semver", replacing(csvFile, "version: "+DefaultVersion, "version: one"), `spec.version "one" is not semver`},
		{"name does not match version", replacing(csvFile, "name: igw.v"+DefaultVersion, "name: igw.v9.9.9"), `metadata.name is "igw.v9.9.9"`},
		{"no install mode", replacingRegexp(csvFile, "supported: true", "supported: false"), "supports no install mode"},
		{"example of a foreign kind", replacing(csvFile, `"kind": "ModelRoute"`, `"kind": "Route"`), `alm-examples has a "Route"`},
		{"kind OLM cannot install", writing("manifests/extra.yaml", "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: x}\n"), `OLM does not install objects of kind "Deployment"`},
		{"wrong mediatype", replacing("metadata/annotations.yaml", "registry+v1", "helm"), "mediatype.v1 is \"helm\""},
		{"default channel outside channels", replacing("metadata/annotations.yaml", "channel.default.v1: stable", "channel.default.v1: fast"), `default channel "fast" is not one of the channels`},
		{"no icon data", replacingRegexp(csvFile, `base64data: \S+`, `base64data: ""`), "spec.icon needs both base64data and mediatype"},
		{"icon of an unknown type", replacing(csvFile, "mediatype: image/svg+xml", "mediatype: image/webp"), `mediatype "image/webp" is not one of`},
		{"unknown category", replacing(csvFile, "categories: AI/Machine Learning, Networking", "categories: AI/Machine Learning, Gateways"), `"Gateways" is not an OperatorHub category`},
		{"bad maintainer email", replacing(csvFile, "email: maintainers@igw.dev", "email: maintainers"), `email "maintainers" is invalid`},
		{"descriptor of no field", replacing(csvFile, "path: requestTimeout", "path: requestTimout"), `specDescriptors path "requestTimout" is not a field of spec`},
		{"descriptor without a URN", replacing(csvFile, "- urn:alm:descriptor:com.tectonic.ui:booleanSwitch", "- booleanSwitch"), `x-descriptor "booleanSwitch"`},
		{"image not in relatedImages", replacing(csvFile, "--epp-image=ghcr.io/igw-dev/igw-epp:"+DefaultVersion, "--epp-image=registry.example/epp:"+DefaultVersion), "image registry.example/epp:" + DefaultVersion + " is used but not listed in spec.relatedImages"},
		{"image on latest", replacingRegexp(csvFile, regexp.QuoteMeta("ghcr.io/igw-dev/igw-manager:"+DefaultVersion), "ghcr.io/igw-dev/igw-manager:latest"), "image ghcr.io/igw-dev/igw-manager:latest is not pinned"},
		{"MultiNamespace", replacing(csvFile, "supported: false\n    type: MultiNamespace", "supported: true\n    type: MultiNamespace"), "supports MultiNamespace"},
		{"target namespaces not wired", replacing(csvFile, "- --watch-namespace=$(WATCH_NAMESPACE)", "- --watch-namespace="), "no deployment passes the olm.targetNamespaces annotation to --watch-namespace"},
		{"created kind without permissions", replacing(csvFile, "          - networkpolicies\n", ""), "lists resource NetworkPolicy, but the operator's permissions lack create, delete, get, list, patch, watch on networkpolicies"},
		{"native API nothing creates", replacing(csvFile, "kind: InferencePool\n    version: v1\n  provider", "kind: InferencePool\n    version: v2\n  provider"), "requires inference.networking.k8s.io/v2 InferencePool, which no owned CRD lists"},
		{"permissions for an unknown account", replacing(csvFile, "serviceAccountName: igw-controller-manager\n      deployments", "serviceAccountName: someone\n      deployments"), `service account "someone"`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			dir := generateInto(t)
			if errs := Validate(dir); len(errs) != 0 {
				t.Fatalf("the unbroken bundle already fails: %v", errs)
			}
			c.breakIt(t, dir)
			var msgs []string
			for _, err := range Validate(dir) {
				msgs = append(msgs, err.Error())
			}
			if !strings.Contains(strings.Join(msgs, "\n"), c.want) {
				t.Fatalf("want an error containing %q, got %q", c.want, msgs)
			}
		})
	}
}

// A breaker breaks the bundle generated into dir.
type breaker func(t *testing.T, dir string)

func replacing(file, old, new string) breaker {
	return func(t *testing.T, dir string) { replace(t, dir, file, old, new) }
}

func replacingRegexp(file, expr, new string) breaker {
	return func(t *testing.T, dir string) { replaceRegexp(t, dir, file, expr, new) }
}

func writing(file, content string) breaker {
	return func(t *testing.T, dir string) { write(t, dir, file, content) }
}

func removing(file string) breaker {
	return func(t *testing.T, dir string) { remove(t, dir, file) }
}

func replaceRegexp(t *testing.T, dir, file, expr, new string) {
	t.Helper()
	re := regexp.MustCompile(expr)
	edit(t, dir, file, "does not match "+expr, func(s string) (string, bool) { return re.ReplaceAllString(s, new), re.MatchString(s) })
}

func replace(t *testing.T, dir, file, old, new string) {
	t.Helper()
	edit(t, dir, file, fmt.Sprintf("does not contain %q", old),
		func(s string) (string, bool) { return strings.Replace(s, old, new, 1), strings.Contains(s, old) })
}

// edit rewrites a file of dir with change, failing t with "<file> <missing>"
// when change reports that what it edits is not there.
func edit(t *testing.T, dir, file, missing string, change func(string) (string, bool)) {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(dir, file))
	if err != nil {
		t.Fatal(err)
	}
	out, ok := change(string(data))
	if !ok {
		t.Fatalf("%s %s", file, missing)
	}
	write(t, dir, file, out)
}

func write(t *testing.T, dir, file, content string) {
	t.Helper()
	if err := os.WriteFile(filepath.Join(dir, file), []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

func remove(t *testing.T, dir, file string) {
	t.Helper()
	if err := os.Remove(filepath.Join(dir, file)); err != nil {
		t.Fatal(err)
	}
}

// TestOwnedResourcesCoverWhatTheOperatorRenders: every kind the renderer
// makes for an owned kind (the golden outputs of pkg/render, by what each
// case renders) is among that kind's resources in the CSV, and every kind
// no Kubernetes release serves is a native API the CSV requires or one the
// CSV says is optional (Envoy Gateway's).
func TestOwnedResourcesCoverWhatTheOperatorRenders(t *testing.T) {
	b, err := Load(committedBundle())
	if err != nil {
		t.Fatal(err)
	}
	listed := map[string]map[string]bool{} // owned kind -> "Kind/version"
	owned, _, _ := unstructured.NestedSlice(b.CSV.Object, "spec", "customresourcedefinitions", "owned")
	for _, o := range owned {
		om := o.(map[string]any)
		kind := om["kind"].(string)
		listed[kind] = map[string]bool{}
		resources, _ := om["resources"].([]any)
		for _, r := range resources {
			rm := r.(map[string]any)
			listed[kind][fmt.Sprintf("%s/%s", rm["kind"], rm["version"])] = true
		}
	}
	natives := map[string]bool{}
	nativeAPIs, _, _ := unstructured.NestedSlice(b.CSV.Object, "spec", "nativeAPIs")
	for _, n := range nativeAPIs {
		nm := n.(map[string]any)
		natives[fmt.Sprintf("%s/%s/%s", nm["group"], nm["version"], nm["kind"])] = true
	}
	ownerOf := map[string]string{"config": "InferenceGatewayConfig", "route": "ModelRoute", "global": "GlobalInferenceGateway"}
	// Groups whose kinds a cluster serves without igw's requirements: the
	// built-in ones, and Envoy Gateway's (its provider and the global tier only).
	unrequired := []string{"", "apps", "rbac.authorization.k8s.io", "networking.k8s.io", "gateway.envoyproxy.io"}
	testdata := filepath.Join(testenv.RepoRoot(), "pkg", "render", "testdata")
	inputs, _ := filepath.Glob(filepath.Join(testdata, "*.in.yaml"))
	if len(inputs) == 0 {
		t.Fatal("no golden cases in pkg/render/testdata")
	}
	seen := map[string]bool{}
	for _, in := range inputs {
		var c struct {
			Render string `json:"render"`
		}
		data, err := os.ReadFile(in)
		if err != nil {
			t.Fatal(err)
		}
		if err := yaml.Unmarshal(data, &c); err != nil {
			t.Fatal(err)
		}
		prefix, _, _ := strings.Cut(c.Render, "/")
		owner := ownerOf[prefix]
		if owner == "" {
			t.Fatalf("%s renders %q, an owner this test does not know", in, c.Render)
		}
		seen[owner] = true
		out, err := os.ReadFile(strings.TrimSuffix(in, ".in.yaml") + ".out.yaml")
		if err != nil {
			t.Fatal(err)
		}
		for _, doc := range strings.Split(string(out), "\n---\n") {
			var obj struct {
				APIVersion string `json:"apiVersion"`
				Kind       string `json:"kind"`
			}
			if err := yaml.Unmarshal([]byte(doc), &obj); err != nil || obj.Kind == "" {
				continue
			}
			gv, err := schema.ParseGroupVersion(obj.APIVersion)
			if err != nil {
				t.Fatal(err)
			}
			if !listed[owner][obj.Kind+"/"+gv.Version] {
				t.Errorf("%s renders a %s %s, which the CSV does not list among %s's resources", filepath.Base(in), obj.APIVersion, obj.Kind, owner)
			}
			if !slices.Contains(unrequired, gv.Group) && !natives[gv.Group+"/"+gv.Version+"/"+obj.Kind] {
				t.Errorf("%s renders a %s %s, which the CSV does not require in spec.nativeAPIs", filepath.Base(in), obj.APIVersion, obj.Kind)
			}
		}
	}
	if len(seen) != len(ownerOf) {
		t.Errorf("golden cases render %v, want each of %v", seen, ownerOf)
	}
}
