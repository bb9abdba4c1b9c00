package livegateway

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/igw-dev/igw/pkg/bench/policies"
	"github.com/igw-dev/igw/pkg/epp/datastore"
	"github.com/igw-dev/igw/pkg/epp/director"
	"github.com/igw-dev/igw/pkg/epp/latency"
	"github.com/igw-dev/igw/pkg/epp/scheduling"
	"github.com/igw-dev/igw/pkg/gateway"
)

// Every benchmark policy but igw (the gateway's own) and the oracle runs in
// the gateway.
func TestRegistryHoldsEveryLiveBaseline(t *testing.T) {
	reg, err := Registry()
	if err != nil {
		t.Fatal(err)
	}
	want := []string{gateway.PolicyIGW}
	for _, p := range policies.Names {
		if p != policies.IGW && p != policies.Oracle {
			want = append(want, p)
		}
	}
	if got := reg.Names(); strings.Join(got, ",") != strings.Join(want, ",") {
		t.Fatalf("registered %v, want %v", got, want)
	}
}

// A failed pick ends the baseline's own accounting, as a completion does:
// least-request counts a failed request's pod free again.
func TestFailureFreesTheBaselinesAccounting(t *testing.T) {
	store := datastore.NewStore(latency.DefaultPriors)
	store.SetEndpoints([]datastore.Endpoint{{Address: "10.0.0.1", Port: 8000}, {Address: "10.0.0.2", Port: 8000}})
	p := &picker{name: policies.LeastRequest, seed: 1, store: store, scrape: time.Second}
	now := time.Unix(1000, 0)
	pick := func() *gateway.Pick {
		t.Helper()
		pk, err := p.Pick(context.Background(), &scheduling.Request{Model: "m", Prompt: "hello"}, false, now)
		if err != nil {
			t.Fatal(err)
		}
		return pk
	}
	first, second := pick(), pick()
	if first.Endpoint == second.Endpoint {
		t.Fatal("least-request sent two requests to one of two idle pods")
	}
	// Were failures not freeing the pod, the counts would tie and each pick
	// would go either way.
	for i := range 10 {
		p.ObserveFailure(first, director.Failure{}, now)
		if first = pick(); first.Endpoint == second.Endpoint {
			t.Fatalf("after failure %d, picked %s, which has a request in flight, over the freed pod", i+1, first.Endpoint)
		}
	}
}
