package render

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	gwapiv1 "sigs.k8s.io/gateway-api/apis/v1"
	"sigs.k8s.io/yaml"

	igwv1 "github.com/igw-dev/igw/api/v1alpha1"
	"github.com/igw-dev/igw/internal/golden"
	eppconfig "github.com/igw-dev/igw/pkg/epp/config"
	"github.com/igw-dev/igw/pkg/epp/scheduling/plugins"
	"github.com/igw-dev/igw/pkg/openaimodels"
)

var testImages = Images{EPP: "ghcr.io/igw-dev/igw-epp:test", BBR: "ghcr.io/igw-dev/igw-bbr:test", Global: "ghcr.io/igw-dev/igw-global:test"}

func ptr[T any](v T) *T { return &v }

// testConfig is an InferenceGatewayConfig as the API server returns it (defaults applied).
func testConfig() *igwv1.InferenceGatewayConfig {
	return &igwv1.InferenceGatewayConfig{
		TypeMeta:   metav1.TypeMeta{APIVersion: igwv1.GroupVersion.String(), Kind: KindConfig},
		ObjectMeta: metav1.ObjectMeta{Name: "igw", Namespace: "models", UID: types.UID("cfg-uid")},
		Spec: igwv1.InferenceGatewayConfigSpec{
			Gateway: igwv1.GatewaySpec{Ref: &igwv1.GatewayRef{Name: "inference-gateway"}, Provider: igwv1.ProviderEnvoyGateway},
			BBR:     igwv1.BBRSpec{Enabled: ptr(true), MaxRequestBodyBytes: 8 << 20},
			EPP: igwv1.EPPDefaults{
				ScrapeInterval:   &metav1.Duration{Duration: 50 * time.Millisecond},
				MetricsStaleness: &metav1.Duration{Duration: 200 * time.Millisecond},
				FailureMode:      igwv1.FailClose,
			},
			Scoring: igwv1.ScoringSpec{AutoTune: ptr(true)},
		},
	}
}

func testRoute(name string, models ...igwv1.ModelName) *igwv1.ModelRoute {
	return &igwv1.ModelRoute{
		TypeMeta:   metav1.TypeMeta{APIVersion: igwv1.GroupVersion.String(), Kind: KindModelRoute},
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "models", UID: types.UID(name + "-uid")},
		Spec: igwv1.ModelRouteSpec{
			ConfigRef:   igwv1.ObjectName{Name: "igw"},
			Models:      models,
			Selector:    igwv1.ModelServerSelector{MatchLabels: map[string]string{"app": name}},
			TargetPorts: []igwv1.TargetPort{{Number: 8000}},
			Engine:      igwv1.EngineVLLM,
		},
	}
}

func loraRoute() *igwv1.ModelRoute {
	mr := testRoute("qwen", "qwen3-32b")
	mr.Spec.Engine = igwv1.EngineSGLang
	mr.Spec.Adapters = []igwv1.LoRAAdapter{{Name: "qwen3-32b-sql"}, {Name: "qwen3-32b-support", BaseModel: "qwen3-32b"}}
	mr.Spec.EPP = &igwv1.EPPOverrides{PodSettings: igwv1.PodSettings{Replicas: ptr[int32](2)}}
	mr.Spec.RequestTimeout = &metav1.Duration{Duration: 300 * time.Second}
	return mr
}

// objectsYAML is the golden form: one YAML document per object as it is
// applied, in apply order.
func objectsYAML(t *testing.T, objs []client.Object) []byte {
	t.Helper()
	var b bytes.Buffer
	for _, o := range objs {
		u, err := ApplyForm(o)
		if err != nil {
			t.Fatal(err)
		}
		data, err := yaml.Marshal(u.Object)
		if err != nil {
			t.Fatal(err)
		}
		b.WriteString("---\n")
		b.Write(data)
	}
	return b.Bytes()
}

// goldenCase is a testdata/<case>.in.yaml: what to render, from which objects.
// Its output is testdata/<case>.out.yaml.
type goldenCase struct {
	// Render is "config" for the config's gateway-wide children,
	// "route/NAME" for the children of the route NAME of Routes, or "global"
	// for the children of Global, whose routes attach to Config's Gateway.
	Render string                       `json:"render"`
	Config igwv1.InferenceGatewayConfig `json:"config"`
	// Routes are the config's routes (for "config") or hold the one rendered.
	Routes       []igwv1.ModelRoute `json:"routes,omitempty"`
	Observations struct {
		AcceleratorTypes []string `json:"acceleratorTypes,omitempty"`
	} `json:"observations,omitempty"`
	Global *igwv1.GlobalInferenceGateway `json:"global,omitempty"`
	// RawPipeline is the content of Global's routing.configMapRef.
	RawPipeline string `json:"rawPipeline,omitempty"`
	// RawConfig is the content of the rendered route's scoring.configMapRef.
	RawConfig string `json:"rawConfig,omitempty"`
}

