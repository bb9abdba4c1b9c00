// Package charts_test renders the igw Helm chart with the Helm CLI pinned in
// go.mod (`go tool helm`) and checks it against what the repository generates
// and what the operator and Envoy Gateway accept: RBAC and CRDs equal to
// controller-gen's output, every flag known to the operator, the extension
// server's address matching its Service, and envoy-gateway-values.yaml merged
// by Envoy Gateway's own chart into a valid configuration that calls that
// Service with the hooks pkg/egext needs.
package charts_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"

	egv1a1 "github.com/envoyproxy/gateway/api/v1alpha1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	policyv1 "k8s.io/api/policy/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/kyaml/filesys"
	"sigs.k8s.io/yaml"

	"github.com/igw-dev/igw/internal/testenv"
	"github.com/igw-dev/igw/pkg/egext"
	"github.com/igw-dev/igw/pkg/manager"
	"github.com/igw-dev/igw/pkg/render"
)

const (
	release   = "igw"
	namespace = "igw-system"
	chartDir  = "igw"
	// envoyGatewayValues is the values file for Envoy Gateway's chart; it
	// assumes the release and namespace above.
	envoyGatewayValues = "igw/envoy-gateway-values.yaml"
	envoyGatewayModule = "github.com/envoyproxy/gateway"
	// kubeVersion is the cluster version the chart is rendered for. Helm built
	// by `go tool` lacks the release's ldflags and assumes Kubernetes v1.20,
	// which the chart's kubeVersion (>= 1.30) refuses.
	kubeVersion = "1.37.2"
)

var (
	helmOnce sync.Once
	helmPath string
	helmErr  error
)

// helm runs the Helm CLI declared as a tool in go.mod. The binary is resolved
// once (`go tool -n helm` builds it into the Go cache the first time) and run
// directly after that.
func helm(t *testing.T, args ...string) (string, error) {
	t.Helper()
	helmOnce.Do(func() {
		cmd := exec.Command("go", "tool", "-n", "helm")
		cmd.Dir = ".."
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		out, err := cmd.Output()
		if err != nil {
			helmErr = fmt.Errorf("go tool -n helm: %w: %s", err, stderr.String())
			return
		}
		helmPath = strings.TrimSpace(string(out))
	})
	if helmErr != nil {
		t.Fatal(helmErr)
	}
	cmd := exec.Command(helmPath, args...)
	// Keep Helm away from the user's repositories, plugins and registry logins.
	home := t.TempDir()
	cmd.Env = append(os.Environ(), "HELM_CACHE_HOME="+home, "HELM_CONFIG_HOME="+home, "HELM_DATA_HOME="+home)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return stdout.String(), fmt.Errorf("helm %s: %w: %s", strings.Join(args, " "), err, stderr.String())
	}
	return stdout.String(), nil
}

// rendered is the output of `helm template`: the text and its objects.
type rendered struct {
	text    string
	objects []*unstructured.Unstructured
}

func (r rendered) find(kind, name string) *unstructured.Unstructured {
	for _, o := range r.all(kind) {
		if name == "" || o.GetName() == name {
			return o
		}
	}
	return nil
}

// all are the rendered objects of kind.
func (r rendered) all(kind string) []*unstructured.Unstructured {
	var out []*unstructured.Unstructured
	for _, o := range r.objects {
		if o.GetKind() == kind {
			out = append(out, o)
		}
	}
	return out
}

func (r rendered) kinds() []string {
	var out []string
	for _, o := range r.objects {
		out = append(out, o.GetKind()+"/"+o.GetName())
	}
	slices.Sort(out)
	return out
}

// get converts the object of that kind and name into a typed value.
func get[T any](t *testing.T, r rendered, kind, name string) *T {
	t.Helper()
	o := r.find(kind, name)
	if o == nil {
		t.Fatalf("no %s %q rendered; objects: %v", kind, name, r.kinds())
	}
	var v T
	if err := runtime.DefaultUnstructuredConverter.FromUnstructuredWithValidation(o.Object, &v, true); err != nil {
		t.Fatalf("%s %s: %v", kind, o.GetName(), err)
	}
	return &v
}

// template renders the igw chart as release "igw" in namespace igw-system with
// the given extra helm arguments (--set, -f, ...).
func template(t *testing.T, args ...string) rendered {
	t.Helper()
	out, err := helm(t, append([]string{"template", release, chartDir, "--namespace", namespace, "--kube-version", kubeVersion}, args...)...)
	if err != nil {
		t.Fatal(err)
	}
	return rendered{text: out, objects: decodeObjects(t, out)}
}

func decodeObjects(t *testing.T, text string) []*unstructured.Unstructured {
	t.Helper()
	var objs []*unstructured.Unstructured
	dec := utilyaml.NewYAMLOrJSONDecoder(strings.NewReader(text), 4096)
	for {
		var m map[string]any
		err := dec.Decode(&m)
		if errors.Is(err, io.EOF) {
			return objs
		}
		if err != nil {
			t.Fatalf("decoding rendered objects: %v", err)
		}
		if len(m) > 0 {
			objs = append(objs, &unstructured.Unstructured{Object: m})
		}
	}
}

func TestLint(t *testing.T) {
	if out, err := helm(t, "lint", "--strict", chartDir, "--kube-version", kubeVersion); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	overrides := filepath.Join(t.TempDir(), "values.yaml")
	writeFile(t, overrides, overrideValues)
	if out, err := helm(t, "lint", "--strict", chartDir, "--kube-version", kubeVersion, "-f", overrides); err != nil {
		t.Fatalf("with overridden values: %v\n%s", err, out)
	}
}

