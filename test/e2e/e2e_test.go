package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"time"

	egv1a1 "github.com/envoyproxy/gateway/api/v1alpha1"
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/prometheus/client_golang/prometheus/testutil"
	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	igwv1 "github.com/igw-dev/igw/api/v1alpha1"
	"github.com/igw-dev/igw/internal/testenv"
	"github.com/igw-dev/igw/internal/testenv/fixtures"
	"github.com/igw-dev/igw/pkg/epp/datastore"
	"github.com/igw-dev/igw/pkg/epp/director"
	"github.com/igw-dev/igw/pkg/render"
	"github.com/igw-dev/igw/pkg/sim"
	"github.com/igw-dev/igw/pkg/sim/simproc"
)

const (
	ns          = "inference"
	gatewayName = "inference-gateway"
	configName  = "igw"

	llamaModel = "llama-3.1-8b"
	llamaAlias = "meta-llama/Llama-3.1-8B-Instruct"
	qwenModel  = "qwen3-32b"
	sqlAdapter = "qwen3-32b-sql"  // registered on qwen-0 only
	faqAdapter = "qwen3-32b-faq"  // registered on qwen-1 only
	maxTokens  = 5                // of every request the specs send
	longTokens = 4000             // of the requests that keep an adapter running
	requestTTL = 30 * time.Second // bound on one client request
)