func loadCase(t *testing.T, path string) goldenCase {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var c goldenCase
	if err := yaml.UnmarshalStrict(data, &c); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	return c
}

// objects renders the case.
func (c goldenCase) objects(t *testing.T) []client.Object {
	t.Helper()
	if c.Render == "global" {
		if c.Global == nil {
			t.Fatal(`render: "global" needs global`)
		}
		out, err := Global(GlobalInput{Global: c.Global, Gateway: ResolveGateway(&c.Config), RawPipeline: []byte(c.RawPipeline), Images: testImages})
		if err != nil {
			t.Fatal(err)
		}
		return out.Objects
	}
	if c.Render == "config" {
		out, err := Config(ConfigInput{Config: &c.Config, Routes: c.Routes, Images: testImages})
		if err != nil {
			t.Fatal(err)
		}
		return out.Objects
	}
	name, ok := strings.CutPrefix(c.Render, "route/")
	i := slices.IndexFunc(c.Routes, func(mr igwv1.ModelRoute) bool { return mr.Name == name })
	if !ok || i < 0 {
		t.Fatalf("render: %q names neither config nor route/NAME of a route in routes", c.Render)
	}
	out, err := Route(RouteInput{Route: &c.Routes[i], Config: &c.Config, Images: testImages,
		Observations: Observations{AcceleratorTypes: c.Observations.AcceleratorTypes}, RawConfig: []byte(c.RawConfig)})
	if err != nil {
		t.Fatal(err)
	}
	return out.Objects
}

// TestGolden renders every testdata/<case>.in.yaml and compares the objects,
// as applied, with <case>.out.yaml (go test ./pkg/render -update rewrites them).
func TestGolden(t *testing.T) {
	inputs, err := filepath.Glob(filepath.Join("testdata", "*.in.yaml"))
	if err != nil || len(inputs) == 0 {
		t.Fatalf("no golden cases in testdata (%v)", err)
	}
	for _, in := range inputs {
		name := strings.TrimSuffix(filepath.Base(in), ".in.yaml")
		t.Run(name, func(t *testing.T) {
			golden.Check(t, filepath.Join("testdata", name+".out.yaml"), objectsYAML(t, loadCase(t, in).objects(t)))
		})
	}
	outputs, _ := filepath.Glob(filepath.Join("testdata", "*.out.yaml"))
	for _, out := range outputs {
		if !slices.Contains(inputs, strings.TrimSuffix(out, ".out.yaml")+".in.yaml") {
			t.Errorf("%s has no input: delete it or add its .in.yaml", out)
		}
	}
}

func TestChildrenBesideAGatewayElsewhereAreLabelledNotOwned(t *testing.T) {
	c := loadCase(t, filepath.Join("testdata", "config-other-namespace-jwt.in.yaml"))
	for _, o := range c.objects(t) {
		if o.GetNamespace() == "gateways" {
			if len(o.GetOwnerReferences()) != 0 || o.GetLabels()[LabelConfigNamespace] != "models" {
				t.Errorf("%T %s in the gateway's namespace: owner refs %v, labels %v; want no owner and the config-namespace label",
					o, o.GetName(), o.GetOwnerReferences(), o.GetLabels())
			}
		} else if len(o.GetOwnerReferences()) != 1 || o.GetOwnerReferences()[0].UID != c.Config.UID {
			t.Errorf("%T %s: owner refs %v, want the config as controller", o, o.GetName(), o.GetOwnerReferences())
		}
	}
}

func TestEveryChildCarriesTheRouteLabelsAndOwner(t *testing.T) {
	mr := loraRoute()
	out, err := Route(RouteInput{Route: mr, Config: testConfig(), Images: testImages})
	if err != nil {
		t.Fatal(err)
	}
	want := RouteLabels(mr)
	for _, o := range out.Objects {
		if !reflect.DeepEqual(o.GetLabels(), want) {
			t.Errorf("%T %s labels %v, want %v", o, o.GetName(), o.GetLabels(), want)
		}
		refs := o.GetOwnerReferences()
		if len(refs) != 1 || refs[0].UID != mr.UID || refs[0].Controller == nil || !*refs[0].Controller || refs[0].Kind != KindModelRoute {
			t.Errorf("%T %s owner refs %v", o, o.GetName(), refs)
		}
	}
}

