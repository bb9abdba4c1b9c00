package e2e

import (
	"fmt"
	"regexp"
	"sort"
	"strings"
	"sync"
	"time"

	egv1a1 "github.com/envoyproxy/gateway/api/v1alpha1"
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	igwv1 "github.com/igw-dev/igw/api/v1alpha1"
	"github.com/igw-dev/igw/internal/loadloop"
	"github.com/igw-dev/igw/internal/testenv"
	"github.com/igw-dev/igw/internal/testenv/chatload"
	"github.com/igw-dev/igw/internal/testenv/fixtures"
	"github.com/igw-dev/igw/pkg/render"
	"github.com/igw-dev/igw/pkg/sim"
	"github.com/igw-dev/igw/pkg/sim/simproc"
)

// The cluster-mode half of test/chaos (which faults the model servers of the
// standalone gateway): under steady openai-go load through the Envoy-playing
// front, a route's pickers are restarted one after the other, as a rollout
// restart does, and then the control plane (API server and etcd, as
// testenv restarts them) goes down and comes back. Every client-visible error
// is counted, split by whether the client had received a first byte; a
// request that had not must never fail.
//
// The route runs what an operator who wants the picker to survive its own
// restarts runs: two replicas, active-passive by leader election, and
// failureMode FailOpen. Two replicas alone do not make a restart invisible:
// between the leader's release of the Lease and the standby's next try
// (client-go retries every 2 s by default, jittered up to 4.4 s) no replica
// is ready, and under FailClose Envoy answers those requests 500. FailOpen
// alone survives too (the FailOpen spec in e2e_test.go stops the only
// picker), but every request until the picker is back then goes unpicked;
// with a standby that gap is one retry. While the control plane is down the
// leader cannot renew its Lease and holds over (pkg/epp/runner/leader.go):
// it must keep placing every request from the endpoints it last saw, none
// failing open, and once the control plane is back it must follow the pool
// again. The front goes on with the routes and policies it last read, as
// Envoy does with its last configuration.
//
// The container has a namespace, config, route and pods of its own rather
// than the first container's: that one changes its routes' failure mode and
// replicas as it goes, and Ginkgo runs the two containers in either order.
var _ = Describe("A route's pickers and the control plane restarted under steady openai-go load", Ordered, func() {
	const (
		chaosNS      = "chaos"
		chaosConfig  = "chaos"
		chaosRoute   = "chat"
		chaosModel   = "chaos-llama"
		chaosGateway = "chaos-gateway"
		workers      = 6
	)
	var (
		sims    []*simulator
		pickers []*process // the running replicas of the route's picker
		front   *envoy
		oai     openai.Client
	)

	BeforeAll(func() {
		configOnGateway(chaosNS, chaosGateway, chaosConfig)
		port := testenv.PodPort(GinkgoT())
		Expect(k8s.Create(ctx, &igwv1.ModelRoute{ObjectMeta: metav1.ObjectMeta{Namespace: chaosNS, Name: chaosRoute},
			Spec: igwv1.ModelRouteSpec{ConfigRef: igwv1.ObjectName{Name: chaosConfig},
				Models:      []igwv1.ModelName{chaosModel},
				Selector:    igwv1.ModelServerSelector{MatchLabels: map[string]string{"app": "chaos"}},
				TargetPorts: []igwv1.TargetPort{{Number: int32(port)}},
				EPP: &igwv1.EPPOverrides{FailureMode: igwv1.FailOpen,
					PodSettings: igwv1.PodSettings{Replicas: new(int32(2))}}}})).To(Succeed())

		opts := simproc.Options{Config: sim.Config{GPU: "H100", Model: llamaModel}, ServedModelName: chaosModel}
		for i := range 3 {
			sims = append(sims, startSimulator(chaosNS, fmt.Sprintf("chaos-%d", i), map[string]string{"app": "chaos"}, port, opts))
		}

		By("running the router, and two replicas of the picker that elect a leader")
		bbr := runDeployment(chaosNS, render.NamesForConfig(chaosConfig).BBR)
		name := render.NamesForRoute(chaosRoute).EPP
		Eventually(func() []string {
			var d appsv1.Deployment
			if k8s.Get(ctx, types.NamespacedName{Namespace: chaosNS, Name: name}, &d) != nil {
				return nil
			}
			return d.Spec.Template.Spec.Containers[0].Args
		}, eventually, poll).Should(ContainElement("--leader-elect"))
		pickers = []*process{startPod(chaosNS, name), startPod(chaosNS, name)}
		Eventually(func() *process { return leaderOf(pickers) }, eventually, poll).ShouldNot(BeNil())
		waitAvailable(chaosNS, name)
		Expect(fixtures.ProgramGateway(ctx, k8s, chaosNS, chaosGateway)).To(Succeed())

		front = startEnvoy(types.NamespacedName{Namespace: chaosNS, Name: chaosGateway}, append([]*process{bbr}, pickers...)...)
		oai = openai.NewClient(option.WithBaseURL(front.URL+"/v1/"), option.WithAPIKey("unused"),
			option.WithMaxRetries(0), option.WithRequestTimeout(requestTTL))

		By("the picker's policy fails open, and both replicas know the pool")
		Eventually(func() bool {
			var p egv1a1.EnvoyExtensionPolicy
			if k8s.Get(ctx, types.NamespacedName{Namespace: chaosNS, Name: render.NamesForRoute(chaosRoute).EPPPolicy}, &p) != nil || len(p.Spec.ExtProc) != 1 {
				return false
			}
			return p.Spec.ExtProc[0].FailOpen != nil && *p.Spec.ExtProc[0].FailOpen
		}, eventually, poll).Should(BeTrue())
		for _, p := range pickers {
			Eventually(func() []string { return pickerEndpoints(p) }, eventually, poll).Should(ConsistOf(addrs(sims)))
		}
		By("one pod is not ready, to turn ready once the control plane is back")
		sims[2].setReady(false)
		for _, p := range pickers {
			Eventually(func() []string { return pickerEndpoints(p) }, eventually, poll).Should(ConsistOf(addrs(sims[:2])))
		}
		Eventually(func() error { return chat(oai, chaosModel, false).err }, eventually, poll).Should(Succeed())
		Expect(front.errors()).To(BeEmpty())
	})

	It("keeps every request that had no first byte, and the picker follows the pool once the control plane is back", func() {
		name := render.NamesForRoute(chaosRoute).EPP
		// The ready pods: sims[2] turns ready once the control plane is back.
		serving := sims[:2]
		load := startChaosLoad(oai, chaosModel, workers) // the steady phase begins
		stopLoad := sync.OnceFunc(load.stop)
		DeferCleanup(stopLoad)
		notes := map[string]string{} // what each phase measured, for the table
		time.Sleep(2 * time.Second)

		By("a rolling restart of the picker: the leader stops, the standby takes over, a new pod starts as standby; twice")
		load.enter(phasePickerRestart)
		var takeovers []string
		for range 2 {
			var leader *process
			Eventually(func() *process { leader = leaderOf(pickers); return leader }, eventually, poll).ShouldNot(BeNil())
			standby := pickers[0]
			if standby == leader {
				standby = pickers[1]
			}
			Eventually(func() []string { return pickerEndpoints(standby) }, eventually, poll).Should(ConsistOf(addrs(serving)), "a warm standby")
			t0 := time.Now()
			leader.Stop()
			Eventually(func() bool { return ready(standby) }, eventually, poll).Should(BeTrue(), "the standby takes the released Lease")
			takeovers = append(takeovers, time.Since(t0).Round(time.Millisecond).String())
			replacement := startPod(chaosNS, name)
			front.add(replacement)
			pickers = []*process{standby, replacement}
		}
		notes[phasePickerRestart] = "standby ready after " + strings.Join(takeovers, ", ")
		for _, p := range pickers {
			Eventually(func() []string { return pickerEndpoints(p) }, eventually, poll).Should(ConsistOf(addrs(serving)))
		}
		time.Sleep(time.Second)

		By("the control plane stops: the leader cannot renew its Lease, holds over and keeps placing requests")
		leader := leaderOf(pickers)
		Expect(leader).NotTo(BeNil())
		load.enter(phaseControlPlaneDown)
		down := true
		DeferCleanup(func() {
			if down { // the spec failed during the outage: the rest of the suite needs the control plane
				Expect(env.StartControlPlane()).To(Succeed())
			}
		})
		t0 := time.Now()
		Expect(env.StopControlPlane()).To(Succeed())
		stopped := time.Since(t0)
		Eventually(func() bool { return holdingOver(leader) }, 30*time.Second, poll).Should(BeTrue(),
			"the leader's renewal deadline passes while the API server is down")
		holding := time.Since(t0)
		time.Sleep(time.Second) // requests placed while holding over
		Expect(pickerEndpoints(leader)).To(ConsistOf(addrs(serving)), "the leader keeps the endpoints it last saw")
		Expect(ready(leader)).To(BeTrue())
		notes[phaseControlPlaneDown] = fmt.Sprintf("down in %v, holding over after %v, out %v",
			stopped.Round(time.Millisecond), holding.Round(time.Millisecond), time.Since(t0).Round(time.Millisecond))

		By("the control plane is back: a replica leads on a renewed Lease")
		load.enter(phaseControlPlaneBack)
		t0 = time.Now()
		Expect(env.StartControlPlane()).To(Succeed())
		down = false
		started := time.Since(t0)
		Eventually(func() *process {
			if l := leaderOf(pickers); l != nil && !holdingOver(l) {
				return l
			}
			return nil
		}, eventually, poll).ShouldNot(BeNil())
		notes[phaseControlPlaneBack] = fmt.Sprintf("up in %v, Lease renewed after %v", started.Round(time.Millisecond), time.Since(t0).Round(time.Millisecond))

		By("the pickers follow the pool again: a pod turns ready and is picked")
		// Under load: the front takes any ready pod as a valid pick, so the
		// pickers may learn of the new one in their own time. Their watches
		// come back after client-go's reflector backoff, which has grown
		// during the outage: it doubles from 0.8 s, jittered up to twice
		// that, and stops at [30, 60) s, so the next try may be most of a
		// minute away (5 to 32 s after the control plane was back, seen on
		// two idle cores), longer when a slow restart made one more try fail.
		t0 = time.Now()
		// kwok, as the kubelet, reports the Pod ready once its own watch is back.
		Eventually(func() error { return testenv.SetReadinessProbe(ctx, k8s, chaosNS, sims[2].Pod, true) }, eventually, poll).Should(Succeed())
		for _, p := range pickers {
			Eventually(func() []string { return pickerEndpoints(p) }, 2*time.Minute, poll).Should(ConsistOf(addrs(sims)))
		}
		notes[phaseControlPlaneBack] += fmt.Sprintf("; both replicas had %s %v after it turned ready", sims[2].Pod, time.Since(t0).Round(time.Millisecond))
		time.Sleep(time.Second)

		By("a pod made not ready stops receiving requests")
		// The load pauses while the change propagates: the front, which
		// reads the API server per request, would see it before the pickers'
		// watches do and fail a pick of the pod as not among the endpoints,
		// where Envoy would balance it to another (and the pod, only not
		// ready, would serve it anyway). How soon the pickers see the change
		// is the measure here, not what the front makes of it.
		gone := sims[0]
		load.pause()
		load.enter(phaseFollows)
		t0 = time.Now()
		gone.setReady(false)
		DeferCleanup(func() { gone.setReady(true) })
		for _, p := range pickers {
			Eventually(func() []string { return pickerEndpoints(p) }, eventually, poll).Should(ConsistOf(addrs(sims[1:])))
		}
		notes[phaseFollows] = fmt.Sprintf("both replicas dropped %s %v after it turned not ready", gone.Pod, time.Since(t0).Round(time.Millisecond))
		load.resume()
		time.Sleep(2 * time.Second)
		stopLoad()

		tallies := load.tallies()
		var total chaosTally
		var table strings.Builder
		row := func(name string, span string, t chaosTally, rest string) {
			fmt.Fprintf(&table, "%-20s %6s %8d %6d %17d %16d %11d   %s\n", name, span, t.Requests, t.OK,
				t.BeforeFirstByte, t.AfterFirstByte, t.failedOpen, rest)
		}
		fmt.Fprintf(&table, "%-20s %6s %8s %6s %17s %16s %11s   %s\n", "phase", "for", "requests", "ok",
			"errors before 1st", "errors after 1st", "failed open", "served by")
		for i, ph := range chaosPhases {
			t := tallies[i]
			row(ph, t.span.Round(100*time.Millisecond).String(), t, byPod(t.upstreams, sims))
			if notes[ph] != "" {
				fmt.Fprintf(&table, "%22s%s\n", "", notes[ph])
			}
			if n := t.failedOpen - t.failedOpenInside; n > 0 {
				fmt.Fprintf(&table, "%22s%d of those failing open ended after the next phase began\n", "", n)
			}
			for why, n := range t.openReasons {
				if len(why) > 200 {
					why = why[:200] + "..."
				}
				fmt.Fprintf(&table, "%22sfailed open %d times: %s\n", "", n, why)
			}
			total.Sum(t.Tally)
			total.failedOpen += t.failedOpen
		}
		row("all", "", total, fmt.Sprintf("(the front read %d times from memory)", front.api.staleReads()))
		AddReportEntry("requests by phase", table.String())

		for i, ph := range chaosPhases {
			t := tallies[i]
			Expect(t.Samples).To(BeEmpty(), "%s: requests failed before their first byte", ph)
			// Served in every phase, or the count proves nothing.
			Expect(t.OK).To(BeNumerically(">=", workers), "%s: requests served", ph)
		}
		Expect(total.BeforeFirstByte).To(BeZero(), "client-visible errors before the first byte")
		Expect(tallies[phaseIndexOf(phaseSteady)].failedOpenInside).To(BeZero(), "the leader places every request")
		Expect(tallies[phaseIndexOf(phaseControlPlaneDown)].failedOpenInside).To(BeZero(),
			"the leader, holding over, places every request while the control plane is down")
		Expect(tallies[phaseIndexOf(phaseFollows)].upstreams).NotTo(HaveKey(gone.Addr), "requests sent to the pod after it turned not ready")
		Expect(tallies[phaseIndexOf(phaseFollows)].upstreams).To(HaveKey(sims[2].Addr), "requests sent to the pod that turned ready")
		Expect(front.errors()).To(BeEmpty(), "what the Envoy-playing front could not do")
	})
})

