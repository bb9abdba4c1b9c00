// Package telemetry reads model servers' Prometheus metrics (vLLM, SGLang,
// TensorRT-LLM through trtllm-serve or Triton) into engine-neutral
// datastore.Metrics, and scrapes every endpoint on an interval.
package telemetry

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/igw-dev/igw/pkg/epp/datastore"
	"github.com/igw-dev/igw/pkg/wire"
)

// wanted are the metric families the parser reads; every other line of a
// scrape (vLLM's histograms make most of it) is dropped before parsing.
var wanted = map[string]bool{
	wire.VLLMNumRequestsWaiting: true, wire.VLLMNumRequestsRunning: true,
	wire.VLLMKVCacheUsagePerc: true, wire.VLLMGPUCacheUsagePercLegacy: true,
	wire.VLLMLoRARequestsInfo: true, wire.VLLMCacheConfigInfo: true,
	wire.VLLMPrefixCacheQueries: true, wire.VLLMPrefixCacheHits: true,
	wire.SGLangNumQueueReqs: true, wire.SGLangNumRunningReqs: true,
	wire.SGLangTokenUsage: true, wire.SGLangCacheHitRate: true,
	wire.TRTLLMNumRequestsWaiting: true, wire.TRTLLMNumRequestsRunning: true,
	wire.TRTLLMKVCacheUtilization: true, wire.TRTLLMKVCacheHitRate: true,
	wire.TritonTRTLLMRequestMetrics: true, wire.TritonTRTLLMKVCacheBlockMetrics: true,
}

// Counter names may appear without their _total suffix in the family name.
func familyName(name string) string {
	if wanted[name] {
		return name
	}
	if wanted[name+"_total"] {
		return name + "_total"
	}
	return ""
}

// Report says what a parse found beyond the metrics.
type Report struct {
	// Engine is "vllm", "sglang", "trtllm" or "triton-trtllm" ("" if none was recognised).
	Engine string
	// LegacyKV is true when KV use came only from vllm:gpu_cache_usage_perc.
	LegacyKV bool
}

// Parse reads one scrape. It fails when the text is malformed or holds none
// of the known queue metrics: a server that cannot be read is not idle.
func Parse(r io.Reader) (datastore.Metrics, Report, error) {
	filtered, err := filter(r)
	if err != nil {
		return datastore.Metrics{}, Report{}, err
	}
	// Names like "vllm:num_requests_waiting" are valid only under UTF-8
	// validation (the legacy scheme rejects nothing with ':', but the parser's
	// zero value rejects everything).
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(bytes.NewReader(filtered))
	if err != nil {
		return datastore.Metrics{}, Report{}, fmt.Errorf("parse metrics: %w", err)
	}
	return fromFamilies(fams)
}

// filter keeps the sample and metadata lines of wanted families.
func filter(r io.Reader) ([]byte, error) {
	var out bytes.Buffer
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 4<<20)
	for sc.Scan() {
		line := sc.Bytes()
		name := line
		if bytes.HasPrefix(line, []byte("# ")) {
			f := bytes.Fields(line)
			if len(f) < 3 || (string(f[1]) != "TYPE" && string(f[1]) != "HELP") {
				continue
			}
			name = f[2]
		} else if i := bytes.IndexAny(line, "{ \t"); i >= 0 {
			name = line[:i]
		}
		if familyName(string(name)) == "" && !wantedSample(name) {
			continue
		}
		out.Write(line)
		out.WriteByte('\n')
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("read metrics: %w", err)
	}
	return out.Bytes(), nil
}

// wantedSample accepts the _total sample lines of wanted counters.
func wantedSample(name []byte) bool {
	return bytes.HasSuffix(name, []byte("_total")) && wanted[string(name)]
}

type families map[string]*dto.MetricFamily

func (f families) get(name string) *dto.MetricFamily {
	if mf, ok := f[name]; ok {
		return mf
	}
	return f[strings.TrimSuffix(name, "_total")]
}

func value(m *dto.Metric) float64 {
	switch {
	case m.Gauge != nil:
		return m.Gauge.GetValue()
	case m.Counter != nil:
		return m.Counter.GetValue()
	case m.Untyped != nil:
		return m.Untyped.GetValue()
	}
	return math.NaN()
}

