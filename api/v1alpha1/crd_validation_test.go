package v1alpha1_test

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"

	igwv1alpha1 "github.com/igw-dev/igw/api/v1alpha1"
	"github.com/igw-dev/igw/internal/testenv"
)

// readObject reads one YAML object and the "# want: ..." line at its top, if any.
func readObject(path string) (*unstructured.Unstructured, string) {
	GinkgoHelper()
	data, err := os.ReadFile(path)
	Expect(err).NotTo(HaveOccurred())
	first, _, _ := bufio.NewReader(bytes.NewReader(data)).ReadLine()
	want, _ := strings.CutPrefix(string(first), "# want: ")
	obj := &unstructured.Unstructured{}
	Expect(yaml.Unmarshal(data, &obj.Object)).To(Succeed(), path)
	return obj, want
}

// namespaceFor gives each object its own namespace so that entries never collide.
func namespaceFor(name string) string {
	GinkgoHelper()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "crd-"}}
	Expect(k8sClient.Create(ctx, ns)).To(Succeed(), name)
	return ns.Name
}

// createConfig creates an InferenceGatewayConfig that sets only its gateway,
// in a namespace of its own, and returns it as the API server defaulted it.
func createConfig(name string, gateway igwv1alpha1.GatewaySpec) *igwv1alpha1.InferenceGatewayConfig {
	GinkgoHelper()
	cfg := &igwv1alpha1.InferenceGatewayConfig{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: namespaceFor(name)},
		Spec:       igwv1alpha1.InferenceGatewayConfigSpec{Gateway: gateway},
	}
	Expect(k8sClient.Create(ctx, cfg)).To(Succeed())
	return cfg
}

func entriesFrom(glob string) []TableEntry {
	paths, err := filepath.Glob(filepath.Join(testenv.RepoRoot(), glob))
	if err != nil || len(paths) == 0 {
		panic(fmt.Sprintf("no files match %s: %v", glob, err))
	}
	var entries []TableEntry
	for _, p := range paths {
		if filepath.Base(p) != "kustomization.yaml" {
			entries = append(entries, Entry(filepath.Base(p), p))
		}
	}
	return entries
}