// The phases of the chaos spec, in order.
const (
	phaseSteady           = "steady"
	phasePickerRestart    = "picker restart"
	phaseControlPlaneDown = "control plane down"
	phaseControlPlaneBack = "control plane back"
	phaseFollows          = "pod not ready"
)

var chaosPhases = []string{phaseSteady, phasePickerRestart, phaseControlPlaneDown, phaseControlPlaneBack, phaseFollows}

func phaseIndexOf(name string) int {
	for i, p := range chaosPhases {
		if p == name {
			return i
		}
	}
	panic("no phase " + name)
}

// ready runs the picker's readiness probe once, as the kubelet would.
func ready(p *process) bool {
	c := p.Deployment.Spec.Template.Spec.Containers[0]
	return p.probe(c, c.ReadinessProbe) == nil
}

// leaderOf is the one ready replica, nil when none or more than one is ready.
func leaderOf(replicas []*process) *process {
	var leader *process
	for _, p := range replicas {
		if ready(p) {
			if leader != nil {
				return nil
			}
			leader = p
		}
	}
	return leader
}

// holdingOver reports whether the replica leads on a Lease it could not renew.
func holdingOver(p *process) bool {
	_, detail := p.EPP.Ready()
	s, _ := detail["leaderElection"].(string)
	return strings.HasPrefix(s, "leader, holding over")
}

