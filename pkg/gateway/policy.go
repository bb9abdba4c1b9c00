package gateway

import (
	"fmt"
	"slices"
	"time"

	"github.com/igw-dev/igw/pkg/epp/datastore"
)

// PolicyIGW is igw's endpoint picker: the gateway's own policy, built in, and
// every pool's default.
const PolicyIGW = "igw"

// Policy is a routing policy a pool may run instead of igw's. The gateway
// ships igw alone; a program that embeds the gateway registers others (the
// live benchmark's gateway, cmd/igw-bench-gateway, registers the
// benchmark's baselines, so that they are compared through the same proxy).
type Policy struct {
	// New builds the policy's picker for one pool.
	New func(PolicyEnv) (Picker, error)
	// Telemetry is true when the picker reads the endpoints' metrics
	// (Picker.UpdateMetrics); the pool scrapes them only then.
	Telemetry bool
}

// PolicyEnv is what a policy's picker is built over: one pool.
type PolicyEnv struct {
	Policy string
	// Store holds the pool's endpoints, kept current from its endpoints file.
	Store *datastore.Store
	// Seed seeds the picker's random choices.
	Seed uint64
	// ScrapeInterval is how often each endpoint's metrics are scraped.
	ScrapeInterval time.Duration
}

// Registry is the policies a gateway can run: igw, built in, and those
// registered besides it. A nil registry knows igw alone.
type Registry struct {
	names    []string
	policies map[string]Policy
}

// NewRegistry returns a registry of igw alone.
func NewRegistry() *Registry { return &Registry{policies: map[string]Policy{}} }

// Register adds the policy name. igw, a name used twice and a policy without
// a constructor are errors.
func (r *Registry) Register(name string, p Policy) error {
	switch {
	case name == PolicyIGW:
		return fmt.Errorf("policy %s is built in", PolicyIGW)
	case name == "":
		return fmt.Errorf("a policy needs a name")
	case p.New == nil:
		return fmt.Errorf("policy %s has no constructor", name)
	}
	if _, dup := r.policies[name]; dup {
		return fmt.Errorf("policy %s is registered twice", name)
	}
	r.names = append(r.names, name)
	r.policies[name] = p
	return nil
}

// Names lists igw and then every registered policy in registration order.
func (r *Registry) Names() []string {
	if r == nil {
		return []string{PolicyIGW}
	}
	return append([]string{PolicyIGW}, r.names...)
}

// Known reports whether a pool can run the policy name.
func (r *Registry) Known(name string) bool { return slices.Contains(r.Names(), name) }

// lookup returns the registered policy name (false for igw and unknown names).
func (r *Registry) lookup(name string) (Policy, bool) {
	if r == nil {
		return Policy{}, false
	}
	p, ok := r.policies[name]
	return p, ok
}
