package integration

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/igw-dev/igw/pkg/epp/config"
	"github.com/igw-dev/igw/pkg/epp/datastore"
	"github.com/igw-dev/igw/pkg/epp/telemetry"
	"github.com/igw-dev/igw/pkg/sim"
	"github.com/igw-dev/igw/pkg/sim/simproc"
)

// TestAdapterRegisteredOnOnePodReachesIt: adapter "sql" is registered on one
// simulator of three and runs nowhere, so the LoRA telemetry shows every pod
// alike; the others answer a request for it with a 404. With the shipped
// configuration (the operator's baseModels added) and the model lists read,
// a burst of concurrent requests for the adapter all reach the pod that has it
// and none fails. The same burst for the base model spreads over the pods,
// which shows a picker blind to the lists would have sent adapter requests to
// the pods without it.
func TestAdapterRegisteredOnOnePodReachesIt(t *testing.T) {
	const burst = 12
	opts := simproc.Options{Config: sim.Config{GPU: "A10G", Model: "llama-3.1-8b", MaxLoras: 2},
		ServedModelName: "m", LoRAModules: []string{"chat=/adapters/chat"}}
	withSQL := opts
	withSQL.LoRAModules = []string{"sql=/adapters/sql"}
	has, lacks1, lacks2 := simproc.Start(t, withSQL), simproc.Start(t, opts), simproc.Start(t, opts)
	d, s := pickerOver(t, config.Default+"baseModels: [m]\n", has, lacks1, lacks2)
	scrapeContinuously(t, s)
	listModelsContinuously(t, d.Store())
	for _, st := range d.Store().Endpoints(nil) {
		var v datastore.View
		st.View(time.Now(), 0, &v)
		if len(v.Metrics.RunningAdapters)+len(v.Metrics.WaitingAdapters) != 0 {
			t.Fatalf("%s reports adapters in use: %+v", v.Key, v.Metrics)
		}
	}
	c := startGateway(t, d).client()
	send := func(model string) (perPod map[string]int, failed []error) {
		perPod = map[string]int{}
		var mu sync.Mutex
		var wg sync.WaitGroup
		for i := range burst {
			wg.Go(func() {
				got, err := chatModel(c, model, "You are terse.", fmt.Sprintf("question %d for %s", i, model))
				mu.Lock()
				defer mu.Unlock()
				perPod[got.Upstream]++
				if err != nil {
					failed = append(failed, err)
				}
			})
		}
		wg.Wait()
		return perPod, failed
	}

	perPod, failed := send("m")
	if len(failed) != 0 {
		t.Fatalf("base-model requests failed: %v", failed)
	}
	if perPod[endpoint(has).Key()] == burst {
		t.Fatalf("the base-model burst all went to %s: the adapter burst below would prove nothing", endpoint(has).Key())
	}

	perPod, failed = send("sql")
	if len(failed) != 0 || perPod[endpoint(has).Key()] != burst {
		t.Fatalf("adapter requests per pod %v (want all %d on %s), failures: %v", perPod, burst, endpoint(has).Key(), failed)
	}
}

// listModelsContinuously reads every endpoint's model list each second until
// the test ends, and waits for the first list of each.
func listModelsContinuously(t *testing.T, store *datastore.Store) {
	t.Helper()
	l := &telemetry.ModelLister{Poll: telemetry.Poll{Store: store, Interval: time.Second, Timeout: time.Second}}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { _ = l.Run(ctx); close(done) }()
	t.Cleanup(func() { cancel(); <-done })
	deadline := time.Now().Add(10 * time.Second)
	for _, st := range store.Endpoints(nil) {
		for st.ServedModels() == nil {
			if time.Now().After(deadline) {
				t.Fatalf("no model list read from %s", st.Key())
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
}