func TestRenderedEPPConfigLoadsInThePicker(t *testing.T) {
	for _, mr := range []*igwv1.ModelRoute{testRoute("llama", "llama"), loraRoute()} {
		out, err := Route(RouteInput{Route: mr, Config: testConfig(), Images: testImages,
			Observations: Observations{AcceleratorTypes: []string{"a", "b"}}})
		if err != nil {
			t.Fatal(err)
		}
		data := configMapData(t, out.Objects, out.Names.EPP, EPPConfigKey)
		if _, err := eppconfig.Load([]byte(data), plugins.NewRegistry()); err != nil {
			t.Errorf("%s: the picker rejects the rendered configuration: %v\n%s", mr.Name, err, data)
		}
	}
}

func configMapData(t *testing.T, objs []client.Object, name, key string) string {
	t.Helper()
	for _, o := range objs {
		if cm, ok := o.(*corev1.ConfigMap); ok && cm.Name == name {
			return cm.Data[key]
		}
	}
	t.Fatalf("no ConfigMap %s", name)
	return ""
}

// objectOf is the rendered object of type T called name.
func objectOf[T client.Object](t *testing.T, objs []client.Object, name string) T {
	t.Helper()
	for _, o := range objs {
		if x, ok := o.(T); ok && x.GetName() == name {
			return x
		}
	}
	var zero T
	t.Fatalf("no %T %s", zero, name)
	return zero
}

func deploymentOf(t *testing.T, objs []client.Object, name string) *appsv1.Deployment {
	t.Helper()
	return objectOf[*appsv1.Deployment](t, objs, name)
}

func TestWeightChangeLeavesThePodTemplateAlone(t *testing.T) {
	mr := testRoute("llama", "llama")
	before, err := Route(RouteInput{Route: mr, Config: testConfig(), Images: testImages})
	if err != nil {
		t.Fatal(err)
	}
	mr.Spec.Scoring = &igwv1.ModelScoring{Weights: igwv1.ScoringWeights{igwv1.ScorerQueue: 7}}
	after, err := Route(RouteInput{Route: mr, Config: testConfig(), Images: testImages,
		Observations: Observations{AcceleratorTypes: []string{"a", "b"}}})
	if err != nil {
		t.Fatal(err)
	}
	n := before.Names.EPP
	if configMapData(t, before.Objects, n, EPPConfigKey) == configMapData(t, after.Objects, n, EPPConfigKey) {
		t.Fatal("the weights changed but the EPP configuration did not")
	}
	if !equality.Semantic.DeepEqual(deploymentOf(t, before.Objects, n).Spec.Template, deploymentOf(t, after.Objects, n).Spec.Template) {
		t.Error("a weight change altered the EPP pod template, which would roll the pickers instead of reloading them")
	}
}

