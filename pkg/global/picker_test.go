package global

import (
	"context"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/igw-dev/igw/pkg/epp/prefixindex"
	"github.com/igw-dev/igw/pkg/epp/scheduling"
	"github.com/igw-dev/igw/pkg/global/health"
	"github.com/igw-dev/igw/pkg/global/member/membertest"
	"github.com/igw-dev/igw/pkg/globalsummary"
	"github.com/igw-dev/igw/pkg/openaimodels"
	"github.com/igw-dev/igw/pkg/tokencount"
)

// t0 is the member tests' decision time, so that their members fit in.
var t0 = membertest.Now

func at(s float64) time.Time { return t0.Add(time.Duration(s * float64(time.Second))) }

// fleet is a picker over members, each serving llama from 4 idle endpoints.
type fleet struct {
	t       *testing.T
	p       *Picker
	members []Member
	rtt     map[string]time.Duration
	models  map[string]globalsummary.Model
}

// newTestPicker returns a picker in us-east-1 running config over members.
func newTestPicker(tb testing.TB, config string, seed uint64, members []Member) *Picker {
	tb.Helper()
	p, err := New(Options{Region: "us-east-1", Seed: seed})
	if err != nil {
		tb.Fatal(err)
	}
	pl, err := LoadPipeline([]byte(config))
	if err != nil {
		tb.Fatal(err)
	}
	p.SetPipeline(pl)
	if err := p.SetMembers(members); err != nil {
		tb.Fatal(err)
	}
	return p
}

func newFleet(t *testing.T, config string, members ...Member) *fleet {
	t.Helper()
	p := newTestPicker(t, config, 1, members)
	f := &fleet{t: t, p: p, members: members, rtt: map[string]time.Duration{}, models: map[string]globalsummary.Model{}}
	for _, m := range members {
		f.rtt[m.Name] = 2 * time.Millisecond
		h := 0.8
		f.models[m.Name] = globalsummary.Model{Model: "llama", Endpoints: 4, ReadyEndpoints: 4, PrefillTokensPerSecond: 80000,
			EndpointPrefillTokensPerSecond: 20000, DecodeStepSeconds: 0.01, KVHeadroom: &h, KVCapacityTokens: 2_000_000}
	}
	return f
}

// poll delivers every member's summary at now, except those named in down.
func (f *fleet) poll(now time.Time, down ...string) {
	f.t.Helper()
	for _, m := range f.members {
		if slices.Contains(down, m.Name) {
			_ = f.p.SummaryFailed(m.Name, &globalsummary.FetchError{URL: m.Name, Err: context.DeadlineExceeded}, now)
			continue
		}
		s := &globalsummary.Summary{Version: 1, Cluster: m.Name, Region: m.Region, GeneratedAt: now, Models: []globalsummary.Model{f.models[m.Name]}}
		if err := f.p.UpdateSummary(m.Name, s, f.rtt[m.Name], now); err != nil {
			f.t.Fatal(err)
		}
	}
}

func (f *fleet) pick(req *scheduling.Request, now time.Time) *Decision {
	f.t.Helper()
	d, apiErr := f.p.Pick(context.Background(), req, true, now)
	if apiErr != nil {
		f.t.Fatalf("pick: %v", apiErr)
	}
	return d
}

var three = []Member{
	{Name: "use1", Region: "us-east-1", Address: "gw.use1.example:443"},
	{Name: "usw2", Region: "us-west-2", Address: "gw.usw2.example:443"},
	{Name: "euw1", Region: "eu-west-1", Address: "gw.euw1.example:443"},
}

func withDigest(m globalsummary.Model, prompt string) globalsummary.Model {
	hashes := prefixindex.Hash(nil, m.Model, prompt, 128*tokencount.CharsPerToken, 256)
	m.Digest = globalsummary.NewDigest(128, len(hashes), 0)
	for _, h := range hashes {
		m.Digest.Add(h)
	}
	return m
}

