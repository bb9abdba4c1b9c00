package scenario

import (
	"fmt"
	"math"
	"regexp"
	"time"
)

// Cluster is one member cluster of a multi-cluster scenario: its own fleet
// behind its own in-cluster router, in a region.
type Cluster struct {
	Name   string  `yaml:"name"`
	Region string  `yaml:"region"`
	Fleet  []Group `yaml:"fleet"`
}

// Link is the one-way network delay between a client region and a cluster
// region (or two cluster regions), the same both ways.
type Link struct {
	From  string        `yaml:"from"`
	To    string        `yaml:"to"`
	Delay time.Duration `yaml:"delay"`
}

// Origin is a client region and the share of sessions that come from it.
type Origin struct {
	Region string  `yaml:"region"`
	Share  float64 `yaml:"share"`
}

// Outage makes a whole member cluster unreachable from At for For.
type Outage struct {
	Cluster string        `yaml:"cluster"`
	At      time.Duration `yaml:"at"`
	For     time.Duration `yaml:"for"`
}

// DefaultSameRegionDelay is the one-way delay within a region unless the
// network lists the region with itself.
const DefaultSameRegionDelay = time.Millisecond

// DefaultOtherRegionDelay is the one-way delay between regions the network
// does not list.
const DefaultOtherRegionDelay = 100 * time.Millisecond

// MultiCluster reports whether the scenario lists clusters.
func (s *Scenario) MultiCluster() bool { return len(s.Clusters) > 0 }

// Groups returns every fleet group: fleet's, or each cluster's in turn, named
// "cluster/group" (the name faults use in a multi-cluster scenario).
func (s *Scenario) Groups() []Group {
	if len(s.Clusters) == 0 {
		return s.Fleet
	}
	var out []Group
	for _, c := range s.Clusters {
		for _, g := range c.Fleet {
			g.Name = c.Name + "/" + g.Name
			out = append(out, g)
		}
	}
	return out
}

// ClusterOfPod returns, in PodConfigs order, the index in Clusters of each
// pod's cluster (all 0 for a single fleet).
func (s *Scenario) ClusterOfPod() []int {
	if len(s.Clusters) == 0 {
		return make([]int, len(s.PodGroups()))
	}
	var out []int
	for i, c := range s.Clusters {
		for _, g := range c.Fleet {
			for range g.Replicas {
				out = append(out, i)
			}
		}
	}
	return out
}

// Delay is the one-way network delay between regions a and b.
func (s *Scenario) Delay(a, b string) time.Duration {
	for _, l := range s.Network {
		if (l.From == a && l.To == b) || (l.From == b && l.To == a) {
			return l.Delay
		}
	}
	if a == b {
		return DefaultSameRegionDelay
	}
	return DefaultOtherRegionDelay
}

// OriginRegions returns the client regions and their cumulative shares: a
// draw u in [0, 1) comes from the first region whose cumulative share exceeds
// it. Without origins, every session comes from the first cluster's region.
func (s *Scenario) OriginRegions() ([]string, []float64) {
	if len(s.Workload.Origins) == 0 {
		if len(s.Clusters) == 0 {
			return nil, nil
		}
		return []string{s.Clusters[0].Region}, []float64{1}
	}
	var regions []string
	var cum []float64
	total := 0.0
	for _, o := range s.Workload.Origins {
		total += o.Share
	}
	acc := 0.0
	for _, o := range s.Workload.Origins {
		acc += o.Share / total
		regions, cum = append(regions, o.Region), append(cum, acc)
	}
	cum[len(cum)-1] = 1
	return regions, cum
}

// regionName is what a region looks like (cloud region names, lower case).
var regionName = regexp.MustCompile(`^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$`)

// maxNetworkDelay bounds a link's one-way delay.
const maxNetworkDelay = 10 * time.Second

