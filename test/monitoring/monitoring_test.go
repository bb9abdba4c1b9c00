// Package monitoring checks the alerts and the Grafana dashboard of
// config/prometheus (which the Helm chart ships too) with Prometheus' own
// libraries, and against the metrics igw's binaries export: every expression
// parses with the PromQL parser, the rule groups load with Prometheus' rule
// loader, and every metric an expression names appears on a scrape of the
// endpoint picker, the body-based router or the operator after real traffic.
package monitoring

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	pb "github.com/envoyproxy/gateway/proto/extension"
	"github.com/prometheus/common/model"
	"github.com/prometheus/prometheus/model/rulefmt"
	"github.com/prometheus/prometheus/promql/parser"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	igwv1 "github.com/igw-dev/igw/api/v1alpha1"
	"github.com/igw-dev/igw/internal/servetest"
	"github.com/igw-dev/igw/internal/testenv"
	"github.com/igw-dev/igw/internal/testenv/fixtures"
	"github.com/igw-dev/igw/internal/testfile"
	"github.com/igw-dev/igw/pkg/bbr"
	"github.com/igw-dev/igw/pkg/epp/options"
	"github.com/igw-dev/igw/pkg/epp/runner"
	"github.com/igw-dev/igw/pkg/extproctest"
	"github.com/igw-dev/igw/pkg/manager"
	"github.com/igw-dev/igw/pkg/sim"
	"github.com/igw-dev/igw/pkg/sim/simproc"
)

func root() string { return testenv.RepoRoot() }

func log() *slog.Logger { return slog.New(slog.DiscardHandler) }

type expression struct{ where, expr string }