var _ = Describe("The operator's data path for two models, with the real pickers, router and simulators", Ordered, func() {
	var (
		llama, qwen []*simulator
		llamaEPP    *process
		qwenEPP     *process
		bbrPod      *process
		front       *envoy
		oai         openai.Client
	)

	BeforeAll(func() {
		configOnGateway(ns, gatewayName, configName)

		// Every simulator listens on the pools' target port, each on its Pod's IP.
		port := testenv.PodPort(GinkgoT())
		targetPorts := []igwv1.TargetPort{{Number: int32(port)}}
		Expect(k8s.Create(ctx, &igwv1.ModelRoute{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "llama"},
			Spec: igwv1.ModelRouteSpec{ConfigRef: igwv1.ObjectName{Name: configName},
				Models:      []igwv1.ModelName{llamaModel, llamaAlias},
				Selector:    igwv1.ModelServerSelector{MatchLabels: map[string]string{"app": "llama"}},
				TargetPorts: targetPorts}})).To(Succeed())
		Expect(k8s.Create(ctx, &igwv1.ModelRoute{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "qwen"},
			Spec: igwv1.ModelRouteSpec{ConfigRef: igwv1.ObjectName{Name: configName},
				Models:         []igwv1.ModelName{qwenModel},
				Adapters:       []igwv1.LoRAAdapter{{Name: sqlAdapter}, {Name: faqAdapter}},
				Selector:       igwv1.ModelServerSelector{MatchLabels: map[string]string{"app": "qwen"}},
				TargetPorts:    targetPorts,
				RequestTimeout: &metav1.Duration{Duration: time.Minute}}})).To(Succeed())

		By("starting a simulator on each Pod's loopback IP")
		llamaOpts := simproc.Options{Config: sim.Config{GPU: "H100", Model: llamaModel}, ServedModelName: llamaModel + "," + llamaAlias}
		llama = []*simulator{
			startSimulator(ns, "llama-0", map[string]string{"app": "llama"}, port, llamaOpts),
			startSimulator(ns, "llama-1", map[string]string{"app": "llama"}, port, llamaOpts),
		}
		qwenOpts := func(adapter string) simproc.Options {
			return simproc.Options{Config: sim.Config{GPU: "H100", Model: qwenModel, MaxLoras: 1},
				LoRAModules: []string{adapter + "=/adapters/" + adapter}}
		}
		qwen = []*simulator{
			startSimulator(ns, "qwen-0", map[string]string{"app": "qwen"}, port, qwenOpts(sqlAdapter)),
			startSimulator(ns, "qwen-1", map[string]string{"app": "qwen"}, port, qwenOpts(faqAdapter)),
		}

		By("running the router and each model's picker from the Deployments and ConfigMaps the operator rendered")
		bbrPod = runDeployment(ns, render.NamesForConfig(configName).BBR)
		llamaEPP = runDeployment(ns, render.NamesForRoute("llama").EPP)
		qwenEPP = runDeployment(ns, render.NamesForRoute("qwen").EPP)
		Expect(fixtures.ProgramGateway(ctx, k8s, ns, gatewayName)).To(Succeed())

		front = startEnvoy(types.NamespacedName{Namespace: ns, Name: gatewayName}, bbrPod, llamaEPP, qwenEPP)
		oai = openai.NewClient(option.WithBaseURL(front.URL+"/v1/"), option.WithAPIKey("unused"),
			option.WithMaxRetries(0), option.WithRequestTimeout(requestTTL))
	})

	AfterEach(func() {
		Expect(front.errors()).To(BeEmpty(), "what the Envoy-playing front could not do")
	})

	It("brings the config and both routes to Ready, each picker following its route's InferencePool", func() {
		Eventually(configCondition(igwv1.ConditionReady), eventually, poll).Should(Equal("True/Ready"))
		for _, c := range []struct {
			route string
			epp   *process
			sims  []*simulator
		}{{"llama", llamaEPP, llama}, {"qwen", qwenEPP, qwen}} {
			Eventually(routeCondition(c.route, igwv1.ConditionReady), eventually, poll).Should(Equal("True/Ready"), c.route)
			mr := getRoute(c.route)
			Expect(mr.Status.ReadyEndpoints).To(BeEquivalentTo(2), c.route)
			Expect(c.epp.EPP.Options.PoolName).To(Equal(mr.Status.InferencePool), c.route)
			Expect(c.epp.EPP.Options.PoolNamespace).To(Equal(ns), c.route)
			Eventually(func() []string { return pickerEndpoints(c.epp) }, eventually, poll).Should(ConsistOf(addrs(c.sims)), c.route)

			By("the " + c.route + " picker runs the scoring the route reports, from the ConfigMap the operator rendered")
			Eventually(func() map[string]int32 { return pickerWeights(c.epp) }, eventually, poll).Should(
				Equal(nonZero(getRoute(c.route).Status.Scoring.Weights)), c.route)
			var models []string
			for _, m := range mr.Spec.Models {
				models = append(models, string(m))
			}
			Expect(c.epp.EPP.Director.Pipeline().BaseModels).To(ConsistOf(models), c.route)
		}
		Expect(pickerWeights(qwenEPP)).To(HaveKey(igwv1.ScorerLoRAAffinity), "the route with adapters")
		Expect(pickerWeights(llamaEPP)).NotTo(HaveKey(igwv1.ScorerLoRAAffinity), "the route without adapters")
	})

	It("sends every served model name to its own pool, streamed and not", func() {
		all := append(append([]*simulator{}, llama...), qwen...)
		before := completedBy(all...)
		sent := map[string]int{} // by pool
		for _, c := range []struct {
			model string
			pool  []*simulator
			name  string
		}{{llamaModel, llama, "llama"}, {llamaAlias, llama, "llama"}, {qwenModel, qwen, "qwen"}} {
			for _, stream := range []bool{false, true} {
				got := chat(oai, c.model, stream)
				Expect(got.err).NotTo(HaveOccurred(), "%s (stream %v)", c.model, stream)
				Expect(got.model).To(Equal(c.model))
				Expect(got.content).NotTo(BeEmpty())
				Expect(got.completionTokens).To(BeEquivalentTo(maxTokens))
				Expect(got.upstream).To(BeElementOf(addrs(c.pool)), "%s went to %s", c.model, got.upstream)
				sent[c.name]++
			}
		}
		By("a legacy completion goes the same way")
		var resp *http.Response
		cmpl, err := oai.Completions.New(ctx, openai.CompletionNewParams{Model: llamaModel,
			Prompt: openai.CompletionNewParamsPromptUnion{OfString: openai.String("The capital of France is")}, MaxTokens: openai.Int(maxTokens)},
			option.WithResponseInto(&resp))
		Expect(err).NotTo(HaveOccurred())
		Expect(cmpl.Model).To(Equal(llamaModel))
		Expect(cmpl.Usage.CompletionTokens).To(BeEquivalentTo(maxTokens))
		Expect(resp.Header.Get(headerUpstream)).To(BeElementOf(addrs(llama)))
		sent["llama"]++

		By("the simulators served exactly those requests, each pool its own")
		after := completedBy(all...)
		Expect(served(before, after, llama)).To(Equal(sent["llama"]))
		Expect(served(before, after, qwen)).To(Equal(sent["qwen"]))
	})

	It("lists every served model and adapter to openai-go's Models.List, from the router's model list route", func() {
		// listed is the list as the client sees it: "id" for a model, "id<parent" for an adapter.
		listed := func() []string {
			var resp *http.Response
			page, err := oai.Models.List(ctx, option.WithResponseInto(&resp))
			Expect(err).NotTo(HaveOccurred())
			Expect(page.Object).To(Equal("list"))
			Expect(resp.Header.Get(headerUpstream)).To(Equal(bbrPod.ports[render.BBRModelsPort]), "the front routed the list to the router's models port")
			var ids []string
			for _, m := range page.Data {
				Expect(string(m.Object)).To(Equal("model"), m.ID)
				Expect(m.OwnedBy).To(Equal("igw"), m.ID)
				Expect(m.Created).To(BeNumerically(">", 0), m.ID)
				parent, ok := m.JSON.ExtraFields["parent"]
				Expect(ok).To(BeTrue(), "%s has no parent field (null for a model, the base model for an adapter)", m.ID)
				var p *string
				Expect(json.Unmarshal([]byte(parent.Raw()), &p)).To(Succeed(), m.ID)
				if p != nil {
					ids = append(ids, m.ID+"<"+*p)
				} else {
					ids = append(ids, m.ID)
				}
			}
			return ids
		}
		served := []string{llamaModel, llamaAlias, qwenModel, sqlAdapter + "<" + qwenModel, faqAdapter + "<" + qwenModel}
		Expect(listed()).To(ConsistOf(served))

		By("the list follows a ModelRoute: an adapter added appears, and goes again when it is removed")
		const added = "qwen3-32b-new"
		setAdapters := func(adapters ...igwv1.LoRAAdapter) {
			Eventually(func() error {
				mr := getRoute("qwen")
				mr.Spec.Adapters = adapters
				return k8s.Update(ctx, mr)
			}, eventually, poll).Should(Succeed())
		}
		original := getRoute("qwen").Spec.Adapters
		setAdapters(append(slices.Clone(original), igwv1.LoRAAdapter{Name: added})...)
		Eventually(listed, eventually, poll).Should(ConsistOf(append(slices.Clone(served), added+"<"+qwenModel)))
		setAdapters(original...)
		Eventually(listed, eventually, poll).Should(ConsistOf(served))

		By("another method on the path gets the router's OpenAI 405, even with a body naming a model")
		resp, err := http.Post(front.URL+"/v1/models", "application/json", strings.NewReader(`{"model":"`+llamaModel+`"}`))
		Expect(err).NotTo(HaveOccurred())
		body := readBody(resp.Body)
		Expect(resp.StatusCode).To(Equal(http.StatusMethodNotAllowed), body)
		Expect(resp.Header.Get("Allow")).To(Equal("GET, HEAD"))
		Expect(body).To(ContainSubstring(`"code":"method_not_allowed"`))
		Expect(resp.Header.Get(headerUpstream)).To(Equal(bbrPod.ports[render.BBRModelsPort]), "no model server may see it")
	})

	It("answers a model nobody serves with the OpenAI 404 error, streamed and not, from the catch-all route", func() {
		for _, stream := range []bool{false, true} {
			got := chat(oai, "gpt-7-unknown", stream)
			var apiErr *openai.Error
			Expect(errors.As(got.err, &apiErr)).To(BeTrue(), "stream %v: %v", stream, got.err)
			Expect(apiErr.StatusCode).To(Equal(http.StatusNotFound))
			// The simulators' own 404 says "NotFoundError": this is the gateway's.
			Expect(apiErr.Type).To(Equal("invalid_request_error"))
			Expect(apiErr.Code).To(Equal("model_not_found"))
			Expect(apiErr.Param).To(Equal("model"))
			Expect(apiErr.Message).To(ContainSubstring("does not exist"))
			Expect(apiErr.Response.Header.Get("Content-Type")).To(HavePrefix("application/json"))
			Expect(apiErr.Response.Header.Get(headerUpstream)).To(BeEmpty(), "no model server may see the request")
		}

		By("a request without a model gets the router's OpenAI 400")
		got := chat(oai, "", false)
		var apiErr *openai.Error
		Expect(errors.As(got.err, &apiErr)).To(BeTrue(), "%v", got.err)
		Expect(apiErr.StatusCode).To(Equal(http.StatusBadRequest))
		Expect(apiErr.Type).To(Equal("invalid_request_error"))
		Expect(apiErr.Code).To(Equal("missing_model"))
		Expect(apiErr.Response.Header.Get(headerUpstream)).To(BeEmpty())
	})

	It("sends a LoRA adapter only to the pod that has it", func() {
		By("keeping each adapter running on the one pod that registered it, as other clients would")
		for i, adapter := range []string{sqlAdapter, faqAdapter} {
			keepBusy(qwen[i], adapter)
		}
		Eventually(func() [][]string {
			return [][]string{runningAdapters(qwenEPP, qwen[0]), runningAdapters(qwenEPP, qwen[1])}
		}, eventually, poll).Should(Equal([][]string{{sqlAdapter}, {faqAdapter}}), "the picker's telemetry")

		before := completedBy(qwen...)
		for i, adapter := range []string{sqlAdapter, faqAdapter} {
			for _, stream := range []bool{false, true} {
				got := chat(oai, adapter, stream)
				// A simulator without the adapter answers 404: success means the right pod.
				Expect(got.err).NotTo(HaveOccurred(), "%s (stream %v)", adapter, stream)
				Expect(got.model).To(Equal(adapter))
				Expect(got.completionTokens).To(BeEquivalentTo(maxTokens))
				Expect(got.upstream).To(Equal(qwen[i].Addr), adapter)
			}
		}
		after := completedBy(qwen...)
		Expect(after[qwen[0].Pod]-before[qwen[0].Pod]).To(Equal(2), "requests qwen-0 (%s) served", sqlAdapter)
		Expect(after[qwen[1].Pod]-before[qwen[1].Pod]).To(Equal(2), "requests qwen-1 (%s) served", faqAdapter)
	})

	It("stops sending to a pod that is no longer ready, and takes it back when it is", func() {
		llama[1].setReady(false)
		Eventually(func() []string { return pickerEndpoints(llamaEPP) }, eventually, poll).Should(Equal([]string{llama[0].Addr}))
		Eventually(func() int32 { return getRoute("llama").Status.ReadyEndpoints }, eventually, poll).Should(BeEquivalentTo(1))

		before := completedBy(llama...)
		for i := range 4 {
			got := chat(oai, llamaModel, i%2 == 1)
			Expect(got.err).NotTo(HaveOccurred())
			Expect(got.upstream).To(Equal(llama[0].Addr))
		}
		after := completedBy(llama...)
		Expect(after[llama[0].Pod] - before[llama[0].Pod]).To(Equal(4))
		Expect(after[llama[1].Pod]).To(Equal(before[llama[1].Pod]))

		llama[1].setReady(true)
		Eventually(func() []string { return pickerEndpoints(llamaEPP) }, eventually, poll).Should(ConsistOf(addrs(llama)))
	})

	It("serves a FailOpen route through its picker, and without it while the picker is down; a FailClose route fails instead", func() {
		names := render.NamesForRoute("llama")
		setFailureMode := func(mode igwv1.FailureMode) {
			Eventually(func() error {
				mr := getRoute("llama")
				if mr.Spec.EPP == nil {
					mr.Spec.EPP = &igwv1.EPPOverrides{}
				}
				mr.Spec.EPP.FailureMode = mode
				return k8s.Update(ctx, mr)
			}, eventually, poll).Should(Succeed())
			Eventually(func() bool {
				var p egv1a1.EnvoyExtensionPolicy
				if k8s.Get(ctx, types.NamespacedName{Namespace: ns, Name: names.EPPPolicy}, &p) != nil || len(p.Spec.ExtProc) != 1 {
					return false
				}
				fo := p.Spec.ExtProc[0].FailOpen
				return fo != nil && *fo == (mode == igwv1.FailOpen)
			}, eventually, poll).Should(BeTrue(), "the picker's policy follows failureMode %s", mode)
		}
		scored := func() float64 {
			return testutil.ToFloat64(llamaEPP.EPP.Metrics.Decisions.WithLabelValues(director.ReasonScored))
		}

		By("FailOpen: the picker still places every request, its body buffered and the answer streamed to it")
		setFailureMode(igwv1.FailOpen)
		before := scored()
		for i := range 4 {
			got := chat(oai, llamaModel, i%2 == 1)
			Expect(got.err).NotTo(HaveOccurred())
			Expect(got.completionTokens).To(BeNumerically(">", 0))
			Expect(addrs(llama)).To(ContainElement(got.upstream))
		}
		Expect(scored() - before).To(BeNumerically(">=", 4))

		By("the picker stops: requests go on, balanced over the pool's ready pods")
		llamaEPP.Stop()
		upstreams := map[string]int{}
		for i := range 6 {
			got := chat(oai, llamaModel, i%2 == 1)
			Expect(got.err).NotTo(HaveOccurred(), "request %d with the picker down", i)
			Expect(got.completionTokens).To(BeNumerically(">", 0))
			upstreams[got.upstream]++
		}
		Expect(upstreams).To(HaveLen(len(llama)), "every ready pod serves: %v", upstreams)

		By("FailClose with the picker down: Envoy answers 500 itself")
		setFailureMode(igwv1.FailClose)
		var apiErr *openai.Error
		Expect(errors.As(chat(oai, llamaModel, false).err, &apiErr)).To(BeTrue())
		Expect(apiErr.StatusCode).To(Equal(http.StatusInternalServerError))

		By("the picker is back: requests are placed again")
		llamaEPP = runDeployment(ns, names.EPP)
		front.add(llamaEPP)
		Eventually(func() error { return chat(oai, llamaModel, false).err }, eventually, poll).Should(Succeed())
		before = scored()
		Expect(chat(oai, llamaModel, true).err).NotTo(HaveOccurred())
		Expect(scored() - before).To(BeNumerically(">=", 1))
	})

	It("runs a picker of two replicas active-passive with what the operator rendered, and fails over when the leader stops", func() {
		By("scaling llama's picker to two replicas: the rollout replaces the single picker")
		Eventually(func() error {
			mr := getRoute("llama")
			mr.Spec.EPP = &igwv1.EPPOverrides{PodSettings: igwv1.PodSettings{Replicas: new(int32(2))}}
			return k8s.Update(ctx, mr)
		}, eventually, poll).Should(Succeed())
		name := render.NamesForRoute("llama").EPP
		Eventually(func() []string {
			var d appsv1.Deployment
			_ = k8s.Get(ctx, types.NamespacedName{Namespace: ns, Name: name}, &d)
			return d.Spec.Template.Spec.Containers[0].Args
		}, eventually, poll).Should(ContainElement("--leader-elect"))
		llamaEPP.Stop()
		// Each replica acts as the picker's service account, with the Role
		// the operator rendered: the Lease must be within it.
		replicas := []*process{startPod(ns, name), startPod(ns, name)}
		front.add(replicas...)

		var leader, standby *process
		Eventually(func() int {
			n := 0
			for i, p := range replicas {
				if ready(p) {
					n++
					leader, standby = p, replicas[1-i]
				}
			}
			return n
		}, eventually, poll).Should(Equal(1), "exactly one replica ready")
		Consistently(func() bool { return ready(leader) && !ready(standby) }, time.Second, 100*time.Millisecond).Should(BeTrue())
		Eventually(standby.EPP.Store.Len, eventually, poll).Should(Equal(len(llama)), "the standby follows the pool")

		By("requests go through the leader only")
		scored := func(p *process) float64 {
			return testutil.ToFloat64(p.EPP.Metrics.Decisions.WithLabelValues(director.ReasonScored)) +
				testutil.ToFloat64(p.EPP.Metrics.Decisions.WithLabelValues(director.ReasonProbe))
		}
		for i := range 4 {
			got := chat(oai, llamaModel, i%2 == 1)
			Expect(got.err).NotTo(HaveOccurred())
			Expect(addrs(llama)).To(ContainElement(got.upstream))
		}
		Expect(scored(leader)).To(BeNumerically(">=", 4))
		Expect(scored(standby)).To(BeZero())

		By("the leader stops (a pod deleted): the standby takes the released Lease and requests flow again")
		t0 := time.Now()
		leader.Stop()
		Eventually(func() bool { return ready(standby) }, eventually, poll).Should(BeTrue())
		readyAfter := time.Since(t0)
		Eventually(func() error { return chat(oai, llamaModel, false).err }, eventually, poll).Should(Succeed())
		AddReportEntry("picker failover", fmt.Sprintf("ready %v, first request answered %v after the leader stopped (default Lease timings)", readyAfter, time.Since(t0)))
		// Requests sent while no replica was ready failed at the front, as
		// they would at Envoy under FailClose; forget those.
		_ = front.errors()
		for i := range 2 {
			Expect(chat(oai, llamaModel, i%2 == 1).err).NotTo(HaveOccurred())
		}
		Expect(scored(standby)).To(BeNumerically(">=", 3))
	})
})