func label(m *dto.Metric, name string) (string, bool) {
	for _, l := range m.Label {
		if l.GetName() == name {
			return l.GetValue(), true
		}
	}
	return "", false
}

// sum adds a family's series (one per model name or rank); ok is false when absent.
func (f families) sum(name string) (float64, bool) {
	mf := f.get(name)
	if mf == nil || len(mf.Metric) == 0 {
		return 0, false
	}
	total := 0.0
	for _, m := range mf.Metric {
		if v := value(m); !math.IsNaN(v) && !math.IsInf(v, 0) {
			total += v
		}
	}
	return total, true
}

// max takes the largest series: a utilisation is as bad as its worst rank.
func (f families) max(name string) (float64, bool) {
	mf := f.get(name)
	if mf == nil || len(mf.Metric) == 0 {
		return 0, false
	}
	best := math.Inf(-1)
	for _, m := range mf.Metric {
		if v := value(m); !math.IsNaN(v) && v > best {
			best = v
		}
	}
	return best, !math.IsInf(best, -1)
}

// byLabel returns the sum of a family's series whose label has value want.
func (f families) byLabel(name, lbl, want string) (float64, bool) {
	mf := f.get(name)
	if mf == nil {
		return 0, false
	}
	total, found := 0.0, false
	for _, m := range mf.Metric {
		if v, ok := label(m, lbl); ok && v == want {
			if x := value(m); !math.IsNaN(x) {
				total += x
				found = true
			}
		}
	}
	return total, found
}

// readGauges reads what every engine exports as gauges: the queue and the
// batch (summed over series), the KV-cache utilisation and, when named, the
// prefix-cache hit rate (the worst series of each).
func (f families) readGauges(m *datastore.Metrics, waiting, running, kvUsage, hitRate string) {
	w, _ := f.sum(waiting)
	r, _ := f.sum(running)
	m.Waiting, m.Running = count(w), count(r)
	if u, ok := f.max(kvUsage); ok {
		m.KVCacheUsage, m.KVCacheKnown = u, true
	}
	if h, ok := f.max(hitRate); ok && hitRate != "" {
		m.PrefixCacheHitRate = h
	}
}

func fromFamilies(raw map[string]*dto.MetricFamily) (datastore.Metrics, Report, error) {
	f := families(raw)
	m := datastore.Metrics{PrefixCacheHitRate: -1}
	var rep Report
	switch {
	case f.get(wire.VLLMNumRequestsWaiting) != nil:
		rep.Engine = "vllm"
		f.readGauges(&m, wire.VLLMNumRequestsWaiting, wire.VLLMNumRequestsRunning, wire.VLLMKVCacheUsagePerc, "")
		if u, ok := f.max(wire.VLLMGPUCacheUsagePercLegacy); ok && !m.KVCacheKnown {
			m.KVCacheUsage, m.KVCacheKnown = u, true
			rep.LegacyKV = true
		}
		readLoRA(f, &m)
		readCacheConfig(f, &m)
		if q, ok := f.sum(wire.VLLMPrefixCacheQueries); ok && q > 0 {
			h, _ := f.sum(wire.VLLMPrefixCacheHits)
			m.PrefixCacheHitRate = h / q
		}
	case f.get(wire.SGLangNumQueueReqs) != nil:
		rep.Engine = "sglang"
		f.readGauges(&m, wire.SGLangNumQueueReqs, wire.SGLangNumRunningReqs, wire.SGLangTokenUsage, wire.SGLangCacheHitRate)
	case f.get(wire.TRTLLMNumRequestsWaiting) != nil:
		rep.Engine = "trtllm"
		f.readGauges(&m, wire.TRTLLMNumRequestsWaiting, wire.TRTLLMNumRequestsRunning, wire.TRTLLMKVCacheUtilization, wire.TRTLLMKVCacheHitRate)
	case f.get(wire.TritonTRTLLMRequestMetrics) != nil:
		rep.Engine = "triton-trtllm"
		readTriton(f, &m)
	default:
		return m, rep, fmt.Errorf("no known queue metric (%s, %s, %s or %s) in the scrape",
			wire.VLLMNumRequestsWaiting, wire.SGLangNumQueueReqs, wire.TRTLLMNumRequestsWaiting, wire.TritonTRTLLMRequestMetrics)
	}
	if m.KVCacheKnown {
		m.KVCacheUsage = clamp01(m.KVCacheUsage)
	}
	return m, rep, nil
}