// ruleGroups reads the PrometheusRule's spec as a Prometheus rule file.
func ruleGroups(t *testing.T) []byte {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(root(), "config", "prometheus", "prometheusrule.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var pr struct {
		Spec json.RawMessage `json:"spec"`
	}
	if err := yaml.Unmarshal(data, &pr); err != nil {
		t.Fatal(err)
	}
	out, err := yaml.JSONToYAML(pr.Spec)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func TestRulesLoad(t *testing.T) {
	groups, errs := rulefmt.Parse(ruleGroups(t), false, model.LegacyValidation, parser.NewParser(parser.Options{}), log())
	for _, err := range errs {
		t.Error(err)
	}
	if groups == nil {
		t.Fatal("no rule groups")
	}
	n := 0
	for _, g := range groups.Groups {
		for _, r := range g.Rules {
			n++
			if r.Alert == "" {
				t.Errorf("group %s has a recording rule %s; the file is for alerts", g.Name, r.Record)
			}
			if sev := r.Labels["severity"]; sev != "warning" && sev != "critical" {
				t.Errorf("alert %s: severity %q, want warning or critical", r.Alert, sev)
			}
			if r.Annotations["summary"] == "" || r.Annotations["description"] == "" {
				t.Errorf("alert %s lacks a summary or description", r.Alert)
			}
		}
	}
	if n < 10 {
		t.Errorf("%d alerts; the file should hold the picker, router, operator and hook alerts", n)
	}
	// The loader must refuse what Prometheus would refuse.
	if _, errs := rulefmt.Parse([]byte("groups:\n- name: x\n  rules:\n  - alert: A\n    expr: sum(\n"), false, model.LegacyValidation, parser.NewParser(parser.Options{}), log()); len(errs) == 0 {
		t.Error("a broken expression loaded")
	}
}

func expressions(t *testing.T) []expression {
	t.Helper()
	var out []expression
	var rules struct {
		Groups []struct {
			Rules []struct{ Alert, Expr string } `json:"rules"`
		} `json:"groups"`
	}
	if err := yaml.Unmarshal(ruleGroups(t), &rules); err != nil {
		t.Fatal(err)
	}
	for _, g := range rules.Groups {
		for _, r := range g.Rules {
			out = append(out, expression{"alert " + r.Alert, r.Expr})
		}
	}
	data, err := os.ReadFile(filepath.Join(root(), "config", "prometheus", "dashboards", "igw.json"))
	if err != nil {
		t.Fatal(err)
	}
	var dash struct {
		Panels []struct {
			Title   string `json:"title"`
			Type    string `json:"type"`
			Targets []struct {
				Expr string `json:"expr"`
			} `json:"targets"`
		} `json:"panels"`
		Templating struct {
			List []struct {
				Name  string `json:"name"`
				Query any    `json:"query"`
			} `json:"list"`
		} `json:"templating"`
	}
	if err := json.Unmarshal(data, &dash); err != nil {
		t.Fatal(err)
	}
	for _, p := range dash.Panels {
		if p.Type != "row" && len(p.Targets) == 0 {
			t.Errorf("panel %q has no query", p.Title)
		}
		for _, tg := range p.Targets {
			out = append(out, expression{"panel " + p.Title, grafana(tg.Expr)})
		}
	}
	labelValues := regexp.MustCompile(`^label_values\((.+),\s*\w+\)$`)
	for _, v := range dash.Templating.List {
		q, ok := v.Query.(map[string]any)
		if !ok {
			continue
		}
		s, _ := q["query"].(string)
		m := labelValues.FindStringSubmatch(s)
		if m == nil {
			t.Errorf("variable %s: query %q is not label_values(selector, label)", v.Name, s)
			continue
		}
		out = append(out, expression{"variable " + v.Name, grafana(m[1])})
	}
	return out
}

// grafana replaces the dashboard's variables by values, as Grafana does
// before sending a query.
func grafana(expr string) string {
	return strings.NewReplacer("$__rate_interval", "1m", "$__interval", "30s", "$namespace", ".*", "$model_route", ".*").Replace(expr)
}

// names parses expr and returns the metric names its selectors name.
func names(expr string) ([]string, error) {
	e, err := parser.NewParser(parser.Options{}).ParseExpr(expr)
	if err != nil {
		return nil, err
	}
	var out []string
	parser.Inspect(e, func(n parser.Node, _ []parser.Node) error {
		if vs, ok := n.(*parser.VectorSelector); ok {
			out = append(out, vs.Name)
		}
		return nil
	})
	return out, nil
}

func TestExpressionsParse(t *testing.T) {
	exprs := expressions(t)
	if len(exprs) < 40 {
		t.Errorf("only %d expressions found in the rules and the dashboard", len(exprs))
	}
	for _, e := range exprs {
		ns, err := names(e.expr)
		if err != nil {
			t.Errorf("%s: %v\n%s", e.where, err, e.expr)
			continue
		}
		for _, n := range ns {
			if n == "" {
				t.Errorf("%s: a selector without a metric name: %s", e.where, e.expr)
			}
		}
	}
	if _, err := names("sum(rate(igw_epp_responses_total[5m]) by (code)"); err == nil {
		t.Error("the parser accepts a broken expression")
	}
}

// exported scrapes url and returns the metric family names, with the series
// names a histogram or summary family adds (_bucket, _sum, _count).
func exported(t *testing.T, url string, into map[string]string, who string) {
	t.Helper()
	for name, f := range servetest.Metrics(t, url) {
		if len(f.GetMetric()) == 0 {
			continue
		}
		into[name] = who
		switch f.GetType().String() {
		case "HISTOGRAM", "GAUGE_HISTOGRAM":
			into[name+"_bucket"], into[name+"_sum"], into[name+"_count"] = who, who, who
		case "SUMMARY":
			into[name+"_sum"], into[name+"_count"] = who, who
		}
	}
}

func TestEveryNamedMetricIsExported(t *testing.T) {
	if os.Getenv("KUBEBUILDER_ASSETS") == "" {
		t.Skip("KUBEBUILDER_ASSETS is not set (KUBEBUILDER_ASSETS=$(hack/control-plane.sh)): the operator's metrics need the control plane")
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	have := map[string]string{}
	logger := log()

	// The endpoint picker over a simulated model server, with traffic.
	sim := simproc.Start(t, simproc.Options{Config: sim.Config{GPU: "A10G", Model: "llama-3.1-8b"}, ServedModelName: "m"})
	dir := t.TempDir()
	eps := testfile.Write(t, dir, "endpoints.yaml", fmt.Sprintf("- {address: 127.0.0.1, port: %d}\n", sim.Port))
	eo := options.New()
	eo.EndpointsFile, eo.BindAddress, eo.GRPCPort, eo.HealthPort, eo.MetricsPort = eps, "127.0.0.1", 0, 0, 0
	epp, picker := startExtProc(t, "endpoint picker", eo, runner.New, logger)
	time.Sleep(300 * time.Millisecond) // a few telemetry scrapes
	body := []byte(`{"model":"m","stream":true,"stream_options":{"include_usage":true},"max_tokens":8,"messages":[{"role":"user","content":"hello"}]}`)
	for range 3 {
		req := extproctest.PostJSON("/v1/chat/completions", body)
		req.Response = upstream(t, sim.URL+"/v1/chat/completions", body)
		if _, err := picker.Process(ctx, req); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := picker.Process(ctx, extproctest.PostJSON("/v1/chat/completions", []byte(`{"model":`))); err != nil {
		t.Fatal(err)
	}
	exported(t, "http://"+epp.Addr("metrics")+"/metrics", have, "epp")

	// The body-based router, with a routed request, over files it loads.
	bo := bbr.NewOptions()
	bo.GRPCPort, bo.HealthPort, bo.MetricsPort, bo.ModelsPort, bo.BindAddress = 0, 0, 0, 0, "127.0.0.1"
	bo.AdapterMappingFile, bo.ModelListFile = filepath.Join(dir, "adapters.yaml"), filepath.Join(dir, "models.json")
	router, bc := startExtProc(t, "body-based router", bo, bbr.NewRunner, logger)
	if _, err := bc.Process(ctx, extproctest.PostJSON("/v1/chat/completions", body)); err != nil {
		t.Fatal(err)
	}
	exported(t, "http://"+router.Addr("metrics")+"/metrics", have, "bbr")

	// The operator, electing a leader and reconciling a config.
	env, err := testenv.Start(testenv.Options{ExtraCRDDirs: testenv.ExternalCRDDirs})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = env.Stop() }) // after the operator stops: cleanups run last-in first-out
	addr, hookAddr := servetest.FreeAddr(t), servetest.FreeAddr(t)
	op, err := manager.New(env.Config, &manager.Options{MetricsAddr: addr, ProbeAddr: "0", SyncPeriod: time.Hour,
		LeaderElect: true, LeaderElectionID: manager.NewOptions().LeaderElectionID, LeaderElectionNS: "default",
		EPPImage: "epp:test", BBRImage: "bbr:test", MaxConcurrentReconciles: 1, ExtensionServerAddr: hookAddr})
	if err != nil {
		t.Fatal(err)
	}
	servetest.Serve(t, "operator", func(ctx context.Context, ready chan<- struct{}) error {
		close(ready)
		return op.Start(ctx)
	})
	k8s, err := client.New(env.Config, client.Options{Scheme: op.GetScheme()})
	if err != nil {
		t.Fatal(err)
	}
	cfg := &igwv1.InferenceGatewayConfig{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "igw"},
		Spec: igwv1.InferenceGatewayConfigSpec{Gateway: igwv1.GatewaySpec{Ref: &igwv1.GatewayRef{Name: "gw"}}}}
	mr := &igwv1.ModelRoute{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "m"},
		Spec: igwv1.ModelRouteSpec{ConfigRef: igwv1.ObjectName{Name: "igw"}, Models: []igwv1.ModelName{"m"},
			Selector: igwv1.ModelServerSelector{MatchLabels: map[string]string{"app": "m"}}}}
	if _, err := fixtures.Gateway(ctx, k8s, "default", "gw"); err != nil {
		t.Fatal(err)
	}
	for _, o := range []client.Object{cfg, mr} {
		if err := k8s.Create(ctx, o); err != nil {
			t.Fatal(err)
		}
	}
	deadline := time.Now().Add(60 * time.Second)
	for {
		_ = k8s.Get(ctx, client.ObjectKeyFromObject(mr), mr)
		if mr.Status.ObservedGeneration > 0 || time.Now().After(deadline) {
			break
		}
		time.Sleep(200 * time.Millisecond)
	}
	// Envoy Gateway calling the extension hook.
	conn, err := grpc.NewClient(hookAddr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	callCtx, cancelCall := context.WithTimeout(ctx, 30*time.Second)
	defer cancelCall()
	if _, err := pb.NewEnvoyGatewayExtensionClient(conn).PostTranslateModify(callCtx, &pb.PostTranslateModifyRequest{},
		grpc.WaitForReady(true)); err != nil {
		t.Fatal(err)
	}
	exported(t, "http://"+addr+"/metrics", have, "operator")

	var missing []string
	for _, e := range expressions(t) {
		ns, err := names(e.expr)
		if err != nil {
			t.Fatalf("%s: %v", e.where, err)
		}
		for _, n := range ns {
			if _, ok := have[n]; !ok {
				missing = append(missing, fmt.Sprintf("%s (%s)", n, e.where))
			}
		}
	}
	sort.Strings(missing)
	missing = slices.Compact(missing)
	for _, m := range missing {
		t.Errorf("no binary exports %s", m)
	}
}

