// Package global is the global tier's end-to-end test on loopback: three
// member clusters, each with its own control plane (etcd and
// kube-apiserver), operator, simulators on its Pods' addresses and gateway
// front following the operator's InferencePool and exporting its member
// summary behind a token, and the hub (igw-global with its standalone front),
// driven by openai-go clients through the hub. One member's control plane is
// stopped under load, one member's network is slowed, a whole member is
// killed under load and restarted, and a region-pinned model is held in its
// region.
package global

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"

	"github.com/igw-dev/igw/internal/loadloop"
	"github.com/igw-dev/igw/internal/logging/kubelog"
	"github.com/igw-dev/igw/internal/testenv"
	"github.com/igw-dev/igw/pkg/bench"
	"github.com/igw-dev/igw/pkg/wire"
)

// result is one request as the client saw it.
type result struct {
	start, end time.Time
	member     string
	stream     bool
	// ttft is a streamed request's time to its first chunk (0 for the
	// others: a plain completion's first byte is its whole answer).
	ttft time.Duration
	// firstByte: a response had begun (a 200's headers) before any error.
	firstByte bool
	err       error
}

// load sends requests from workers until stop is closed, half of them
// streamed, each with its own prompt.
type load struct {
	client openai.Client
	model  string

	mu      sync.Mutex
	results []result
	workers *loadloop.Loop
}

func startLoad(base, model string, workers int) *load {
	l := &load{client: openai.NewClient(option.WithBaseURL(base+"/v1"), option.WithAPIKey("unused"),
		// The client's own retries would hide the hub's failures.
		option.WithMaxRetries(0), option.WithRequestTimeout(30*time.Second)), model: model}
	l.workers = loadloop.Start(workers, func(w, i int) {
		r := l.one(fmt.Sprintf("worker %d request %d: tell me about the weather", w, i), i%2 == 0)
		l.mu.Lock()
		l.results = append(l.results, r)
		l.mu.Unlock()
	})
	return l
}

func (l *load) finish() []result {
	l.workers.Stop()
	return l.snapshot()
}

func (l *load) snapshot() []result {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]result(nil), l.results...)
}

// one sends one chat completion through the hub.
func (l *load) one(prompt string, stream bool) result {
	ctx := context.Background()
	params := openai.ChatCompletionNewParams{Model: l.model, MaxTokens: openai.Int(12),
		Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage(prompt)}}
	var resp *http.Response
	r := result{start: time.Now(), stream: stream}
	if stream {
		s := l.client.Chat.Completions.NewStreaming(ctx, params, option.WithResponseInto(&resp))
		r.firstByte = resp != nil && resp.StatusCode == http.StatusOK
		chunks := 0
		for s.Next() {
			if chunks == 0 {
				r.ttft = time.Since(r.start)
			}
			chunks++
		}
		r.err = s.Err()
		if r.err == nil && chunks == 0 {
			r.err = errors.New("a stream without chunks")
		}
	} else {
		c, err := l.client.Chat.Completions.New(ctx, params, option.WithResponseInto(&resp))
		r.err = err
		if err == nil && (len(c.Choices) == 0 || c.Usage.CompletionTokens == 0) {
			r.err = fmt.Errorf("an empty completion: %+v", c)
		}
	}
	if resp != nil {
		r.member = resp.Header.Get(wire.HeaderGlobalMember)
	}
	r.end = time.Now()
	return r
}

// shares counts answered requests by member among those that started in [from, to).
func shares(rs []result, from, to time.Time) (map[string]int, int) {
	out, n := map[string]int{}, 0
	for _, r := range rs {
		if r.err == nil && !r.start.Before(from) && r.start.Before(to) {
			out[r.member]++
			n++
		}
	}
	return out, n
}