var _ = Describe("the generated CRDs", func() {
	DescribeTable("accept every sample in config/samples",
		func(path string) {
			obj, _ := readObject(path)
			obj.SetNamespace(namespaceFor(obj.GetName()))
			Expect(k8sClient.Create(ctx, obj)).To(Succeed())
		},
		entriesFrom("config/samples/*.yaml"),
	)

	It("has at least 12 invalid objects to reject", func() {
		Expect(len(entriesFrom("api/v1alpha1/testdata/invalid/*.yaml"))).To(BeNumerically(">=", 12))
	})

	DescribeTable("reject an invalid object with a message that says how to fix it",
		func(path string) {
			obj, want := readObject(path)
			Expect(want).NotTo(BeEmpty(), "%s needs a '# want: <message>' first line", path)
			obj.SetNamespace(namespaceFor(obj.GetName()))
			err := k8sClient.Create(ctx, obj)
			Expect(err).To(HaveOccurred(), "the API server accepted %s", path)
			Expect(err.Error()).To(ContainSubstring(want))
		},
		entriesFrom("api/v1alpha1/testdata/invalid/*.yaml"),
	)

	It("defaults an InferenceGatewayConfig that sets only its gateway", func() {
		s := createConfig("minimal", igwv1alpha1.GatewaySpec{Ref: &igwv1alpha1.GatewayRef{Name: "gw"}}).Spec
		Expect(s.Gateway.Provider).To(Equal(igwv1alpha1.ProviderEnvoyGateway))
		Expect(s.BBR.Enabled).To(HaveValue(BeTrue()))
		Expect(s.BBR.MaxRequestBodyBytes).To(Equal(int64(4 << 20)))
		Expect(s.EPP.ScrapeInterval.Duration).To(Equal(50 * time.Millisecond))
		Expect(s.EPP.MetricsStaleness.Duration).To(Equal(200 * time.Millisecond))
		Expect(s.EPP.FailureMode).To(Equal(igwv1alpha1.FailClose))
		Expect(s.Scoring.AutoTune).To(HaveValue(BeTrue()))
	})

	It("defaults the port of a managed Gateway", func() {
		cfg := createConfig("managed", igwv1alpha1.GatewaySpec{Managed: &igwv1alpha1.ManagedGateway{GatewayClassName: "eg"}})
		Expect(cfg.Spec.Gateway.Managed.Port).To(Equal(int32(80)))
	})

	It("defaults a ModelRoute's ports and engine", func() {
		route := &igwv1alpha1.ModelRoute{
			ObjectMeta: metav1.ObjectMeta{Name: "minimal", Namespace: namespaceFor("minimal-route")},
			Spec: igwv1alpha1.ModelRouteSpec{
				ConfigRef: igwv1alpha1.ObjectName{Name: "igw"},
				Models:    []igwv1alpha1.ModelName{"llama"},
				Selector:  igwv1alpha1.ModelServerSelector{MatchLabels: map[string]string{"app": "llama"}},
				Adapters:  []igwv1alpha1.LoRAAdapter{{Name: "sql"}},
			},
		}
		Expect(k8sClient.Create(ctx, route)).To(Succeed())
		Expect(route.Spec.TargetPorts).To(Equal([]igwv1alpha1.TargetPort{{Number: 8000}}))
		Expect(route.Spec.Engine).To(Equal(igwv1alpha1.EngineVLLM))
	})

	It("accepts request timeouts of whole milliseconds in the forms Go and users write", func() {
		ns := namespaceFor("timeouts")
		for i, timeout := range []string{"1500ms", "1.5s", "1s500ms", "1m30s", "1h30m0.001s", "24h", "1.25s"} {
			route := &unstructured.Unstructured{Object: map[string]any{
				"apiVersion": igwv1alpha1.GroupVersion.String(), "kind": "ModelRoute",
				"metadata": map[string]any{"name": fmt.Sprintf("timeout-%d", i), "namespace": ns},
				"spec": map[string]any{"configRef": map[string]any{"name": "igw"}, "models": []any{"llama"},
					"selector": map[string]any{"matchLabels": map[string]any{"app": "llama"}}, "requestTimeout": timeout},
			}}
			Expect(k8sClient.Create(ctx, route)).To(Succeed(), timeout)
		}
	})

	It("prints the printer columns in kubectl get igwc,mr", func() {
		ns := namespaceFor("kubectl")
		for _, name := range []string{"gateway_v1alpha1_inferencegatewayconfig.yaml", "gateway_v1alpha1_modelroute.yaml"} {
			obj, _ := readObject(filepath.Join(testenv.RepoRoot(), "config", "samples", name))
			obj.SetNamespace(ns)
			Expect(k8sClient.Create(ctx, obj)).To(Succeed())
		}
		route := &igwv1alpha1.ModelRoute{}
		Expect(k8sClient.Get(ctx, keyOf(ns, "llama-8b"), route)).To(Succeed())
		route.Status = igwv1alpha1.ModelRouteStatus{
			ReadyEndpoints: 3, TotalEndpoints: 4, Rollout: igwv1alpha1.RolloutAvailable,
			Conditions: []metav1.Condition{{Type: igwv1alpha1.ConditionReady, Status: metav1.ConditionTrue,
				Reason: "EndpointsReady", Message: "3 of 4 endpoints ready", LastTransitionTime: metav1.Now()}},
		}
		Expect(k8sClient.Status().Update(ctx, route)).To(Succeed())

		out, err := env.Kubectl("get", "igwc,mr", "-n", ns)
		Expect(err).NotTo(HaveOccurred())
		GinkgoWriter.Println(out)
		lines := strings.Split(strings.TrimSpace(out), "\n")
		Expect(out).To(MatchRegexp(`NAME\s+GATEWAY\s+PROVIDER\s+BBR\s+READY\s+AGE`))
		Expect(out).To(MatchRegexp(`inferencegatewayconfig.gateway.igw.dev/igw\s+EnvoyGateway\s+`))
		Expect(out).To(MatchRegexp(`NAME\s+MODELS\s+CONFIG\s+ENDPOINTS\s+READY\s+ROLLOUT\s+AGE`))
		Expect(out).To(MatchRegexp(`modelroute.gateway.igw.dev/llama-8b\s+\["meta-llama/Llama-3.1-8B-Instruct","llama-3.1-8b"\]\s+igw\s+3\s+True\s+Available\s+\S+`))
		Expect(len(lines)).To(BeNumerically(">=", 5))

		wide, err := env.Kubectl("get", "mr", "-n", ns, "-o", "wide")
		Expect(err).NotTo(HaveOccurred())
		Expect(wide).To(MatchRegexp(`TOTAL`))
		Expect(wide).To(MatchRegexp(`llama-8b\s+.*\s+3\s+4\s+True`))
	})
})
