// Package wire holds every name that crosses a process boundary: the headers and
// metadata keys exchanged with the proxy, and the model servers' metric names.
// Keeping them in one file makes a protocol change a one-line diff that every
// component picks up together.
package wire

// LabelGPUProduct is the pod (or node) label naming its accelerator, as
// NVIDIA's GPU feature discovery writes it: the operator reads it to see a
// pool mixing accelerator types, and the endpoint picker groups endpoints by
// it into speed classes.
const LabelGPUProduct = "nvidia.com/gpu.product"

// Headers and dynamic-metadata keys of the endpoint picker protocol (Gateway API
// Inference Extension) and of the body-based router.
const (
	// HeaderDestinationEndpoint carries the picked endpoint as "ip:port", optionally
	// followed by comma-separated fallbacks.
	HeaderDestinationEndpoint = "x-gateway-destination-endpoint"
	// MetadataNamespaceLB is the dynamic-metadata namespace Envoy's load balancer reads.
	MetadataNamespaceLB = "envoy.lb"
	// MetadataKeyDestinationEndpoint is the key under MetadataNamespaceLB that holds the pick.
	MetadataKeyDestinationEndpoint = HeaderDestinationEndpoint
	// MetadataNamespaceSubsetHint is the filter-metadata namespace of the subset hint.
	MetadataNamespaceSubsetHint = "envoy.lb.subset_hint"
	// MetadataKeyDestinationSubset lists the "ip:port" endpoints the proxy allows.
	MetadataKeyDestinationSubset = "x-gateway-destination-endpoint-subset"

	// HeaderModelName is set by the body-based router from the body's "model" field.
	HeaderModelName = "x-gateway-model-name"
	// HeaderBaseModelName is set for a LoRA adapter: the model the adapter runs on.
	HeaderBaseModelName = "x-gateway-base-model-name"

	// HeaderDebug asks the picker to explain its decision ("1" turns it on).
	HeaderDebug = "x-igw-debug"
	// HeaderScoreBreakdown is the response header that carries the explanation.
	HeaderScoreBreakdown = "x-igw-score-breakdown"
	// HeaderPriority is the request's admission priority (integer; higher is kept longer).
	HeaderPriority = "x-igw-priority"
	// HeaderRetryAfter is the standard header sent with a 429.
	HeaderRetryAfter = "retry-after"
	// HeaderContentType and HeaderContentLength are the HTTP headers the ext_proc servers rewrite.
	HeaderContentType   = "content-type"
	HeaderContentLength = "content-length"
	// HeaderStatus is Envoy's pseudo-header for the response status.
	HeaderStatus = ":status"
	// HeaderPath is the request path pseudo-header.
	HeaderPath = ":path"
)

// ModelsPath is the OpenAI model list of vLLM, SGLang, trtllm-serve and the
// simulator: one entry per name the server answers to, LoRA adapters
// registered with --lora-modules or /v1/load_lora_adapter included.
const ModelsPath = "/v1/models"

// MetricsPath is where vLLM, SGLang and the simulator serve Prometheus text
// (trtllm-serve: TRTLLMMetricsPath).
const MetricsPath = "/metrics"

// vLLM metric names.
const (
	VLLMNumRequestsWaiting      = "vllm:num_requests_waiting"
	VLLMNumRequestsRunning      = "vllm:num_requests_running"
	VLLMKVCacheUsagePerc        = "vllm:kv_cache_usage_perc"
	VLLMGPUCacheUsagePercLegacy = "vllm:gpu_cache_usage_perc"
	VLLMLoRARequestsInfo        = "vllm:lora_requests_info"
	VLLMCacheConfigInfo         = "vllm:cache_config_info"
	VLLMPrefixCacheQueries      = "vllm:prefix_cache_queries_total"
	VLLMPrefixCacheHits         = "vllm:prefix_cache_hits_total"
	VLLMTimeToFirstToken        = "vllm:time_to_first_token_seconds"
	VLLMInterTokenLatency       = "vllm:inter_token_latency_seconds"
	VLLME2ERequestLatency       = "vllm:e2e_request_latency_seconds"
	VLLMNumPreemptions          = "vllm:num_preemptions_total"
	VLLMPromptTokens            = "vllm:prompt_tokens_total"
	VLLMGenerationTokens        = "vllm:generation_tokens_total"
	VLLMRequestSuccess          = "vllm:request_success_total"
	VLLMRequestQueueTime        = "vllm:request_queue_time_seconds"

	// Labels of vllm:lora_requests_info.
	VLLMLabelRunningLoRAAdapters = "running_lora_adapters"
	VLLMLabelWaitingLoRAAdapters = "waiting_lora_adapters"
	VLLMLabelMaxLoRA             = "max_lora"
	// Label of vllm:request_success_total.
	VLLMLabelFinishedReason = "finished_reason"
	// Labels of vllm:cache_config_info.
	VLLMLabelBlockSize    = "block_size"
	VLLMLabelNumGPUBlocks = "num_gpu_blocks"
)

// SGLang metric names.
const (
	SGLangNumQueueReqs     = "sglang:num_queue_reqs"
	SGLangNumRunningReqs   = "sglang:num_running_reqs"
	SGLangTokenUsage       = "sglang:token_usage"
	SGLangCacheHitRate     = "sglang:cache_hit_rate"
	SGLangTimeToFirstToken = "sglang:time_to_first_token_seconds"
)

