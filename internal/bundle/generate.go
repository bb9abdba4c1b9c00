// Package bundle writes and checks igw's OLM bundle (bundle/) the way the
// operator-sdk's `generate bundle` and `bundle validate` do, from config/manifests.
// The operator-sdk CLI is not available here, so the layout is followed by hand
// and the checks OLM relies on are ported in validate.go.
package bundle

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utiljson "k8s.io/apimachinery/pkg/util/json"
	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/kyaml/filesys"
	"sigs.k8s.io/yaml"

	"github.com/igw-dev/igw/internal/version"
	"github.com/igw-dev/igw/pkg/manager"
)

// DefaultVersion is the operator version `make bundle` writes unless told
// otherwise: the release the tree builds.
const DefaultVersion = version.Default

// PackageName is the OLM package of the operator.
const PackageName = "igw"

// DefaultChannels are the channels a bundle is published in; the first is the default.
var DefaultChannels = []string{"stable", "candidate"}

// ManagerRepository is the operator's image repository.
const ManagerRepository = "ghcr.io/igw-dev/igw-manager"

// BundleRepository is the repository of the bundle image (bundle.Dockerfile).
const BundleRepository = "ghcr.io/igw-dev/igw-bundle"

// Images are the images a bundle of version runs: the operator's, and the
// endpoint picker's and body-based router's it gives the pods it creates
// (their repositories are the operator's defaults', tagged with the version).
func Images(version string) map[string]string {
	d := manager.NewOptions()
	return map[string]string{
		"manager": ManagerRepository + ":" + version,
		"epp":     untagged(d.EPPImage) + ":" + version,
		"bbr":     untagged(d.BBRImage) + ":" + version,
		"global":  untagged(d.GlobalPickerImage) + ":" + version,
	}
}

func untagged(image string) string {
	if i := strings.LastIndex(image, ":"); i > strings.LastIndex(image, "/") {
		return image[:i]
	}
	return image
}

// Options say which bundle to write.
type Options struct {
	// Root is the repository root; config/manifests is read from it.
	Root string
	// OutDir receives manifests/, metadata/ and tests/.
	OutDir string
	// Version of the operator (semver, without "v").
	Version string
	// Channels the bundle is published in; the first is the default.
	Channels []string
}

// Generate writes the bundle for opts.
func Generate(opts Options) error {
	objs, err := build(filepath.Join(opts.Root, "config", "manifests"))
	if err != nil {
		return err
	}
	var csv *unstructured.Unstructured
	var deployments, clusterRoles, roles, crds, examples, extras, scorecards []*unstructured.Unstructured
	bound := boundClusterRoles(objs)
	for _, o := range objs {
		switch o.GetKind() {
		case "ClusterServiceVersion":
			csv = o
		case "Deployment":
			deployments = append(deployments, o)
		case "ClusterRole":
			// The operator's own permissions go into the CSV; a ClusterRole
			// for others (metrics-reader, the aggregated editor and viewer
			// roles) is a manifest of the bundle, which OLM creates as is.
			if bound[o.GetName()] {
				clusterRoles = append(clusterRoles, o)
			} else {
				extras = append(extras, o)
			}
		case "Role":
			roles = append(roles, o)
		case "CustomResourceDefinition":
			crds = append(crds, o)
		case "InferenceGatewayConfig", "ModelRoute", "GlobalInferenceGateway":
			examples = append(examples, o)
		case "Configuration":
			scorecards = append(scorecards, o)
		case "Service", "ConfigMap":
			extras = append(extras, o)
		case "Namespace", "ServiceAccount", "ClusterRoleBinding", "RoleBinding":
			// OLM creates the namespace, service accounts and bindings from the CSV.
		default:
			return fmt.Errorf("config/manifests renders a %s (%s) that the bundle has no place for", o.GetKind(), o.GetName())
		}
	}
	if csv == nil {
		return fmt.Errorf("config/manifests has no ClusterServiceVersion base")
	}
	if len(deployments) != 1 {
		return fmt.Errorf("config/manifests must render exactly one Deployment, got %d", len(deployments))
	}
	if err := setImages(deployments[0], Images(opts.Version)); err != nil {
		return err
	}
	if err := fillCSV(csv, opts, deployments[0], clusterRoles, roles, examples); err != nil {
		return err
	}
	if err := fillOwned(csv, filepath.Join(opts.Root, "api", "v1alpha1")); err != nil {
		return err
	}
	if err := fillIcon(csv, filepath.Join(opts.Root, "config", "manifests", "bases", IconFile)); err != nil {
		return err
	}

	manifests := filepath.Join(opts.OutDir, "manifests")
	for _, dir := range []string{manifests, filepath.Join(opts.OutDir, "metadata"), filepath.Join(opts.OutDir, "tests", "scorecard")} {
		if err := os.RemoveAll(dir); err != nil {
			return err
		}
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return err
		}
	}
	write := func(path string, o any) error {
		data, err := yaml.Marshal(o)
		if err != nil {
			return err
		}
		return os.WriteFile(path, data, 0o644)
	}
	if err := write(filepath.Join(manifests, PackageName+".clusterserviceversion.yaml"), csv.Object); err != nil {
		return err
	}
	for _, crd := range crds {
		if err := write(filepath.Join(manifests, crd.GetName()+".yaml"), crd.Object); err != nil {
			return err
		}
	}
	for _, o := range extras {
		o.SetNamespace("")
		name := fmt.Sprintf("%s_%s.yaml", o.GetName(), strings.ToLower(o.GetKind()))
		if err := write(filepath.Join(manifests, name), o.Object); err != nil {
			return err
		}
	}
	if err := write(filepath.Join(opts.OutDir, "metadata", "annotations.yaml"), map[string]any{"annotations": Annotations(opts.Channels)}); err != nil {
		return err
	}
	if len(scorecards) == 1 {
		if err := write(filepath.Join(opts.OutDir, "tests", "scorecard", "config.yaml"), scorecards[0].Object); err != nil {
			return err
		}
	}
	return nil
}