func readTriton(f families, m *datastore.Metrics) {
	const reqs, kv = wire.TritonTRTLLMRequestMetrics, wire.TritonTRTLLMKVCacheBlockMetrics
	scheduled, _ := f.byLabel(reqs, wire.TritonLabelRequestType, wire.TritonRequestTypeScheduled)
	if w, ok := f.byLabel(reqs, wire.TritonLabelRequestType, wire.TritonRequestTypeWaiting); ok {
		m.Waiting = count(w)
	} else if active, ok := f.byLabel(reqs, wire.TritonLabelRequestType, wire.TritonRequestTypeActive); ok {
		m.Waiting = count(active - scheduled)
	}
	m.Running = count(scheduled)
	if frac, ok := f.byLabel(kv, wire.TritonLabelKVCacheBlockType, wire.TritonKVCacheBlockFraction); ok {
		m.KVCacheUsage, m.KVCacheKnown = frac, true
	} else if used, ok := f.byLabel(kv, wire.TritonLabelKVCacheBlockType, wire.TritonKVCacheBlockUsed); ok {
		if mx, ok := f.byLabel(kv, wire.TritonLabelKVCacheBlockType, wire.TritonKVCacheBlockMax); ok && mx > 0 {
			m.KVCacheUsage, m.KVCacheKnown = used/mx, true
		}
	}
	if mx, ok := f.byLabel(kv, wire.TritonLabelKVCacheBlockType, wire.TritonKVCacheBlockMax); ok {
		m.NumGPUBlocks = count(mx)
	}
	if tp, ok := f.byLabel(kv, wire.TritonLabelKVCacheBlockType, wire.TritonKVCacheBlockTokensPer); ok {
		m.BlockSizeTokens = count(tp)
	}
}

// readLoRA reads vllm:lora_requests_info. vLLM keeps one series per label
// combination and sets the newest one's value to the time it was updated, so
// the series with the largest value is current.
func readLoRA(f families, m *datastore.Metrics) {
	mf := f.get(wire.VLLMLoRARequestsInfo)
	if mf == nil {
		return
	}
	var latest *dto.Metric
	for _, s := range mf.Metric {
		if latest == nil || value(s) > value(latest) {
			latest = s
		}
	}
	if latest == nil {
		return
	}
	running, _ := label(latest, wire.VLLMLabelRunningLoRAAdapters)
	waiting, _ := label(latest, wire.VLLMLabelWaitingLoRAAdapters)
	m.RunningAdapters = splitList(running)
	m.WaitingAdapters = splitList(waiting)
	if s, ok := label(latest, wire.VLLMLabelMaxLoRA); ok {
		if n, err := strconv.Atoi(strings.TrimSpace(s)); err == nil && n > 0 {
			m.MaxAdapters = n
		}
	}
}

func readCacheConfig(f families, m *datastore.Metrics) {
	mf := f.get(wire.VLLMCacheConfigInfo)
	if mf == nil || len(mf.Metric) == 0 {
		return
	}
	s := mf.Metric[0]
	if v, ok := label(s, wire.VLLMLabelBlockSize); ok {
		if n, err := strconv.Atoi(v); err == nil && n > 0 && n <= 1<<16 {
			m.BlockSizeTokens = n
		}
	}
	if v, ok := label(s, wire.VLLMLabelNumGPUBlocks); ok {
		if n, err := strconv.Atoi(v); err == nil && n > 0 {
			m.NumGPUBlocks = n
		}
	}
}

func splitList(s string) []string {
	var out []string
	for _, a := range strings.Split(s, ",") {
		if a = strings.TrimSpace(a); a != "" {
			out = append(out, a)
		}
	}
	return out
}

// count turns a gauge into a request count, rejecting negative and absurd values.
func count(v float64) int {
	if math.IsNaN(v) || v <= 0 {
		return 0
	}
	if v > 1e9 {
		return 1e9
	}
	return int(math.Round(v))
}

func clamp01(v float64) float64 {
	switch {
	case math.IsNaN(v) || v < 0:
		return 0
	case v > 1:
		return 1
	}
	return v
}