func TestScoringPrecedence(t *testing.T) {
	mixed := Observations{AcceleratorTypes: []string{"NVIDIA-A10G", "NVIDIA-H100"}}
	t.Run("auto-tuning from adapters and mixed accelerators", func(t *testing.T) {
		s := ResolveScoring(testConfig(), loraRoute(), mixed)
		if s.Weights[igwv1.ScorerLoRAAffinity] != AutoLoRAAffinityWeight || s.Weights[igwv1.ScorerPredictedLatency] != 4 {
			t.Fatalf("weights %v", s.Weights)
		}
		if len(s.Adjustments) != 2 || !strings.Contains(s.Adjustments[0].Reason, "qwen3-32b-sql") ||
			!strings.Contains(s.Adjustments[1].Reason, "NVIDIA-A10G, NVIDIA-H100") {
			t.Fatalf("adjustments %+v", s.Adjustments)
		}
	})
	t.Run("manual weights win over auto-tuning, route over config", func(t *testing.T) {
		cfg := testConfig()
		cfg.Spec.Scoring.Weights = igwv1.ScoringWeights{igwv1.ScorerPredictedLatency: 3, igwv1.ScorerQueue: 5}
		mr := loraRoute()
		mr.Spec.Scoring = &igwv1.ModelScoring{Weights: igwv1.ScoringWeights{igwv1.ScorerLoRAAffinity: 0, igwv1.ScorerQueue: 9}}
		s := ResolveScoring(cfg, mr, mixed)
		if s.Weights[igwv1.ScorerPredictedLatency] != 3 || s.Weights[igwv1.ScorerLoRAAffinity] != 0 || s.Weights[igwv1.ScorerQueue] != 9 {
			t.Fatalf("weights %v", s.Weights)
		}
		if len(s.Adjustments) != 0 {
			t.Fatalf("manual weights were overridden or reported as adjusted: %+v", s.Adjustments)
		}
	})
	t.Run("autoTune off keeps the defaults", func(t *testing.T) {
		mr := loraRoute()
		mr.Spec.Scoring = &igwv1.ModelScoring{AutoTune: ptr(false)}
		s := ResolveScoring(testConfig(), mr, mixed)
		if !reflect.DeepEqual(igwv1.ScoringWeights(s.Weights), BuiltinWeights) || len(s.Adjustments) != 0 {
			t.Fatalf("weights %v adjustments %+v", s.Weights, s.Adjustments)
		}
	})
	t.Run("all weights zero keeps one scorer", func(t *testing.T) {
		cfg := testConfig()
		cfg.Spec.Scoring.Weights = igwv1.ScoringWeights{}
		for _, name := range igwv1.Scorers {
			cfg.Spec.Scoring.Weights[name] = 0
		}
		s := ResolveScoring(cfg, testRoute("a", "a"), Observations{})
		if s.Weights[igwv1.ScorerPredictedLatency] != 1 || len(s.Adjustments) != 1 {
			t.Fatalf("weights %v adjustments %+v", s.Weights, s.Adjustments)
		}
	})
}

func TestRawConfigMapReplacesRenderedWeights(t *testing.T) {
	mr := testRoute("llama", "llama")
	mr.Spec.Scoring = &igwv1.ModelScoring{ConfigMapRef: &igwv1.ConfigMapKeyRef{Name: "raw", Key: "config.yaml"}}
	raw := "scorers:\n- {plugin: queue, weight: 1}\n"
	out, err := Route(RouteInput{Route: mr, Config: testConfig(), Images: testImages, RawConfig: []byte(raw)})
	if err != nil {
		t.Fatal(err)
	}
	if got := configMapData(t, out.Objects, out.Names.EPP, EPPConfigKey); got != raw || out.Scoring.Source != ScoringSourceConfigMap {
		t.Fatalf("config %q source %q", got, out.Scoring.Source)
	}
	if _, err := Route(RouteInput{Route: mr, Config: testConfig(), Images: testImages}); err == nil {
		t.Fatal("a configMapRef without content rendered")
	}
}

// TestRouteSLOReachesThePicker: spec.slo becomes the picker's admission.slo,
// whose bounds the picker derives from it; a raw configuration gets it
// unless it names its own; without spec.slo nothing is added.
func TestRouteSLOReachesThePicker(t *testing.T) {
	mr := testRoute("llama", "llama")
	mr.Spec.SLO = &igwv1.RouteSLO{TTFTSeconds: 4, TPOTSeconds: 0.05}
	load := func(mr *igwv1.ModelRoute, raw string) (string, *eppconfig.Config) {
		t.Helper()
		out, err := Route(RouteInput{Route: mr, Config: testConfig(), Images: testImages, RawConfig: []byte(raw)})
		if err != nil {
			t.Fatal(err)
		}
		text := configMapData(t, out.Objects, out.Names.EPP, EPPConfigKey)
		pl, err := eppconfig.Load([]byte(text), plugins.NewRegistry())
		if err != nil {
			t.Fatalf("the picker refuses %q: %v", text, err)
		}
		c, err := eppconfig.Parse([]byte(text))
		if err != nil {
			t.Fatal(err)
		}
		if c.Admission != nil && c.Admission.SLO != nil {
			if want := 0.75 * c.Admission.SLO.TTFTSeconds; pl.Admission.MaxWaitSeconds != want {
				t.Errorf("max wait %v, want %v from the SLO", pl.Admission.MaxWaitSeconds, want)
			}
		}
		return text, c
	}
	wantSLO := func(what string, c *eppconfig.Config, ttft, tpot float64) {
		t.Helper()
		if c.Admission == nil || c.Admission.SLO == nil || c.Admission.SLO.TTFTSeconds != ttft || c.Admission.SLO.TPOTSeconds != tpot {
			t.Errorf("%s: admission %+v, want slo %v/%v", what, c.Admission, ttft, tpot)
		}
	}
	_, c := load(mr, "")
	wantSLO("rendered", c, 4, 0.05)

	mr.Spec.Scoring = &igwv1.ModelScoring{ConfigMapRef: &igwv1.ConfigMapKeyRef{Name: "raw", Key: "config.yaml"}}
	_, c = load(mr, "scorers:\n- {plugin: queue, weight: 1}\n")
	wantSLO("raw without an slo", c, 4, 0.05)
	if len(c.Scorers) != 1 || c.Scorers[0].Plugin != "queue" {
		t.Errorf("raw scorers %+v, want the raw configuration's", c.Scorers)
	}
	_, c = load(mr, "scorers:\n- {plugin: queue, weight: 1}\nadmission: {slo: {ttftSeconds: 9, tpotSeconds: 0.2}}\n")
	wantSLO("raw with its own slo", c, 9, 0.2)

	mr.Spec.SLO = nil
	raw := "scorers:\n- {plugin: queue, weight: 1}\n"
	if text, _ := load(mr, raw); text != raw {
		t.Errorf("raw without spec.slo: %q, want it unchanged", text)
	}
	if _, c := load(testRoute("llama", "llama"), ""); c.Admission != nil {
		t.Errorf("rendered without spec.slo: admission %+v, want none (the picker's default)", c.Admission)
	}
}

