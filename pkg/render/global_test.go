package render

import (
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/util/validation"

	igwv1 "github.com/igw-dev/igw/api/v1alpha1"
)

func TestEveryGlobalChildIsInTheSpecNamespaceWithTheGatewayAsController(t *testing.T) {
	c := loadCase(t, filepath.Join("testdata", "global-three-members.in.yaml"))
	want := GlobalLabels(c.Global)
	for _, o := range c.objects(t) {
		if o.GetNamespace() != c.Global.Spec.Namespace {
			t.Errorf("%T %s in namespace %q, want spec.namespace %q", o, o.GetName(), o.GetNamespace(), c.Global.Spec.Namespace)
		}
		if !reflect.DeepEqual(o.GetLabels(), want) {
			t.Errorf("%T %s labels %v, want %v", o, o.GetName(), o.GetLabels(), want)
		}
		refs := o.GetOwnerReferences()
		if len(refs) != 1 || refs[0].UID != c.Global.UID || refs[0].Kind != KindGlobal || refs[0].Controller == nil || !*refs[0].Controller {
			t.Errorf("%T %s owner refs %v, want the GlobalInferenceGateway as controller", o, o.GetName(), refs)
		}
	}
}

func TestGlobalRouteNamesAreDNSLabelsAndKeepModelsApart(t *testing.T) {
	gig := &igwv1.GlobalInferenceGateway{}
	gig.Name = "a-global-gateway-with-a-rather-long-name-for-testing"
	for _, m := range []igwv1.ModelName{"Llama", "llama", "meta-llama/Llama-3.1-8B-Instruct", "meta-llama/Llama-3.1-8B-Instruct-v2", "qwen3_32b", "qwen3-32b"} {
		gig.Spec.Models = append(gig.Spec.Models, igwv1.GlobalModel{Name: m})
	}
	seen := map[string]string{}
	for model, name := range NamesForGlobal(gig).Routes {
		if errs := validation.IsDNS1123Label(name); len(errs) > 0 {
			t.Errorf("route of %q is %q: %s", model, name, strings.Join(errs, "; "))
		}
		if other, ok := seen[name]; ok {
			t.Errorf("models %q and %q share the route name %q", model, other, name)
		}
		seen[name] = model
	}
}

func TestGlobalRawPipelineReplacesPolicyAndWeights(t *testing.T) {
	c := loadCase(t, filepath.Join("testdata", "global-raw-pipeline.in.yaml"))
	cfg, err := GlobalPickerConfig(c.Global, []byte(c.RawPipeline))
	if err != nil {
		t.Fatal(err)
	}
	if s := string(cfg); !strings.Contains(s, "pipeline: |") || strings.Contains(s, "policy:") {
		t.Errorf("config with a raw pipeline:\n%s\nwant the pipeline and no policy", s)
	}
	if _, err := Global(GlobalInput{Global: c.Global, Images: testImages}); err == nil || !strings.Contains(err.Error(), "configMapRef global-pipeline") {
		t.Errorf("rendering without the ConfigMap's content: %v, want an error naming it", err)
	}
}
