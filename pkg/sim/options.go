package sim

import (
	"errors"
	"flag"
	"fmt"
	"strconv"
	"strings"
)

// Options configure the real-time server (cmd/modelsim). The engine flags carry
// the fleet keys of a benchmark scenario; the rest follow vLLM's flag names.
type Options struct {
	Host string
	Port int

	// Config is the engine the server runs (--gpu ... --seed).
	Config

	// Speedup runs the engine this many times faster than a GPU would; latencies
	// a client sees are the engine's divided by it (metrics report engine time).
	Speedup float64
	// Engine selects the metric names: vllm or sglang.
	Engine string
	// ServedModelNames are the names clients may use for the base model; the
	// first also labels the metrics. Default: the model profile's name.
	ServedModelNames []string
	// LoRAModules are adapters registered at start, as vLLM's --lora-modules.
	LoRAModules LoRAModules
	// EnablePromptTokensDetails adds usage.prompt_tokens_details.cached_tokens.
	EnablePromptTokensDetails bool
	// KVEvents is --kv-events-config: publish KV cache events as vLLM does.
	KVEvents KVEventsConfig
	// Faults is --faults: the pod's fault schedule, times since the start
	// (engine time).
	Faults Faults
}

// DefaultOptions returns the options of a bare `modelsim` invocation.
func DefaultOptions() Options {
	return Options{
		Host: "127.0.0.1",
		Port: 8000,
		Config: Config{
			GPU:                 "H100",
			Model:               "llama-3.1-8b",
			TensorParallel:      DefaultTensorParallel,
			MaxNumSeqs:          DefaultMaxNumSeqs,
			MaxNumBatchedTokens: DefaultMaxNumBatchedTokens,
			LoRALoadTime:        DefaultLoRALoadTime,
		},
		Speedup:  1,
		Engine:   EngineVLLM,
		KVEvents: KVEventsConfig{IntBlockHashes: true},
	}
}

// Engine flavours, selecting the metric names on /metrics.
const (
	EngineVLLM   = "vllm"
	EngineSGLang = "sglang"
)

// AddFlags registers the options on fs, with o's current values as defaults.
func (o *Options) AddFlags(fs *flag.FlagSet) {
	fs.StringVar(&o.Host, "host", o.Host, "address to listen on")
	fs.IntVar(&o.Port, "port", o.Port, "port to listen on (0: any free port, printed at start)")
	fs.StringVar(&o.GPU, "gpu", o.GPU, "GPU profile: "+strings.Join(GPUNames(), ", "))
	fs.StringVar(&o.Model, "model", o.Model, "model profile: "+strings.Join(ModelNames(), ", "))
	fs.IntVar(&o.TensorParallel, "tensor-parallel", o.TensorParallel, "GPUs the model is split over")
	fs.IntVar(&o.MaxNumSeqs, "max-num-seqs", o.MaxNumSeqs, "most requests running at once")
	fs.IntVar(&o.MaxNumBatchedTokens, "max-num-batched-tokens", o.MaxNumBatchedTokens, "token budget of one step (chunked prefill)")
	fs.Var(kvTokensFlag{&o.KVCacheTokens}, "kv-cache-tokens", "KV cache size in `tokens`, or auto (the default: from GPU memory and model)")
	fs.IntVar(&o.MaxLoras, "max-loras", o.MaxLoras, "LoRA adapter slots on the GPU (0 disables LoRA)")
	fs.DurationVar(&o.LoRALoadTime, "lora-load-time", o.LoRALoadTime, "time to load an adapter into a slot")
	fs.Float64Var(&o.SpeedJitter, "speed-jitter", o.SpeedJitter, "per-step multiplicative noise half-width, e.g. 0.05")
	fs.Uint64Var(&o.Seed, "seed", o.Seed, "seed of the jitter")
	fs.Float64Var(&o.Speedup, "speedup", o.Speedup, "run this many times faster than real time")
	fs.StringVar(&o.Engine, "engine", o.Engine, "metric names to expose: vllm or sglang")
	fs.Var((*stringList)(&o.ServedModelNames), "served-model-name", "model name(s) clients use, comma-separated or repeated (default: --model)")
	fs.Var(&o.LoRAModules, "lora-modules", `adapters to register: name=path (several separated by spaces or commas) or JSON {"name":..,"path":..,"base_model_name":..}; repeatable`)
	fs.BoolVar(&o.EnablePromptTokensDetails, "enable-prompt-tokens-details", o.EnablePromptTokensDetails, "report cached prompt tokens in usage")
	fs.Var(&kvEventsFlag{cfg: &o.KVEvents}, "kv-events-config",
		`publish KV cache events as vLLM, e.g. '{"enable_kv_cache_events":true,"publisher":"zmq","endpoint":"tcp://*:5557","replay_endpoint":"tcp://*:5558","topic":"kv-events"}' ("*" binds --host)`)
	fs.Var(faultsFlag{&o.Faults}, "faults", "fault schedule since start: comma-separated KIND@AT+FOR[xFACTOR], e.g. hang@30s+30s,slow@2m+1mx3 (kinds: "+joinKinds()+"; FOR 0: until exit)")
	fs.Var(dropFlag{&o.KVEvents}, "kv-events-drop", "KV event sequence numbers not to send (still replayable), comma-separated: lost messages for tests")
}

