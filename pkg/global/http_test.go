package global

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/igw-dev/igw/internal/testfile"
	"github.com/igw-dev/igw/pkg/epp/datastore"
	"github.com/igw-dev/igw/pkg/epp/latency"
	"github.com/igw-dev/igw/pkg/epp/prefixindex"
	"github.com/igw-dev/igw/pkg/epp/scheduling"
	"github.com/igw-dev/igw/pkg/globalsummary"
	"github.com/igw-dev/igw/pkg/tokencount"
	"github.com/igw-dev/igw/pkg/wire"
)

// memberCluster is one member's endpoint picker state (store and prefix
// index) behind its summary handler on a real HTTP server.
type memberCluster struct {
	store *datastore.Store
	index *prefixindex.Index
	srv   *httptest.Server
}

func startMember(t *testing.T, name, region, tokenFile string) *memberCluster {
	t.Helper()
	mc := &memberCluster{store: datastore.NewStore(latency.DefaultPriors), index: prefixindex.New(10000)}
	eps := []datastore.Endpoint{{Address: "10.0.0.1", Port: 8000}, {Address: "10.0.0.2", Port: 8000}}
	mc.store.SetEndpoints(eps)
	auth, err := globalsummary.NewTokenFile(tokenFile, nil)
	if err != nil {
		t.Fatal(err)
	}
	exp := globalsummary.NewExporter(globalsummary.ExporterOptions{Cluster: name, Region: region}, func() []globalsummary.Source {
		return []globalsummary.Source{{Model: "llama", Store: mc.store, Index: mc.index, BlockTokens: 128, Staleness: time.Minute}}
	})
	h, err := globalsummary.NewHandler(func(now time.Time) *globalsummary.Summary {
		for _, ep := range eps { // fresh telemetry, as the scraper would keep it
			mc.store.UpdateMetrics(ep.Key(), datastore.Metrics{Running: 2, KVCacheKnown: true, KVCacheUsage: 0.3, SampledAt: now}, now)
		}
		return exp.Summary(now)
	}, globalsummary.HandlerOptions{Auth: auth})
	if err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	mux.Handle(wire.GlobalSummaryPath, h)
	mc.srv = httptest.NewServer(mux)
	t.Cleanup(mc.srv.Close)
	return mc
}

// TestMembersOverHTTP: the hub fetches two members' summaries over real
// HTTP with a bearer token, and the conversation whose prefix the second
// member's picker holds goes there; a member whose token is refused is out.
func TestMembersOverHTTP(t *testing.T) {
	dir := t.TempDir()
	tokenFile := testfile.Write(t, dir, "token", "6c6f6f706261636b2d746f6b656e2d31\n")
	wrong := testfile.Write(t, dir, "wrong", "0000000000000000000000000000000000\n")
	a := startMember(t, "a", "us-east-1", tokenFile)
	b := startMember(t, "b", "us-east-1", tokenFile)
	conversation := strings.Repeat("system: you are terse. user: summarise the incident report. ", 300)
	hashes := prefixindex.Hash(nil, "llama", conversation, 128*tokencount.CharsPerToken, 256)
	b.index.Add(b.store.Get("10.0.0.2:8000").ID(), hashes, nil)

	p, err := New(Options{Region: "us-east-1"})
	if err != nil {
		t.Fatal(err)
	}
	pl, _ := LoadPipeline([]byte(DefaultConfig))
	p.SetPipeline(pl)
	members := []Member{
		{Name: "a", Region: "us-east-1", Address: strings.TrimPrefix(a.srv.URL, "http://")},
		{Name: "b", Region: "us-east-1", Address: strings.TrimPrefix(b.srv.URL, "http://")},
	}
	if err := p.SetMembers(members); err != nil {
		t.Fatal(err)
	}
	client := &globalsummary.Client{TokenFile: tokenFile}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for _, mc := range []struct {
		name string
		srv  *httptest.Server
	}{{"a", a.srv}, {"b", b.srv}} {
		start := time.Now()
		s, err := client.Fetch(ctx, mc.srv.URL+wire.GlobalSummaryPath)
		if err != nil {
			t.Fatal(err)
		}
		if err := p.UpdateSummary(mc.name, s, time.Since(start), time.Now()); err != nil {
			t.Fatal(err)
		}
	}
	d, apiErr := p.Pick(ctx, &scheduling.Request{Model: "llama", Prompt: conversation + " user: and the root cause?"}, true, time.Now())
	if apiErr != nil {
		t.Fatal(apiErr)
	}
	if d.Member != "b" || d.UncachedTokens >= len(conversation)/tokencount.CharsPerToken/2 {
		t.Fatalf("picked %s with %d uncached tokens: %s", d.Member, d.UncachedTokens, d.Breakdown)
	}
	p.ObserveCompletion(d, time.Now())

	bad := &globalsummary.Client{TokenFile: wrong}
	for range 2 {
		_, err := bad.Fetch(ctx, b.srv.URL+wire.GlobalSummaryPath)
		if err == nil || !strings.Contains(err.Error(), "401") {
			t.Fatalf("wrong token: %v", err)
		}
		_ = p.SummaryFailed("b", err, time.Now())
	}
	d, apiErr = p.Pick(ctx, &scheduling.Request{Model: "llama", Prompt: conversation}, false, time.Now())
	if apiErr != nil || d.Member != "a" {
		t.Fatalf("with b refusing the hub: %+v %v", d, apiErr)
	}
}
