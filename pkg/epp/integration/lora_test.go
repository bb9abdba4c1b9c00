package integration

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/igw-dev/igw/pkg/epp/datastore"
	"github.com/igw-dev/igw/pkg/epp/scheduling"
	"github.com/igw-dev/igw/pkg/sim"
	"github.com/igw-dev/igw/pkg/sim/simproc"
)

// TestLoRAAffinityPrefersResidentAdapter: a request for the adapter running on
// one simulator goes there; a request for another adapter avoids it while its
// only slot is taken.
func TestLoRAAffinityPrefersResidentAdapter(t *testing.T) {
	opts := simproc.Options{Config: sim.Config{GPU: "A10G", Model: "llama-3.1-8b", MaxLoras: 1},
		ServedModelName: "m", LoRAModules: []string{"sql=/adapters/sql", "chat=/adapters/chat"}}
	withSQL, other := simproc.Start(t, opts), simproc.Start(t, opts)
	d, s := pickerOver(t, "scorers: [{plugin: lora-affinity, weight: 1}, {plugin: queue, weight: 0.01}]", withSQL, other)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	loadModel(ctx, withSQL, "sql", 2)
	deadline := time.Now().Add(10 * time.Second)
	for {
		scrapeAll(t, d, s)
		var v datastore.View
		d.Store().Get(endpoint(withSQL).Key()).View(time.Now(), 0, &v)
		if slices.Contains(v.Metrics.RunningAdapters, "sql") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("adapter never reported running: %+v", v.Metrics)
		}
		time.Sleep(20 * time.Millisecond)
	}
	for _, c := range []struct{ adapter, want string }{{"sql", endpoint(withSQL).Key()}, {"chat", endpoint(other).Key()}} {
		res, err := d.Schedule(context.Background(), &scheduling.Request{Model: "llama-3.1-8b", Adapter: c.adapter}, true, time.Now())
		if err != nil {
			t.Fatal(err)
		}
		if res.Primary != c.want {
			t.Fatalf("adapter %s went to %s (%s), want %s", c.adapter, res.Primary, res.Breakdown, c.want)
		}
		d.ObserveCompletion(res, 0, time.Now())
	}
}
