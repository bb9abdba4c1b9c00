package egext_test

import (
	"context"
	"fmt"
	"net"
	"strings"
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
	counts := func(ok int) string {
		return fmt.Sprintf(`# HELP %[1]s Calls of igw's Envoy Gateway extension hook, by hook and result (ok, or the gRPC code of the error).
# TYPE %[1]s counter
%[1]s{hook="%[3]s",result="InvalidArgument"} 1
%[1]s{hook="%[3]s",result="ok"} %[4]d
# HELP %[2]s Calls of igw's Envoy Gateway extension hook that returned an error, by hook.
# TYPE %[2]s counter
%[2]s{hook="%[3]s"} 1
`, wire.ExtensionServerCalls, wire.ExtensionServerErrors, h, ok)
	}
	if err := testutil.GatherAndCompare(reg, strings.NewReader(counts(2)), wire.ExtensionServerCalls, wire.ExtensionServerErrors); err != nil {
		t.Error(err)
	}
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	last := -1.0
	for _, f := range families {
		if f.GetName() == wire.ExtensionServerLastCall && len(f.GetMetric()) == 1 {
			last = f.GetMetric()[0].GetGauge().GetValue()
		}
	}
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
	if err := testutil.GatherAndCompare(reg, strings.NewReader(counts(3)), wire.ExtensionServerCalls, wire.ExtensionServerErrors); err != nil {
		t.Errorf("after a second Liveness observed a call: %v", err)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}