// operatorFlags parses the manager container's arguments with the operator's
// own flag set, so that a flag the chart passes but the operator lacks fails here.
func operatorFlags(t *testing.T, c corev1.Container) *manager.Options {
	t.Helper()
	if len(c.Command) > 0 {
		t.Fatalf("the image's entrypoint is the operator; the chart must not set a command: %v", c.Command)
	}
	opts := manager.NewOptions()
	fs := flag.NewFlagSet("manager", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	opts.AddFlags(fs)
	(&zap.Options{}).BindFlags(fs)
	if err := fs.Parse(c.Args); err != nil {
		t.Fatalf("the operator rejects the chart's arguments %q: %v", c.Args, err)
	}
	if fs.NArg() > 0 {
		t.Fatalf("the operator ignores arguments %q", fs.Args())
	}
	if err := opts.Validate(); err != nil {
		t.Fatalf("the operator rejects the chart's arguments %q: %v", c.Args, err)
	}
	return opts
}

func managerContainer(t *testing.T, d *appsv1.Deployment) corev1.Container {
	t.Helper()
	for _, c := range d.Spec.Template.Spec.Containers {
		if c.Name == "manager" {
			return c
		}
	}
	t.Fatalf("Deployment %s has no manager container", d.Name)
	return corev1.Container{}
}

func containerPort(c corev1.Container, name string) (int32, bool) {
	for _, p := range c.Ports {
		if p.Name == name {
			return p.ContainerPort, true
		}
	}
	return 0, false
}

func portOf(t *testing.T, addr string) int32 {
	t.Helper()
	_, p, err := net.SplitHostPort(addr)
	if err != nil {
		t.Fatalf("address %q: %v", addr, err)
	}
	n, err := strconv.Atoi(p)
	if err != nil {
		t.Fatalf("address %q: %v", addr, err)
	}
	return int32(n)
}

// checkServiceReaches asserts that the Service selects the Deployment's pods
// and that its port named portName lands on the container port the operator
// listens on (bound).
func checkServiceReaches(t *testing.T, svc *corev1.Service, d *appsv1.Deployment, portName string, bound int32) {
	t.Helper()
	c := managerContainer(t, d)
	for k, v := range svc.Spec.Selector {
		if d.Spec.Template.Labels[k] != v {
			t.Errorf("Service %s selects %s=%s, which the operator's pods lack (%v)", svc.Name, k, v, d.Spec.Template.Labels)
		}
	}
	if len(svc.Spec.Selector) == 0 {
		t.Errorf("Service %s selects nothing", svc.Name)
	}
	for _, p := range svc.Spec.Ports {
		if p.Name != portName {
			continue
		}
		target := p.TargetPort.IntVal
		if p.TargetPort.StrVal != "" {
			var ok bool
			if target, ok = containerPort(c, p.TargetPort.StrVal); !ok {
				t.Fatalf("Service %s targets port %q, which the container does not name", svc.Name, p.TargetPort.StrVal)
			}
		}
		if target != bound {
			t.Errorf("Service %s sends port %d to %d, but the operator listens on %d", svc.Name, p.Port, target, bound)
		}
		return
	}
	t.Errorf("Service %s has no port %q", svc.Name, portName)
}

// appVersion is the chart's appVersion.
func appVersion(t *testing.T) string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(chartDir, "Chart.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var chart struct {
		AppVersion string `json:"appVersion"`
	}
	if err := yaml.Unmarshal(data, &chart); err != nil || chart.AppVersion == "" {
		t.Fatalf("Chart.yaml appVersion: %q %v", chart.AppVersion, err)
	}
	return chart.AppVersion
}

// sameJSON compares two decoded objects as JSON, so that integers decoded as
// int64 on one side and float64 on the other compare equal.
func sameJSON(a, b any) bool {
	x, errA := json.Marshal(a)
	y, errB := json.Marshal(b)
	return errA == nil && errB == nil && bytes.Equal(x, y)
}

// repo is an image reference without its tag.
func repo(image string) string {
	if i := strings.LastIndex(image, ":"); i > strings.LastIndex(image, "/") {
		return image[:i]
	}
	return image
}

// checkAvailability asserts the disruption budget and spread the chart gives
// the operator's pods: the PDB selects them and lets maxUnavailable of them go,
// and every spread constraint counts them (its selector matches their labels).
func checkAvailability(t *testing.T, r rendered, d *appsv1.Deployment, maxUnavailable int) {
	t.Helper()
	pdb := get[policyv1.PodDisruptionBudget](t, r, "PodDisruptionBudget", d.Name)
	sel, err := metav1.LabelSelectorAsSelector(pdb.Spec.Selector)
	if err != nil || !sel.Matches(labels.Set(d.Spec.Template.Labels)) {
		t.Errorf("the PodDisruptionBudget selects %v, not the operator's pods %v", pdb.Spec.Selector, d.Spec.Template.Labels)
	}
	if pdb.Spec.MaxUnavailable == nil || pdb.Spec.MaxUnavailable.IntValue() != maxUnavailable || pdb.Spec.MinAvailable != nil {
		t.Errorf("PodDisruptionBudget maxUnavailable %v minAvailable %v, want maxUnavailable %d", pdb.Spec.MaxUnavailable, pdb.Spec.MinAvailable, maxUnavailable)
	}
	spread := d.Spec.Template.Spec.TopologySpreadConstraints
	var keys []string
	for _, c := range spread {
		keys = append(keys, c.TopologyKey)
		sel, err := metav1.LabelSelectorAsSelector(c.LabelSelector)
		if err != nil || !sel.Matches(labels.Set(d.Spec.Template.Labels)) {
			t.Errorf("spread over %s counts %v, not the operator's pods", c.TopologyKey, c.LabelSelector)
		}
		if c.WhenUnsatisfiable != corev1.ScheduleAnyway {
			t.Errorf("spread over %s is %s: a cluster with one zone or node could not schedule", c.TopologyKey, c.WhenUnsatisfiable)
		}
	}
	if want := []string{"topology.kubernetes.io/zone", "kubernetes.io/hostname"}; !reflect.DeepEqual(keys, want) {
		t.Errorf("spread over %v, want %v", keys, want)
	}
}

