package egext_test

import (
	"context"
	"net"
	"testing"
	"time"

	pb "github.com/envoyproxy/gateway/proto/extension"
	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/anypb"

	"github.com/igw-dev/igw/pkg/egext"
	"github.com/igw-dev/igw/pkg/wire"
)

// brokenListener has a connection manager filter whose config is not one, which Fix refuses.
func brokenListener(t *testing.T) *listenerv3.Listener {
	t.Helper()
	notHCM, err := anypb.New(&routev3.Route{Name: "not-a-connection-manager"})
	if err != nil {
		t.Fatal(err)
	}
	return &listenerv3.Listener{Name: "broken", FilterChains: []*listenerv3.FilterChain{{Filters: []*listenerv3.Filter{{
		Name: "envoy.filters.network.http_connection_manager", ConfigType: &listenerv3.Filter_TypedConfig{TypedConfig: notHCM}}}}}}
}

func TestLivenessCountsCallsOverGRPC(t *testing.T) {
	reg := prometheus.NewRegistry()
	live, err := egext.NewLiveness(reg)
	if err != nil {
		t.Fatal(err)
	}
	notified := make(chan struct{}, 10)
	live.OnCall(func() { notified <- struct{}{} })
	if !live.LastCall().IsZero() {
		t.Fatalf("LastCall before any call = %s, want zero", live.LastCall())
	}

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	listening := make(chan net.Addr, 1)
	done := make(chan error, 1)
	go func() {
		done <- egext.Runnable{Addr: "127.0.0.1:0", Listening: listening, Liveness: live}.Start(ctx)
	}()
	addr := <-listening
	conn, err := grpc.NewClient(addr.String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	hook := pb.NewEnvoyGatewayExtensionClient(conn)

	before := time.Now()
	for range 2 {
		if _, err := hook.PostTranslateModify(ctx, &pb.PostTranslateModifyRequest{}); err != nil {
			t.Fatal(err)
		}
	}
	_, err = hook.PostTranslateModify(ctx, &pb.PostTranslateModifyRequest{Listeners: []*listenerv3.Listener{brokenListener(t)}})
	if status.Code(err) != codes.InvalidArgument {
		t.Fatalf("a listener Fix refuses gave %v, want InvalidArgument", err)
	}

	h := egext.HookPostTranslateModify
	if got := testutil.ToFloat64(collector(t, reg, wire.ExtensionServerCalls, "result", "ok")); got != 2 {
		t.Errorf("ok calls = %v, want 2", got)
	}
	if got := testutil.ToFloat64(collector(t, reg, wire.ExtensionServerCalls, "result", "InvalidArgument")); got != 1 {
		t.Errorf("InvalidArgument calls = %v, want 1", got)
	}
	if got := testutil.ToFloat64(collector(t, reg, wire.ExtensionServerErrors, "hook", h)); got != 1 {
		t.Errorf("errors = %v, want 1", got)
	}
	last := testutil.ToFloat64(collector(t, reg, wire.ExtensionServerLastCall, "hook", h))
	if last < float64(before.Unix()) || last > float64(time.Now().Unix()+1) {
		t.Errorf("last call gauge = %v, want a unix time from %d on", last, before.Unix())
	}
	if lc := live.LastCall(); lc.Before(before) {
		t.Errorf("LastCall = %s, before the calls (%s)", lc, before)
	}
	if len(notified) != 3 {
		t.Errorf("listeners ran %d times, want 3", len(notified))
	}

	// A second operator in the process shares the metrics instead of failing.
	again, err := egext.NewLiveness(reg)
	if err != nil {
		t.Fatalf("registering twice: %v", err)
	}
	again.Observe(h, nil)
	if got := testutil.ToFloat64(collector(t, reg, wire.ExtensionServerCalls, "result", "ok")); got != 3 {
		t.Errorf("ok calls after a second Liveness observed one = %v, want 3", got)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}

// collector is the one series of the metric name whose label has value.
func collector(t *testing.T, reg *prometheus.Registry, name, label, value string) prometheus.Collector {
	t.Helper()
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range families {
		if f.GetName() != name {
			continue
		}
		for _, m := range f.GetMetric() {
			for _, lp := range m.GetLabel() {
				if lp.GetName() == label && lp.GetValue() == value {
					var v float64
					switch {
					case m.GetCounter() != nil:
						v = m.GetCounter().GetValue()
					case m.GetGauge() != nil:
						v = m.GetGauge().GetValue()
					}
					return prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "copy"}, func() float64 { return v })
				}
			}
		}
	}
	t.Fatalf("no %s{%s=%q}", name, label, value)
	return nil
}