// TestPrefixAndNetworkDecide: the member holding a conversation's prefix
// gets its next turn, even 40 ms further away; without digests the nearest
// wins; the destination header names a fallback.
func TestPrefixAndNetworkDecide(t *testing.T) {
	f := newFleet(t, DefaultConfig, three...)
	f.rtt["usw2"], f.rtt["euw1"] = 40*time.Millisecond, 80*time.Millisecond
	conversation := strings.Repeat("user: tell me more about the fabric. assistant: it spans regions. ", 500) // ~8k tokens
	f.poll(at(0))
	d := f.pick(&scheduling.Request{Model: "llama", Prompt: conversation}, at(0.1))
	if d.Member != "use1" || d.FallbackMember != "usw2" || d.Destination() != "gw.use1.example:443,gw.usw2.example:443" {
		t.Fatalf("without digests: %s (fallback %s), destination %q", d.Member, d.FallbackMember, d.Destination())
	}
	f.p.ObserveCompletion(d, at(0.2))
	f.models["usw2"] = withDigest(f.models["usw2"], conversation)
	f.poll(at(1))
	d = f.pick(&scheduling.Request{Model: "llama", Prompt: conversation + "user: and then?"}, at(1.1))
	if d.Member != "usw2" || d.UncachedTokens > 128 {
		t.Fatalf("with usw2 holding the prefix: %s, %d uncached tokens; %s", d.Member, d.UncachedTokens, d.Breakdown)
	}
}

// TestPicksSinceTheSummaryCount: a burst between two summaries spreads over
// the members instead of piling onto the one that looked best.
func TestPicksSinceTheSummaryCount(t *testing.T) {
	f := newFleet(t, DefaultConfig, three...)
	f.poll(at(0))
	count := map[string]int{}
	for i := range 60 {
		d := f.pick(&scheduling.Request{Model: "llama", PromptTokens: 8000}, at(0.1+float64(i)*0.001))
		count[d.Member]++
	}
	t.Logf("a burst of 60: %v", count)
	if len(count) != 3 || count["use1"] > 40 {
		t.Fatalf("a burst of 60 landed %v", count)
	}
}

// TestRetryOnceOnAnotherMember: a failure before the first byte moves the
// request to another member once; the retry's failure, or a failure after
// the first byte, is not retried.
func TestRetryOnceOnAnotherMember(t *testing.T) {
	f := newFleet(t, DefaultConfig, three...)
	f.poll(at(0))
	req := &scheduling.Request{Model: "llama", PromptTokens: 100}
	d := f.pick(req, at(0.1))
	r, apiErr := f.p.Retry(d, health.Reset, at(0.11))
	if apiErr != nil || r.Member == d.Member || r.Attempt != 2 || r.FallbackAddress != "" || r.Reason != ReasonRetried {
		t.Fatalf("retry of %s: %+v %v", d.Member, r, apiErr)
	}
	if _, apiErr := f.p.Retry(r, health.Reset, at(0.12)); apiErr == nil || !strings.Contains(apiErr.Message, "retried once") {
		t.Fatalf("a second retry: %v", apiErr)
	}
	d = f.pick(req, at(0.2))
	f.p.ObserveFirstByte(d, at(0.25))
	if _, apiErr := f.p.Retry(d, health.Reset, at(0.3)); apiErr == nil || !strings.Contains(apiErr.Message, "after the response began") {
		t.Fatalf("retry after the first byte: %v", apiErr)
	}
	// A shed spills over the same way; shed again, the client gets a 429.
	d = f.pick(req, at(0.4))
	r, apiErr = f.p.Retry(d, health.Shed, at(0.41))
	if apiErr != nil || r.Member == d.Member || r.Attempt != 2 {
		t.Fatalf("spill-over of %s's shed: %+v %v", d.Member, r, apiErr)
	}
	if _, apiErr := f.p.Retry(r, health.Shed, at(0.42)); apiErr == nil || apiErr.Status != 429 || apiErr.RetryAfterSeconds < 1 {
		t.Fatalf("shed on the retry too: %v, want a 429 with Retry-After", apiErr)
	}
}

