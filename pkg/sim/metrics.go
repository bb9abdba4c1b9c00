package sim

import (
	"bytes"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/igw-dev/igw/pkg/wire"
)

// loraInfoHistory mimics vllm:lora_requests_info: vLLM sets the gauge of the
// current (running, waiting) label set to the current Unix time, so earlier
// label sets stay exposed with older timestamps and a reader must pick the
// newest. The simulator keeps the most recent few.
type loraInfoHistory struct {
	entries []loraInfoEntry
}

type loraInfoEntry struct {
	running, waiting string
	at               float64
}

const loraInfoHistoryLen = 8

func (h *loraInfoHistory) record(running, waiting string, at float64) {
	for i, e := range h.entries {
		if e.running == running && e.waiting == waiting {
			h.entries = append(h.entries[:i], h.entries[i+1:]...)
			break
		}
	}
	if len(h.entries) == loraInfoHistoryLen {
		h.entries = h.entries[1:]
	}
	h.entries = append(h.entries, loraInfoEntry{running: running, waiting: waiting, at: at})
}

func (s *Server) handleMetrics(w http.ResponseWriter, _ *http.Request) {
	s.mu.Lock()
	defer s.mu.Unlock()
	switch s.rt.metricsFault() {
	case FaultMetricsAbsent:
		http.Error(w, "metrics unavailable (fault)", http.StatusServiceUnavailable)
		return
	case FaultMetricsGarbage:
		w.Header().Set("Content-Type", "text/plain; version=0.0.4; charset=utf-8")
		_, _ = w.Write([]byte("vllm:num_requests_running{ \x00 garbage\n# TYPE\n}}}\n"))
		return
	}
	s.rt.snapshot(&s.snap)
	var b bytes.Buffer
	m := metricWriter{b: &b, labels: `model_name=` + labelValue(s.servedNames[0])}
	if s.opts.Engine == EngineSGLang {
		m.sglang(&s.snap)
	} else {
		m.labels += `,engine="0"`
		s.loraInfo.record(strings.Join(s.snap.RunningAdapters, ","), strings.Join(s.snap.WaitingAdapters, ","),
			float64(time.Now().UnixNano())/1e9)
		m.vllm(&s.snap, &s.loraInfo)
	}
	w.Header().Set("Content-Type", "text/plain; version=0.0.4; charset=utf-8")
	_, _ = w.Write(b.Bytes())
}

// metricWriter writes the Prometheus text format.
type metricWriter struct {
	b      *bytes.Buffer
	labels string // the labels every series carries
}

func (m *metricWriter) header(name, typ, help string) {
	m.b.WriteString("# HELP " + name + " " + help + "\n# TYPE " + name + " " + typ + "\n")
}

func (m *metricWriter) sample(name, extraLabels string, v float64) {
	m.b.WriteString(name)
	m.b.WriteByte('{')
	m.b.WriteString(m.labels)
	if extraLabels != "" {
		m.b.WriteByte(',')
		m.b.WriteString(extraLabels)
	}
	m.b.WriteString("} ")
	m.b.WriteString(strconv.FormatFloat(v, 'g', -1, 64))
	m.b.WriteByte('\n')
}

func (m *metricWriter) gauge(name, help string, v float64) {
	m.header(name, "gauge", help)
	m.sample(name, "", v)
}

func (m *metricWriter) counter(name, help string, v uint64) {
	m.header(name, "counter", help)
	m.sample(name, "", float64(v))
}

func (m *metricWriter) histogram(name, help string, h *Histogram) {
	m.header(name, "histogram", help)
	var cumulative uint64
	for i, bound := range h.Bounds {
		cumulative += h.Counts[i]
		m.sample(name+"_bucket", `le="`+strconv.FormatFloat(bound, 'g', -1, 64)+`"`, float64(cumulative))
	}
	m.sample(name+"_bucket", `le="+Inf"`, float64(h.Count))
	m.sample(name+"_sum", "", h.Sum)
	m.sample(name+"_count", "", float64(h.Count))
}