// reply is what the client saw of one chat completion.
type reply struct {
	err              error
	model, content   string
	completionTokens int64
	upstream         string // the endpoint the front proxied to
}

// chat sends one chat completion through the front with openai-go, streamed
// (with usage in the last chunk) or not.
func chat(c openai.Client, model string, stream bool) (out reply) {
	params := openai.ChatCompletionNewParams{
		Model:     model,
		Messages:  []openai.ChatCompletionMessageParamUnion{openai.SystemMessage("You are terse."), openai.UserMessage("Say hello.")},
		MaxTokens: openai.Int(maxTokens),
	}
	var resp *http.Response
	defer func() {
		if resp != nil {
			out.upstream = resp.Header.Get(headerUpstream)
		}
	}()
	if !stream {
		cc, err := c.Chat.Completions.New(ctx, params, option.WithResponseInto(&resp))
		if err != nil {
			out.err = err
			return out
		}
		out.model, out.completionTokens = cc.Model, cc.Usage.CompletionTokens
		if len(cc.Choices) > 0 {
			out.content = cc.Choices[0].Message.Content
		}
		return out
	}
	params.StreamOptions = openai.ChatCompletionStreamOptionsParam{IncludeUsage: openai.Bool(true)}
	s := c.Chat.Completions.NewStreaming(ctx, params, option.WithResponseInto(&resp))
	defer s.Close()
	var content strings.Builder
	for s.Next() {
		ch := s.Current()
		out.model = ch.Model
		if len(ch.Choices) > 0 {
			content.WriteString(ch.Choices[0].Delta.Content)
		}
		if ch.Usage.CompletionTokens > 0 {
			out.completionTokens = ch.Usage.CompletionTokens
		}
	}
	out.err, out.content = s.Err(), content.String()
	return out
}