func TestDefaults(t *testing.T) {
	r := template(t)
	want := []string{
		"ClusterRole/igw-inferencegatewayconfig-editor", "ClusterRole/igw-inferencegatewayconfig-viewer",
		"ClusterRole/igw-manager", "ClusterRole/igw-metrics-auth", "ClusterRole/igw-metrics-reader",
		"ClusterRole/igw-modelroute-editor", "ClusterRole/igw-modelroute-viewer",
		"ClusterRoleBinding/igw-manager", "ClusterRoleBinding/igw-metrics-auth", "Deployment/igw", "PodDisruptionBudget/igw",
		"Role/igw-leader-election", "RoleBinding/igw-leader-election",
		"Service/igw-extension-server", "Service/igw-metrics", "ServiceAccount/igw",
	}
	if got := r.kinds(); !reflect.DeepEqual(got, want) {
		t.Errorf("rendered objects:\n got %v\nwant %v", got, want)
	}
	for _, o := range r.objects {
		cluster := o.GetKind() == "ClusterRole" || o.GetKind() == "ClusterRoleBinding"
		if !cluster && o.GetNamespace() != namespace {
			t.Errorf("%s/%s is in namespace %q, not the release's %q", o.GetKind(), o.GetName(), o.GetNamespace(), namespace)
		}
	}

	d := get[appsv1.Deployment](t, r, "Deployment", "igw")
	c := managerContainer(t, d)
	opts := operatorFlags(t, c)
	if !opts.LeaderElect {
		t.Error("leader election is off by default")
	}
	// Operator, pickers and routers run one release: the chart's appVersion.
	version := appVersion(t)
	for what, c := range map[string][2]string{
		"operator": {c.Image, "ghcr.io/igw-dev/igw-manager:" + version},
		"epp":      {opts.EPPImage, "ghcr.io/igw-dev/igw-epp:" + version},
		"bbr":      {opts.BBRImage, "ghcr.io/igw-dev/igw-bbr:" + version},
		"global":   {opts.GlobalPickerImage, "ghcr.io/igw-dev/igw-global:" + version},
	} {
		if c[0] != c[1] {
			t.Errorf("%s image %q, want %q", what, c[0], c[1])
		}
	}
	defaults := manager.NewOptions()
	if repo(opts.GlobalPickerImage) != repo(defaults.GlobalPickerImage) {
		t.Errorf("the chart's global picker repository %s differs from the operator's default %s", opts.GlobalPickerImage, defaults.GlobalPickerImage)
	}
	if repo(opts.EPPImage) != repo(defaults.EPPImage) || repo(opts.BBRImage) != repo(defaults.BBRImage) {
		t.Errorf("the chart's picker and router repositories %s, %s differ from the operator's defaults %s, %s",
			opts.EPPImage, opts.BBRImage, defaults.EPPImage, defaults.BBRImage)
	}
	checkAvailability(t, r, d, 1)
	if d.Spec.Template.Spec.ServiceAccountName != "igw" {
		t.Errorf("service account %q", d.Spec.Template.Spec.ServiceAccountName)
	}
	if c.Resources.Limits.Memory().IsZero() || c.Resources.Requests.Cpu().IsZero() {
		t.Errorf("no default resources: %v", c.Resources)
	}

	if opts.ExtensionServerAddr != ":5005" {
		t.Errorf("extension server address %q, want :5005", opts.ExtensionServerAddr)
	}
	if !opts.MetricsSecure || opts.MetricsAddr != ":8443" {
		t.Errorf("metrics on %q secure=%v, want HTTPS on :8443 by default", opts.MetricsAddr, opts.MetricsSecure)
	}
	if m := get[corev1.Service](t, r, "Service", "igw-metrics"); m.Spec.Ports[0].AppProtocol == nil || *m.Spec.Ports[0].AppProtocol != "https" {
		t.Errorf("metrics Service port %+v, want appProtocol https", m.Spec.Ports[0])
	}
	ext := get[corev1.Service](t, r, "Service", "igw-extension-server")
	if ext.Spec.Ports[0].Port != 5005 {
		t.Errorf("extension server Service port %d, want 5005", ext.Spec.Ports[0].Port)
	}
	checkServiceReaches(t, ext, d, "grpc", portOf(t, opts.ExtensionServerAddr))
	checkServiceReaches(t, get[corev1.Service](t, r, "Service", "igw-metrics"), d, "metrics", portOf(t, opts.MetricsAddr))
	probes, _ := containerPort(c, "probes")
	if probes != portOf(t, opts.ProbeAddr) {
		t.Errorf("probes go to port %d, the operator serves them on %s", probes, opts.ProbeAddr)
	}
}

// overrideValues changes every value the chart offers.
const overrideValues = `
namespace: inference-ops
fullnameOverride: gw-operator
clusterDomain: corp.example
image:
  repository: registry.example/igw/manager
  tag: v0.1.0
  pullPolicy: IfNotPresent
imagePullSecrets: [{name: pull}]
replicas: 2
eppImage: registry.example/igw/epp:v0.1.0
bbrImage: registry.example/igw/bbr:v0.1.0
globalPickerImage: registry.example/igw/global:v0.1.0
leaderElection: {enabled: true, id: gw-operator-lease}
metrics:
  port: 9443
  secure: false
  serviceMonitor: {enabled: true, interval: 30s, labels: {release: prom}}
rbac: {aggregatedRoles: false}
networkPolicy: {enabled: true, metricsNamespace: prom, envoyGatewayNamespace: eg, apiServerPorts: [8443]}
healthProbePort: 9081
extensionServer:
  port: 6000
  service: {annotations: {a: b}}
watchNamespace: models
maxConcurrentReconciles: 8
syncPeriod: 2h
logLevel: debug
extraArgs: [--zap-devel]
serviceAccount: {create: true, name: gw-sa, annotations: {iam: role}}
resources:
  requests: {cpu: 100m, memory: 128Mi}
  limits: {memory: 512Mi}
nodeSelector: {node-role.kubernetes.io/control-plane: ""}
tolerations: [{key: dedicated, operator: Equal, value: ops, effect: NoSchedule}]
affinity:
  podAntiAffinity:
    preferredDuringSchedulingIgnoredDuringExecution:
    - weight: 100
      podAffinityTerm: {topologyKey: kubernetes.io/hostname, labelSelector: {matchLabels: {app.kubernetes.io/name: igw}}}
priorityClassName: system-cluster-critical
podAnnotations: {team: ml}
podLabels: {team: ml}
podDisruptionBudget: {enabled: true, maxUnavailable: 1, minAvailable: 1}
topologySpread: {enabled: true, maxSkew: 2, whenUnsatisfiable: DoNotSchedule, topologyKeys: [kubernetes.io/hostname]}
topologySpreadConstraints:
- {maxSkew: 1, topologyKey: topology.kubernetes.io/zone, whenUnsatisfiable: DoNotSchedule}
monitoring:
  podMonitors: {enabled: true, interval: 15s, labels: {release: prom}}
  prometheusRule: {enabled: true, labels: {release: prom}}
  dashboard: {enabled: true, namespace: grafana, labels: {grafana_dashboard: "1"}, annotations: {folder: igw}}
crds: {templated: false}
`

