package telemetry

import (
	"slices"
	"strings"
	"testing"
)

const vllmScrape = `# HELP vllm:num_requests_running Number of requests in model execution batches.
# TYPE vllm:num_requests_running gauge
vllm:num_requests_running{engine="0",model_name="llama"} 7.0
# HELP vllm:num_requests_waiting Number of requests waiting to be processed.
# TYPE vllm:num_requests_waiting gauge
vllm:num_requests_waiting{engine="0",model_name="llama"} 3.0
# TYPE vllm:kv_cache_usage_perc gauge
vllm:kv_cache_usage_perc{engine="0",model_name="llama"} 0.42
# TYPE vllm:lora_requests_info gauge
vllm:lora_requests_info{max_lora="4",running_lora_adapters="",waiting_lora_adapters=""} 1.7e9
vllm:lora_requests_info{max_lora="4",running_lora_adapters="sql-lora,chat-lora",waiting_lora_adapters="tool-lora"} 1.8e9
# TYPE vllm:cache_config_info gauge
vllm:cache_config_info{block_size="16",cache_dtype="auto",num_gpu_blocks="28000"} 1.0
# TYPE vllm:prefix_cache_queries_total counter
vllm:prefix_cache_queries_total{engine="0",model_name="llama"} 1000.0
# TYPE vllm:prefix_cache_hits_total counter
vllm:prefix_cache_hits_total{engine="0",model_name="llama"} 250.0
# HELP vllm:time_to_first_token_seconds Histogram of time to first token in seconds.
# TYPE vllm:time_to_first_token_seconds histogram
vllm:time_to_first_token_seconds_bucket{le="0.001",model_name="llama"} 0.0
vllm:time_to_first_token_seconds_bucket{le="+Inf",model_name="llama"} 5.0
vllm:time_to_first_token_seconds_count{model_name="llama"} 5.0
vllm:time_to_first_token_seconds_sum{model_name="llama"} 0.5
`

func parse(t *testing.T, text string) (m Report, w, r int, kv float64, known bool) {
	t.Helper()
	got, rep, err := Parse(strings.NewReader(text))
	if err != nil {
		t.Fatal(err)
	}
	return rep, got.Waiting, got.Running, got.KVCacheUsage, got.KVCacheKnown
}

func TestParseVLLM(t *testing.T) {
	m, rep, err := Parse(strings.NewReader(vllmScrape))
	if err != nil {
		t.Fatal(err)
	}
	if rep.Engine != "vllm" || rep.LegacyKV {
		t.Fatalf("report %+v", rep)
	}
	if m.Waiting != 3 || m.Running != 7 || !m.KVCacheKnown || m.KVCacheUsage != 0.42 {
		t.Fatalf("queue/kv: %+v", m)
	}
	if !slices.Equal(m.RunningAdapters, []string{"sql-lora", "chat-lora"}) || !slices.Equal(m.WaitingAdapters, []string{"tool-lora"}) || m.MaxAdapters != 4 {
		t.Fatalf("lora (newest series must win): %+v", m)
	}
	if m.BlockSizeTokens != 16 || m.NumGPUBlocks != 28000 || m.PrefixCacheHitRate != 0.25 {
		t.Fatalf("cache config: %+v", m)
	}
}

func TestParseVLLMLegacyKV(t *testing.T) {
	text := "vllm:num_requests_waiting 1\nvllm:num_requests_running 2\nvllm:gpu_cache_usage_perc 0.9\n"
	rep, w, r, kv, known := parse(t, text)
	if !rep.LegacyKV || w != 1 || r != 2 || kv != 0.9 || !known {
		t.Fatalf("legacy: %+v %d %d %v %v", rep, w, r, kv, known)
	}
	// Both names present: the current one wins and no warning is due.
	rep, _, _, kv, _ = parse(t, text+"vllm:kv_cache_usage_perc 0.3\n")
	if rep.LegacyKV || kv != 0.3 {
		t.Fatalf("both names: %+v %v", rep, kv)
	}
}

