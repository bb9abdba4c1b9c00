package sim

import (
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// KVEventsConfig is vLLM's --kv-events-config: a JSON object with vLLM's key
// names and defaults.
type KVEventsConfig struct {
	EnableKVCacheEvents bool `json:"enable_kv_cache_events"`
	// Publisher is "zmq" or "null" (default: zmq when events are enabled).
	Publisher string `json:"publisher"`
	// Endpoint is the PUB socket: an address with "*" binds (the simulator
	// binds "*" on its --host), any other is dialed, as vLLM does.
	Endpoint string `json:"endpoint"`
	// ReplayEndpoint is the ROUTER socket answering replay requests ("": none).
	ReplayEndpoint string `json:"replay_endpoint"`
	// BufferSteps is how many past batches the replay socket can resend.
	BufferSteps int `json:"buffer_steps"`
	// HWM is the PUB socket's high-water mark: batches beyond it are dropped.
	HWM int `json:"hwm"`
	// MaxQueueSize bounds the batches waiting for the publisher.
	MaxQueueSize int `json:"max_queue_size"`
	// Topic is the first frame of every message.
	Topic string `json:"topic"`

	// IntBlockHashes publishes hashes as 64-bit integers, vLLM's default;
	// false sends the 32-byte digests. Not a JSON key: vLLM reads it from
	// VLLM_KV_EVENTS_USE_INT_BLOCK_HASHES, and so does cmd/modelsim.
	IntBlockHashes bool `json:"-"`
	// HashSeed is vLLM's PYTHONHASHSEED ("" with HashSeedSet false: a random
	// NONE_HASH, as vLLM without the variable). Not a JSON key either.
	HashSeed    string `json:"-"`
	HashSeedSet bool   `json:"-"`
	// DropSequences are batches the PUB socket does not send (they stay in
	// the replay buffer): lost messages on demand, for tests of gap recovery.
	// The --kv-events-drop flag.
	DropSequences []uint64 `json:"-"`
}

// vLLM's defaults.
const (
	DefaultKVEventsEndpoint     = "tcp://*:5557"
	DefaultKVEventsBufferSteps  = 10_000
	DefaultKVEventsHWM          = 100_000
	DefaultKVEventsMaxQueueSize = 100_000
)

// Enabled reports whether the configuration publishes anything.
func (c *KVEventsConfig) Enabled() bool { return c.EnableKVCacheEvents && c.Publisher != "null" }

// ParseKVEventsConfig reads the flag's JSON; unknown keys are errors, with
// the known ones listed.
func ParseKVEventsConfig(s string) (KVEventsConfig, error) {
	c := KVEventsConfig{Endpoint: DefaultKVEventsEndpoint, BufferSteps: DefaultKVEventsBufferSteps,
		HWM: DefaultKVEventsHWM, MaxQueueSize: DefaultKVEventsMaxQueueSize, IntBlockHashes: true}
	dec := json.NewDecoder(strings.NewReader(s))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&c); err != nil {
		return c, fmt.Errorf("--kv-events-config: %v (a JSON object with keys enable_kv_cache_events, publisher, "+
			"endpoint, replay_endpoint, buffer_steps, hwm, max_queue_size, topic)", err)
	}
	if dec.More() {
		return c, errors.New("--kv-events-config: trailing data after the JSON object")
	}
	if c.Publisher == "" {
		c.Publisher = "zmq"
	}
	return c, c.Validate()
}

// Validate reports every invalid field in one error.
func (c *KVEventsConfig) Validate() error {
	var errs []error
	if c.Publisher != "zmq" && c.Publisher != "null" {
		errs = append(errs, fmt.Errorf("publisher must be zmq or null, got %q", c.Publisher))
	}
	if c.Enabled() {
		if !strings.HasPrefix(c.Endpoint, "tcp://") {
			errs = append(errs, fmt.Errorf("endpoint must be tcp://HOST:PORT (e.g. %s), got %q", DefaultKVEventsEndpoint, c.Endpoint))
		}
		if c.ReplayEndpoint != "" && !strings.HasPrefix(c.ReplayEndpoint, "tcp://") {
			errs = append(errs, fmt.Errorf("replay_endpoint must be tcp://HOST:PORT (e.g. tcp://*:5558), got %q", c.ReplayEndpoint))
		}
	}
	if c.BufferSteps < 1 {
		errs = append(errs, fmt.Errorf("buffer_steps must be at least 1, got %d", c.BufferSteps))
	}
	if c.HWM < 0 || c.MaxQueueSize < 1 {
		errs = append(errs, fmt.Errorf("hwm must be at least 0 and max_queue_size at least 1, got %d and %d", c.HWM, c.MaxQueueSize))
	}
	if len(errs) > 0 {
		return fmt.Errorf("--kv-events-config: %w", errors.Join(errs...))
	}
	return nil
}

// kvEventsFlag is the flag.Value of --kv-events-config.
type kvEventsFlag struct {
	cfg *KVEventsConfig
	raw string
}

func (f *kvEventsFlag) String() string {
	if f == nil || f.raw == "" {
		return ""
	}
	return f.raw
}

func (f *kvEventsFlag) Set(v string) error {
	c, err := ParseKVEventsConfig(v)
	if err != nil {
		return err
	}
	c.IntBlockHashes, c.HashSeed, c.HashSeedSet, c.DropSequences = f.cfg.IntBlockHashes, f.cfg.HashSeed, f.cfg.HashSeedSet, f.cfg.DropSequences
	*f.cfg, f.raw = c, strings.TrimSpace(v)
	return nil
}

// KVEventsFromEnv reads the environment variables vLLM takes its hash
// settings from: VLLM_KV_EVENTS_USE_INT_BLOCK_HASHES ("0" sends digests) and
// PYTHONHASHSEED (the NONE_HASH seed).
func (c *KVEventsConfig) KVEventsFromEnv(lookup func(string) (string, bool)) error {
	if v, ok := lookup("VLLM_KV_EVENTS_USE_INT_BLOCK_HASHES"); ok {
		switch strings.TrimSpace(v) {
		case "0":
			c.IntBlockHashes = false
		case "1":
			c.IntBlockHashes = true
		default:
			return fmt.Errorf("VLLM_KV_EVENTS_USE_INT_BLOCK_HASHES must be 0 or 1, got %q", v)
		}
	}
	c.HashSeed, c.HashSeedSet = lookup("PYTHONHASHSEED")
	return nil
}

// dropFlag is the flag.Value of --kv-events-drop: sequence numbers,
// comma-separated.
type dropFlag struct{ cfg *KVEventsConfig }

func (f dropFlag) String() string {
	if f.cfg == nil {
		return ""
	}
	parts := make([]string, len(f.cfg.DropSequences))
	for i, s := range f.cfg.DropSequences {
		parts[i] = strconv.FormatUint(s, 10)
	}
	return strings.Join(parts, ",")
}

func (f dropFlag) Set(v string) error {
	for _, part := range strings.Split(v, ",") {
		if part = strings.TrimSpace(part); part == "" {
			continue
		}
		n, err := strconv.ParseUint(part, 10, 64)
		if err != nil {
			return fmt.Errorf("--kv-events-drop: %q is not a sequence number", part)
		}
		f.cfg.DropSequences = append(f.cfg.DropSequences, n)
	}
	return nil
}
