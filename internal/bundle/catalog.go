package bundle

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/yaml"
)

// A file-based catalog (FBC) of the package, as `opm render` and `opm
// validate` would write and check it (opm is not available here): one
// olm.package, an olm.channel per channel, and an olm.bundle per bundle
// version with the properties OLM resolves by (package and version, the GVKs
// it provides) and its related images.

// CatalogFile is the catalog's file below its directory: <dir>/igw/catalog.yaml.
var CatalogFile = filepath.Join(PackageName, "catalog.yaml")

// Meta is one FBC object (schema olm.package, olm.channel or olm.bundle).
type Meta struct {
	Schema         string         `json:"schema"`
	Name           string         `json:"name"`
	Package        string         `json:"package,omitempty"`
	DefaultChannel string         `json:"defaultChannel,omitempty"`
	Description    string         `json:"description,omitempty"`
	Icon           map[string]any `json:"icon,omitempty"`
	Entries        []ChannelEntry `json:"entries,omitempty"`
	Image          string         `json:"image,omitempty"`
	Properties     []Property     `json:"properties,omitempty"`
	RelatedImages  []RelatedImage `json:"relatedImages,omitempty"`
}

// ChannelEntry is a bundle in a channel; Replaces names the one it upgrades.
type ChannelEntry struct {
	Name     string `json:"name"`
	Replaces string `json:"replaces,omitempty"`
}

// Property is an olm.bundle property.
type Property struct {
	Type  string         `json:"type"`
	Value map[string]any `json:"value"`
}

// RelatedImage is an image a bundle uses.
type RelatedImage struct {
	Name  string `json:"name"`
	Image string `json:"image"`
}

// GenerateCatalog writes the catalog of the bundle in bundleDir, whose image
// is bundleImage, into outDir.
func GenerateCatalog(bundleDir, outDir, bundleImage string) error {
	b, err := Load(bundleDir)
	if err != nil {
		return err
	}
	var meta struct {
		Annotations map[string]string `json:"annotations"`
	}
	if err := readYAML(filepath.Join(bundleDir, "metadata", "annotations.yaml"), &meta); err != nil {
		return err
	}
	channels := splitComma(meta.Annotations["operators.operatorframework.io.bundle.channels.v1"])
	version, _, _ := unstructured.NestedString(b.CSV.Object, "spec", "version")
	description, _, _ := unstructured.NestedString(b.CSV.Object, "spec", "description")
	icons, _, _ := unstructured.NestedSlice(b.CSV.Object, "spec", "icon")

	pkg := Meta{Schema: "olm.package", Name: PackageName, Description: description,
		DefaultChannel: meta.Annotations["operators.operatorframework.io.bundle.channel.default.v1"]}
	if len(icons) == 1 {
		pkg.Icon, _ = icons[0].(map[string]any)
	}
	objs := []Meta{pkg}
	for _, ch := range channels {
		objs = append(objs, Meta{Schema: "olm.channel", Package: PackageName, Name: ch, Entries: []ChannelEntry{{Name: b.CSV.GetName()}}})
	}
	bundle := Meta{Schema: "olm.bundle", Name: b.CSV.GetName(), Package: PackageName, Image: bundleImage,
		Properties: []Property{{Type: "olm.package", Value: map[string]any{"packageName": PackageName, "version": version}}}}
	owned, _, _ := unstructured.NestedSlice(b.CSV.Object, "spec", "customresourcedefinitions", "owned")
	for _, o := range owned {
		om, _ := o.(map[string]any)
		name, _ := om["name"].(string)
		_, group, _ := strings.Cut(name, ".")
		bundle.Properties = append(bundle.Properties, Property{Type: "olm.gvk",
			Value: map[string]any{"group": group, "kind": om["kind"], "version": om["version"]}})
	}
	bundle.RelatedImages = append(bundle.RelatedImages, RelatedImage{Name: "", Image: bundleImage})
	related, _, _ := unstructured.NestedSlice(b.CSV.Object, "spec", "relatedImages")
	for _, r := range related {
		rm, _ := r.(map[string]any)
		bundle.RelatedImages = append(bundle.RelatedImages, RelatedImage{Name: rm["name"].(string), Image: rm["image"].(string)})
	}
	objs = append(objs, bundle)

	var buf bytes.Buffer
	buf.WriteString("# The file-based catalog of igw's OLM package, written by `make catalog` from bundle/.\n")
	for _, o := range objs {
		data, err := yaml.Marshal(o)
		if err != nil {
			return err
		}
		buf.WriteString("---\n")
		buf.Write(data)
	}
	path := filepath.Join(outDir, CatalogFile)
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	return os.WriteFile(path, buf.Bytes(), 0o644)
}