func TestParseSGLang(t *testing.T) {
	text := `# TYPE sglang:num_queue_reqs gauge
sglang:num_queue_reqs{model_name="m"} 4
# TYPE sglang:num_running_reqs gauge
sglang:num_running_reqs{model_name="m"} 9
# TYPE sglang:token_usage gauge
sglang:token_usage{model_name="m"} 0.61
# TYPE sglang:cache_hit_rate gauge
sglang:cache_hit_rate{model_name="m"} 0.5
`
	m, rep, err := Parse(strings.NewReader(text))
	if err != nil || rep.Engine != "sglang" || m.Waiting != 4 || m.Running != 9 || m.KVCacheUsage != 0.61 || m.PrefixCacheHitRate != 0.5 {
		t.Fatalf("%+v %+v %v", m, rep, err)
	}
}

func TestParseTRTLLM(t *testing.T) {
	serve := "trtllm_num_requests_waiting{model_name=\"m\"} 2\ntrtllm_num_requests_running{model_name=\"m\"} 5\ntrtllm_kv_cache_utilization{model_name=\"m\"} 0.7\n"
	rep, w, r, kv, _ := parse(t, serve)
	if rep.Engine != "trtllm" || w != 2 || r != 5 || kv != 0.7 {
		t.Fatalf("trtllm-serve: %+v %d %d %v", rep, w, r, kv)
	}
	triton := `# TYPE nv_trt_llm_request_metrics gauge
nv_trt_llm_request_metrics{model="tensorrt_llm",request_type="active",version="1"} 10
nv_trt_llm_request_metrics{model="tensorrt_llm",request_type="scheduled",version="1"} 6
# TYPE nv_trt_llm_kv_cache_block_metrics gauge
nv_trt_llm_kv_cache_block_metrics{kv_cache_block_type="max",model="tensorrt_llm",version="1"} 1000
nv_trt_llm_kv_cache_block_metrics{kv_cache_block_type="used",model="tensorrt_llm",version="1"} 250
nv_trt_llm_kv_cache_block_metrics{kv_cache_block_type="tokens_per",model="tensorrt_llm",version="1"} 64
`
	m, rep2, err := Parse(strings.NewReader(triton))
	if err != nil || rep2.Engine != "triton-trtllm" || m.Waiting != 4 || m.Running != 6 || m.KVCacheUsage != 0.25 || m.NumGPUBlocks != 1000 || m.BlockSizeTokens != 64 {
		t.Fatalf("triton derived: %+v %+v %v", m, rep2, err)
	}
	// Explicit waiting and fraction series take precedence over derivations.
	m, _, _ = Parse(strings.NewReader(triton + `nv_trt_llm_request_metrics{model="tensorrt_llm",request_type="waiting",version="1"} 1
nv_trt_llm_kv_cache_block_metrics{kv_cache_block_type="fraction",model="tensorrt_llm",version="1"} 0.5
`))
	if m.Waiting != 1 || m.KVCacheUsage != 0.5 {
		t.Fatalf("triton explicit: %+v", m)
	}
}

func TestParseRejects(t *testing.T) {
	for name, text := range map[string]string{
		"unknown server": "process_cpu_seconds_total 12\n",
		"empty":          "",
		"malformed":      "vllm:num_requests_waiting{model_name=\"m\" 3\n",
	} {
		if _, _, err := Parse(strings.NewReader(text)); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}

func TestParseClampsNonsense(t *testing.T) {
	_, w, r, kv, _ := parse(t, "vllm:num_requests_waiting -3\nvllm:num_requests_running NaN\nvllm:kv_cache_usage_perc 7\n")
	if w != 0 || r != 0 || kv != 1 {
		t.Fatalf("clamp: %d %d %v", w, r, kv)
	}
}

func FuzzParse(f *testing.F) {
	f.Add(vllmScrape)
	f.Add("sglang:num_queue_reqs 1\nsglang:token_usage 2\n")
	f.Add("nv_trt_llm_request_metrics{request_type=\"active\"} 3\n")
	f.Fuzz(func(t *testing.T, text string) {
		m, _, err := Parse(strings.NewReader(text))
		if err != nil {
			return
		}
		if m.Waiting < 0 || m.Running < 0 || m.KVCacheUsage < 0 || m.KVCacheUsage > 1 || m.MaxAdapters < 0 {
			t.Fatalf("out of range: %+v", m)
		}
	})
}