// Validate reports every invalid option in one error.
func (o *Options) Validate() error {
	var errs []error
	if o.Port < 0 || o.Port > 65535 {
		errs = append(errs, fmt.Errorf("--port %d out of range", o.Port))
	}
	if !(o.Speedup > 0) {
		errs = append(errs, fmt.Errorf("--speedup must be positive, got %g", o.Speedup))
	}
	if o.Engine != EngineVLLM && o.Engine != EngineSGLang {
		errs = append(errs, fmt.Errorf("--engine must be %s or %s, got %q", EngineVLLM, EngineSGLang, o.Engine))
	}
	if err := o.Config.Validate(); err != nil { // flags carry explicit defaults: a zero is the user's
		errs = append(errs, err)
	}
	if len(o.LoRAModules) > 0 && o.MaxLoras == 0 {
		errs = append(errs, errors.New("--lora-modules needs --max-loras of at least 1"))
	}
	if o.KVEvents.Enabled() {
		if err := o.KVEvents.Validate(); err != nil {
			errs = append(errs, err)
		}
	}
	if err := o.Faults.Validate(); err != nil {
		errs = append(errs, fmt.Errorf("--faults: %w", err))
	}
	for _, n := range o.ServedModelNames {
		if n == "" {
			errs = append(errs, errors.New("--served-model-name has an empty name"))
		}
	}
	return errors.Join(errs...)
}

// EngineConfig is the engine configuration the options describe. It cannot
// fail any longer (--kv-cache-tokens is parsed when set); the error stays for
// its callers.
func (o *Options) EngineConfig() (Config, error) { return o.Config, nil }

// kvTokensFlag is --kv-cache-tokens: auto (0) or a number of tokens.
type kvTokensFlag struct{ tokens *int }

func (f kvTokensFlag) String() string {
	if f.tokens == nil || *f.tokens == 0 {
		return "auto"
	}
	return strconv.Itoa(*f.tokens)
}

func (f kvTokensFlag) Set(s string) error {
	n, err := ParseKVCacheTokens(s)
	if err == nil {
		*f.tokens = n
	}
	return err
}

// faultsFlag is --faults.
type faultsFlag struct{ faults *Faults }

func (f faultsFlag) String() string {
	if f.faults == nil {
		return ""
	}
	return f.faults.String()
}

func (f faultsFlag) Set(s string) error {
	fs, err := ParseFaults(s)
	if err == nil {
		*f.faults = append(*f.faults, fs...)
	}
	return err
}

// servedNames returns the base model's names, defaulting to the profile name.
func (o *Options) servedNames() []string {
	if len(o.ServedModelNames) == 0 {
		return []string{o.Model}
	}
	return o.ServedModelNames
}

// stringList is a flag of comma-separated values that may also be repeated.
type stringList []string

func (l *stringList) String() string { return strings.Join(*l, ",") }

func (l *stringList) Set(v string) error {
	for _, s := range strings.Split(v, ",") {
		if s = strings.TrimSpace(s); s != "" {
			*l = append(*l, s)
		}
	}
	return nil
}