func TestOverriddenValues(t *testing.T) {
	values := filepath.Join(t.TempDir(), "values.yaml")
	writeFile(t, values, overrideValues)
	r := template(t, "-f", values)
	if cm := r.find("ConfigMap", "gw-operator-grafana-dashboard"); cm == nil || cm.GetNamespace() != "grafana" {
		t.Errorf("the dashboard ConfigMap is not in monitoring.dashboard.namespace: %v", cm)
	}
	for _, o := range r.objects {
		cluster := o.GetKind() == "ClusterRole" || o.GetKind() == "ClusterRoleBinding"
		if !cluster && o.GetNamespace() != "inference-ops" && o.GetKind() != "ConfigMap" {
			t.Errorf("%s/%s is in namespace %q, want inference-ops", o.GetKind(), o.GetName(), o.GetNamespace())
		}
		if !strings.HasPrefix(o.GetName(), "gw-") {
			t.Errorf("%s/%s does not carry fullnameOverride", o.GetKind(), o.GetName())
		}
	}
	d := get[appsv1.Deployment](t, r, "Deployment", "gw-operator")
	c := managerContainer(t, d)
	opts := operatorFlags(t, c)
	pod := d.Spec.Template.Spec
	checks := []struct {
		what      string
		got, want any
	}{
		{"image", c.Image, "registry.example/igw/manager:v0.1.0"},
		{"pull policy", c.ImagePullPolicy, corev1.PullIfNotPresent},
		{"pull secrets", pod.ImagePullSecrets, []corev1.LocalObjectReference{{Name: "pull"}}},
		{"replicas", *d.Spec.Replicas, int32(2)},
		{"epp image", opts.EPPImage, "registry.example/igw/epp:v0.1.0"},
		{"bbr image", opts.BBRImage, "registry.example/igw/bbr:v0.1.0"},
		{"global picker image", opts.GlobalPickerImage, "registry.example/igw/global:v0.1.0"},
		{"leader election", opts.LeaderElect, true},
		{"lease", opts.LeaderElectionID, "gw-operator-lease"},
		{"metrics", opts.MetricsAddr, ":9443"},
		{"probes", opts.ProbeAddr, ":9081"},
		{"extension server", opts.ExtensionServerAddr, ":6000"},
		{"watch namespace", opts.WatchNamespace, "models"},
		{"reconciles", opts.MaxConcurrentReconciles, 8},
		{"sync period", opts.SyncPeriod.String(), "2h0m0s"},
		{"service account", pod.ServiceAccountName, "gw-sa"},
		{"memory limit", c.Resources.Limits.Memory().String(), "512Mi"},
		{"cpu request", c.Resources.Requests.Cpu().String(), "100m"},
		{"node selector", pod.NodeSelector, map[string]string{"node-role.kubernetes.io/control-plane": ""}},
		{"tolerations", pod.Tolerations, []corev1.Toleration{{Key: "dedicated", Operator: corev1.TolerationOpEqual, Value: "ops", Effect: corev1.TaintEffectNoSchedule}}},
		{"affinity", pod.Affinity != nil && pod.Affinity.PodAntiAffinity != nil, true},
		{"priority class", pod.PriorityClassName, "system-cluster-critical"},
		{"pod annotation", d.Spec.Template.Annotations["team"], "ml"},
		{"pod label", d.Spec.Template.Labels["team"], "ml"},
		{"pdb", get[policyv1.PodDisruptionBudget](t, r, "PodDisruptionBudget", "gw-operator").Spec.MinAvailable.String(), "1"},
		{"spread", len(pod.TopologySpreadConstraints), 1},
		{"spread key", pod.TopologySpreadConstraints[0].TopologyKey, "topology.kubernetes.io/zone"},
		{"spread selector", pod.TopologySpreadConstraints[0].LabelSelector.MatchLabels["app.kubernetes.io/instance"], release},
	}
	for _, ch := range checks {
		if !reflect.DeepEqual(ch.got, ch.want) {
			t.Errorf("%s: got %v, want %v", ch.what, ch.got, ch.want)
		}
	}
	for _, arg := range []string{"--zap-log-level=debug", "--zap-devel"} {
		if !slices.Contains(c.Args, arg) {
			t.Errorf("args %q lack %s", c.Args, arg)
		}
	}
	sa := get[corev1.ServiceAccount](t, r, "ServiceAccount", "gw-sa")
	if sa.Annotations["iam"] != "role" {
		t.Errorf("service account annotations %v", sa.Annotations)
	}
	for _, kind := range []string{"ClusterRoleBinding", "RoleBinding"} {
		b := r.find(kind, "")
		subjects, _, _ := unstructured.NestedSlice(b.Object, "subjects")
		want := []any{map[string]any{"kind": "ServiceAccount", "name": "gw-sa", "namespace": "inference-ops"}}
		if !reflect.DeepEqual(subjects, want) {
			t.Errorf("%s subjects %v, want %v", kind, subjects, want)
		}
	}
	ext := get[corev1.Service](t, r, "Service", "gw-operator-extension-server")
	if ext.Spec.Ports[0].Port != 6000 || ext.Annotations["a"] != "b" {
		t.Errorf("extension server Service %+v", ext)
	}
	checkServiceReaches(t, ext, d, "grpc", portOf(t, opts.ExtensionServerAddr))
	checkServiceReaches(t, get[corev1.Service](t, r, "Service", "gw-operator-metrics"), d, "metrics", portOf(t, opts.MetricsAddr))
	sm := r.find("ServiceMonitor", "gw-operator-metrics")
	if sm == nil || sm.GetLabels()["release"] != "prom" {
		t.Errorf("ServiceMonitor %v", sm)
	}
	endpoints, _, _ := unstructured.NestedSlice(sm.Object, "spec", "endpoints")
	if len(endpoints) != 1 {
		t.Fatalf("ServiceMonitor endpoints %v", endpoints)
	}
	if scheme, _, _ := unstructured.NestedString(endpoints[0].(map[string]any), "scheme"); scheme != "" || opts.MetricsSecure {
		t.Errorf("metrics.secure=false still serves HTTPS (%v) or scrapes with scheme %q", opts.MetricsSecure, scheme)
	}
	if r.find("ClusterRole", "gw-operator-modelroute-editor") != nil || r.find("ClusterRole", "gw-operator-metrics-auth") != nil {
		t.Error("rbac.aggregatedRoles=false or metrics.secure=false still renders their ClusterRoles")
	}
	if np := r.find("NetworkPolicy", "gw-operator-allow-metrics-traffic"); np == nil || np.GetNamespace() != "inference-ops" {
		t.Errorf("metrics NetworkPolicy %v", np)
	}

	t.Run("off switches", func(t *testing.T) {
		r := template(t, "--set", "extensionServer.enabled=false", "--set", "metrics.enabled=false",
			"--set", "leaderElection.enabled=false", "--set", "serviceAccount.create=false", "--set", "serviceAccount.name=existing",
			"--set", "podDisruptionBudget.enabled=false", "--set", "topologySpread.enabled=false", "--set", "rbac.aggregatedRoles=false")
		d := get[appsv1.Deployment](t, r, "Deployment", "igw")
		if c := d.Spec.Template.Spec.TopologySpreadConstraints; len(c) > 0 {
			t.Errorf("topologySpread.enabled=false still spreads: %v", c)
		}
		opts := operatorFlags(t, managerContainer(t, d))
		if opts.ExtensionServerAddr != "0" || opts.MetricsAddr != "0" || opts.LeaderElect {
			t.Errorf("extension server %q, metrics %q, leader election %v", opts.ExtensionServerAddr, opts.MetricsAddr, opts.LeaderElect)
		}
		want := []string{"ClusterRole/igw-manager", "ClusterRoleBinding/igw-manager", "Deployment/igw"}
		if got := r.kinds(); !reflect.DeepEqual(got, want) {
			t.Errorf("rendered %v, want %v", got, want)
		}
	})
	t.Run("invalid", func(t *testing.T) {
		for _, set := range []string{"extensionServer.port=70000", "metrics.port=0", "serviceAccount.create=false"} {
			if _, err := helm(t, "template", release, chartDir, "--kube-version", kubeVersion, "--set", set); err == nil {
				t.Errorf("--set %s rendered", set)
			}
		}
	})
}