func TestGlobalTierOnLoopback(t *testing.T) {
	if testing.Short() {
		t.Skip("starts three control planes and 16 processes")
	}
	if os.Getenv("KUBEBUILDER_ASSETS") == "" {
		t.Skip("KUBEBUILDER_ASSETS is not set (KUBEBUILDER_ASSETS=$(hack/control-plane.sh)): every member runs its own control plane")
	}
	// The test's own API clients log through controller-runtime; the
	// members' processes log for themselves.
	kubelog.RouteSlog(slog.New(slog.DiscardHandler))
	began := time.Now()
	b := buildBinaries(t)
	use1 := newMember(t, "use1", "us-east-1", 1)
	use2 := newMember(t, "use2", "us-east-2", 2)
	euw1 := newMember(t, "euw1", "eu-west-1", 3)
	members := []*member{use1, use2, euw1}
	var startWG sync.WaitGroup
	for _, m := range members {
		startWG.Go(func() { m.setUp(t, b) })
	}
	startWG.Wait()
	if t.Failed() {
		t.FailNow()
	}
	t.Cleanup(func() {
		for _, m := range members {
			m.stop()
		}
	})
	front, metrics, hubProc := startHub(t, b, members)
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("the hub's log (its end):\n%s", hubProc.Stderr())
		}
		hubProc.Stop()
	})
	waitUntil(t, "every member in rotation", 20*time.Second, func() bool {
		st := status(t, metrics)
		return st["use1"].InRotation && st["use2"].InRotation && st["euw1"].InRotation
	})
	t.Logf("fleet up in %v", time.Since(began).Round(time.Millisecond))

	t.Run("openai-go through the hub, streamed and not", func(t *testing.T) {
		l := &load{client: openai.NewClient(option.WithBaseURL(front+"/v1"), option.WithAPIKey("unused"), option.WithMaxRetries(0)), model: "llama"}
		for _, stream := range []bool{false, true} {
			if r := l.one("hello there", stream); r.err != nil || r.member == "" {
				t.Errorf("stream=%v: %v (member %q)", stream, r.err, r.member)
			}
		}
	})

	t.Run("a pinned model stays in its region", func(t *testing.T) {
		l := startLoad(front, "llama-eu", 4)
		time.Sleep(1500 * time.Millisecond)
		rs := l.finish()
		by, n := shares(rs, time.Time{}, time.Now())
		if n < 10 || by["euw1"] != n {
			t.Errorf("llama-eu answered by %v (%d requests), want euw1 alone", by, n)
		}
		checkNoErrors(t, rs)
	})

	t.Run("a member's control plane stopped under load: it keeps serving and stays in rotation", func(t *testing.T) {
		l := startLoad(front, "llama", 6)
		time.Sleep(2 * time.Second)
		by, _ := shares(l.snapshot(), time.Time{}, time.Now())
		victim := busiest(members, by)
		// The API server and etcd: the member's gateway keeps the endpoints
		// it last saw, and its operator retries.
		must(t, victim.env.StopControlPlane())
		stopped := time.Now()
		outOfRotation := 0
		for time.Since(stopped) < outage {
			if !status(t, metrics)[victim.name].InRotation {
				outOfRotation++
			}
			time.Sleep(100 * time.Millisecond)
		}
		during, n := shares(l.snapshot(), stopped, time.Now())
		restartBegan := time.Now()
		must(t, victim.env.StartControlPlane())
		restartTook := time.Since(restartBegan)
		time.Sleep(time.Second)
		rs := l.finish()
		t.Logf("before: %v; with %s's API server and etcd down for %v: %v of %d; the control plane back in %v", by, victim.name,
			outage, during, n, restartTook.Round(time.Millisecond))
		if outOfRotation > 0 {
			t.Errorf("%s was out of the hub's rotation in %d of its status reads while only its control plane was down", victim.name, outOfRotation)
		}
		if n < 20 || during[victim.name] == 0 {
			t.Errorf("with its control plane down %s answered %d of %d requests, want some", victim.name, during[victim.name], n)
		}
		checkNoErrors(t, rs)

		// Back, the member's gateway follows its pool again: a Pod that
		// turns not ready leaves it, and comes back when ready.
		followed := time.Now()
		ctx := context.Background()
		must(t, testenv.SetReadinessProbe(ctx, victim.k8s, memberNamespace, victim.podName(1), false))
		waitUntil(t, victim.name+"'s gateway dropping the Pod no longer ready", time.Minute, func() bool { return victim.gatewayEndpoints(t) == 1 })
		must(t, testenv.SetReadinessProbe(ctx, victim.k8s, memberNamespace, victim.podName(1), true))
		waitUntil(t, victim.name+"'s gateway taking the Pod back", time.Minute, func() bool { return victim.gatewayEndpoints(t) == 2 })
		t.Logf("%s's gateway followed a Pod out of and back into its pool in %v after its control plane's return",
			victim.name, time.Since(followed).Round(time.Millisecond))
	})

	t.Run("latency on one member shifts its traffic away", func(t *testing.T) {
		l := startLoad(front, "llama", 6)
		time.Sleep(3 * time.Second)
		slowed := time.Now()
		// The busiest member's link gets 100 ms each way: 200 ms more round trip.
		before, nb := shares(l.snapshot(), time.Time{}, slowed)
		slow := busiest(members, before)
		slow.delay.set(100 * time.Millisecond)
		// The hub learns the round trip from its summary fetches (every 0.5 s, smoothed).
		time.Sleep(3 * time.Second)
		settled := time.Now()
		time.Sleep(3 * time.Second)
		rs := l.finish()
		slow.delay.set(0)
		after, na := shares(rs, settled, time.Now())
		t.Logf("before %s's delay: %v of %d; after: %v of %d", slow.name, before, nb, after, na)
		shareBefore, shareAfter := float64(before[slow.name])/float64(max(nb, 1)), float64(after[slow.name])/float64(max(na, 1))
		if nb < 20 || na < 20 || shareAfter > shareBefore/3 {
			t.Errorf("%s's share %.2f before the delay, %.2f after; want under a third of it after", slow.name, shareBefore, shareAfter)
		}
		checkNoErrors(t, rs)
	})

	t.Run("a member killed under load: no errors before the first byte, out within 2s, back within 30s, no P99 spike", func(t *testing.T) {
		l := startLoad(front, "llama", 6)
		probe := startSchedProbe()
		// The first second warms the clients' connections and the hub's
		// estimates; the steady state is measured after it.
		time.Sleep(time.Second)
		steadyFrom := time.Now()
		time.Sleep(steadyWindow)
		retriesBefore := counter(t, metrics, wire.GlobalRetries)
		killed := time.Now()
		// The victim is the member that takes the most of the traffic (the
		// policy may well send all of it to one member).
		by, _ := shares(l.snapshot(), steadyFrom, killed)
		victim := busiest(members, by)
		name := victim.name
		if by[name] == 0 {
			t.Fatalf("no member took traffic before the kill (%v): nothing to fail over", by)
		}
		controlPlaneDown := victim.kill()
		var out time.Duration
		waitUntil(t, name+" out of rotation", 10*time.Second, func() bool {
			out = time.Since(killed)
			return !status(t, metrics)[name].InRotation
		})
		tOff := killed.Add(2 * time.Second)
		time.Sleep(time.Until(tOff))
		sentAt2s := attempts(t, metrics, name)
		time.Sleep(2 * time.Second)
		if n := attempts(t, metrics, name) - sentAt2s; n != 0 {
			t.Errorf("the hub sent %d requests to %s more than 2 s after its death", n, name)
		}
		must(t, <-controlPlaneDown)
		restarted := time.Now()
		victim.restart(t, b)
		// The hub's part of the recovery counts from the member's gateway
		// being ready again; its control plane's restart comes before.
		up := time.Now()
		var back time.Duration
		waitUntil(t, name+" answering requests again", 30*time.Second, func() bool {
			for _, r := range l.snapshot() {
				if r.member == name && r.start.After(up) && r.err == nil {
					back = time.Since(up)
					return true
				}
			}
			return false
		})
		// The recovery window: the member back in rotation, in slow start
		// and then at its full share.
		time.Sleep(time.Until(up.Add(recoveryWindow)))
		rs := l.finish()
		delays := probe.finish()
		var timeline strings.Builder
		for from := steadyFrom; from.Before(up.Add(recoveryWindow)); from = from.Add(2 * time.Second) {
			to := from.Add(2 * time.Second)
			fmt.Fprintf(&timeline, "\n  %+6.1fs: TTFT P99 %v, max %v; the test's scheduling delay P99 %v",
				from.Sub(up).Seconds(), ttftP99(rs, from, to, ""), ttftMax(rs, from, to), delays.p99(from, to))
		}
		t.Logf("timeline from the member's return (killed at %+.1fs, restart began at %+.1fs):%s", killed.Sub(up).Seconds(), restarted.Sub(up).Seconds(), timeline.String())
		recovered := up.Sub(restarted) + back
		t.Logf("%s out of rotation %v after its death; its control plane, operator, simulators and gateway up again %v after the restart began; serving again %v after its gateway was ready (%v after the restart began)",
			name, out.Round(time.Millisecond), up.Sub(restarted).Round(time.Millisecond), back.Round(time.Millisecond), recovered.Round(time.Millisecond))
		if out > 2*time.Second {
			t.Errorf("%s left rotation %v after its death, want within 2 s", name, out)
		}
		if recovered > 30*time.Second {
			t.Errorf("%s served again %v after its restart began, want within 30 s", name, recovered)
		}
		checkNoErrors(t, rs)
		t.Logf("requests retried on another member since the kill: %d", counter(t, metrics, wire.GlobalRetries)-retriesBefore)
		// Slow start: in its first second back it takes a small share.
		firstSecond, n := shares(rs, up.Add(back), up.Add(back+time.Second))
		t.Logf("first second back: %v of %d", firstSecond, n)

		// No P99 spike on recovery: the streamed requests' TTFT over the
		// recovery window against the steady state before the kill.
		steady := ttftP99(rs, steadyFrom, killed, "")
		recovery := ttftP99(rs, up, up.Add(recoveryWindow), "")
		t.Logf("P99 TTFT: steady %v; during the outage %v; during the restart %v; recovery %v (%s's own %v, the others' %v); recovery/steady %.2f",
			steady, ttftP99(rs, killed, restarted, ""), ttftP99(rs, restarted, up, ""), recovery,
			name, ttftP99(rs, up, up.Add(recoveryWindow), name), ttftP99(rs, up, up.Add(recoveryWindow), "-"+name), recovery.ratio(steady))
		by, n = shares(rs, up, up.Add(recoveryWindow))
		t.Logf("recovery window: %v of %d", by, n)
		for _, w := range []p99{steady, recovery} {
			if w.n < minP99Samples {
				t.Errorf("%d streamed requests in a window, want at least %d for a P99", w.n, minP99Samples)
			}
		}
		if ratio := recovery.ratio(steady); ratio > 2 {
			t.Errorf("P99 TTFT over the %v after %s's return is %.2f× the steady state's (%v against %v), want at most 2×",
				recoveryWindow, name, ratio, recovery.value, steady.value)
		}
	})

	t.Run("a pinned model with its region gone gets a 503 with the reason", func(t *testing.T) {
		controlPlaneDown := euw1.kill()
		t.Cleanup(func() { <-controlPlaneDown })
		waitUntil(t, "euw1 out of rotation", 10*time.Second, func() bool { return !status(t, metrics)["euw1"].InRotation })
		l := &load{client: openai.NewClient(option.WithBaseURL(front+"/v1"), option.WithAPIKey("unused"), option.WithMaxRetries(0)), model: "llama-eu"}
		r := l.one("hello", false)
		var apiErr *openai.Error
		if !errors.As(r.err, &apiErr) || apiErr.StatusCode != http.StatusServiceUnavailable ||
			!strings.Contains(apiErr.Message, "pinned to regions [eu-west-1]") || !strings.Contains(apiErr.Message, "euw1") {
			t.Errorf("llama-eu with eu-west-1 gone: %v, want a 503 naming the pin and the member", r.err)
		}
		l.model = "llama"
		if r := l.one("hello", true); r.err != nil {
			t.Errorf("llama with euw1 gone: %v", r.err)
		}
	})
	t.Logf("end to end in %v", time.Since(began).Round(time.Millisecond))
}

