// Package simproc starts simulated model servers (cmd/modelsim) as processes for
// tests: the binary is built once per test binary, each process listens on a
// free loopback port, and every process is stopped when its test ends.
//
//	pods := simproc.StartN(t, 3, simproc.Options{Config: sim.Config{GPU: "H100", Model: "llama-3.1-8b"}, Speedup: 10})
//	resp, _ := http.Get(pods[0].URL + "/metrics")
package simproc

import (
	"context"
	"strconv"

	"github.com/igw-dev/igw/internal/proc"
	"github.com/igw-dev/igw/pkg/sim"
)

// TB is the part of testing.TB the helpers need; Ginkgo's GinkgoT() satisfies it too.
type TB interface {
	Helper()
	Fatal(args ...any)
	Fatalf(format string, args ...any)
	Cleanup(func())
}

// Options are the simulator flags; zero values leave the simulator's defaults.
type Options struct {
	// Host is the address to listen on (default 127.0.0.1): another loopback
	// address such as 127.0.0.12 lets a test give each simulator the IP of a pod.
	Host string
	// Port to listen on (default 0: a free port).
	Port int

	// Config is the engine (--gpu ... --seed); zero fields are the
	// simulator's defaults, but for Seed, which StartN gives process i as
	// Seed+i.
	sim.Config
	// Speedup runs the simulator this many times faster than real time.
	Speedup float64
	// Engine is "vllm" (default) or "sglang" metric names.
	Engine          string
	ServedModelName string
	// LoRAModules are adapters registered at start, as "name=path".
	LoRAModules []string
	// Extra are further flags passed verbatim.
	Extra []string
}

// Proc is one running simulator: URL (e.g. http://127.0.0.1:41234), Addr
// (host:port), Port, Stop (safe to call early, to take a pod away), Stderr.
type Proc = proc.Proc

// Start builds (once) and starts one simulator; it has answered /health when
// Start returns, and is stopped at the test's cleanup.
func Start(t TB, opts Options) *Proc {
	t.Helper()
	p, err := Launch(Binary(t), opts)
	if err != nil {
		t.Fatalf("simproc: %v", err)
	}
	t.Cleanup(p.Stop)
	return p
}

// Launch starts one simulator from bin (Binary) and returns once it has
// answered /health; the caller stops it. It is Start for a goroutine other
// than the test's, which must not end the test.
func Launch(bin string, opts Options) (*Proc, error) {
	host := opts.Host
	if host == "" {
		host = "127.0.0.1"
	}
	args := append([]string{"--host", host, "--port", strconv.Itoa(opts.Port)}, opts.args()...)
	return proc.Start(context.Background(), "modelsim", bin, args, "/health")
}

// StartN starts n simulators with the same options and seeds Seed, Seed+1, ...
func StartN(t TB, n int, opts Options) []*Proc {
	t.Helper()
	procs := make([]*Proc, n)
	for i := range procs {
		o := opts
		o.Seed = opts.Seed + uint64(i)
		procs[i] = Start(t, o)
	}
	return procs
}

func (o Options) args() []string {
	var a []string
	add := func(flag, v string) { a = append(a, "--"+flag, v) }
	if o.GPU != "" {
		add("gpu", o.GPU)
	}
	if o.Model != "" {
		add("model", o.Model)
	}
	for flag, v := range map[string]int{"tensor-parallel": o.TensorParallel, "max-num-seqs": o.MaxNumSeqs,
		"max-num-batched-tokens": o.MaxNumBatchedTokens, "kv-cache-tokens": o.KVCacheTokens, "max-loras": o.MaxLoras} {
		if v != 0 {
			add(flag, strconv.Itoa(v))
		}
	}
	if o.LoRALoadTime != 0 {
		add("lora-load-time", o.LoRALoadTime.String())
	}
	if o.SpeedJitter != 0 {
		add("speed-jitter", strconv.FormatFloat(o.SpeedJitter, 'g', -1, 64))
	}
	add("seed", strconv.FormatUint(o.Seed, 10))
	if o.Speedup != 0 {
		add("speedup", strconv.FormatFloat(o.Speedup, 'g', -1, 64))
	}
	if o.Engine != "" {
		add("engine", o.Engine)
	}
	if o.ServedModelName != "" {
		add("served-model-name", o.ServedModelName)
	}
	for _, m := range o.LoRAModules {
		add("lora-modules", m)
	}
	return append(a, o.Extra...)
}

// Binary returns the path of the modelsim binary, building it on first use.
func Binary(t TB) string {
	t.Helper()
	bin, err := proc.Build("modelsim")
	if err != nil {
		t.Fatalf("simproc: %v", err)
	}
	return bin
}