// ModelsimLoRALoads is the simulator's own count of adapters loaded into GPU
// slots (vLLM has no such metric); the live benchmark reports it as lora_loads.
const ModelsimLoRALoads = "modelsim:lora_loads_total"

// TensorRT-LLM metric names, for both ways it is served. trtllm-serve's own
// Prometheus endpoint (/prometheus/metrics) uses a "trtllm_" prefix and reports
// queue, batch and KV utilisation (0..1) gauges, the names the Gateway API
// Inference Extension's model-server protocol lists for it; the Triton
// TensorRT-LLM backend reports nv_trt_llm_request_metrics by request_type and
// nv_trt_llm_kv_cache_block_metrics by kv_cache_block_type (tensorrtllm_backend
// issue 725 added the "waiting" and "fraction" series used here).
const (
	TRTLLMNumRequestsWaiting = "trtllm_num_requests_waiting"
	TRTLLMNumRequestsRunning = "trtllm_num_requests_running"
	TRTLLMKVCacheUtilization = "trtllm_kv_cache_utilization"
	TRTLLMKVCacheHitRate     = "trtllm_kv_cache_hit_rate"
	// TRTLLMMetricsPath is where trtllm-serve serves Prometheus text.
	TRTLLMMetricsPath = "/prometheus/metrics"

	TritonTRTLLMRequestMetrics      = "nv_trt_llm_request_metrics"
	TritonTRTLLMKVCacheBlockMetrics = "nv_trt_llm_kv_cache_block_metrics"
	// Label of nv_trt_llm_request_metrics and its values.
	TritonLabelRequestType     = "request_type"
	TritonRequestTypeActive    = "active"
	TritonRequestTypeScheduled = "scheduled"
	TritonRequestTypeWaiting   = "waiting"
	// Label of nv_trt_llm_kv_cache_block_metrics and its values.
	TritonLabelKVCacheBlockType = "kv_cache_block_type"
	TritonKVCacheBlockMax       = "max"
	TritonKVCacheBlockUsed      = "used"
	TritonKVCacheBlockFraction  = "fraction"
	TritonKVCacheBlockTokensPer = "tokens_per"
)

// KV cache events: vLLM's tags and defaults the picker relies on, and the
// picker's metrics about the streams it follows.
const (
	// KVEventsTopic is the topic the operator and the simulator publish on.
	KVEventsTopic = "kv-events"
	// KVEventsPort and KVEventsReplayPort are vLLM's documented defaults
	// (endpoint tcp://*:5557, replay tcp://*:5558).
	KVEventsPort       = 5557
	KVEventsReplayPort = 5558

	// EPPKVEventsStreamState is 1 for the state each pod's stream is in
	// (labels endpoint, state: connecting, exact, resyncing, down).
	EPPKVEventsStreamState = "igw_epp_kv_events_stream_state"
	// EPPKVEventsBatches counts batches applied (label endpoint).
	EPPKVEventsBatches = "igw_epp_kv_events_batches_total"
	// EPPKVEventsBlocks counts block events (labels endpoint, kind: stored,
	// removed, orphan, cleared).
	EPPKVEventsBlocks = "igw_epp_kv_events_blocks_total"
	// EPPKVEventsGaps counts sequence gaps (labels endpoint, outcome: seen,
	// recovered, lost).
	EPPKVEventsGaps = "igw_epp_kv_events_gaps_total"
	// EPPKVEventsReplays counts replay requests and unanswered ones (labels
	// endpoint, result: sent, timeout).
	EPPKVEventsReplays = "igw_epp_kv_events_replays_total"
	// EPPKVEventsDecodeErrors counts batches that could not be used (label endpoint).
	EPPKVEventsDecodeErrors = "igw_epp_kv_events_decode_errors_total"
	// EPPKVEventsPublisherRestarts counts sequences that began again (label endpoint).
	EPPKVEventsPublisherRestarts = "igw_epp_kv_events_publisher_restarts_total"
	// EPPKVEventsDisconnects counts lost connections (label endpoint).
	EPPKVEventsDisconnects = "igw_epp_kv_events_disconnects_total"
	// EPPKVEventsIndexBlocks is the number of distinct blocks in the exact index.
	EPPKVEventsIndexBlocks = "igw_epp_kv_events_index_blocks"
	// EPPKVEventsScores counts endpoint scores by source (label source:
	// exact, approximate-stream, approximate-tokenizer).
	EPPKVEventsScores = "igw_epp_kv_events_scores_total"
)

// Metrics of the operator's Envoy Gateway extension server (pkg/egext). The
// alerts and the dashboard use them to tell whether Envoy Gateway calls the hook.
const (
	// ExtensionServerCalls counts hook calls by hook and result ("ok" or the gRPC code of the error).
	ExtensionServerCalls = "igw_extension_server_calls_total"
	// ExtensionServerErrors counts hook calls that returned an error, by hook.
	ExtensionServerErrors = "igw_extension_server_errors_total"
	// ExtensionServerLastCall is the unix time in seconds of the last call, by hook.
	ExtensionServerLastCall = "igw_extension_server_last_call_timestamp_seconds"
)
