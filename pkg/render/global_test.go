package render

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/util/validation"
	"sigs.k8s.io/yaml"

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

// TestGlobalMembersThatOneBackendCannotHoldAreRefused: Envoy Gateway would
// split such members into clusters of their own, where the picker's choice
// no longer decides; the error says what to change.
func TestGlobalMembersThatOneBackendCannotHoldAreRefused(t *testing.T) {
	tlsMember := func(name, ip, host, ca string) igwv1.GlobalMember {
		m := igwv1.GlobalMember{Name: name, Region: "us-east-1", Address: ip + ":443", SummaryURL: "https://" + host + "/igw/v1/global-summary",
			CredentialsSecretRef: igwv1.SecretKeyRef{Name: name + "-token", Key: "token"}}
		if ca != "" {
			m.CASecretRef = &igwv1.SecretKeyRef{Name: ca, Key: CACertificateKey}
		}
		return m
	}
	plain := igwv1.GlobalMember{Name: "plain", Region: "us-east-1", Address: "10.9.0.1:8080", SummaryURL: "http://10.9.0.1:8080/igw/v1/global-summary",
		CredentialsSecretRef: igwv1.SecretKeyRef{Name: "plain-token", Key: "token"}}
	byName := igwv1.GlobalMember{Name: "named", Region: "us-east-1", Address: "gw.example.com:443", CredentialsSecretRef: igwv1.SecretKeyRef{Name: "named-token", Key: "token"}}
	noHost := tlsMember("nohost", "10.8.0.1", "10.8.0.1", "")
	wrongKey := tlsMember("wrongkey", "10.7.0.1", "gw.wrongkey.example.com", "ca")
	wrongKey.CASecretRef.Key = "bundle.pem"
	for _, c := range []struct {
		name    string
		members []igwv1.GlobalMember
		want    string // in the error; "" for none
	}{
		{"IP members over TLS sharing a CA", []igwv1.GlobalMember{tlsMember("a", "10.0.0.1", "a.example.com", "ca"), tlsMember("b", "10.0.0.2", "b.example.com", "ca")}, ""},
		{"IP members over TLS with the system's CAs", []igwv1.GlobalMember{tlsMember("a", "10.0.0.1", "a.example.com", ""), tlsMember("b", "10.0.0.2", "b.example.com", "")}, ""},
		{"IP and host name", []igwv1.GlobalMember{tlsMember("a", "10.0.0.1", "a.example.com", ""), byName}, "address them all one way"},
		{"plaintext and TLS", []igwv1.GlobalMember{tlsMember("a", "10.0.0.1", "a.example.com", ""), plain}, "reach them all one way"},
		{"two CAs", []igwv1.GlobalMember{tlsMember("a", "10.0.0.1", "a.example.com", "ca-a"), tlsMember("b", "10.0.0.2", "b.example.com", "ca-b")}, "put the CAs in one Secret"},
		{"a CA for some only", []igwv1.GlobalMember{tlsMember("a", "10.0.0.1", "a.example.com", "ca"), tlsMember("b", "10.0.0.2", "b.example.com", "")}, "name the Secret from every member"},
		{"TLS to an IP with no host name", []igwv1.GlobalMember{noHost}, "no host name to verify"},
		{"a CA under another key", []igwv1.GlobalMember{wrongKey}, `set that key`},
	} {
		t.Run(c.name, func(t *testing.T) {
			gig := &igwv1.GlobalInferenceGateway{}
			gig.Name, gig.Spec.Namespace = "g", "hub"
			gig.Spec.Members = c.members
			gig.Spec.Models = []igwv1.GlobalModel{{Name: "m"}}
			_, err := Global(GlobalInput{Global: gig, Images: testImages})
			switch {
			case c.want == "" && err != nil:
				t.Errorf("error %v", err)
			case c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)):
				t.Errorf("error %v, want one saying %q", err, c.want)
			}
		})
	}
}

func TestTheGlobalSampleRenders(t *testing.T) {
	data, err := os.ReadFile(filepath.Join("..", "..", "config", "samples", "gateway_v1alpha1_globalinferencegateway.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var gig igwv1.GlobalInferenceGateway
	if err := yaml.UnmarshalStrict(data, &gig); err != nil {
		t.Fatal(err)
	}
	if _, err := Global(GlobalInput{Global: &gig, Gateway: GatewayTarget{Name: "hub", Namespace: gig.Spec.Namespace}, Images: testImages}); err != nil {
		t.Errorf("the sample does not render: %v", err)
	}
}
