package bbr

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"testing"
	"time"

	extprocv3 "github.com/envoyproxy/go-control-plane/envoy/service/ext_proc/v3"

	"github.com/igw-dev/igw/pkg/extproctest"
	"github.com/igw-dev/igw/pkg/requestbody"
	"github.com/igw-dev/igw/pkg/requestbody/bodytest"
	"github.com/igw-dev/igw/pkg/wire"
)

// benchBodies are chat completions of about 1 KiB, 64 KiB and 4 MiB whose prompt
// is code-like text (quotes, backslashes, newlines) and whose model comes last:
// the worst place for a scanner, which must read everything before it.
func benchBodies() []struct {
	name string
	body []byte
} {
	var out []struct {
		name string
		body []byte
	}
	for _, size := range []struct {
		name  string
		bytes int
	}{{"1KiB", 1 << 10}, {"64KiB", 64 << 10}, {"4MiB", 4 << 20}} {
		// Chat's prompt is about size bytes; the envelope adds ~150.
		out = append(out, struct {
			name string
			body []byte
		}{size.name, bodytest.Chat(size.bytes-200, "meta-llama/Llama-3.1-8B-Instruct", true)})
	}
	return out
}

// latencies records one duration per iteration, for the p99 metric.
type latencies []time.Duration

func (l latencies) report(b *testing.B) {
	if len(l) == 0 {
		return
	}
	slices.Sort(l)
	b.ReportMetric(float64(l[(len(l)*99)/100].Nanoseconds())/1e3, "p99-µs")
}

// BenchmarkExtractModel compares the scanner with encoding/json on the same bodies
// in the same run: a full decode (what a router that unmarshals the document does)
// and, for reference, the cheapest encoding/json can do (a struct with only the
// model field, which still scans and validates everything).
//
//	go test ./pkg/bbr -run '^$' -bench BenchmarkExtractModel -benchtime 2s
func BenchmarkExtractModel(b *testing.B) {
	for _, body := range benchBodies() {
		b.Run(body.name+"/scanner", func(b *testing.B) {
			run(b, body.body, func() string {
				m, _, err := requestbody.ExtractModel(body.body)
				if err != nil {
					b.Fatal(err)
				}
				return m
			})
		})
		b.Run(body.name+"/router", func(b *testing.B) {
			r := NewRouter(RouterConfig{MaxRequestBodyBytes: 64 << 20})
			h := http.Header{"Content-Type": {"application/json"}}
			run(b, body.body, func() string {
				d, err := r.Route(h, body.body)
				if err != nil {
					b.Fatal(err)
				}
				return d.Model
			})
		})
		b.Run(body.name+"/encoding_json_full", func(b *testing.B) {
			run(b, body.body, func() string {
				var doc map[string]any
				if err := json.Unmarshal(body.body, &doc); err != nil {
					b.Fatal(err)
				}
				m, _ := doc["model"].(string)
				return m
			})
		})
		b.Run(body.name+"/encoding_json_struct", func(b *testing.B) {
			run(b, body.body, func() string {
				var doc struct {
					Model string `json:"model"`
				}
				if err := json.Unmarshal(body.body, &doc); err != nil {
					b.Fatal(err)
				}
				return doc.Model
			})
		})
	}
}

// BenchmarkSpeedup times the scanner and a full encoding/json decode alternately
// on the same body, so that both see the same machine load (a shared CI machine
// slows runs unevenly), and reports the ratio of their total times.
//
//	go test ./pkg/bbr -run '^$' -bench BenchmarkSpeedup -benchtime 2s
func BenchmarkSpeedup(b *testing.B) {
	for _, body := range benchBodies() {
		b.Run(body.name, func(b *testing.B) {
			var scan, decode latencies
			for b.Loop() {
				start := time.Now()
				if _, _, err := requestbody.ExtractModel(body.body); err != nil {
					b.Fatal(err)
				}
				mid := time.Now()
				var doc map[string]any
				if err := json.Unmarshal(body.body, &doc); err != nil {
					b.Fatal(err)
				}
				scan, decode = append(scan, mid.Sub(start)), append(decode, time.Since(mid))
			}
			var ts, td time.Duration
			for i := range scan {
				ts, td = ts+scan[i], td+decode[i]
			}
			mb := float64(len(body.body)) * float64(len(scan)) / 1e6
			b.ReportMetric(mb/ts.Seconds(), "scanner-MB/s")
			b.ReportMetric(mb/td.Seconds(), "json-MB/s")
			b.ReportMetric(float64(td)/float64(ts), "speedup")
			slices.Sort(scan)
			slices.Sort(decode)
			p99 := len(scan) * 99 / 100
			b.ReportMetric(float64(scan[p99].Nanoseconds())/1e3, "scanner-p99-µs")
			b.ReportMetric(float64(decode[p99].Nanoseconds())/1e3, "json-p99-µs")
		})
	}
}

func run(b *testing.B, body []byte, extract func() string) {
	b.SetBytes(int64(len(body)))
	b.ReportAllocs()
	lat := make(latencies, 0, b.N)
	for b.Loop() {
		start := time.Now()
		if m := extract(); m != "meta-llama/Llama-3.1-8B-Instruct" {
			b.Fatalf("model %q", m)
		}
		lat = append(lat, time.Since(start))
	}
	lat.report(b)
}

func TestBenchBodiesAreTheAdvertisedSizes(t *testing.T) {
	for _, body := range benchBodies() {
		var want int
		if _, err := fmt.Sscanf(body.name, "%d", &want); err != nil {
			t.Fatal(err)
		}
		want <<= 10
		if body.name[len(body.name)-3:] == "MiB" {
			want <<= 10
		}
		if n := len(body.body); n < want*95/100 || n > want*105/100 {
			t.Fatalf("%s body is %d bytes", body.name, n)
		}
		if m, found, err := requestbody.ExtractModel(body.body); err != nil || !found || m != "meta-llama/Llama-3.1-8B-Instruct" {
			t.Fatalf("%s body: model %q %v %v", body.name, m, found, err)
		}
	}
}

// BenchmarkExtProc measures whole ext_proc exchanges over loopback gRPC in
// full-duplex mode (64 KiB chunks, as Envoy sends them), for BBR and for the echo
// floor: the difference is the latency BBR adds on the wire.
//
//	go test ./pkg/bbr -run '^$' -bench BenchmarkExtProc -benchtime 2s
func BenchmarkExtProc(b *testing.B) {
	for _, body := range benchBodies() {
		for _, srv := range []struct {
			name string
			srv  extprocv3.ExternalProcessorServer
		}{
			{"bbr", &ExtProc{Router: NewRouter(RouterConfig{MaxRequestBodyBytes: 64 << 20}), BodyMode: Streamed}},
			{"echo", extproctest.Passthrough{SetHeaders: extproctest.NewHeaders(wire.HeaderModelName, "fixed")}},
		} {
			b.Run(body.name+"/"+srv.name, func(b *testing.B) {
				c := extproctest.Start(b, srv.srv, extproctest.Config{ChunkSize: 64 << 10})
				req := extproctest.PostJSON("/v1/chat/completions", body.body)
				b.SetBytes(int64(len(body.body)))
				lat := make(latencies, 0, b.N)
				for b.Loop() {
					start := time.Now()
					res, err := c.Process(context.Background(), req)
					if err != nil || res.RequestHeaders.Get(wire.HeaderModelName) == "" {
						b.Fatalf("%v %v", err, res)
					}
					lat = append(lat, time.Since(start))
				}
				lat.report(b)
			})
		}
	}
}