// byPod lists how many requests each simulator served, by Pod name.
func byPod(upstreams map[string]int, sims []*simulator) string {
	var out []string
	for _, s := range sims {
		out = append(out, fmt.Sprintf("%s %d", s.Pod, upstreams[s.Addr]))
	}
	var other []string
	for a, n := range upstreams {
		known := false
		for _, s := range sims {
			known = known || s.Addr == a
		}
		if !known {
			other = append(other, fmt.Sprintf("%q %d", a, n))
		}
	}
	sort.Strings(other)
	return strings.Join(append(out, other...), ", ")
}

// chaosTally is what the clients saw of the requests begun in one phase.
type chaosTally struct {
	chatload.Tally
	span time.Duration
	// failedOpen requests went on unpicked: no picker replica was ready.
	// failedOpenInside of them also ended in the phase: a request begun
	// just before the next phase's fault may meet it.
	failedOpen, failedOpenInside int
	openReasons                  map[string]int // why they failed open: the picker's Service had no ready pod, or its stream failed
	upstreams                    map[string]int // requests by the endpoint the front sent them to
}

// chaosLoad is steady load from openai-go workers, each sending one request
// after another, three of four streamed; outcomes are tallied by the phase
// in which the request began.
type chaosLoad struct {
	gate    sync.RWMutex // workers hold it for reading over a request; pause takes it
	workers *loadloop.Loop

	mu      sync.Mutex
	phase   int
	entered []time.Time
	stopped time.Time
	tally   []chaosTally
}