// keepBusy keeps a long request for adapter running on s, sent to the pod
// directly, until the spec ends.
func keepBusy(s *simulator, adapter string) {
	reqCtx, stop := context.WithCancel(ctx)
	done := make(chan struct{})
	DeferCleanup(func() { stop(); <-done })
	body := fmt.Sprintf(`{"model":%q,"prompt":"a long report","max_tokens":%d,"stream":true}`, adapter, longTokens)
	req, err := http.NewRequestWithContext(reqCtx, http.MethodPost, s.proc.URL+"/v1/completions", bytes.NewBufferString(body))
	Expect(err).NotTo(HaveOccurred())
	req.Header.Set("Content-Type", "application/json")
	go func() {
		defer close(done)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return
		}
		defer resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			GinkgoWriter.Printf("keepBusy %s on %s: %d %s\n", adapter, s.Pod, resp.StatusCode, readBody(resp.Body))
			return
		}
		_, _ = io.Copy(io.Discard, resp.Body)
	}()
}

// pickerEndpoints are the endpoints the picker knows, from its pool source.
func pickerEndpoints(p *process) []string {
	var out []string
	for _, e := range p.EPP.Store.Endpoints(nil) {
		out = append(out, e.Key())
	}
	return out
}

// pickerWeights are the scorers the picker runs, by type, with their weights.
func pickerWeights(p *process) map[string]int32 {
	out := map[string]int32{}
	for _, s := range p.EPP.Director.Pipeline().Profile.Scorers {
		out[s.Scorer.Type()] = int32(s.Weight)
	}
	return out
}