// Annotations are the bundle's metadata/annotations.yaml entries.
func Annotations(channels []string) map[string]string {
	return map[string]string{
		"operators.operatorframework.io.bundle.mediatype.v1":       "registry+v1",
		"operators.operatorframework.io.bundle.manifests.v1":       "manifests/",
		"operators.operatorframework.io.bundle.metadata.v1":        "metadata/",
		"operators.operatorframework.io.bundle.package.v1":         PackageName,
		"operators.operatorframework.io.bundle.channels.v1":        strings.Join(channels, ","),
		"operators.operatorframework.io.bundle.channel.default.v1": channels[0],
		"operators.operatorframework.io.test.mediatype.v1":         "scorecard+v1",
		"operators.operatorframework.io.test.config.v1":            "tests/scorecard/",
	}
}

func build(dir string) ([]*unstructured.Unstructured, error) {
	k := krusty.MakeKustomizer(krusty.MakeDefaultOptions())
	resources, err := k.Run(filesys.MakeFsOnDisk(), dir)
	if err != nil {
		return nil, fmt.Errorf("kustomize build %s: %w", dir, err)
	}
	var objs []*unstructured.Unstructured
	for _, r := range resources.Resources() {
		data, err := r.MarshalJSON()
		if err != nil {
			return nil, err
		}
		o := &unstructured.Unstructured{}
		if err := o.UnmarshalJSON(data); err != nil {
			return nil, err
		}
		objs = append(objs, o)
	}
	return objs, nil
}

func fillCSV(csv *unstructured.Unstructured, opts Options, deploy *unstructured.Unstructured, clusterRoles, roles, examples []*unstructured.Unstructured) error {
	csv.SetName(PackageName + ".v" + opts.Version)
	csv.SetNamespace("")
	set := func(value any, fields ...string) error {
		return unstructured.SetNestedField(csv.Object, toJSONValue(value), fields...)
	}
	if err := set(opts.Version, "spec", "version"); err != nil {
		return err
	}
	sa, _, _ := unstructured.NestedString(deploy.Object, "spec", "template", "spec", "serviceAccountName")
	depSpec, _, _ := unstructured.NestedMap(deploy.Object, "spec")
	install := map[string]any{
		"strategy": "deployment",
		"spec": map[string]any{
			"deployments":        []any{map[string]any{"name": deploy.GetName(), "label": toJSONValue(deploy.GetLabels()), "spec": depSpec}},
			"clusterPermissions": permissions(sa, clusterRoles),
			"permissions":        permissions(sa, roles),
		},
	}
	if err := set(install, "spec", "install"); err != nil {
		return err
	}
	sort.Slice(examples, func(i, j int) bool {
		return examples[i].GetKind()+examples[i].GetName() < examples[j].GetKind()+examples[j].GetName()
	})
	var almExamples []map[string]any
	for _, e := range examples {
		e.SetNamespace("")
		almExamples = append(almExamples, e.Object)
	}
	data, err := json.MarshalIndent(almExamples, "", "  ")
	if err != nil {
		return err
	}
	images := Images(opts.Version)
	var related []any
	for _, name := range []string{"manager", "epp", "bbr", "global"} {
		related = append(related, map[string]any{"name": name, "image": images[name]})
	}
	if err := set(related, "spec", "relatedImages"); err != nil {
		return err
	}
	ann := csv.GetAnnotations()
	ann["containerImage"] = images["manager"]
	ann["alm-examples"] = string(data)
	ann["operators.operatorframework.io/builder"] = "igw internal/bundle"
	ann["operators.operatorframework.io/project_layout"] = "go.kubebuilder.io/v4"
	csv.SetAnnotations(ann)
	return nil
}