// readYAML reads one YAML object from a file of the repository.
func readYAML[T any](t *testing.T, path string) *T {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("..", path))
	if err != nil {
		t.Fatal(err)
	}
	var v T
	if err := yaml.UnmarshalStrict(data, &v); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	return &v
}

func TestRBACMatchesGenerated(t *testing.T) {
	r := template(t)
	want := readYAML[rbacv1.ClusterRole](t, "config/rbac/role.yaml")
	got := get[rbacv1.ClusterRole](t, r, "ClusterRole", "igw-manager")
	if !reflect.DeepEqual(got.Rules, want.Rules) {
		t.Errorf("the chart's ClusterRole differs from config/rbac/role.yaml (run make manifests):\n got %v\nwant %v", got.Rules, want.Rules)
	}
	binding := get[rbacv1.ClusterRoleBinding](t, r, "ClusterRoleBinding", "igw-manager")
	if binding.RoleRef.Name != got.Name || binding.Subjects[0].Name != "igw" || binding.Subjects[0].Namespace != namespace {
		t.Errorf("ClusterRoleBinding %+v", binding)
	}
	for file, name := range map[string]string{
		"metrics_auth_role": "igw-metrics-auth", "metrics_reader_role": "igw-metrics-reader",
		"inferencegatewayconfig_editor_role": "igw-inferencegatewayconfig-editor", "inferencegatewayconfig_viewer_role": "igw-inferencegatewayconfig-viewer",
		"modelroute_editor_role": "igw-modelroute-editor", "modelroute_viewer_role": "igw-modelroute-viewer",
	} {
		want := readYAML[rbacv1.ClusterRole](t, "config/rbac/"+file+".yaml")
		got := get[rbacv1.ClusterRole](t, r, "ClusterRole", name)
		if !reflect.DeepEqual(got.Rules, want.Rules) {
			t.Errorf("the chart's ClusterRole %s differs from config/rbac/%s.yaml (run make manifests):\n got %v\nwant %v", name, file, got.Rules, want.Rules)
		}
		for k, v := range want.Labels {
			if strings.HasPrefix(k, "rbac.authorization.k8s.io/") && got.Labels[k] != v {
				t.Errorf("ClusterRole %s lacks the label %s=%s of config/rbac/%s.yaml", name, k, v, file)
			}
		}
	}
	metricsAuth := get[rbacv1.ClusterRoleBinding](t, r, "ClusterRoleBinding", "igw-metrics-auth")
	if metricsAuth.RoleRef.Name != "igw-metrics-auth" || metricsAuth.Subjects[0].Name != "igw" {
		t.Errorf("metrics auth ClusterRoleBinding %+v", metricsAuth)
	}
	wantLE := readYAML[rbacv1.Role](t, "config/rbac/leader_election_role.yaml")
	gotLE := get[rbacv1.Role](t, r, "Role", "igw-leader-election")
	if !reflect.DeepEqual(gotLE.Rules, wantLE.Rules) {
		t.Errorf("the chart's leader election Role differs from config/rbac/leader_election_role.yaml:\n got %v\nwant %v", gotLE.Rules, wantLE.Rules)
	}
}