func TestAdapterMapping(t *testing.T) {
	a := testRoute("a", "base-a")
	a.Spec.Adapters = []igwv1.LoRAAdapter{{Name: "sql"}, {Name: "chat", BaseModel: "base-a"}}
	b := testRoute("b", "base-b")
	b.Spec.Adapters = []igwv1.LoRAAdapter{{Name: "sql"}, {Name: "code"}}
	mapping, conflicts := AdapterMapping([]igwv1.ModelRoute{*b, *a})
	want := map[string]string{"sql": "base-a", "chat": "base-a", "code": "base-b"}
	if !reflect.DeepEqual(mapping, want) || !reflect.DeepEqual(conflicts, []string{"sql"}) {
		t.Fatalf("mapping %v conflicts %v", mapping, conflicts)
	}
	data, err := MarshalAdapterMapping(nil)
	if err != nil || string(data) != "adapters: {}\n" {
		t.Fatalf("empty mapping %q %v", data, err)
	}
}

func TestModelList(t *testing.T) {
	// Routes arrive in any order; the first by name wins a name two of them claim.
	b := testRoute("b", "base-b", "shared")
	b.Spec.Adapters = []igwv1.LoRAAdapter{{Name: "sql", BaseModel: "base-b"}, {Name: "code", BaseModel: "shared"}}
	a := testRoute("a", "base-a", "shared")
	a.Spec.Adapters = []igwv1.LoRAAdapter{{Name: "sql", BaseModel: "base-a"}, {Name: "chat", BaseModel: "shared"}}
	c := testRoute("c", "base-c")
	c.Spec.Adapters = []igwv1.LoRAAdapter{{Name: "only"}}
	routes := []igwv1.ModelRoute{*c, *b, *a}
	want := []openaimodels.Entry{
		{ID: "base-a"}, {ID: "shared"}, {ID: "sql", Parent: "base-a"}, {ID: "chat", Parent: "shared"},
		{ID: "base-b"}, {ID: "code", Parent: "shared"},
		{ID: "base-c"}, {ID: "only", Parent: "base-c"},
	}
	if got := ModelList(routes); !reflect.DeepEqual(got, want) {
		t.Fatalf("model list\n%+v\nwant\n%+v", got, want)
	}
	mapping, _ := AdapterMapping(routes)
	for _, e := range ModelList(routes) {
		if e.Parent != mapping[e.ID] {
			t.Errorf("%s: parent %q in the list, base model %q in the adapter mapping: the router would list one and route another", e.ID, e.Parent, mapping[e.ID])
		}
	}

	// The ConfigMap the router mounts holds the list, in the file form the router parses.
	out, err := Config(ConfigInput{Config: testConfig(), Routes: routes, Images: testImages})
	if err != nil {
		t.Fatal(err)
	}
	got, err := openaimodels.ParseFile([]byte(configMapData(t, out.Objects, out.Names.AdapterMapping, ModelListKey)))
	if err != nil || !reflect.DeepEqual(got, want) {
		t.Fatalf("the rendered file parses to %+v (%v), want %+v", got, err, want)
	}
	out, err = Config(ConfigInput{Config: testConfig(), Images: testImages})
	if err != nil {
		t.Fatal(err)
	}
	if got, err := openaimodels.ParseFile([]byte(configMapData(t, out.Objects, out.Names.AdapterMapping, ModelListKey))); err != nil || len(got) != 0 {
		t.Fatalf("without routes: %v %v, want a valid empty list", got, err)
	}
}