// outage is how long a member's control plane stays down under load.
const outage = 10 * time.Second

const (
	// steadyWindow is the steady state before a member is killed, and
	// recoveryWindow the time after its return over which its recovery's
	// P99 TTFT is measured: its slow start (10 s) and a little more.
	steadyWindow   = 5 * time.Second
	recoveryWindow = 12 * time.Second
	// minP99Samples is the fewest TTFTs a window's P99 is taken from.
	minP99Samples = 100
)

// p99 is the P99 TTFT of n streamed requests.
type p99 struct {
	value time.Duration
	n     int
}

func (p p99) String() string {
	return fmt.Sprintf("%v (%d requests)", p.value.Round(time.Millisecond), p.n)
}

func (p p99) ratio(base p99) float64 { return float64(p.value) / float64(max(base.value, 1)) }

func ttftMax(rs []result, from, to time.Time) time.Duration {
	var m time.Duration
	for _, r := range rs {
		if r.err == nil && r.stream && !r.start.Before(from) && r.start.Before(to) {
			m = max(m, r.ttft)
		}
	}
	return m.Round(time.Millisecond)
}

// schedProbe measures how late a 2 ms sleep wakes up: the machine's CPU
// contention as this process sees it.
type schedProbe struct {
	stop chan struct{}
	done chan struct{}
	at   []time.Time
	late []time.Duration
}