// TestPinnedModelNeverLeavesItsRegion: a model pinned to eu-west-1 goes only
// there; when its one member there fails, the retry and later picks get a
// 503 naming the pin, never another region.
func TestPinnedModelNeverLeavesItsRegion(t *testing.T) {
	config := `
plugins:
- {name: region-pin, type: region-pin, parameters: {pins: [{model: llama, regions: [eu-west-1]}]}}
` + DefaultConfig
	f := newFleet(t, config, three...)
	f.poll(at(0))
	req := &scheduling.Request{Model: "llama", PromptTokens: 100}
	d := f.pick(req, at(0.1))
	if d.Member != "euw1" || d.FallbackMember != "" {
		t.Fatalf("pinned pick: %s, fallback %q", d.Member, d.FallbackMember)
	}
	_, apiErr := f.p.Retry(d, health.Reset, at(0.11))
	if apiErr == nil || apiErr.Status != http.StatusServiceUnavailable || !strings.Contains(apiErr.Message, "pinned to regions [eu-west-1] (data residency)") {
		t.Fatalf("retry of a pinned request: %v", apiErr)
	}
	for i := range 2 { // with the retried one, three failures in a row: ejected
		d := f.pick(req, at(0.2+float64(i)*0.01))
		f.p.ObserveFailure(d, health.Reset, at(0.2+float64(i)*0.01))
	}
	_, apiErr = f.p.Pick(context.Background(), req, false, at(0.3))
	if apiErr == nil || !strings.Contains(apiErr.Message, "pinned to regions [eu-west-1]") || !strings.Contains(apiErr.Message, "euw1 ejected after 3 consecutive request failures") {
		t.Fatalf("pick while the pinned region is out: %v", apiErr)
	}
}

// TestGarbageOrSilentMemberSkipped: a member whose summary is invalid, or
// who stops answering, is marked in status and skipped; requests go to the
// others, never a 5xx while one can serve.
func TestGarbageOrSilentMemberSkipped(t *testing.T) {
	f := newFleet(t, DefaultConfig, three...)
	f.poll(at(0))
	bad := &globalsummary.Summary{Version: 1, Cluster: "use1", GeneratedAt: at(0.5), Models: []globalsummary.Model{{Model: "llama", Waiting: -4}}}
	for _, s := range []float64{0.5, 1} {
		if err := f.p.UpdateSummary("use1", bad, time.Millisecond, at(s)); err == nil {
			t.Fatal("garbage accepted")
		}
	}
	st := f.p.Status(at(1))
	var use1 MemberStatus
	for _, s := range st {
		if s.Name == "use1" {
			use1 = s
		}
	}
	if use1.InRotation || !use1.Garbage || !strings.Contains(use1.LastError, "must not be negative") {
		t.Fatalf("status of the garbage member: %+v", use1)
	}
	for i := range 20 {
		if d := f.pick(&scheduling.Request{Model: "llama", PromptTokens: 100}, at(1+float64(i)*0.01)); d.Member == "use1" {
			t.Fatal("picked the member that sent garbage")
		}
	}
}