func TestModelListRouteFollowsTheRouter(t *testing.T) {
	for _, provider := range []igwv1.GatewayProvider{igwv1.ProviderEnvoyGateway, igwv1.ProviderNative} {
		for _, enabled := range []bool{true, false} {
			cfg := testConfig()
			cfg.Spec.Gateway.Provider = provider
			cfg.Spec.BBR.Enabled = ptr(enabled)
			out, err := Config(ConfigInput{Config: cfg, Images: testImages})
			if err != nil {
				t.Fatal(err)
			}
			var route *gwapiv1.HTTPRoute
			for _, o := range out.Objects {
				if hr, ok := o.(*gwapiv1.HTTPRoute); ok && hr.Name == out.Names.ModelList {
					route = hr
				}
			}
			if !enabled {
				if route != nil {
					t.Errorf("%s without the router: a model list route to a router that does not run", provider)
				}
				continue
			}
			if route == nil {
				t.Fatalf("%s: no model list route", provider)
			}
			if len(route.Spec.Rules) != 1 || len(route.Spec.Rules[0].Matches) != 1 {
				t.Fatalf("%s: rules %+v, want one rule with one match", provider, route.Spec.Rules)
			}
			rule := route.Spec.Rules[0]
			m := rule.Matches[0]
			if *m.Path.Type != gwapiv1.PathMatchPathPrefix || *m.Path.Value != "/v1/models" || m.Method != nil ||
				len(m.Headers) != 0 || len(rule.Filters) != 0 || len(rule.BackendRefs) != 1 {
				t.Fatalf("%s: rules %+v, want a /v1/models path prefix match for every method, without filters, and one backend", provider, route.Spec.Rules)
			}
			ref := rule.BackendRefs[0]
			d := deploymentOf(t, out.Objects, out.Names.BBR)
			if ref.Kind != nil || ref.Name != gwapiv1.ObjectName(out.Names.BBR) || ref.Port == nil || int32(*ref.Port) != BBRModelsPort ||
				!slices.Contains(d.Spec.Template.Spec.Containers[0].Args, "--models-port="+fmt.Sprint(BBRModelsPort)) {
				t.Fatalf("%s: backend %+v, want the router Service's port the router serves the list on", provider, ref)
			}
		}
	}
}

func TestChildNamesFitDNSLabels(t *testing.T) {
	long := strings.Repeat("a", 200)
	n1, n2 := ChildName(long, SuffixEPPPolicy), ChildName(long+"b", SuffixEPPPolicy)
	if len(n1) > 63 || !strings.HasSuffix(n1, SuffixEPPPolicy) || n1 == n2 {
		t.Fatalf("%q / %q", n1, n2)
	}
	if ChildName("llama", SuffixEPP) != "llama-epp" {
		t.Fatal(ChildName("llama", SuffixEPP))
	}
}

func TestManyNamesSplitIntoRulesWithinGatewayAPILimits(t *testing.T) {
	mr := testRoute("big", "m0")
	for i := 1; i < 16; i++ {
		mr.Spec.Models = append(mr.Spec.Models, igwv1.ModelName(fmt.Sprint("m", i)))
	}
	for i := 0; i < 64; i++ {
		mr.Spec.Adapters = append(mr.Spec.Adapters, igwv1.LoRAAdapter{Name: igwv1.ModelName(fmt.Sprint("a", i)), BaseModel: "m0"})
	}
	out, err := Route(RouteInput{Route: mr, Config: testConfig(), Images: testImages})
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range out.Objects {
		if hr, ok := o.(*gwapiv1.HTTPRoute); ok {
			total := 0
			for _, rule := range hr.Spec.Rules {
				if len(rule.Matches) > maxMatchesPerRule {
					t.Fatalf("rule with %d matches", len(rule.Matches))
				}
				total += len(rule.Matches)
			}
			if total != 80 || len(hr.Spec.Rules) != 2 {
				t.Fatalf("%d matches in %d rules", total, len(hr.Spec.Rules))
			}
			return
		}
	}
	t.Fatal("no HTTPRoute")
}
