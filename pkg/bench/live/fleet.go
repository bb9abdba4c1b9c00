package live

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"sigs.k8s.io/yaml"

	"github.com/igw-dev/igw/internal/proc"
	"github.com/igw-dev/igw/pkg/bench"
	"github.com/igw-dev/igw/pkg/bench/livegateway"
	"github.com/igw-dev/igw/pkg/bench/policies"
	"github.com/igw-dev/igw/pkg/bench/workload"
	"github.com/igw-dev/igw/pkg/gateway"
	"github.com/igw-dev/igw/pkg/sim"
	"github.com/igw-dev/igw/pkg/wire"
)

// fleet is one run's processes.
type fleet struct {
	job     bench.Job
	speedup float64
	dir     string
	pods    []*proc.Proc
	podOf   map[string]int // "ip:port" → pod index in fleet order
	gateway *proc.Proc
	client  *http.Client
}

// startFleet starts a simulator per pod and the gateway in front of them;
// igwConfig, when set, is the pool's EPP configuration for the igw policy.
// The returned fleet, even with an error, holds what started: stop it.
func startFleet(ctx context.Context, job bench.Job, speedup float64, bins binaries, igwConfig string) (*fleet, error) {
	sc := job.Scenario
	dir, err := os.MkdirTemp("", "igw-live-")
	if err != nil {
		return nil, err
	}
	f := &fleet{job: job, speedup: speedup, dir: dir, podOf: map[string]int{},
		client: &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 4096, DisableCompression: true}}}
	adapters := scenarioAdapters(job)
	groups := sc.PodGroups()
	cfgs := sc.PodConfigs(job.Seed)
	eps := make([]endpoint, len(cfgs))
	f.pods = make([]*proc.Proc, len(cfgs))
	errs := make([]error, len(cfgs))
	var wg sync.WaitGroup
	for i, cfg := range cfgs {
		wg.Go(func() {
			name := fmt.Sprintf("modelsim %d (%s)", i, groups[i])
			p, err := proc.Start(ctx, name, bins.modelsim, simArgs(podHost(i), cfg, speedup, adapters), "/health")
			if err != nil {
				errs[i] = err
				return
			}
			f.pods[i] = p
			eps[i], errs[i] = endpointOf(p.Addr, groups[i], cfg)
		})
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return f, err
	}
	for i, p := range f.pods {
		f.podOf[p.Addr] = i
	}
	if err := writeYAML(filepath.Join(dir, "endpoints.yaml"), eps); err != nil {
		return f, err
	}
	pool := gateway.PoolConfig{Name: sc.Name, Models: []string{sc.Model()}, EndpointsFile: "endpoints.yaml"}
	if job.Policy == policies.IGW {
		// Told the scenario's SLO as a route declares it, as in the des.
		text, err := policies.RouteConfig(igwConfig, policies.RouteSLO(sc.SLO.TTFT, sc.SLO.TPOT))
		if err != nil {
			return f, err
		}
		if text != "" {
			pool.EPPConfig = "igw-epp.yaml"
			if err := os.WriteFile(filepath.Join(dir, pool.EPPConfig), []byte(text), 0o644); err != nil {
				return f, err
			}
		}
	}
	for _, a := range adapters {
		if pool.Adapters == nil {
			pool.Adapters = map[string]string{}
		}
		pool.Adapters[a] = sc.Model()
	}
	if err := writeYAML(filepath.Join(dir, "gateway.yaml"), gateway.Config{Pools: []gateway.PoolConfig{pool}}); err != nil {
		return f, err
	}
	f.gateway, err = proc.Start(ctx, gatewayCommand, bins.gateway, gatewayArgs(job, dir, speedup), "/readyz")
	return f, err
}

// stop ends every process and removes the run's files.
func (f *fleet) stop() {
	proc.StopAll(append([]*proc.Proc{f.gateway}, f.pods...))
	f.client.CloseIdleConnections()
	_ = os.RemoveAll(f.dir)
}

// exited returns an error naming a process of the fleet that has ended.
func (f *fleet) exited() error {
	for _, p := range append([]*proc.Proc{f.gateway}, f.pods...) {
		if p != nil && p.Exited() {
			return fmt.Errorf("%s exited during the run: %s", p.Name, lastLines(p.Stderr(), 5))
		}
	}
	return nil
}

// logStderr writes the tail of every process's stderr to w.
func (f *fleet) logStderr(w io.Writer) {
	for _, p := range append([]*proc.Proc{f.gateway}, f.pods...) {
		if p != nil {
			if s := lastLines(p.Stderr(), 10); s != "" {
				fmt.Fprintf(w, "live: %s stderr (tail):\n%s\n", p.Name, s)
			}
		}
	}
}

func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	return strings.Join(lines[max(0, len(lines)-n):], "\n")
}

// scenarioAdapters are the LoRA adapters the job's workload names.
func scenarioAdapters(job bench.Job) []string {
	l := job.Scenario.Workload.LoRA
	if l == nil || l.Fraction == 0 {
		return nil
	}
	out := make([]string, l.Adapters)
	for i := range out {
		out[i] = workload.AdapterName(i)
	}
	return out
}

// podHost is the loopback address pod i binds. Distinct addresses whose
// order is the fleet's (the gateway sorts endpoints by "ip:port") on Linux,
// where all of 127.0.0.0/8 is loopback; 127.0.0.1 elsewhere.
func podHost(i int) string {
	if runtime.GOOS != "linux" || i > 154 {
		return "127.0.0.1"
	}
	return "127.0.1." + strconv.Itoa(100+i)
}