func startSchedProbe() *schedProbe {
	p := &schedProbe{stop: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(p.done)
		for {
			select {
			case <-p.stop:
				return
			default:
			}
			before := time.Now()
			time.Sleep(2 * time.Millisecond)
			p.at = append(p.at, before)
			p.late = append(p.late, time.Since(before)-2*time.Millisecond)
		}
	}()
	return p
}

func (p *schedProbe) finish() *schedProbe {
	close(p.stop)
	<-p.done
	return p
}

func (p *schedProbe) p99(from, to time.Time) time.Duration {
	var xs []float64
	for i, at := range p.at {
		if !at.Before(from) && at.Before(to) {
			xs = append(xs, float64(p.late[i]))
		}
	}
	sort.Float64s(xs)
	return time.Duration(bench.Percentile(xs, 99)).Round(time.Millisecond)
}

// ttftP99 is the P99 TTFT of the streamed requests answered in full that
// started in [from, to): all of them for member "", those member answered,
// or, for "-member", those the others did.
func ttftP99(rs []result, from, to time.Time, member string) p99 {
	var ttfts []float64
	for _, r := range rs {
		if r.err != nil || !r.stream || r.start.Before(from) || !r.start.Before(to) {
			continue
		}
		if other, ok := strings.CutPrefix(member, "-"); (ok && r.member == other) || (!ok && member != "" && r.member != member) {
			continue
		}
		ttfts = append(ttfts, float64(r.ttft))
	}
	sort.Float64s(ttfts)
	return p99{time.Duration(bench.Percentile(ttfts, 99)), len(ttfts)}
}