func startChaosLoad(c openai.Client, model string, workers int) *chaosLoad {
	// The first phase begins with the load: every request is counted.
	l := &chaosLoad{entered: make([]time.Time, len(chaosPhases)), tally: make([]chaosTally, len(chaosPhases))}
	l.entered[0] = time.Now()
	l.workers = loadloop.Start(workers, func(w, i int) {
		l.gate.RLock()
		l.mu.Lock()
		ph := l.phase
		l.mu.Unlock()
		o := chaosRequest(c, model, w, i)
		l.gate.RUnlock()
		l.record(ph, o)
	})
	return l
}

// enter starts the named phase.
func (l *chaosLoad) enter(name string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.phase = phaseIndexOf(name)
	l.entered[l.phase] = time.Now()
}

// pause waits for the requests in flight and holds the next until resume.
func (l *chaosLoad) pause()  { l.gate.Lock() }
func (l *chaosLoad) resume() { l.gate.Unlock() }

// stop ends the load and waits for the requests in flight.
func (l *chaosLoad) stop() {
	l.workers.Stop()
	l.mu.Lock()
	defer l.mu.Unlock()
	l.stopped = time.Now()
}

func (l *chaosLoad) record(ph int, o chaosOutcome) {
	l.mu.Lock()
	defer l.mu.Unlock()
	t := &l.tally[ph]
	if o.failedOpen != "" && l.phase == ph {
		t.failedOpenInside++
	}
	t.Add(o.Outcome)
	if o.failedOpen != "" {
		t.failedOpen++
		if t.openReasons == nil {
			t.openReasons = map[string]int{}
		}
		t.openReasons[anyPort.ReplaceAllString(o.failedOpen, ":port")]++
	}
	if o.upstream != "" {
		if t.upstreams == nil {
			t.upstreams = map[string]int{}
		}
		t.upstreams[o.upstream]++
	}
}