// ValidateCatalog checks every package of the catalog in dir the way opm
// validate does: one olm.package per package with a default channel that
// exists; channels and bundles of known packages; each channel's entries name
// bundles of the package, distinct, forming one replaces chain with a single
// head; each bundle has exactly one olm.package property matching it, a
// semver version, a name that is <package>.v<version>, and an image.
func ValidateCatalog(dir string) []error {
	var errs []error
	fail := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }
	var objs []Meta
	err := filepath.WalkDir(dir, func(path string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() || !(strings.HasSuffix(path, ".yaml") || strings.HasSuffix(path, ".json")) {
			return err
		}
		data, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(data), 4096)
		for {
			var raw map[string]any
			if err := dec.Decode(&raw); errors.Is(err, io.EOF) {
				return nil
			} else if err != nil {
				return fmt.Errorf("%s: %w", path, err)
			}
			if len(raw) == 0 {
				continue
			}
			js, _ := yaml.Marshal(raw)
			var m Meta
			if err := yaml.UnmarshalStrict(js, &m); err != nil {
				return fmt.Errorf("%s: %w", path, err)
			}
			objs = append(objs, m)
		}
	})
	if err != nil {
		return []error{err}
	}
	packages := map[string]Meta{}
	channels := map[string][]Meta{}
	bundles := map[string]map[string]Meta{}
	for _, o := range objs {
		switch o.Schema {
		case "olm.package":
			if _, dup := packages[o.Name]; dup {
				fail("package %s is declared twice", o.Name)
			}
			packages[o.Name] = o
		case "olm.channel":
			channels[o.Package] = append(channels[o.Package], o)
		case "olm.bundle":
			if bundles[o.Package] == nil {
				bundles[o.Package] = map[string]Meta{}
			}
			if _, dup := bundles[o.Package][o.Name]; dup {
				fail("bundle %s of %s is declared twice", o.Name, o.Package)
			}
			bundles[o.Package][o.Name] = o
		default:
			fail("object %q has unknown schema %q", o.Name, o.Schema)
		}
	}
	if len(packages) == 0 {
		fail("the catalog declares no olm.package")
	}
	for name := range channels {
		if _, ok := packages[name]; !ok {
			fail("channels of undeclared package %s", name)
		}
	}
	for name := range bundles {
		if _, ok := packages[name]; !ok {
			fail("bundles of undeclared package %s", name)
		}
	}
	for name, pkg := range packages {
		var chNames []string
		for _, ch := range channels[name] {
			if slices.Contains(chNames, ch.Name) {
				fail("package %s: channel %s is declared twice", name, ch.Name)
			}
			chNames = append(chNames, ch.Name)
			errs = append(errs, validateChannel(name, ch, bundles[name])...)
		}
		if !slices.Contains(chNames, pkg.DefaultChannel) {
			fail("package %s: default channel %q is not one of its channels %v", name, pkg.DefaultChannel, chNames)
		}
		for bname, b := range bundles[name] {
			var pkgProps []Property
			for _, p := range b.Properties {
				if p.Type == "olm.package" {
					pkgProps = append(pkgProps, p)
				}
			}
			if len(pkgProps) != 1 {
				fail("bundle %s: %d olm.package properties, want 1", bname, len(pkgProps))
				continue
			}
			v, _ := pkgProps[0].Value["version"].(string)
			if pkgProps[0].Value["packageName"] != name {
				fail("bundle %s: olm.package names %v, not %s", bname, pkgProps[0].Value["packageName"], name)
			}
			if !semver.MatchString(v) {
				fail("bundle %s: version %q is not semver", bname, v)
			}
			if bname != name+".v"+v {
				fail("bundle %s: the name does not match version %s", bname, v)
			}
			if b.Image == "" {
				fail("bundle %s has no image", bname)
			}
		}
	}
	return errs
}

func validateChannel(pkg string, ch Meta, bundles map[string]Meta) []error {
	var errs []error
	fail := func(format string, args ...any) {
		errs = append(errs, fmt.Errorf("package %s channel %s: "+format, append([]any{pkg, ch.Name}, args...)...))
	}
	if len(ch.Entries) == 0 {
		fail("no entries")
	}
	replaced := map[string]bool{}
	names := map[string]bool{}
	for _, e := range ch.Entries {
		if names[e.Name] {
			fail("entry %s is listed twice", e.Name)
		}
		names[e.Name] = true
		if _, ok := bundles[e.Name]; !ok {
			fail("entry %s is not a bundle of the package", e.Name)
		}
		if e.Replaces != "" {
			replaced[e.Replaces] = true
		}
	}
	var heads []string
	for n := range names {
		if !replaced[n] {
			heads = append(heads, n)
		}
	}
	if len(heads) != 1 {
		fail("%d heads %v, want one (every other entry replaced by a later one)", len(heads), heads)
	}
	return errs
}