// endpoint is one line of the gateway's endpoints file.
type endpoint struct {
	Address string            `json:"address"`
	Port    int               `json:"port"`
	Labels  map[string]string `json:"labels"`
}

// endpointOf describes a started pod to the gateway: its address, and the
// labels the baselines read (fleet group, KV-cache size).
func endpointOf(addr, group string, cfg sim.Config) (endpoint, error) {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return endpoint{}, err
	}
	n, err := strconv.Atoi(port)
	if err != nil {
		return endpoint{}, fmt.Errorf("port of %s: %w", addr, err)
	}
	kv := cfg.KVCacheTokens
	if kv == 0 {
		prof, err := sim.NewProfile(cfg.GPU, cfg.Model, max(cfg.TensorParallel, 1))
		if err != nil {
			return endpoint{}, err
		}
		kv = prof.KVCapacityTokens
	}
	return endpoint{Address: host, Port: n, Labels: map[string]string{
		livegateway.LabelGroup: group, livegateway.LabelKVCacheTokens: strconv.Itoa(kv), wire.LabelGPUProduct: cfg.GPU}}, nil
}

// simArgs are modelsim's flags for one pod: every key of its configuration
// (defaults resolved here, so the simulator runs exactly what the des backend
// would), the speedup, and the workload's adapters.
func simArgs(host string, cfg sim.Config, speedup float64, adapters []string) []string {
	cfg = cfg.WithDefaults()
	kv := "auto"
	if cfg.KVCacheTokens > 0 {
		kv = strconv.Itoa(cfg.KVCacheTokens)
	}
	args := []string{"--host", host, "--port", "0", "--gpu", cfg.GPU, "--model", cfg.Model,
		"--tensor-parallel", strconv.Itoa(cfg.TensorParallel), "--max-num-seqs", strconv.Itoa(cfg.MaxNumSeqs),
		"--max-num-batched-tokens", strconv.Itoa(cfg.MaxNumBatchedTokens), "--kv-cache-tokens", kv,
		"--max-loras", strconv.Itoa(cfg.MaxLoras), "--lora-load-time", cfg.LoRALoadTime.String(),
		"--speed-jitter", strconv.FormatFloat(cfg.SpeedJitter, 'g', -1, 64), "--seed", strconv.FormatUint(cfg.Seed, 10),
		"--speedup", strconv.FormatFloat(speedup, 'g', -1, 64), "--enable-prompt-tokens-details"}
	if len(adapters) > 0 && cfg.MaxLoras > 0 {
		mods := make([]string, len(adapters))
		for i, a := range adapters {
			mods[i] = a + "=/adapters/" + a
		}
		args = append(args, "--lora-modules", strings.Join(mods, ","))
	}
	return args
}

// gatewayArgs are the gateway's flags: the pool file in dir, the policy and
// seed, the clock scaled like the simulators', and the scenario's telemetry
// interval and staleness as the des backend models them. The load client on
// loopback is trusted with x-igw-debug, whose breakdown names each request's
// endpoint.
func gatewayArgs(job bench.Job, dir string, speedup float64) []string {
	sc := job.Scenario
	return []string{"--port", "0", "--bind-address", "127.0.0.1", "--config", filepath.Join(dir, "gateway.yaml"),
		"--trusted-cidrs", "127.0.0.1/32", "--allow-debug-header",
		"--policy", job.Policy, "--seed", strconv.FormatUint(job.Seed, 10),
		"--time-scale", strconv.FormatFloat(speedup, 'g', -1, 64),
		"--scrape-interval", sc.ScrapeInterval.String(),
		"--metrics-staleness", policies.StalenessFor(sc.ScrapeInterval).String()}
}

func writeYAML(path string, v any) error {
	data, err := yaml.Marshal(v)
	if err != nil {
		return err
	}
	return os.WriteFile(path, data, 0o644)
}

// counters sums the simulators' cumulative prefix-cache and adapter-load counters.
func (f *fleet) counters(ctx context.Context) (bench.FleetCounters, error) {
	var c bench.FleetCounters
	for _, p := range f.pods {
		value, err := f.scrapeCounters(ctx, p)
		if err != nil {
			return c, err
		}
		c.PrefixQueries += value(wire.VLLMPrefixCacheQueries)
		c.PrefixHits += value(wire.VLLMPrefixCacheHits)
		c.LoRALoads += value(wire.ModelsimLoRALoads)
	}
	return c, nil
}

// scrapeCounters reads p's /metrics and returns the value of each counter by
// name (summed over its series; 0 when absent).
func (f *fleet) scrapeCounters(ctx context.Context, p *proc.Proc) (func(name string) uint64, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, p.URL+wire.MetricsPath, nil)
	if err != nil {
		return nil, err
	}
	resp, err := f.client.Do(req)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", p.Name, err)
	}
	defer resp.Body.Close()
	parser := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := parser.TextToMetricFamilies(resp.Body)
	if err != nil {
		return nil, fmt.Errorf("%s /metrics: %w", p.Name, err)
	}
	return func(name string) uint64 {
		var v float64
		if fam := fams[name]; fam != nil {
			for _, m := range fam.GetMetric() {
				v += m.GetCounter().GetValue()
			}
		}
		return uint64(v)
	}, nil
}

// delta is what cumulative counters counted between two readings.
func delta(base, now bench.FleetCounters) bench.FleetCounters {
	return bench.FleetCounters{
		PrefixQueries: now.PrefixQueries - base.PrefixQueries,
		PrefixHits:    now.PrefixHits - base.PrefixHits,
		LoRALoads:     now.LoRALoads - base.LoRALoads,
	}
}