// tallies returns the tallies, each with how long its phase lasted.
func (l *chaosLoad) tallies() []chaosTally {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := make([]chaosTally, len(l.tally))
	copy(out, l.tally)
	for i := range out {
		if l.entered[i].IsZero() {
			continue
		}
		end := l.stopped
		if i+1 < len(out) && !l.entered[i+1].IsZero() {
			end = l.entered[i+1]
		}
		out[i].span = end.Sub(l.entered[i])
	}
	return out
}

// anyPort: the reasons of failing open differ only by the ports of pods
// that come and go.
var anyPort = regexp.MustCompile(`:[0-9]+\b`)

// chaosOutcome is one request's end as its client saw it, with the proxy's
// word on where it went.
type chaosOutcome struct {
	chatload.Outcome
	failedOpen string // why, when the request went on unpicked
	upstream   string
}

// chaosRequest sends worker w's i-th request (chatload.Send).
func chaosRequest(c openai.Client, model string, w, i int) chaosOutcome {
	o := chaosOutcome{Outcome: chatload.Send(ctx, c, model, int64(8+(w+i)%9), w, i)}
	if r := o.Response; r != nil {
		o.upstream, o.failedOpen = r.Header.Get(headerUpstream), r.Header.Get(headerFailedOpen)
	}
	return o
}
