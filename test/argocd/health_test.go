// Package argocd tests the Argo CD health checks of config/argocd with the Lua
// interpreter Argo CD's own health checks run on (gopher-lua), on the
// InferenceGatewayConfig and ModelRoute objects the real reconcilers write on
// the local control plane.
package argocd

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	lua "github.com/yuin/gopher-lua"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	igwv1 "github.com/igw-dev/igw/api/v1alpha1"
	"github.com/igw-dev/igw/controllers"
	"github.com/igw-dev/igw/internal/testenv"
	"github.com/igw-dev/igw/internal/testenv/fixtures"
	"github.com/igw-dev/igw/pkg/manager"
	"github.com/igw-dev/igw/pkg/render"
	"github.com/igw-dev/igw/pkg/wire"
)

const (
	watched   = "models"
	unwatched = "elsewhere"
)

// health runs script on obj as Argo CD does: obj is a global table of the
// object, and the script returns a table with status and message.
func health(t *testing.T, script string, obj client.Object) (status, message string) {
	t.Helper()
	m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(obj)
	if err != nil {
		t.Fatal(err)
	}
	L := lua.NewState(lua.Options{SkipOpenLibs: false})
	defer L.Close()
	L.SetGlobal("obj", toLua(L, m))
	if err := L.DoString(script); err != nil {
		t.Fatalf("the health check fails to run: %v", err)
	}
	ret, ok := L.Get(-1).(*lua.LTable)
	if !ok {
		t.Fatalf("the health check returned %v, not a table", L.Get(-1))
	}
	return lua.LVAsString(ret.RawGetString("status")), lua.LVAsString(ret.RawGetString("message"))
}

// toLua converts decoded JSON the way Argo CD hands objects to Lua.
func toLua(L *lua.LState, v any) lua.LValue {
	switch x := v.(type) {
	case map[string]any:
		t := L.NewTable()
		for k, e := range x {
			t.RawSetString(k, toLua(L, e))
		}
		return t
	case []any:
		t := L.NewTable()
		for _, e := range x {
			t.Append(toLua(L, e))
		}
		return t
	case string:
		return lua.LString(x)
	case bool:
		return lua.LBool(x)
	case int64:
		return lua.LNumber(x)
	case float64:
		return lua.LNumber(x)
	case nil:
		return lua.LNil
	}
	return lua.LString("")
}