// TestOutageTimeline: a member dies under load at 10 s. Its resets eject it
// at once and its failed checks keep it out; no later request is sent there.
// When it recovers at 20 s, its share comes back over slow start, not at once.
func TestOutageTimeline(t *testing.T) {
	f := newFleet(t, DefaultConfig, three...)
	share := func(from, to float64, down ...string) map[string]int {
		count := map[string]int{}
		for now := from; now < to; now += 0.01 { // 100 requests a second
			if int(now*100)%50 == 0 {
				f.poll(at(now), down...)
			}
			d := f.pick(&scheduling.Request{Model: "llama", PromptTokens: 100}, at(now))
			if slices.Contains(down, d.Member) {
				if r, apiErr := f.p.Retry(d, health.Reset, at(now)); apiErr != nil || slices.Contains(down, r.Member) {
					t.Fatalf("at %.2f s: retry of a request to dead %s: %+v %v", now, d.Member, r, apiErr)
				} else {
					f.p.ObserveCompletion(r, at(now))
				}
				count["failed-"+d.Member]++
				continue
			}
			f.p.ObserveCompletion(d, at(now))
			count[d.Member]++
		}
		return count
	}
	// The fleet is balanced by load; use1 is the nearest and takes most.
	f.rtt["usw2"], f.rtt["euw1"] = 30*time.Millisecond, 35*time.Millisecond
	before := share(0, 10)
	if before["use1"] == 0 {
		t.Fatalf("before the outage: %v", before)
	}
	during := share(10, 20, "use1")
	if during["failed-use1"] > 3 {
		t.Fatalf("%d requests reached the dead member (want at most the 3 that eject it): %v", during["failed-use1"], during)
	}
	recovery := share(20, 21)
	later := share(31, 41)
	t.Logf("before %v; during %v; first second back %v; 11-21 s back %v", before, during, recovery, later)
	if first, steady := float64(recovery["use1"])/100, float64(later["use1"])/1000; first > steady/2 || steady == 0 {
		t.Fatalf("use1's share in its first second back %.2f, steady %.2f: slow start should hold it under half", first, steady)
	}
}

func TestLoadPipelineRejectsEndpointPickerSettings(t *testing.T) {
	for _, bad := range []string{
		DefaultConfig + "latency: {chunkTokens: 1}\n",
		DefaultConfig + "admission: {enabled: false}\n",
		DefaultConfig + "prefix: {blockTokens: 64}\n",
		"scorers: [{plugin: predicted-latency, weight: 1}]\n",
		"filters: [model-served-filter]\nscorers: [{plugin: queue, weight: 1}]\n",
	} {
		if _, err := LoadPipeline([]byte(bad)); err == nil {
			t.Errorf("accepted:\n%s", bad)
		}
	}
}

// TestBlendIsFourWeightsSummingToOne: the managed router's policy is a
// configuration of the same plugins.
func TestBlendIsFourWeightsSummingToOne(t *testing.T) {
	pl, err := LoadPipeline([]byte(BlendConfig))
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	sum := 0.0
	for _, ws := range pl.Profile.Scorers {
		names = append(names, ws.Scorer.Type())
		sum += ws.Weight
	}
	if !slices.Equal(names, []string{"kv-cache-utilization", "queue", "region-proximity", "member-error-rate"}) || sum != 1 {
		t.Fatalf("blend scorers %v, weights sum %v", names, sum)
	}
	if pl.Profile.Fallbacks != 1 {
		t.Fatalf("fallbacks %d", pl.Profile.Fallbacks)
	}
}

func TestSetMembersValidates(t *testing.T) {
	p, _ := New(Options{})
	for _, bad := range [][]Member{
		{{Name: "", Region: "r", Address: "a:1"}},
		{{Name: "a", Region: "", Address: "a:1"}},
		{{Name: "a", Region: "r", Address: "a"}},
		{{Name: "a", Region: "r", Address: "a:99999"}},
		{{Name: "a", Region: "r", Address: "a:1"}, {Name: "a", Region: "r", Address: "b:1"}},
		{{Name: "a", Region: "r", Address: "a:1"}, {Name: "b", Region: "r", Address: "a:1"}},
	} {
		if err := p.SetMembers(bad); err == nil {
			t.Errorf("accepted %+v", bad)
		}
	}
}

