package sim

import (
	"cmp"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// Config is one simulated pod: exactly the per-group fleet keys of a benchmark
// scenario (bench/scenarios/README.md) plus the seed.
type Config struct {
	GPU                 string
	Model               string
	TensorParallel      int
	MaxNumSeqs          int
	MaxNumBatchedTokens int
	// KVCacheTokens is the KV-cache size in tokens; 0 means auto (derived from the
	// GPU memory and the model).
	KVCacheTokens int
	// MaxLoras is the number of adapter slots on the GPU; 0 disables LoRA.
	MaxLoras     int
	LoRALoadTime time.Duration
	// SpeedJitter is the half-width of the uniform multiplicative noise applied to
	// every step (0.05: each step takes 95%..105% of its nominal time).
	SpeedJitter float64
	// Seed makes the jitter reproducible; give every pod its own.
	Seed uint64
}

// Defaults of the keys a scenario may leave out; they follow vLLM's defaults for
// online serving.
const (
	DefaultTensorParallel      = 1
	DefaultMaxNumSeqs          = 256
	DefaultMaxNumBatchedTokens = 8192
	DefaultLoRALoadTime        = 50 * time.Millisecond
	// BlockSize is the number of tokens in a KV-cache block (vLLM's default).
	BlockSize = 16
)

// WithDefaults returns c with zero fields set to their defaults.
func (c Config) WithDefaults() Config {
	c.TensorParallel = cmp.Or(c.TensorParallel, DefaultTensorParallel)
	c.MaxNumSeqs = cmp.Or(c.MaxNumSeqs, DefaultMaxNumSeqs)
	c.MaxNumBatchedTokens = cmp.Or(c.MaxNumBatchedTokens, DefaultMaxNumBatchedTokens)
	if c.LoRALoadTime == 0 && c.MaxLoras > 0 {
		c.LoRALoadTime = DefaultLoRALoadTime
	}
	return c
}

// Validate reports every invalid field of c (after defaults) in one error.
func (c Config) Validate() error {
	var errs []error
	if _, err := NewProfile(c.GPU, c.Model, max(c.TensorParallel, 1)); err != nil {
		errs = append(errs, err)
	}
	if c.TensorParallel < 1 {
		errs = append(errs, fmt.Errorf("tensorParallel must be at least 1, got %d", c.TensorParallel))
	}
	if c.MaxNumSeqs < 1 {
		errs = append(errs, fmt.Errorf("maxNumSeqs must be at least 1, got %d", c.MaxNumSeqs))
	}
	if c.MaxNumBatchedTokens < 1 {
		errs = append(errs, fmt.Errorf("maxNumBatchedTokens must be at least 1, got %d", c.MaxNumBatchedTokens))
	}
	if c.KVCacheTokens < 0 {
		errs = append(errs, fmt.Errorf("kvCacheTokens must be auto or positive, got %d", c.KVCacheTokens))
	} else if c.KVCacheTokens > 0 && c.KVCacheTokens < BlockSize {
		errs = append(errs, fmt.Errorf("kvCacheTokens %d is smaller than one block of %d tokens", c.KVCacheTokens, BlockSize))
	}
	if c.MaxLoras < 0 {
		errs = append(errs, fmt.Errorf("maxLoras must not be negative, got %d", c.MaxLoras))
	}
	if c.LoRALoadTime < 0 {
		errs = append(errs, fmt.Errorf("loraLoadTime must not be negative, got %v", c.LoRALoadTime))
	}
	if !(c.SpeedJitter >= 0 && c.SpeedJitter < 1) {
		errs = append(errs, fmt.Errorf("speedJitter must be in [0, 1), got %g", c.SpeedJitter))
	}
	return errors.Join(errs...)
}

// ParseKVCacheTokens reads the scenario's kvCacheTokens value: "auto" (returned as
// 0) or a positive number of tokens.
func ParseKVCacheTokens(s string) (int, error) {
	s = strings.TrimSpace(s)
	if strings.EqualFold(s, "auto") || s == "" {
		return 0, nil
	}
	n, err := strconv.Atoi(s)
	if err != nil || n <= 0 {
		return 0, fmt.Errorf("kvCacheTokens must be auto or a positive integer, got %q", s)
	}
	return n, nil
}