func scripts(t *testing.T) map[string]string {
	t.Helper()
	root := testenv.RepoRoot()
	file, err := os.ReadFile(filepath.Join(root, "config", "argocd", "health", "health.lua"))
	if err != nil {
		t.Fatal(err)
	}
	var cm struct {
		Data map[string]string `json:"data"`
	}
	data, err := os.ReadFile(filepath.Join(root, "config", "argocd", "argocd-cm.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if err := yaml.UnmarshalStrict(data, &cm); err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, kind := range []string{"InferenceGatewayConfig", "ModelRoute", "GlobalInferenceGateway"} {
		key := "resource.customizations.health." + igwv1.GroupVersion.Group + "_" + kind
		s, ok := cm.Data[key]
		if !ok {
			t.Fatalf("argocd-cm.yaml has no %s", key)
		}
		if s != string(file) {
			t.Errorf("argocd-cm.yaml's %s differs from health/health.lua", key)
		}
		out[kind] = s
	}
	return out
}

func TestHealthOnRealObjects(t *testing.T) {
	// The real deployment controller and kwok's node bring the
	// Deployments the operator renders, and the model's, up.
	env := testenv.StartFor(t, "the health checks run on the API server's objects", testenv.Options{ExtraCRDDirs: testenv.ExternalCRDDirs,
		Controllers: testenv.WorkloadControllers, Nodes: &testenv.Nodes{PodCIDR: "127.0.91.0/24"}})
	check := scripts(t)
	k8s := env.ClientFor(t, manager.NewScheme)
	ctx := context.Background()
	for _, ns := range []string{watched, unwatched} {
		if err := fixtures.Namespace(ctx, k8s, ns); err != nil {
			t.Fatal(err)
		}
	}
	if err := k8s.Create(ctx, testenv.NewNode("node-0", nil)); err != nil {
		t.Fatal(err)
	}
	// The operator watches one namespace, so objects elsewhere stay as created.
	// The global picker's GET /status, as the test sets it.
	var report atomic.Pointer[controllers.PickerReport]
	pickerStatus := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		r := report.Load()
		if r == nil {
			http.Error(w, "no report", http.StatusServiceUnavailable)
			return
		}
		_ = json.NewEncoder(w).Encode(r)
	}))
	t.Cleanup(pickerStatus.Close)
	op, err := manager.New(env.Config, &manager.Options{MetricsAddr: "0", ProbeAddr: "0", SyncPeriod: time.Hour,
		WatchNamespace: watched, EPPImage: "epp:test", BBRImage: "bbr:test", GlobalPickerImage: "global:test", MaxConcurrentReconciles: 2,
		GlobalPickerStatus: controllers.HTTPPickerStatus{URL: func(string, string) string { return pickerStatus.URL + "/status" }}})
	if err != nil {
		t.Fatal(err)
	}
	opCtx, stop := context.WithCancel(ctx)
	stopped := make(chan error, 1)
	go func() { stopped <- op.Start(opCtx) }()
	t.Cleanup(stop)

	newConfig := func(ns string) *igwv1.InferenceGatewayConfig {
		return &igwv1.InferenceGatewayConfig{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "igw"},
			Spec: igwv1.InferenceGatewayConfigSpec{Gateway: igwv1.GatewaySpec{Ref: &igwv1.GatewayRef{Name: "gw"}}}}
	}
	newRoute := func(ns string) *igwv1.ModelRoute {
		return &igwv1.ModelRoute{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "llama"},
			Spec: igwv1.ModelRouteSpec{ConfigRef: igwv1.ObjectName{Name: "igw"}, Models: []igwv1.ModelName{"llama"},
				Selector: igwv1.ModelServerSelector{MatchLabels: map[string]string{"app": "llama"}}}}
	}
	want := func(what string, obj client.Object, status, inMessage string) {
		t.Helper()
		for _, kind := range []string{"InferenceGatewayConfig", "ModelRoute"} {
			if _, ok := obj.(*igwv1.ModelRoute); ok != (kind == "ModelRoute") {
				continue
			}
			got, msg := health(t, check[kind], obj)
			if got != status || !strings.Contains(msg, inMessage) {
				t.Errorf("%s: %s health %s (%q), want %s with %q", what, kind, got, msg, status, inMessage)
			}
		}
	}
	// eventually waits until the object read back satisfies ok.
	eventually := func(obj client.Object, ok func() bool) {
		t.Helper()
		deadline := time.Now().Add(30 * time.Second)
		for {
			if err := k8s.Get(ctx, client.ObjectKeyFromObject(obj), obj); err != nil {
				t.Fatal(err)
			}
			if ok() {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s/%s never reached the state: %+v", obj.GetNamespace(), obj.GetName(), obj)
			}
			time.Sleep(100 * time.Millisecond)
		}
	}

	// No status yet: Progressing.
	for _, o := range []client.Object{newConfig(unwatched), newRoute(unwatched)} {
		if err := k8s.Create(ctx, o); err != nil {
			t.Fatal(err)
		}
		if err := k8s.Get(ctx, client.ObjectKeyFromObject(o), o); err != nil {
			t.Fatal(err)
		}
		want("never reconciled", o, "Progressing", "generation 1")
	}

	// A hub in a namespace without an InferenceGatewayConfig: Degraded.
	hub := newHub(t, ctx, k8s, watched, &report)
	hub.eventually(t, "without a config", func() bool { return hub.ready() == "False/"+igwv1.ReasonConfigNotFound })
	hub.want(t, "no config", "Degraded", igwv1.ReasonConfigNotFound)

	// The hub's picker reports every member in rotation from its start: the
	// operator reads the report when the picker's Deployment turns available,
	// which it does as soon as the config below lets the operator render it.
	hub.report(t, "")

	// Reconciled, nothing serving yet (Gateway not programmed, no model pods): Degraded.
	if _, err := fixtures.Gateway(ctx, k8s, watched, "gw"); err != nil {
		t.Fatal(err)
	}
	cfg, mr := newConfig(watched), newRoute(watched)
	for _, o := range []client.Object{cfg, mr} {
		if err := k8s.Create(ctx, o); err != nil {
			t.Fatal(err)
		}
	}
	eventually(cfg, func() bool { return cfg.Status.ObservedGeneration == cfg.Generation })
	eventually(mr, func() bool { return mr.Status.ObservedGeneration == mr.Generation })
	want("gateway not programmed", cfg, "Degraded", "")
	want("no model server pods", mr, "Degraded", "selector")

	// Everything up (a fixture plays Envoy Gateway; the model's Pod and
	// the operator's Deployments run on kwok's node): Healthy.
	if err := fixtures.ProgramGateway(ctx, k8s, watched, "gw"); err != nil {
		t.Fatal(err)
	}
	labels := map[string]string{"app": "llama"}
	if err := k8s.Create(ctx, &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: watched, Name: "llama"},
		Spec: appsv1.DeploymentSpec{Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "vllm", Image: "vllm/vllm-openai:latest"}}}}}}); err != nil {
		t.Fatal(err)
	}
	for _, d := range []string{"llama", render.NamesForConfig("igw").BBR, render.NamesForRoute("llama").EPP} {
		eventuallyAvailable(t, ctx, k8s, watched, d)
	}
	eventually(cfg, func() bool { return fixtures.Condition(cfg.Status.Conditions, igwv1.ConditionReady) == "True/Ready" })
	eventually(mr, func() bool { return fixtures.Condition(mr.Status.Conditions, igwv1.ConditionReady) == "True/Ready" })
	want("serving", cfg, "Healthy", "")
	want("serving", mr, "Healthy", "endpoints ready")

	// The hub's picker up with both members in rotation: Healthy; one member
	// ejected: the hub still routes (Ready True), but Degraded, naming it.
	eventuallyAvailable(t, ctx, k8s, watched, render.NamesForGlobal(hub.gig).Picker)
	hub.eventually(t, "all members in rotation", func() bool { return hub.ready() == "True/Ready" && hub.gig.Status.MembersInRotation == 2 })
	hub.want(t, "all members in rotation", "Healthy", "2 of 2 members in rotation")
	hub.report(t, "ejected for 2s: 3 consecutive request failures")
	hub.eventually(t, "one member out", func() bool { return hub.gig.Status.MembersInRotation == 1 })
	hub.want(t, "one member out of rotation", "Degraded", "1 of 2 members in rotation; out of rotation: euw1 (ejected for 2s: 3 consecutive request failures)")

	// A spec change the operator has not observed yet: Progressing again. The
	// operator is stopped first, so the status stays the one it wrote.
	stop()
	if err := <-stopped; err != nil {
		t.Fatal(err)
	}
	patch := []byte(`{"spec":{"requestTimeout":"30s"}}`)
	if err := k8s.Patch(ctx, mr, client.RawPatch(types.MergePatchType, patch)); err != nil {
		t.Fatal(err)
	}
	if err := k8s.Get(ctx, client.ObjectKeyFromObject(mr), mr); err != nil {
		t.Fatal(err)
	}
	if mr.Status.ObservedGeneration >= mr.Generation {
		t.Fatalf("generation %d, observed %d: the patch did not change the spec", mr.Generation, mr.Status.ObservedGeneration)
	}
	want("spec changed", mr, "Progressing", "generation 2")
	if err := k8s.Patch(ctx, hub.gig, client.RawPatch(types.MergePatchType, []byte(`{"spec":{"models":[{"name":"llama"},{"name":"qwen"}]}}`))); err != nil {
		t.Fatal(err)
	}
	hub.want(t, "spec changed", "Progressing", "generation 2")
}