func TestCRDsMatchGenerated(t *testing.T) {
	want := map[string][]byte{}
	err := filepath.WalkDir("../config/crd/bases", func(path string, e fs.DirEntry, err error) error {
		if err != nil || e.IsDir() {
			return err
		}
		data, err := os.ReadFile(path)
		want[e.Name()] = data
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	entries, err := os.ReadDir(filepath.Join(chartDir, "crds"))
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, e := range entries {
		got = append(got, e.Name())
		data, err := os.ReadFile(filepath.Join(chartDir, "crds", e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		if w, ok := want[e.Name()]; !ok {
			t.Errorf("charts/igw/crds/%s is not in config/crd/bases (run make manifests)", e.Name())
		} else if !bytes.Equal(data, w) {
			t.Errorf("charts/igw/crds/%s differs from config/crd/bases (run make manifests)", e.Name())
		}
	}
	if len(got) != len(want) {
		t.Errorf("charts/igw/crds holds %v; config/crd/bases has %d files (run make manifests)", got, len(want))
	}

	r := template(t, "--include-crds")
	var names []string
	for _, o := range r.objects {
		if o.GetKind() == "CustomResourceDefinition" {
			names = append(names, o.GetName())
		}
	}
	slices.Sort(names)
	if wantNames := []string{"globalinferencegateways.gateway.igw.dev", "inferencegatewayconfigs.gateway.igw.dev", "modelroutes.gateway.igw.dev"}; !reflect.DeepEqual(names, wantNames) {
		t.Errorf("helm installs CRDs %v, want %v", names, wantNames)
	}
}

// envoyGatewayChart copies Envoy Gateway's chart from the module pinned in
// go.mod (the source of the published v1.9.1 chart) and writes the values.yaml
// its release process writes from values.tmpl.yaml.
func envoyGatewayChart(t *testing.T) string {
	t.Helper()
	cmd := exec.Command("go", "list", "-m", "-f", "{{.Dir}}", envoyGatewayModule)
	cmd.Dir = ".."
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list -m %s: %v", envoyGatewayModule, err)
	}
	src := filepath.Join(strings.TrimSpace(string(out)), "charts", "gateway-helm")
	dst := filepath.Join(t.TempDir(), "gateway-helm")
	err = filepath.WalkDir(src, func(path string, e fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, path)
		if e.IsDir() {
			return os.MkdirAll(filepath.Join(dst, rel), 0o755)
		}
		data, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		if rel == "values.tmpl.yaml" {
			rel = "values.yaml"
			data = []byte(strings.NewReplacer("${GatewayImage}", "docker.io/envoyproxy/gateway:v1.9.1",
				"${GatewayImagePullPolicy}", "IfNotPresent").Replace(string(data)))
		}
		return os.WriteFile(filepath.Join(dst, rel), data, 0o644)
	})
	if err != nil {
		t.Fatal(err)
	}
	return dst
}

// TestEnvoyGatewayValues installs envoy-gateway-values.yaml the way the docs
// say (into Envoy Gateway's own chart), reads the EnvoyGateway configuration
// Envoy Gateway would load (strictly, into Envoy Gateway's API types), and
// checks that it calls igw's extension server with what pkg/egext needs.
// (Envoy Gateway's own validator package needs a module go.sum lacks; the
// checks below cover what it asks of an extension manager: hooks and exactly
// one service target.)
func TestEnvoyGatewayValues(t *testing.T) {
	// The file on its own: every key is a field of Envoy Gateway's API.
	var file struct {
		Config struct {
			EnvoyGateway egv1a1.EnvoyGatewaySpec `json:"envoyGateway"`
		} `json:"config"`
	}
	data, err := os.ReadFile(envoyGatewayValues)
	if err != nil {
		t.Fatal(err)
	}
	if err := yaml.UnmarshalStrict(data, &file); err != nil {
		t.Fatalf("%s does not match Envoy Gateway's configuration API: %v", envoyGatewayValues, err)
	}

	out, err := helm(t, "template", "eg", envoyGatewayChart(t), "--namespace", "envoy-gateway-system",
		"--set", "crds.enabled=false", "-f", envoyGatewayValues, "--show-only", "templates/envoy-gateway-config.yaml")
	if err != nil {
		t.Fatal(err)
	}
	objs := decodeObjects(t, out)
	if len(objs) != 1 || objs[0].GetName() != "envoy-gateway-config" {
		t.Fatalf("Envoy Gateway's chart rendered %v", objs)
	}
	raw, _, _ := unstructured.NestedString(objs[0].Object, "data", "envoy-gateway.yaml")
	var eg egv1a1.EnvoyGateway
	if err := yaml.UnmarshalStrict([]byte(raw), &eg); err != nil {
		t.Fatalf("Envoy Gateway's configuration: %v\n%s", err, raw)
	}
	if eg.Provider == nil || eg.Provider.Type != egv1a1.ProviderTypeKubernetes || eg.Gateway == nil {
		t.Errorf("the chart's own defaults were lost in the merge:\n%s", raw)
	}

	em := eg.ExtensionManager
	if em == nil {
		t.Fatalf("no extensionManager in Envoy Gateway's configuration:\n%s", raw)
	}
	hooks := em.Hooks.XDSTranslator
	// pkg/egext implements PostTranslateModify only, which the "Translation" post hook calls.
	if !reflect.DeepEqual(hooks.Post, []egv1a1.XDSTranslatorHook{egv1a1.XDSTranslation}) || len(hooks.Pre) > 0 {
		t.Errorf("hooks pre %v post %v, want post [%s] only", hooks.Pre, hooks.Post, egv1a1.XDSTranslation)
	}
	tc := hooks.Translation
	if !tc.ShouldIncludeListeners() || !tc.ShouldIncludeRoutes() {
		t.Error("the hook rewrites listeners and routes: translation.listener and translation.route need includeAll: true")
	}
	if tc.ShouldIncludeSecrets() || tc.ShouldIncludeClusters() {
		t.Error("the hook needs no clusters or secrets: translation.cluster and translation.secret should set includeAll: false")
	}
	if len(em.BackendResources)+len(em.Resources)+len(em.PolicyResources) > 0 {
		t.Errorf("the extension handles no resources of its own: backendResources %v, resources %v, policyResources %v",
			em.BackendResources, em.Resources, em.PolicyResources)
	}
	if em.FailOpen {
		t.Error("failOpen: a hook error would push configuration where pickers are skipped")
	}
	if em.MaxMessageSize == nil || em.MaxMessageSize.Value() != egext.MaxMessageBytes {
		t.Errorf("maxMessageSize %v, want the server's limit of %d bytes", em.MaxMessageSize, egext.MaxMessageBytes)
	}
	if em.Service == nil || em.Service.FQDN == nil || em.Service.IP != nil || em.Service.Unix != nil ||
		//lint:ignore SA1019 the deprecated host must stay unset beside the fqdn.
		em.Service.Host != "" || em.Service.TLS != nil {
		t.Fatalf("service %+v: want exactly one target, a plaintext fqdn", em.Service)
	}

	// The FQDN and port are those of the extension server Service the igw chart
	// renders with its defaults, in the namespace the values file documents.
	r := template(t)
	svc := get[corev1.Service](t, r, "Service", "igw-extension-server")
	fqdn := fmt.Sprintf("%s.%s.svc.cluster.local", svc.Name, svc.Namespace)
	if em.Service.FQDN.Hostname != fqdn || em.Service.FQDN.Port != svc.Spec.Ports[0].Port {
		t.Errorf("Envoy Gateway calls %s:%d; the igw chart serves the hook at %s:%d",
			em.Service.FQDN.Hostname, em.Service.FQDN.Port, fqdn, svc.Spec.Ports[0].Port)
	}
}

// TestKustomizeServesTheSameExtensionServer checks that the kustomize install
// (config/default, which the OLM bundle is also built from) exposes the
// extension server where envoy-gateway-values.yaml points, as the chart does.
func TestKustomizeServesTheSameExtensionServer(t *testing.T) {
	r := kustomize(t, "../config/default")
	d := get[appsv1.Deployment](t, r, "Deployment", "igw-controller-manager")
	opts := operatorFlags(t, managerContainer(t, d))
	if opts.ExtensionServerAddr == "" || opts.ExtensionServerAddr == "0" {
		t.Fatalf("config/default turns the extension server off (%q)", opts.ExtensionServerAddr)
	}
	svc := get[corev1.Service](t, r, "Service", "igw-extension-server")
	checkServiceReaches(t, svc, d, "grpc", portOf(t, opts.ExtensionServerAddr))
	chart := get[corev1.Service](t, template(t), "Service", "igw-extension-server")
	if svc.Namespace != chart.Namespace || svc.Spec.Ports[0].Port != chart.Spec.Ports[0].Port {
		t.Errorf("config/default serves the hook at %s.%s:%d, the chart (and envoy-gateway-values.yaml) at %s.%s:%d",
			svc.Name, svc.Namespace, svc.Spec.Ports[0].Port, chart.Name, chart.Namespace, chart.Spec.Ports[0].Port)
	}
}

// TestServerSideDryRun sends the rendered objects to the real API server
// (internal/testenv) as a server-side dry-run apply, so that schema and
// validation errors show. It runs when KUBEBUILDER_ASSETS points at the
// control plane binaries (`make test` sets it).
func TestServerSideDryRun(t *testing.T) {
	if os.Getenv("KUBEBUILDER_ASSETS") == "" {
		t.Skip("KUBEBUILDER_ASSETS is not set (KUBEBUILDER_ASSETS=$(hack/control-plane.sh))")
	}
	env, err := testenv.Start(testenv.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = env.Stop() })
	overrides := filepath.Join(t.TempDir(), "values.yaml")
	// The Prometheus Operator's CRDs are not installed there: no monitors.
	noMonitors := strings.NewReplacer("serviceMonitor: {enabled: true", "serviceMonitor: {enabled: false",
		"podMonitors: {enabled: true", "podMonitors: {enabled: false", "prometheusRule: {enabled: true", "prometheusRule: {enabled: false")
	writeFile(t, overrides, noMonitors.Replace(overrideValues))
	for _, c := range []struct {
		name, namespace string
		args            []string
	}{
		{"defaults", namespace, nil},
		{"overridden", "inference-ops", []string{"-f", overrides}},
		{"templated CRDs", "igw-crds", []string{"--set", "crds.templated=true"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			for _, ns := range []string{c.namespace, "grafana"} {
				if _, err := env.Kubectl("create", "namespace", ns); err != nil && !strings.Contains(err.Error(), "AlreadyExists") {
					t.Fatal(err)
				}
			}
			c.args = append(c.args, "--namespace", c.namespace)
			r := template(t, c.args...)
			file := filepath.Join(t.TempDir(), "rendered.yaml")
			writeFile(t, file, r.text)
			// --force-conflicts: the CRDs exist already, applied by the test environment.
			out, err := env.Kubectl("apply", "--server-side", "--dry-run=server", "--field-manager=helm", "--force-conflicts", "-f", file)
			if err != nil {
				t.Fatal(err)
			}
			if n := strings.Count(out, "serverside-applied"); n != len(r.objects) {
				t.Errorf("%d of %d objects applied:\n%s", n, len(r.objects), out)
			}
		})
	}
}

func writeFile(t *testing.T, path, content string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestSchemaRejectsBadValues renders values that values.schema.json must
// refuse, each with the path Helm's message must name, and a good value of
// each kind that it must accept.
func TestSchemaRejectsBadValues(t *testing.T) {
	for _, c := range []struct{ set, path string }{
		{"replicas=abc", "/replicas"},
		{"replicas=-1", "/replicas"},
		{"replica=2", "additional properties 'replica'"},
		{"image.tags=v1", "additional properties 'tags'"},
		{"image.pullPolicy=Sometimes", "/image/pullPolicy"},
		{"image.tag=v1 0", "/image/tag"},
		{"metrics.port=abc", "/metrics/port"},
		{"extensionServer.port=0", "/extensionServer/port"},
		{"logLevel=loud", "/logLevel"},
		{"syncPeriod=2hours", "/syncPeriod"},
		{"podDisruptionBudget.maxUnavailable=half", "/podDisruptionBudget/maxUnavailable"},
		{"topologySpread.whenUnsatisfiable=Never", "/topologySpread/whenUnsatisfiable"},
		{"watchNamespace=Models", "/watchNamespace"},
		{"extraArgs[0]=zap-devel", "/extraArgs/0"},
		{"monitoring.dashboard.enabled=yes", "/monitoring/dashboard/enabled"},
		{"crds.templated=1", "/crds/templated"},
	} {
		_, err := helm(t, "template", release, chartDir, "--kube-version", kubeVersion, "--set", c.set)
		if err == nil {
			t.Errorf("--set %s rendered", c.set)
		} else if !strings.Contains(err.Error(), "schema") || !strings.Contains(err.Error(), c.path) {
			t.Errorf("--set %s: the error does not name %s:\n%v", c.set, c.path, err)
		}
		if out, err := helm(t, "lint", "--strict", chartDir, "--kube-version", kubeVersion, "--set", c.set); err == nil {
			t.Errorf("helm lint --strict passes --set %s:\n%s", c.set, out)
		}
	}
	for _, set := range []string{"replicas=3", "syncPeriod=1h30m", "logLevel=2", "podDisruptionBudget.minAvailable=50%", "image.tag=v0.2.0-rc.1"} {
		if _, err := helm(t, "template", release, chartDir, "--kube-version", kubeVersion, "--set", set); err != nil {
			t.Errorf("--set %s: %v", set, err)
		}
	}
}

func TestKubeVersion(t *testing.T) {
	_, err := helm(t, "template", release, chartDir, "--kube-version", "1.29.9")
	if err == nil || !strings.Contains(err.Error(), "kubeVersion") {
		t.Errorf("Kubernetes 1.29 accepted: %v", err)
	}
}

// TestTemplatedCRDs checks the opt-in: the CRDs of crds/ rendered as templates,
// unchanged but for Helm's labels and the keep policy.
func TestTemplatedCRDs(t *testing.T) {
	if template(t).find("CustomResourceDefinition", "") != nil {
		t.Fatal("CRDs are templated by default; Helm's crds/ install is the default")
	}
	r := template(t, "--set", "crds.templated=true")
	for _, file := range []string{"gateway.igw.dev_inferencegatewayconfigs.yaml", "gateway.igw.dev_modelroutes.yaml"} {
		want := readYAML[unstructured.Unstructured](t, "config/crd/bases/"+file)
		got := r.find("CustomResourceDefinition", want.GetName())
		if got == nil {
			t.Errorf("CRD %s not templated; objects %v", want.GetName(), r.kinds())
			continue
		}
		if got.GetAnnotations()["helm.sh/resource-policy"] != "keep" {
			t.Errorf("CRD %s lacks helm.sh/resource-policy: keep: uninstalling would delete every object of the kind", got.GetName())
		}
		if got.GetLabels()["app.kubernetes.io/managed-by"] != "Helm" {
			t.Errorf("CRD %s lacks the chart's labels: %v", got.GetName(), got.GetLabels())
		}
		if !sameJSON(got.Object["spec"], want.Object["spec"]) {
			t.Errorf("the templated CRD %s differs from config/crd/bases/%s", got.GetName(), file)
		}
		for k, v := range want.GetAnnotations() {
			if got.GetAnnotations()[k] != v {
				t.Errorf("CRD %s lost annotation %s=%s", got.GetName(), k, v)
			}
		}
	}
}

// TestMonitoring checks the opt-in monitoring objects against config/prometheus,
// which the kustomize install applies and test/monitoring checks against the
// binaries: the same alerts, the same dashboard, PodMonitors that select the
// pods the operator renders.
func TestMonitoring(t *testing.T) {
	r := template(t, "--set", "monitoring.podMonitors.enabled=true", "--set", "monitoring.prometheusRule.enabled=true",
		"--set", "monitoring.dashboard.enabled=true")
	rule := r.find("PrometheusRule", "igw-alerts")
	want := readYAML[unstructured.Unstructured](t, "config/prometheus/prometheusrule.yaml")
	if rule == nil || !sameJSON(rule.Object["spec"], want.Object["spec"]) {
		t.Errorf("the chart's PrometheusRule differs from config/prometheus/prometheusrule.yaml (run make manifests)")
	}
	cm := r.find("ConfigMap", "igw-grafana-dashboard")
	dashboard, err := os.ReadFile("../config/prometheus/dashboards/igw.json")
	if err != nil {
		t.Fatal(err)
	}
	if cm == nil || cm.GetLabels()["grafana_dashboard"] != "1" {
		t.Fatalf("dashboard ConfigMap %v", cm)
	}
	if got, _, _ := unstructured.NestedString(cm.Object, "data", "igw.json"); got != strings.TrimSuffix(string(dashboard), "\n") {
		t.Errorf("the chart's dashboard differs from config/prometheus/dashboards/igw.json (run make manifests)")
	}

	kustomized := kustomize(t, "../config/prometheus")
	for _, name := range []string{"endpoint-pickers", "body-based-routers"} {
		got := r.find("PodMonitor", "igw-"+name)
		want := kustomized.find("PodMonitor", "igw-"+name)
		if got == nil || want == nil {
			t.Fatalf("PodMonitor %s: chart %v, kustomize %v", name, got != nil, want != nil)
		}
		if !sameJSON(got.Object["spec"], want.Object["spec"]) {
			t.Errorf("PodMonitor %s: the chart's spec %v differs from config/prometheus's %v", name, got.Object["spec"], want.Object["spec"])
		}
	}
	for _, c := range []struct {
		monitor, component string
		owner              map[string]string
	}{
		{"igw-endpoint-pickers", "epp", map[string]string{"app.kubernetes.io/name": "igw-epp"}},
		{"igw-body-based-routers", "bbr", map[string]string{"app.kubernetes.io/name": "igw-bbr"}},
	} {
		sel, _, _ := unstructured.NestedStringMap(r.find("PodMonitor", c.monitor).Object, "spec", "selector", "matchLabels")
		if !reflect.DeepEqual(sel, c.owner) {
			t.Errorf("%s selects %v, want the %s pods' %v", c.monitor, sel, c.component, c.owner)
		}
	}
}

// kustomize builds a kustomization of the repository.
func kustomize(t *testing.T, dir string) rendered {
	t.Helper()
	resources, err := krusty.MakeKustomizer(krusty.MakeDefaultOptions()).Run(filesys.MakeFsOnDisk(), dir)
	if err != nil {
		t.Fatal(err)
	}
	data, err := resources.AsYaml()
	if err != nil {
		t.Fatal(err)
	}
	return rendered{text: string(data), objects: decodeObjects(t, string(data))}
}

func TestNetworkPolicies(t *testing.T) {
	if r := template(t); len(r.all("NetworkPolicy")) > 0 {
		t.Error("NetworkPolicies are rendered without networkPolicy.enabled")
	}
	r := template(t, "--set", "networkPolicy.enabled=true", "--set", "networkPolicy.envoyGatewayNamespace=eg")
	d := get[appsv1.Deployment](t, r, "Deployment", "igw")
	opts := operatorFlags(t, managerContainer(t, d))
	podLabels := labels.Set(d.Spec.Template.Labels)
	for name, want := range map[string]struct {
		namespace string
		port      int32
	}{
		"igw-allow-metrics-traffic":          {"monitoring", portOf(t, opts.MetricsAddr)},
		"igw-allow-extension-server-traffic": {"eg", portOf(t, opts.ExtensionServerAddr)},
	} {
		np := get[networkingv1.NetworkPolicy](t, r, "NetworkPolicy", name)
		sel, err := metav1.LabelSelectorAsSelector(&np.Spec.PodSelector)
		if err != nil || !sel.Matches(podLabels) {
			t.Errorf("%s does not select the operator's pods: %v", name, err)
		}
		in := np.Spec.Ingress
		if len(in) != 1 || len(in[0].From) != 1 || in[0].From[0].NamespaceSelector.MatchLabels["kubernetes.io/metadata.name"] != want.namespace ||
			len(in[0].Ports) != 1 || in[0].Ports[0].Port.IntVal != want.port {
			t.Errorf("%s lets in %+v, want port %d from namespace %s only", name, in, want.port, want.namespace)
		}
	}
	egress := get[networkingv1.NetworkPolicy](t, r, "NetworkPolicy", "igw-allow-api-server-egress")
	if len(egress.Spec.Egress) != 3 || len(egress.Spec.Ingress) > 0 {
		t.Errorf("egress policy %+v, want the API server, DNS and global picker status rules only", egress.Spec)
	} else if pk := egress.Spec.Egress[2]; len(pk.To) != 1 || pk.To[0].PodSelector.MatchLabels["app.kubernetes.io/name"] != render.NameGlobalPicker ||
		len(pk.Ports) != 1 || pk.Ports[0].Port.IntVal != render.GlobalMetricsPort {
		t.Errorf("egress rule %+v, want the global pickers' metrics port %d only", pk, render.GlobalMetricsPort)
	}
	// config/network-policy has the same policies, selecting config/default's operator pods.
	k := kustomize(t, "../config/network-policy")
	if len(k.all("NetworkPolicy")) != len(r.all("NetworkPolicy")) {
		t.Errorf("config/network-policy has %d policies, the chart %d", len(k.all("NetworkPolicy")), len(r.all("NetworkPolicy")))
	}
	kd := get[appsv1.Deployment](t, kustomize(t, "../config/default"), "Deployment", "igw-controller-manager")
	chartDefaults := template(t, "--set", "networkPolicy.enabled=true")
	for _, o := range k.all("NetworkPolicy") {
		kp := get[networkingv1.NetworkPolicy](t, k, "NetworkPolicy", o.GetName())
		cp := get[networkingv1.NetworkPolicy](t, chartDefaults, "NetworkPolicy", o.GetName())
		if !reflect.DeepEqual(kp.Spec.Ingress, cp.Spec.Ingress) || !reflect.DeepEqual(kp.Spec.Egress, cp.Spec.Egress) ||
			!reflect.DeepEqual(kp.Spec.PolicyTypes, cp.Spec.PolicyTypes) {
			t.Errorf("%s: config/network-policy %+v, the chart %+v", o.GetName(), kp.Spec, cp.Spec)
		}
		sel, err := metav1.LabelSelectorAsSelector(&kp.Spec.PodSelector)
		if err != nil || !sel.Matches(labels.Set(kd.Spec.Template.Labels)) || kp.Namespace != kd.Namespace {
			t.Errorf("%s does not select config/default's operator pods: %v", o.GetName(), err)
		}
	}
}

// TestSecureMetricsScrape: the chart's ServiceMonitor scrapes the HTTPS
// endpoint the way config/prometheus' does.
func TestSecureMetricsScrape(t *testing.T) {
	r := template(t, "--set", "metrics.serviceMonitor.enabled=true")
	got, _, _ := unstructured.NestedSlice(r.find("ServiceMonitor", "igw-metrics").Object, "spec", "endpoints")
	want := readYAML[map[string]any](t, "config/prometheus/servicemonitor.yaml")
	wantEndpoints, _, _ := unstructured.NestedSlice(*want, "spec", "endpoints")
	if len(got) != 1 || len(wantEndpoints) != 1 {
		t.Fatalf("endpoints %v, want one as in config/prometheus: %v", got, wantEndpoints)
	}
	for _, field := range []string{"scheme", "bearerTokenFile", "tlsConfig", "path"} {
		g, w := got[0].(map[string]any)[field], wantEndpoints[0].(map[string]any)[field]
		if w == nil || !reflect.DeepEqual(g, w) {
			t.Errorf("endpoint %s: chart %v, config/prometheus %v", field, g, w)
		}
	}
}