// setImages gives the manager container the version's image and passes it
// the pickers' and router's, so that the CSV's relatedImages are all it runs.
func setImages(deploy *unstructured.Unstructured, images map[string]string) error {
	containers, _, _ := unstructured.NestedSlice(deploy.Object, "spec", "template", "spec", "containers")
	found := false
	for _, c := range containers {
		cm := c.(map[string]any)
		if cm["name"] != "manager" {
			continue
		}
		found = true
		cm["image"] = images["manager"]
		var args []any
		for _, a := range cm["args"].([]any) {
			if s, _ := a.(string); !strings.HasPrefix(s, "--epp-image=") && !strings.HasPrefix(s, "--bbr-image=") && !strings.HasPrefix(s, "--global-picker-image=") {
				args = append(args, a)
			}
		}
		cm["args"] = append(args, "--epp-image="+images["epp"], "--bbr-image="+images["bbr"], "--global-picker-image="+images["global"])
	}
	if !found {
		return fmt.Errorf("the Deployment %s has no manager container", deploy.GetName())
	}
	return unstructured.SetNestedSlice(deploy.Object, containers, "spec", "template", "spec", "containers")
}

// IconFile is the operator's icon beside the base CSV.
const IconFile = "igw.svg"

func fillIcon(csv *unstructured.Unstructured, path string) error {
	data, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	return unstructured.SetNestedSlice(csv.Object, []any{map[string]any{
		"base64data": base64.StdEncoding.EncodeToString(data), "mediatype": "image/svg+xml"}}, "spec", "icon")
}

// fillOwned adds the markers' display names, resources and descriptors to
// the owned CRDs the base CSV lists.
func fillOwned(csv *unstructured.Unstructured, apiDir string) error {
	markers, err := ReadMarkers(apiDir)
	if err != nil {
		return err
	}
	owned, _, _ := unstructured.NestedSlice(csv.Object, "spec", "customresourcedefinitions", "owned")
	for _, o := range owned {
		om := o.(map[string]any)
		kind, _ := om["kind"].(string)
		m, ok := markers[kind]
		if !ok {
			return fmt.Errorf("the CSV owns %s, which %s does not define", kind, apiDir)
		}
		if m.DisplayName != "" {
			om["displayName"] = m.DisplayName
		}
		for key, v := range map[string]any{"resources": m.Resources, "specDescriptors": m.Spec, "statusDescriptors": m.Status} {
			om[key] = toJSONValue(v)
		}
	}
	return unstructured.SetNestedSlice(csv.Object, owned, "spec", "customresourcedefinitions", "owned")
}

func permissions(serviceAccount string, roles []*unstructured.Unstructured) []any {
	var out []any
	for _, r := range roles {
		rules, _, _ := unstructured.NestedSlice(r.Object, "rules")
		out = append(out, map[string]any{"serviceAccountName": serviceAccount, "rules": rules})
	}
	return out
}

// toJSONValue turns typed Go values into the plain JSON types unstructured accepts.
func toJSONValue(v any) any {
	data, _ := json.Marshal(v)
	var out any
	_ = utiljson.Unmarshal(data, &out) // keeps integers int64, as unstructured requires
	return out
}

// boundClusterRoles are the names of the ClusterRoles a ClusterRoleBinding grants.
func boundClusterRoles(objs []*unstructured.Unstructured) map[string]bool {
	bound := map[string]bool{}
	for _, o := range objs {
		if o.GetKind() != "ClusterRoleBinding" {
			continue
		}
		if name, _, _ := unstructured.NestedString(o.Object, "roleRef", "name"); name != "" {
			bound[name] = true
		}
	}
	return bound
}