// nonZero drops the scorers a status lists with weight 0 (not run).
func nonZero(weights map[string]int32) map[string]int32 {
	out := map[string]int32{}
	for k, w := range weights {
		if w != 0 {
			out[k] = w
		}
	}
	return out
}

// runningAdapters is what the picker's telemetry says runs on s.
func runningAdapters(p *process, s *simulator) []string {
	st := p.EPP.Store.Get(s.Addr)
	if st == nil {
		return nil
	}
	var v datastore.View
	st.View(time.Now(), 0, &v)
	return v.Metrics.RunningAdapters
}

func addrs(sims []*simulator) []string {
	out := make([]string, len(sims))
	for i, s := range sims {
		out[i] = s.Addr
	}
	return out
}

// served is how many requests the simulators of pool completed between two counts.
func served(before, after map[string]int, pool []*simulator) int {
	n := 0
	for _, s := range pool {
		n += after[s.Pod] - before[s.Pod]
	}
	return n
}

func getRoute(name string) *igwv1.ModelRoute {
	var mr igwv1.ModelRoute
	Expect(k8s.Get(ctx, types.NamespacedName{Namespace: ns, Name: name}, &mr)).To(Succeed())
	return &mr
}

func routeCondition(name, typ string) func() string {
	return func() string { return fixtures.Condition(getRoute(name).Status.Conditions, typ) }
}

func configCondition(typ string) func() string {
	return func() string {
		var c igwv1.InferenceGatewayConfig
		Expect(k8s.Get(ctx, types.NamespacedName{Namespace: ns, Name: configName}, &c)).To(Succeed())
		return fixtures.Condition(c.Status.Conditions, typ)
	}
}
