package scenario

import (
	"strings"
	"testing"
	"time"
)

// globalKeys is the multi-cluster schema's every key.
const globalKeys = `
name: three-region
duration: 300s
warmup: 30s
clusters:
  - name: use1
    region: us-east-1
    fleet: [{name: h100, replicas: 2, gpu: H100, model: llama-3.1-8b}]
  - {name: euw1, region: eu-west-1, fleet: [{name: h100, replicas: 1, gpu: H100, model: llama-3.1-8b}, {name: a10g, replicas: 2, gpu: A10G, model: llama-3.1-8b}]}
network:
  - {from: us-east-1, to: eu-west-1, delay: 40ms}
  - {from: eu-west-1, to: eu-west-1, delay: 2ms}
workload:
  origins: [{region: us-east-1, share: 0.6}, {region: eu-west-1, share: 0.4}]
  arrival: {type: poisson, rate: 2}
  input: {dist: fixed, value: 100}
  output: {dist: fixed, value: 10}
outages: [{cluster: use1, at: 100s, for: 60s}]
faults: [{group: euw1/a10g, replica: 1, kind: slow, factor: 2, at: 10s, for: 5s}]
slo: {ttft: 1s}
`

func TestParseClusters(t *testing.T) {
	s, err := Parse([]byte(globalKeys), "global.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if !s.MultiCluster() || len(s.PodConfigs(1)) != 5 || s.Model() != "llama-3.1-8b" {
		t.Fatalf("multi %v, %d pods, model %q", s.MultiCluster(), len(s.PodConfigs(1)), s.Model())
	}
	if got := strings.Join(s.PodGroups(), ","); got != "use1/h100,use1/h100,euw1/h100,euw1/a10g,euw1/a10g" {
		t.Fatalf("groups %s", got)
	}
	if got := s.ClusterOfPod(); len(got) != 5 || got[1] != 0 || got[2] != 1 || got[4] != 1 {
		t.Fatalf("clusters of pods %v", got)
	}
	for _, tc := range []struct {
		a, b string
		want time.Duration
	}{{"us-east-1", "eu-west-1", 40 * time.Millisecond}, {"eu-west-1", "us-east-1", 40 * time.Millisecond},
		{"us-east-1", "us-east-1", DefaultSameRegionDelay}, {"eu-west-1", "eu-west-1", 2 * time.Millisecond},
		{"us-east-1", "ap-south-1", DefaultOtherRegionDelay}} {
		if got := s.Delay(tc.a, tc.b); got != tc.want {
			t.Errorf("delay %s-%s = %v, want %v", tc.a, tc.b, got, tc.want)
		}
	}
	if faults := s.PodFaults(); len(faults[4]) != 1 || len(faults[3]) != 0 {
		t.Fatalf("faults by pod %v", faults)
	}
	regions, cum := s.OriginRegions()
	if len(regions) != 2 || regions[1] != "eu-west-1" || cum[0] != 0.6 || cum[1] != 1 {
		t.Fatalf("origins %v %v", regions, cum)
	}
	scaled := s.ScaleRate(2)
	if o := scaled.Outages[0]; o.At != 50*time.Second || o.For != 60*time.Second || s.Outages[0].At != 100*time.Second {
		t.Fatalf("scaled outage %+v (original %+v)", o, s.Outages[0])
	}
}

// Each multi-cluster key is checked with a message that says how to fix it.
func TestInvalidClusters(t *testing.T) {
	for _, tc := range []struct{ name, from, to, want string }{
		{"fleet and clusters", "clusters:\n", "fleet: [{name: a, replicas: 1, gpu: H100, model: llama-3.1-8b}]\nclusters:\n", "fleet and clusters are both given"},
		{"duplicate cluster", "name: euw1,", "name: use1,", `clusters[1].name "use1" is used twice`},
		{"region case", "region: us-east-1", "region: US-East-1", `clusters[0].region "US-East-1" must be a lower-case region name, e.g. us-east-1`},
		{"empty fleet", "fleet: [{name: h100, replicas: 2, gpu: H100, model: llama-3.1-8b}]", "fleet: []", "clusters[0].fleet needs at least one group, e.g."},
		{"other model", "replicas: 2, gpu: H100, model: llama-3.1-8b", "replicas: 2, gpu: H100, model: qwen3-32b", "a scenario serves one model"},
		{"bad group", "replicas: 1, gpu: H100", "replicas: 0, gpu: H100", "clusters[1].fleet[0].replicas must be in 1..4096"},
		{"shares", "share: 0.4", "share: 0.3", "workload.origins shares sum to 0.9; make them sum to 1"},
		{"unknown region", "to: eu-west-1, delay: 40ms", "to: eu-west-9, delay: 40ms", `network[0].to "eu-west-9" is no cluster's or origin's region; regions here: [us-east-1 eu-west-1]`},
		{"symmetric twice", "to: eu-west-1, delay: 2ms", "to: us-east-1, delay: 2ms", "network[1] lists eu-west-1-us-east-1 again; delays are symmetric"},
		{"negative delay", "delay: 40ms", "delay: -1ms", "network[0].delay must be in [0, 10s]"},
		{"outage cluster", "cluster: use1", "cluster: usw2", `outages[0].cluster "usw2" names no cluster; clusters: [use1 euw1]`},
		{"outage length", "for: 60s", "for: 0s", "outages[0].for must be positive"},
		{"outage start", "at: 100s, for", "at: 400s, for", "outages[0].at must be in [0, duration)"},
		{"fault group", "group: euw1/a10g", "group: a10g", `faults[0].group "a10g" names no fleet group`},
		{"unknown key", "region: us-east-1\n", "region: us-east-1\n    zone: a\n", `global.yaml:8: unknown key "zone" in clusters (known: name, region, fleet)`},
		{"origin key", "share: 0.6}", "share: 0.6, weight: 1}", `unknown key "weight" in workload.origins (known: region, share)`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			bad := strings.Replace(globalKeys, tc.from, tc.to, 1)
			if bad == globalKeys {
				t.Fatalf("edit %q not applied", tc.from)
			}
			_, err := Parse([]byte(bad), "global.yaml")
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v, want %q", err, tc.want)
			}
		})
	}
	// The multi-cluster keys need clusters.
	_, err := Parse([]byte(strings.Replace(everyKey, "slo:", "outages: [{cluster: a, at: 1s, for: 1s}]\nslo:", 1)), "one.yaml")
	if err == nil || !strings.Contains(err.Error(), "outages needs clusters: move fleet under clusters") {
		t.Fatalf("error %v", err)
	}
}