// busiest is the member that answered the most requests of by (the policy
// may well send all of the traffic to one member).
func busiest(members []*member, by map[string]int) *member {
	top := members[0]
	for _, m := range members[1:] {
		if by[m.name] > by[top.name] {
			top = m
		}
	}
	return top
}

// checkNoErrors fails on any client-visible error of a request that had no
// first byte; those after a first byte (a stream cut by a killed member) are
// the only ones allowed, and are logged.
func checkNoErrors(t *testing.T, rs []result) {
	t.Helper()
	cut := 0
	var bad []string
	for _, r := range rs {
		switch {
		case r.err == nil:
		case r.firstByte:
			cut++
		default:
			bad = append(bad, fmt.Sprintf("%s (stream=%v, at %s)", describe(r.err), r.stream, r.start.Format("15:04:05.000")))
		}
	}
	sort.Strings(bad)
	t.Logf("%d requests, %d cut after their first byte, %d errors before it", len(rs), cut, len(bad))
	if len(bad) > 0 {
		t.Errorf("%d client-visible errors without a first byte, e.g. %v", len(bad), bad[:min(len(bad), 5)])
	}
}

// describe is an error with the OpenAI error's message, which openai.Error's
// own text leaves out.
func describe(err error) string {
	var apiErr *openai.Error
	if errors.As(err, &apiErr) {
		return fmt.Sprintf("%d: %s", apiErr.StatusCode, apiErr.Message)
	}
	return err.Error()
}

func waitUntil(t *testing.T, what string, timeout time.Duration, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(timeout); !cond(); time.Sleep(50 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting until %s", timeout, what)
		}
	}
}
