// Package integration runs the picker against real simulator processes.
package integration

import (
	"bytes"
	"cmp"
	"context"
	"fmt"
	"io"
	"net/http"
	"testing"
	"time"

	"github.com/igw-dev/igw/pkg/epp/config"
	"github.com/igw-dev/igw/pkg/epp/config/configtest"
	"github.com/igw-dev/igw/pkg/epp/datastore"
	"github.com/igw-dev/igw/pkg/epp/director"
	"github.com/igw-dev/igw/pkg/epp/scheduling"
	"github.com/igw-dev/igw/pkg/epp/telemetry"
	"github.com/igw-dev/igw/pkg/sim"
	"github.com/igw-dev/igw/pkg/sim/simproc"
)

func endpoint(p *simproc.Proc) datastore.Endpoint {
	return datastore.Endpoint{Address: "127.0.0.1", Port: p.Port}
}

// trustTestHeaders lets the tests' requests ask for the score breakdown and
// set their priority.
const trustTestHeaders = "\ntrust: {debugHeader: true, priorityHeader: true}\n"

func pickerOver(t *testing.T, cfg string, procs ...*simproc.Proc) (*director.Director, *telemetry.Scraper) {
	t.Helper()
	var eps []datastore.Endpoint
	for _, p := range procs {
		eps = append(eps, endpoint(p))
	}
	d := configtest.Director(t, cmp.Or(cfg, config.Default)+trustTestHeaders, director.Options{}, eps...)
	return d, &telemetry.Scraper{Sink: d, Poll: telemetry.Poll{Store: d.Store(), Interval: time.Second, Timeout: 2 * time.Second}}
}

func scrapeAll(t *testing.T, d *director.Director, s *telemetry.Scraper) {
	t.Helper()
	for _, st := range d.Store().Endpoints(nil) {
		if err := s.ScrapeOnce(context.Background(), st); err != nil {
			t.Fatal(err)
		}
	}
}

// load sends n long requests straight to p (bypassing the picker), so that
// its queue fills while the test runs.
func load(t *testing.T, ctx context.Context, p *simproc.Proc, n int) { loadModel(ctx, p, "m", n) }

// loadModel sends n long requests for model (or adapter) straight to p.
func loadModel(ctx context.Context, p *simproc.Proc, model string, n int) {
	for i := range n {
		body := fmt.Sprintf(`{"model":%q,"prompt":"%d %s","max_tokens":2000}`, model, i, bytes.Repeat([]byte("x"), 4000))
		go func() {
			req, _ := http.NewRequestWithContext(ctx, http.MethodPost, p.URL+"/v1/completions", bytes.NewBufferString(body))
			req.Header.Set("Content-Type", "application/json")
			if resp, err := http.DefaultClient.Do(req); err == nil {
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
			}
		}()
	}
}

// TestQueueScorerPrefersShorterQueue: the queue scorer avoids the simulator
// whose queue is full; with equal (empty) queues it spreads the picks.
func TestQueueScorerPrefersShorterQueue(t *testing.T) {
	opts := simproc.Options{Config: sim.Config{GPU: "A10G", Model: "llama-3.1-8b", MaxNumSeqs: 2}, ServedModelName: "m"}
	busy, idle := simproc.Start(t, opts), simproc.Start(t, opts)
	d, s := pickerOver(t, "scorers: [{plugin: queue, weight: 1}]", busy, idle)

	// Counter-case first: both idle, picks spread over both.
	scrapeAll(t, d, s)
	seen := map[string]int{}
	for range 20 {
		res, err := d.Schedule(context.Background(), &scheduling.Request{Model: "m"}, false, time.Now())
		if err != nil {
			t.Fatal(err)
		}
		seen[res.Primary]++
		d.ObserveCompletion(res, 0, time.Now())
	}
	if len(seen) != 2 {
		t.Fatalf("equal queues sent every pick to one endpoint: %v", seen)
	}

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	load(t, ctx, busy, 12)
	deadline := time.Now().Add(10 * time.Second)
	for {
		scrapeAll(t, d, s)
		var v datastore.View
		d.Store().Get(endpoint(busy).Key()).View(time.Now(), 0, &v)
		if v.Metrics.Waiting >= 5 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the loaded simulator never queued: %+v", v.Metrics)
		}
		time.Sleep(20 * time.Millisecond)
	}
	for range 10 {
		res, err := d.Schedule(context.Background(), &scheduling.Request{Model: "m"}, false, time.Now())
		if err != nil {
			t.Fatal(err)
		}
		if res.Primary != endpoint(idle).Key() {
			t.Fatalf("picked the loaded simulator %s", res.Primary)
		}
		d.ObserveCompletion(res, 0, time.Now())
	}
}