// TestAdapterResolvesToItsBaseModel: a request naming only an adapter goes
// to a member that lists it.
func TestAdapterResolvesToItsBaseModel(t *testing.T) {
	f := newFleet(t, DefaultConfig, three...)
	m := f.models["euw1"]
	m.Adapters = []string{"sql"}
	f.models["euw1"] = m
	f.poll(at(0))
	if d := f.pick(&scheduling.Request{Model: "sql", PromptTokens: 10}, at(0.1)); d.Member != "euw1" {
		t.Fatalf("adapter went to %s", d.Member)
	}
	if _, apiErr := f.p.Pick(context.Background(), &scheduling.Request{Model: "nothing"}, false, at(0.1)); apiErr == nil || !strings.Contains(apiErr.Message, "no member cluster has reported model nothing") {
		t.Fatalf("unknown model: %v", apiErr)
	}
}

// TestServedModelsListsEveryMembersModelsAndAdapters: the union of the
// members' latest summaries, each adapter once, after its model; a member
// whose fetches fail keeps its last list; a member never heard from adds none.
func TestServedModelsListsEveryMembersModelsAndAdapters(t *testing.T) {
	f := newFleet(t, DefaultConfig, three...)
	f.models["use1"] = globalsummary.Model{Model: "qwen", Endpoints: 1, ReadyEndpoints: 1, Adapters: []string{"qwen-sql"}}
	f.models["usw2"] = globalsummary.Model{Model: "llama", Endpoints: 1, ReadyEndpoints: 1, Adapters: []string{"llama-chat", "qwen-sql"}}
	if got := f.p.ServedModels(); len(got) != 0 {
		t.Fatalf("before any summary: %v", got)
	}
	f.poll(at(0), "euw1")
	f.poll(at(1), "use1", "euw1")
	want := []openaimodels.Entry{{ID: "llama"}, {ID: "llama-chat", Parent: "llama"}, {ID: "qwen-sql", Parent: "llama"}, {ID: "qwen"}}
	if got := f.p.ServedModels(); !slices.Equal(got, want) {
		t.Fatalf("served models %v, want %v", got, want)
	}
}

// TestServedByMovesTheDecision: a request the proxy retried on the fallback
// is the primary's failure and the fallback's from then on; one the proxy
// balanced elsewhere is no failure; an address of no member leaves d alone.
func TestServedByMovesTheDecision(t *testing.T) {
	f := newFleet(t, DefaultConfig, three...)
	f.poll(at(0))
	d := f.pick(&scheduling.Request{Model: "llama", Prompt: "hello"}, at(0.1))
	if same, err := f.p.ServedBy(d, "10.9.9.9:443", true, health.Reset, at(0.2)); err == nil || same != d {
		t.Fatalf("unknown address: %v, %v", same, err)
	}
	if same, err := f.p.ServedBy(d, d.Address, true, health.Reset, at(0.2)); err != nil || same != d {
		t.Fatalf("the primary's own address: %v, %v", same, err)
	}
	next, err := f.p.ServedBy(d, d.FallbackAddress, true, health.Reset, at(0.2))
	if err != nil || next.Member != d.FallbackMember || next.Attempt != 2 || next.Reason != ReasonRetried {
		t.Fatalf("retried on the fallback: %+v, %v", next, err)
	}
	f.p.ObserveCompletion(next, at(0.3))
	d2 := f.pick(&scheduling.Request{Model: "llama", Prompt: "hello"}, at(1))
	other := ""
	for _, m := range three {
		if m.Name != d2.Member && m.Name != d2.FallbackMember {
			other = m.Address
		}
	}
	next, err = f.p.ServedBy(d2, other, false, health.Reset, at(1.1))
	if err != nil || next.Address != other || next.Attempt != 1 || next.Reason != ReasonBalancedByProxy {
		t.Fatalf("balanced elsewhere: %+v, %v", next, err)
	}
	f.p.ObserveCompletion(next, at(1.2))
	for _, st := range f.p.Status(at(1.3)) {
		if !st.InRotation {
			t.Errorf("%s out of rotation after one failure: %s", st.Name, st.Reason)
		}
	}
}