// globalHub is a GlobalInferenceGateway over two members whose picker
// status the test serves.
type globalHub struct {
	ctx     context.Context
	k8s     client.Client
	gig     *igwv1.GlobalInferenceGateway
	check   string
	members []igwv1.GlobalMember
	status  *atomic.Pointer[controllers.PickerReport]
}

func newHub(t *testing.T, ctx context.Context, k8s client.Client, ns string, status *atomic.Pointer[controllers.PickerReport]) *globalHub {
	t.Helper()
	h := &globalHub{ctx: ctx, k8s: k8s, check: scripts(t)["GlobalInferenceGateway"], status: status}
	for i, name := range []string{"use1", "euw1"} {
		region := []string{"us-east-1", "eu-west-1"}[i]
		h.members = append(h.members, igwv1.GlobalMember{Name: name, Region: igwv1.RegionName(region), Address: fmt.Sprintf("10.%d.0.10:18080", i+1),
			SummaryURL: fmt.Sprintf("http://10.%d.0.10:18080%s", i+1, wire.GlobalSummaryPath), CredentialsSecretRef: igwv1.SecretKeyRef{Name: name + "-token"}})
		if err := k8s.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name + "-token"},
			StringData: map[string]string{"token": "token-of-" + name + "-0123456789"}}); err != nil {
			t.Fatal(err)
		}
	}
	h.gig = &igwv1.GlobalInferenceGateway{ObjectMeta: metav1.ObjectMeta{Name: "fabric"},
		Spec: igwv1.GlobalInferenceGatewaySpec{Namespace: ns, Members: h.members, Models: []igwv1.GlobalModel{{Name: "llama"}}}}
	if err := k8s.Create(ctx, h.gig); err != nil {
		t.Fatal(err)
	}
	return h
}