func (m *metricWriter) vllm(s *Snapshot, lora *loraInfoHistory) {
	m.gauge(wire.VLLMNumRequestsRunning, "Number of requests in model execution batches.", float64(s.Running))
	m.gauge(wire.VLLMNumRequestsWaiting, "Number of requests waiting to be processed.", float64(s.Waiting))
	m.gauge(wire.VLLMKVCacheUsagePerc, "KV-cache usage. 1 means 100 percent usage.", s.KVCacheUsage)
	m.gauge(wire.VLLMGPUCacheUsagePercLegacy, "GPU KV-cache usage (deprecated name).", s.KVCacheUsage)
	m.counter(wire.VLLMPrefixCacheQueries, "Prefix cache queries, in terms of number of queried tokens.", s.PrefixCacheQueries)
	m.counter(wire.VLLMPrefixCacheHits, "Prefix cache hits, in terms of number of cached tokens.", s.PrefixCacheHits)
	m.counter(wire.VLLMNumPreemptions, "Cumulative number of preemptions from the engine.", s.Preemptions)
	m.counter(wire.VLLMPromptTokens, "Number of prefill tokens processed.", s.PromptTokens)
	m.counter(wire.VLLMGenerationTokens, "Number of generation tokens processed.", s.GenerationTokens)
	m.header(wire.VLLMRequestSuccess, "counter", "Count of successfully processed requests.")
	for _, r := range []struct {
		reason string
		n      uint64
	}{{"stop", s.FinishedStop}, {"length", s.FinishedLength}, {"abort", s.Aborted}} {
		m.sample(wire.VLLMRequestSuccess, wire.VLLMLabelFinishedReason+`="`+r.reason+`"`, float64(r.n))
	}
	m.histogram(wire.VLLMTimeToFirstToken, "Histogram of time to first token in seconds.", &s.TTFT)
	m.histogram(wire.VLLMInterTokenLatency, "Histogram of inter-token latency in seconds.", &s.ITL)
	m.histogram(wire.VLLME2ERequestLatency, "Histogram of e2e request latency in seconds.", &s.E2E)
	m.histogram(wire.VLLMRequestQueueTime, "Histogram of time spent in WAITING phase for request.", &s.QueueTime)

	m.header(wire.VLLMCacheConfigInfo, "gauge", "Information of the LLMEngine CacheConfig")
	info := metricWriter{b: m.b, labels: wire.VLLMLabelBlockSize + `="` + strconv.Itoa(s.BlockSize) + `",cache_dtype="auto",` +
		`enable_prefix_caching="True",engine="0",gpu_memory_utilization="0.9",` +
		wire.VLLMLabelNumGPUBlocks + `="` + strconv.Itoa(s.NumBlocks) + `"`}
	info.sample(wire.VLLMCacheConfigInfo, "", 1)

	if s.MaxLoras > 0 {
		m.counter(wire.ModelsimLoRALoads, "Adapters loaded into GPU slots (simulator only).", s.LoRALoads)
		m.header(wire.VLLMLoRARequestsInfo, "gauge", "Running stats on lora requests.")
		for _, e := range lora.entries {
			series := metricWriter{b: m.b, labels: wire.VLLMLabelMaxLoRA + `="` + strconv.Itoa(s.MaxLoras) + `",` +
				wire.VLLMLabelRunningLoRAAdapters + `=` + labelValue(e.running) + `,` +
				wire.VLLMLabelWaitingLoRAAdapters + `=` + labelValue(e.waiting)}
			series.sample(wire.VLLMLoRARequestsInfo, "", e.at)
		}
	}
}

func (m *metricWriter) sglang(s *Snapshot) {
	m.gauge(wire.SGLangNumRunningReqs, "The number of running requests.", float64(s.Running))
	m.gauge(wire.SGLangNumQueueReqs, "The number of requests in the waiting queue.", float64(s.Waiting))
	m.gauge(wire.SGLangTokenUsage, "The token usage.", s.KVCacheUsage)
	hitRate := 0.0
	if s.PrefixCacheQueries > 0 {
		hitRate = float64(s.PrefixCacheHits) / float64(s.PrefixCacheQueries)
	}
	m.gauge(wire.SGLangCacheHitRate, "The prefix cache hit rate.", hitRate)
	m.histogram(wire.SGLangTimeToFirstToken, "Histogram of time to first token in seconds.", &s.TTFT)
}

// labelValue quotes a label value as the text format wants: only backslash,
// double quote and newline are escaped.
func labelValue(v string) string {
	return `"` + labelEscaper.Replace(v) + `"`
}

var labelEscaper = strings.NewReplacer(`\`, `\\`, `"`, `\"`, "\n", `\n`)
