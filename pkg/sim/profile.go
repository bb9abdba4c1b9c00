package sim

import (
	"fmt"
	"math"
	"slices"
	"strings"
	"time"
)

// GPU is one accelerator's published figures and the efficiencies that turn them
// into achieved throughput (the derivation and the table it reproduces are in
// the package README, "Profiles").
type GPU struct {
	Name string
	// MemoryGiB is the device memory; KV capacity is derived from it.
	MemoryGiB float64
	// BandwidthTBps is HBM bandwidth in TB/s; decode is bound by it.
	BandwidthTBps float64
	// BF16TFLOPS is dense BF16 throughput; prefill is bound by it.
	BF16TFLOPS float64
	// PrefillMFU is the model-FLOPs utilisation achieved in prefill.
	PrefillMFU float64
	// BandwidthEfficiency is the share of HBM bandwidth decode achieves.
	BandwidthEfficiency float64
}

// Model is one model's size figures.
type Model struct {
	Name string
	// Params is the parameter count; BF16 weights take 2 bytes each.
	Params float64
	// KVBytesPerToken is the KV-cache footprint of one token over all layers.
	KVBytesPerToken float64
	// MaxModelLen is the context length the model supports.
	MaxModelLen int
	// EmbeddingDim, when set, makes the model an embedding model (vLLM's
	// pooling runner): it serves /v1/embeddings with vectors this long, and
	// not the generation APIs.
	EmbeddingDim int
}

// WeightBytes is the size of the model's BF16 weights.
func (m Model) WeightBytes() float64 { return 2 * m.Params }

const gib = 1 << 30

// The efficiencies below reproduce the README's table of derived figures to
// within 1%: H100-class decode reaches 72% of HBM bandwidth, the others 75%.
var gpus = []GPU{
	{Name: "H100", MemoryGiB: 80, BandwidthTBps: 3.35, BF16TFLOPS: 989, PrefillMFU: 0.45, BandwidthEfficiency: 0.72},
	{Name: "H200", MemoryGiB: 141, BandwidthTBps: 4.8, BF16TFLOPS: 989, PrefillMFU: 0.45, BandwidthEfficiency: 0.72},
	{Name: "A100", MemoryGiB: 80, BandwidthTBps: 2.039, BF16TFLOPS: 312, PrefillMFU: 0.38, BandwidthEfficiency: 0.75},
	{Name: "L40S", MemoryGiB: 48, BandwidthTBps: 0.864, BF16TFLOPS: 362, PrefillMFU: 0.32, BandwidthEfficiency: 0.75},
	{Name: "A10G", MemoryGiB: 24, BandwidthTBps: 0.6, BF16TFLOPS: 70, PrefillMFU: 0.35, BandwidthEfficiency: 0.75},
	{Name: "L4", MemoryGiB: 24, BandwidthTBps: 0.3, BF16TFLOPS: 121, PrefillMFU: 0.35, BandwidthEfficiency: 0.75},
}

var gpuAliases = map[string]string{"A100-80": "A100", "A100-80GB": "A100", "H100-SXM": "H100", "H200-SXM": "H200"}

var models = []Model{
	{Name: "llama-3.1-8b", Params: 8.03e9, KVBytesPerToken: 128 << 10, MaxModelLen: 131072},
	{Name: "qwen3-32b", Params: 32.8e9, KVBytesPerToken: 256 << 10, MaxModelLen: 40960},
	{Name: "llama-3.1-70b", Params: 70.6e9, KVBytesPerToken: 320 << 10, MaxModelLen: 131072},
	// intfloat/e5-mistral-7b-instruct: Mistral 7B's 32 layers of 8 KV heads of
	// 128 (128 KiB a token), a 4096-token context, 4096-wide embeddings.
	{Name: "e5-mistral-7b", Params: 7.11e9, KVBytesPerToken: 128 << 10, MaxModelLen: 4096, EmbeddingDim: 4096},
}

// GPUNames and ModelNames list the built-in profiles.
func GPUNames() []string   { return names(gpus, func(g GPU) string { return g.Name }) }
func ModelNames() []string { return names(models, func(m Model) string { return m.Name }) }

func names[T any](items []T, name func(T) string) []string {
	out := make([]string, len(items))
	for i, it := range items {
		out[i] = name(it)
	}
	return out
}

// LookupGPU finds a built-in GPU profile by name, case-insensitively.
func LookupGPU(name string) (GPU, error) {
	key := strings.ToUpper(name)
	if alias, ok := gpuAliases[key]; ok {
		key = alias
	}
	i := slices.IndexFunc(gpus, func(g GPU) bool { return g.Name == key })
	if i < 0 {
		return GPU{}, fmt.Errorf("unknown GPU %q (built-in: %s)", name, strings.Join(GPUNames(), ", "))
	}
	return gpus[i], nil
}