func (s *Scenario) validateClusters() []error {
	var errs []error
	bad := func(format string, a ...any) { errs = append(errs, fmt.Errorf(format, a...)) }
	names, regions := map[string]bool{}, map[string]bool{}
	model := func() string { return s.Groups()[0].Model }
	for i, c := range s.Clusters {
		at := fmt.Sprintf("clusters[%d]", i)
		switch {
		case c.Name == "":
			bad("%s.name is required", at)
		case names[c.Name]:
			bad("%s.name %q is used twice; give each cluster its own name", at, c.Name)
		case !regionName.MatchString(c.Name):
			bad("%s.name %q must be lower-case letters, digits and '-', e.g. use1", at, c.Name)
		}
		names[c.Name] = true
		if !regionName.MatchString(c.Region) {
			bad("%s.region %q must be a lower-case region name, e.g. us-east-1", at, c.Region)
		}
		regions[c.Region] = true
		if len(c.Fleet) == 0 {
			bad("%s.fleet needs at least one group, e.g. fleet: [{name: h100, replicas: 4, gpu: H100, model: llama-3.1-8b}]", at)
		}
		errs = append(errs, validateFleet(at+".fleet", c.Fleet, model)...)
	}
	total := 0.0
	for i, o := range s.Workload.Origins {
		at := fmt.Sprintf("workload.origins[%d]", i)
		if !regionName.MatchString(o.Region) {
			bad("%s.region %q must be a lower-case region name, e.g. us-east-1", at, o.Region)
		}
		if !(o.Share > 0 && o.Share <= 1) {
			bad("%s.share must be in (0, 1], got %v", at, o.Share)
		}
		total += o.Share
	}
	if len(s.Workload.Origins) > 0 && !(math.Abs(total-1) <= 1e-6) {
		bad("workload.origins shares sum to %.4g; make them sum to 1", total)
	}
	known := func(r string) bool {
		if regions[r] {
			return true
		}
		for _, o := range s.Workload.Origins {
			if o.Region == r {
				return true
			}
		}
		return false
	}
	seen := map[[2]string]bool{}
	for i, l := range s.Network {
		at := fmt.Sprintf("network[%d]", i)
		for _, end := range []struct{ key, region string }{{"from", l.From}, {"to", l.To}} {
			if !known(end.region) {
				bad("%s.%s %q is no cluster's or origin's region; regions here: %v", at, end.key, end.region, s.regionList())
			}
		}
		if l.Delay < 0 || l.Delay > maxNetworkDelay {
			bad("%s.delay must be in [0, %v], got %v", at, maxNetworkDelay, l.Delay)
		}
		if seen[[2]string{l.From, l.To}] || seen[[2]string{l.To, l.From}] {
			bad("%s lists %s-%s again; delays are symmetric, list each pair once", at, l.From, l.To)
		}
		seen[[2]string{l.From, l.To}] = true
	}
	for i, o := range s.Outages {
		at := fmt.Sprintf("outages[%d]", i)
		if !names[o.Cluster] {
			bad("%s.cluster %q names no cluster; clusters: %v", at, o.Cluster, s.clusterNames())
		}
		if o.At < 0 || (s.Duration > 0 && o.At >= s.Duration) {
			bad("%s.at must be in [0, duration), got %v", at, o.At)
		}
		if o.For <= 0 {
			bad("%s.for must be positive, got %v (an outage that never ends is for: DURATION - at)", at, o.For)
		}
	}
	return errs
}

// validateSingleCluster refuses the multi-cluster keys without clusters.
func (s *Scenario) validateSingleCluster() []error {
	var errs []error
	for _, k := range []struct {
		key string
		set bool
	}{{"network", len(s.Network) > 0}, {"workload.origins", len(s.Workload.Origins) > 0}, {"outages", len(s.Outages) > 0}} {
		if k.set {
			errs = append(errs, fmt.Errorf("%s needs clusters: move fleet under clusters: [{name: ..., region: ..., fleet: [...]}]", k.key))
		}
	}
	return errs
}

func (s *Scenario) regionList() []string {
	var out []string
	seen := map[string]bool{}
	add := func(r string) {
		if !seen[r] {
			seen[r] = true
			out = append(out, r)
		}
	}
	for _, c := range s.Clusters {
		add(c.Region)
	}
	for _, o := range s.Workload.Origins {
		add(o.Region)
	}
	return out
}

func (s *Scenario) clusterNames() []string {
	out := make([]string, len(s.Clusters))
	for i, c := range s.Clusters {
		out[i] = c.Name
	}
	return out
}