func (h *globalHub) ready() string {
	return fixtures.Condition(h.gig.Status.Conditions, igwv1.ConditionReady)
}

// want reads the hub back and checks its health.
func (h *globalHub) want(t *testing.T, what, status, inMessage string) {
	t.Helper()
	if err := h.k8s.Get(h.ctx, client.ObjectKeyFromObject(h.gig), h.gig); err != nil {
		t.Fatal(err)
	}
	if got, msg := health(t, h.check, h.gig); got != status || !strings.Contains(msg, inMessage) {
		t.Errorf("hub %s: health %s (%q), want %s with %q", what, got, msg, status, inMessage)
	}
}

// eventually waits until the operator has observed the hub's generation and ok holds.
func (h *globalHub) eventually(t *testing.T, what string, ok func() bool) {
	t.Helper()
	// A picker's report is read at the operator's status refresh, every
	// 15 s: room for two of them, and a loaded machine.
	deadline := time.Now().Add(45 * time.Second)
	for {
		if err := h.k8s.Get(h.ctx, client.ObjectKeyFromObject(h.gig), h.gig); err != nil {
			t.Fatal(err)
		}
		if h.gig.Status.ObservedGeneration == h.gig.Generation && ok() {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("hub never %s: %+v", what, h.gig.Status)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// report has the picker report every member in rotation but euw1, which is
// out for outReason unless it is empty.
func (h *globalHub) report(t *testing.T, outReason string) {
	t.Helper()
	r := &controllers.PickerReport{GeneratedAt: time.Now()}
	for _, m := range h.members {
		in := m.Name != "euw1" || outReason == ""
		reason := ""
		if !in {
			reason = outReason
		}
		r.Members = append(r.Members, controllers.PickerMember{Name: m.Name, Region: string(m.Region), Reachable: true,
			SummaryValid: true, InRotation: in, Reason: reason, SummaryAgeSeconds: 0.2, RTTSeconds: 0.01})
	}
	// The operator reads it at its next status refresh (every 15 s while the
	// picker runs): the hub's watch passes generation changes only, so no
	// change of the object would bring the read sooner.
	h.status.Store(r)
}

// eventuallyAvailable waits until the deployment controller reports every
// replica of Deployment ns/name available.
func eventuallyAvailable(t *testing.T, ctx context.Context, c client.Client, ns, name string) {
	t.Helper()
	// Generous: the controllers and kwok share two cores with the test.
	deadline := time.Now().Add(time.Minute)
	for {
		var d appsv1.Deployment
		err := c.Get(ctx, types.NamespacedName{Namespace: ns, Name: name}, &d)
		if err == nil {
			if err = testenv.DeploymentAvailable(&d); err == nil {
				return
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("Deployment %s/%s not available: %v %+v", ns, name, err, d.Status)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// TestHealthOfStatuses covers the cases the real objects above do not: a
// Ready condition missing, and a status without conditions.
func TestHealthOfStatuses(t *testing.T) {
	check := scripts(t)
	for _, c := range []struct {
		name, status, want string
	}{
		{"observed, no conditions", `{"observedGeneration": 3}`, "Healthy"},
		{"observed, Ready missing", `{"observedGeneration": 3, "conditions": [{"type": "Accepted", "status": "True"}]}`, "Healthy"},
		{"observed, Ready False", `{"observedGeneration": 3, "conditions": [{"type": "Ready", "status": "False", "reason": "X", "message": "y"}]}`, "Degraded"},
		{"behind", `{"observedGeneration": 2, "conditions": [{"type": "Ready", "status": "False"}]}`, "Progressing"},
	} {
		var status map[string]any
		if err := yaml.Unmarshal([]byte(c.status), &status); err != nil {
			t.Fatal(err)
		}
		u := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "gateway.igw.dev/v1alpha1", "kind": "ModelRoute",
			"metadata": map[string]any{"name": "x", "generation": int64(3)}, "status": status}}
		if got, msg := health(t, check["ModelRoute"], u); got != c.want {
			t.Errorf("%s: %s (%q), want %s", c.name, got, msg, c.want)
		}
	}
	// A hub's member counts: fewer in rotation than members is Degraded,
	// even without member conditions to name them.
	for _, c := range []struct {
		name, status, want, inMessage string
	}{
		{"all in rotation", `{"observedGeneration": 3, "memberCount": 3, "membersInRotation": 3, "conditions": [{"type": "Ready", "status": "True", "message": "3 of 3 members in rotation"}]}`, "Healthy", "3 of 3"},
		{"one out, no member conditions", `{"observedGeneration": 3, "memberCount": 3, "membersInRotation": 2}`, "Degraded", "2 of 3 members in rotation"},
		{"one out, named", `{"observedGeneration": 3, "memberCount": 2, "membersInRotation": 1, "members": [{"name": "a", "conditions": [{"type": "InRotation", "status": "True"}]}, {"name": "b", "conditions": [{"type": "InRotation", "status": "Unknown", "reason": "MemberNotReported"}]}]}`, "Degraded", "out of rotation: b (MemberNotReported)"},
		{"none in rotation", `{"observedGeneration": 3, "memberCount": 2, "membersInRotation": 0, "conditions": [{"type": "Ready", "status": "False", "reason": "NoMemberInRotation", "message": "no member is in rotation"}]}`, "Degraded", "NoMemberInRotation"},
	} {
		var status map[string]any
		if err := yaml.Unmarshal([]byte(c.status), &status); err != nil {
			t.Fatal(err)
		}
		u := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "gateway.igw.dev/v1alpha1", "kind": "GlobalInferenceGateway",
			"metadata": map[string]any{"name": "x", "generation": int64(3)}, "status": status}}
		if got, msg := health(t, check["GlobalInferenceGateway"], u); got != c.want || !strings.Contains(msg, c.inMessage) {
			t.Errorf("%s: %s (%q), want %s with %q", c.name, got, msg, c.want, c.inMessage)
		}
	}
}
