package gateway

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"

	"sigs.k8s.io/yaml"

	"github.com/igw-dev/igw/pkg/bbr"
	"github.com/igw-dev/igw/pkg/epp/source"
)

// Config is the gateway's model map: which pool of endpoints serves which
// model names and LoRA adapters, each pool with its own picker, as one
// HTTPRoute rule and InferencePool per model in a cluster.
//
//	pools:
//	- name: llama                        # unique
//	  models: [llama-3.1-8b]             # served names (the body's "model")
//	  adapters: {sql-lora: llama-3.1-8b} # LoRA adapter → base model (one of models)
//	  endpointsFile: llama-endpoints.yaml  # the EPP's endpoints file; relative to this file
//	  # or, instead of endpointsFile, the ready Pods of an InferencePool (--kubeconfig or in-cluster):
//	  # inferencePool: {namespace: inference, name: llama-pool}
//	  eppConfig: llama-epp.yaml          # optional EPP configuration (default: the built-in)
//	  policy: igw                        # optional; default: --policy
type Config struct {
	Pools []PoolConfig `json:"pools"`
}

// PoolConfig is one pool of model servers.
type PoolConfig struct {
	Name          string            `json:"name"`
	Models        []string          `json:"models,omitempty"`
	Adapters      map[string]string `json:"adapters,omitempty"`
	EndpointsFile string            `json:"endpointsFile,omitempty"`
	// InferencePool, instead of EndpointsFile, takes the endpoints from a
	// cluster: the pool's ready Pods, followed as they change.
	InferencePool *PoolRef `json:"inferencePool,omitempty"`
	EPPConfig     string   `json:"eppConfig,omitempty"`
	Policy        string   `json:"policy,omitempty"`
}

// PoolRef names an InferencePool; without a namespace, the gateway's own
// ($POD_NAMESPACE, else "default").
type PoolRef struct {
	Namespace string `json:"namespace,omitempty"`
	Name      string `json:"name"`
}

// LoadConfig reads a gateway configuration file; relative paths in it are
// resolved against the file's directory.
func LoadConfig(path string) (*Config, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var c Config
	if err := yaml.UnmarshalStrict(data, &c); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	dir := filepath.Dir(path)
	for i := range c.Pools {
		p := &c.Pools[i]
		p.EndpointsFile = resolve(dir, p.EndpointsFile)
		p.EPPConfig = resolve(dir, p.EPPConfig)
		if p.InferencePool != nil {
			p.InferencePool.Namespace = source.PoolNamespace(p.InferencePool.Namespace)
		}
	}
	if err := c.Validate(); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return &c, nil
}

func resolve(dir, path string) string {
	if path == "" || filepath.IsAbs(path) {
		return path
	}
	return filepath.Join(dir, path)
}

// Validate reports every problem in one error. A pool without models takes
// every model, which only makes sense when it is the only pool.
func (c *Config) Validate() error {
	var errs []error
	bad := func(format string, a ...any) { errs = append(errs, fmt.Errorf(format, a...)) }
	if len(c.Pools) == 0 {
		bad("pools: at least one pool is required")
	}
	pools := map[string]bool{}
	owner := map[string]string{} // served name or adapter → pool
	claim := func(pool, name, what string) {
		if other, dup := owner[name]; dup {
			bad("pool %q: %s %q is already served by pool %q", pool, what, name, other)
		}
		owner[name] = pool
		if len(name) == 0 || len(name) > bbr.MaxModelNameBytes {
			bad("pool %q: %s name %q must have 1 to %d bytes", pool, what, name, bbr.MaxModelNameBytes)
		}
	}
	for i, p := range c.Pools {
		if p.Name == "" {
			bad("pools[%d]: name is required", i)
		} else if pools[p.Name] {
			bad("pools[%d]: name %q is used twice", i, p.Name)
		}
		pools[p.Name] = true
		switch {
		case (p.EndpointsFile == "") == (p.InferencePool == nil):
			bad("pool %q: exactly one of endpointsFile and inferencePool is required", p.Name)
		case p.InferencePool != nil && p.InferencePool.Name == "":
			bad("pool %q: inferencePool.name is required", p.Name)
		}
		if len(p.Models) == 0 && (len(c.Pools) > 1 || len(p.Adapters) > 0) {
			bad("pool %q: models is required when there are several pools or adapters", p.Name)
		}
		for _, m := range p.Models {
			claim(p.Name, m, "model")
		}
		for a, base := range p.Adapters {
			claim(p.Name, a, "adapter")
			if !slices.Contains(p.Models, base) {
				bad("pool %q: adapter %q runs on %q, which the pool does not serve", p.Name, a, base)
			}
		}
	}
	return errors.Join(errs...)
}

// discovers reports whether some pool follows an InferencePool, so the
// gateway needs the API server.
func (c *Config) discovers() bool {
	return slices.ContainsFunc(c.Pools, func(p PoolConfig) bool { return p.InferencePool != nil })
}

// adapterMap is every pool's adapter → base model mapping, for the body-based router.
func (c *Config) adapterMap() map[string]string {
	m := map[string]string{}
	for _, p := range c.Pools {
		for a, base := range p.Adapters {
			m[a] = base
		}
	}
	return m
}