// LookupModel finds a built-in model profile by name, case-insensitively.
func LookupModel(name string) (Model, error) {
	i := slices.IndexFunc(models, func(m Model) bool { return strings.EqualFold(m.Name, name) })
	if i < 0 {
		return Model{}, fmt.Errorf("unknown model %q (built-in: %s)", name, strings.Join(ModelNames(), ", "))
	}
	return models[i], nil
}

// Step-time constants that do not depend on the hardware.
const (
	// stepOverhead is the fixed launch and scheduling cost of every step.
	stepOverhead = 1.5e-3
	// perDecodeSequence is the per-sequence cost of sampling and bookkeeping.
	perDecodeSequence = 4e-6
	// reservedBytesPerGPU is left for activations and the CUDA context.
	reservedBytesPerGPU = 2 * gib
	// gpuMemoryUtilization is vLLM's default share of device memory it may use.
	gpuMemoryUtilization = 0.9
	// loraStepOverhead is the step-time cost of each distinct adapter in a batch,
	// the middle of the 2..6% that resident adapters are reported to cost vLLM.
	loraStepOverhead = 0.04
)

// Profile is a GPU and model pair with tensor parallelism: the coefficients of
//
//	step = (Base + PerPrefillToken·prefill + PerDecodeSeq·decodes + PerContextToken·Σctx)
//	       · (1 + LoRAOverhead·adapters)
//
// in seconds, and the KV capacity.
type Profile struct {
	GPU            GPU
	Model          Model
	TensorParallel int
	// Base is paid by every step: overhead plus reading the weights once.
	Base float64
	// PerPrefillToken is the compute cost of one uncached prompt token.
	PerPrefillToken float64
	// PerDecodeSeq is the fixed cost of one decoding sequence.
	PerDecodeSeq float64
	// PerContextToken is the cost of reading one token of KV during decode.
	PerContextToken float64
	// LoRAOverhead is the relative cost of each distinct adapter in a batch.
	LoRAOverhead float64
	// KVCapacityTokens is the KV cache size when kvCacheTokens is auto.
	KVCapacityTokens int
}

// NewProfile derives the cost coefficients of a built-in GPU and model.
func NewProfile(gpuName, modelName string, tensorParallel int) (Profile, error) {
	gpu, err := LookupGPU(gpuName)
	if err != nil {
		return Profile{}, err
	}
	model, err := LookupModel(modelName)
	if err != nil {
		return Profile{}, err
	}
	if tensorParallel < 1 {
		return Profile{}, fmt.Errorf("tensorParallel must be at least 1, got %d", tensorParallel)
	}
	tp := float64(tensorParallel)
	kvBytesPerGPU := gpuMemoryUtilization*gpu.MemoryGiB*gib - model.WeightBytes()/tp - reservedBytesPerGPU
	if kvBytesPerGPU <= 0 {
		return Profile{}, fmt.Errorf("%s does not fit on %d× %s: %.0f GiB of weights per GPU",
			model.Name, tensorParallel, gpu.Name, model.WeightBytes()/tp/gib)
	}
	bandwidth := gpu.BandwidthTBps * 1e12 * gpu.BandwidthEfficiency * tp
	return Profile{
		GPU:              gpu,
		Model:            model,
		TensorParallel:   tensorParallel,
		Base:             stepOverhead + model.WeightBytes()/bandwidth,
		PerPrefillToken:  2 * model.Params / (gpu.BF16TFLOPS * 1e12 * gpu.PrefillMFU * tp),
		PerDecodeSeq:     perDecodeSequence,
		PerContextToken:  model.KVBytesPerToken / bandwidth,
		LoRAOverhead:     loraStepOverhead,
		KVCapacityTokens: int(kvBytesPerGPU * tp / model.KVBytesPerToken),
	}, nil
}

// StepSeconds is the duration of one engine step before jitter and adapter loads.
func (p *Profile) StepSeconds(prefillTokens, decodeSeqs int, decodeContext int64, adapters int) float64 {
	s := p.Base + p.PerPrefillToken*float64(prefillTokens) + p.PerDecodeSeq*float64(decodeSeqs) +
		p.PerContextToken*float64(decodeContext)
	return s * (1 + p.LoRAOverhead*float64(adapters))
}

// PrefillTokensPerSecond is the compute-bound prefill rate.
func (p *Profile) PrefillTokensPerSecond() float64 { return 1 / p.PerPrefillToken }

// AnalyticTTFT is the time to first token of a request alone on an idle pod:
// its uncached tokens in chunks of at most chunk tokens, one step per chunk.
func (p *Profile) AnalyticTTFT(promptTokens, cachedTokens, chunk int) time.Duration {
	uncached := promptTokens - cachedTokens
	steps := (uncached + chunk - 1) / chunk
	return seconds(float64(steps)*p.Base + p.PerPrefillToken*float64(uncached))
}

// AnalyticITL is the inter-token latency of a single decoding sequence whose
// context is contextTokens long.
func (p *Profile) AnalyticITL(contextTokens int) time.Duration {
	return seconds(p.StepSeconds(0, 1, int64(contextTokens), 0))
}

func seconds(s float64) time.Duration { return time.Duration(math.Round(s * 1e9)) }