// upstream asks the simulator and returns its answer as the response the
// picker sees through ext_proc.
func upstream(t *testing.T, url string, body []byte) *extproctest.Response {
	t.Helper()
	resp, err := http.Post(url, "application/json", bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	var chunks [][]byte
	for _, ev := range bytes.SplitAfter(data, []byte("\n\n")) {
		if len(ev) > 0 {
			chunks = append(chunks, ev)
		}
	}
	return &extproctest.Response{Headers: extproctest.NewHeaders(":status", fmt.Sprint(resp.StatusCode),
		"content-type", resp.Header.Get("Content-Type")), Chunks: chunks}
}

// extProcRunner is what the picker's and the router's runners have in common.
type extProcRunner interface {
	Run(ctx context.Context, ready chan<- struct{}) error
	Addr(name string) string
}

// startExtProc completes and validates opts, builds a runner from them, serves
// it for the rest of the test and connects to its ext_proc port as Envoy
// would.
func startExtProc[O interface {
	Complete()
	Validate() error
}, R extProcRunner](t *testing.T, name string, opts O, build func(O, *slog.Logger) (R, error), logger *slog.Logger) (R, *extproctest.Client) {
	t.Helper()
	opts.Complete()
	if err := opts.Validate(); err != nil {
		t.Fatal(err)
	}
	r, err := build(opts, logger)
	if err != nil {
		t.Fatal(err)
	}
	servetest.Serve(t, name, r.Run)
	c, err := extproctest.Dial(r.Addr("grpc"), extproctest.Config{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return r, c
}
