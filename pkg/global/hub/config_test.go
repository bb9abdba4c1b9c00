package hub

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"

	"github.com/igw-dev/igw/internal/command"
)

const member = "members: [{name: use1, region: us-east-1, address: \"gw.use1.example:443\", summaryURLs: [\"https://gw.use1.example/igw/v1/global-summary\"], tokenFile: /t}]\n"

// The contract's full example parses: every key the operator renders.
func TestConfigParsesTheContract(t *testing.T) {
	c, err := ParseConfig([]byte(`
region: us-east-1
policy: global-blend
weights: {region-proximity: 500, queue: 0, member-error-rate: 250}
members:
- name: use1
  region: us-east-1
  address: gw.use1.example:443
  summaryURLs: ["https://gw.use1.example/igw/v1/global-summary", "https://gw2.use1.example/igw/v1/global-summary"]
  tokenFile: /var/run/igw-global/members/use1/token
  caFile: /var/run/igw-global/members/use1/ca.crt
- {name: euw1, region: eu-west-1, address: "gw.euw1.example:443", summaryURLs: ["https://gw.euw1.example/igw/v1/global-summary"], tokenFile: /t}
models:
- {name: llama-eu, regions: [eu-west-1]}
- {name: llama}
regions:
- {region: us-east-1, spillOver: [eu-west-1], maxShare: 0.3}
health: {probeInterval: 500ms, probeTimeout: 400ms, failedProbes: 2, consecutiveErrors: 3, baseEjection: 2s, maxEjection: 30s, slowStart: 10s}
`))
	if err != nil {
		t.Fatal(err)
	}
	if c.probeInterval().Milliseconds() != 500 || c.probeTimeout().Milliseconds() != 400 || c.healthSettings().SlowStart.Seconds() != 10 {
		t.Errorf("health %+v", c.Health)
	}
	pl, err := c.BuildPipeline()
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, f := range pl.Profile.Filters {
		names = append(names, f.Name())
	}
	if len(names) == 0 || names[0] != pinFilter || strings.Count(strings.Join(names, ","), "region-pin") != 1 {
		t.Errorf("filters %v, want the hub's pins first and once", names)
	}
	if names[len(names)-1] != shapingFilter {
		t.Errorf("filters %v, want the regions' shaping last", names)
	}
	weights := map[string]float64{}
	for _, s := range pl.Profile.Scorers {
		weights[s.Scorer.Name()] = s.Weight
	}
	if _, ok := weights["queue"]; ok || weights["region-proximity"] != 0.5 || weights["member-error-rate"] != 0.25 || weights["kv-cache-utilization"] != 0.25 {
		t.Errorf("scorer weights %v, want the blend with queue dropped and proximity 0.5", weights)
	}
}

// TestConfigWithoutRegion: the operator renders no hub region (the CRD has
// none), so a configuration without one loads; requests then take their
// origin from x-igw-client-region alone.
func TestConfigWithoutRegion(t *testing.T) {
	c, err := ParseConfig([]byte("members:\n- {name: a, region: us-east-1, address: \"10.0.0.1:80\", summaryURLs: [\"http://10.0.0.1/igw/v1/global-summary\"], tokenFile: /t}\n"))
	if err != nil {
		t.Fatal(err)
	}
	if c.Region != "" {
		t.Fatalf("region %q", c.Region)
	}
	if _, err := c.BuildPipeline(); err != nil {
		t.Fatal(err)
	}
}

func TestConfigErrorsNameTheField(t *testing.T) {
	for _, tc := range []struct{ name, config, want string }{
		{"unknown key", "region: us-east-1\nfoo: 1\n" + member, "unknown field"},
		{"no members", "region: us-east-1\n", "members must list"},
		{"bad policy", "region: us-east-1\npolicy: fastest\n" + member, "policy must be igw-global or global-blend"},
		{"weight range", "region: us-east-1\nweights: {queue: 1001}\n" + member, "weights[queue] is 1001"},
		{"weights with pipeline", "region: us-east-1\nweights: {queue: 1}\npipeline: 'filters: [member-health]'\n" + member, "weights apply to a policy"},
		{"pin to no member", "region: us-east-1\nmodels: [{name: l, regions: [eu-west-1]}]\n" + member, `region "eu-west-1" has no member`},
		{"spill to no member", "region: us-east-1\nregions: [{region: us-east-1, spillOver: [ap-south-1]}]\n" + member, `spillOver region "ap-south-1"`},
		{"timeout over interval", "region: us-east-1\nhealth: {probeInterval: 500ms, probeTimeout: 1s}\n" + member, "longer than health.probeInterval"},
		{"bad duration", "region: us-east-1\nhealth: {slowStart: soon}\n" + member, `want a duration such as`},
		{"bad address", "region: us-east-1\nmembers: [{name: a, region: r, address: nohost, summaryURLs: [\"http://x/\"], tokenFile: /t}]\n", "is not host:port"},
		{"no token", "region: us-east-1\nmembers: [{name: a, region: r, address: \"a:1\", summaryURLs: [\"http://x/\"]}]\n", "tokenFile is required"},
		{"bad url", "region: us-east-1\nmembers: [{name: a, region: r, address: \"a:1\", summaryURLs: [\"ftp://x/\"], tokenFile: /t}]\n", "is not an http(s) URL"},
		{"bad pipeline", "region: us-east-1\npipeline: 'scorers: [{plugin: nope, weight: 1}]'\n" + member, "pipeline:"},
		{"pins twice", "region: us-east-1\nmodels: [{name: l, regions: [us-east-1]}]\npipeline: |\n  plugins: [{name: p, type: region-pin, parameters: {pins: [{model: l, regions: [us-east-1]}]}}]\n  filters: [p]\n" + member, "name the pins in one place"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := ParseConfig([]byte(tc.config))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %v, want one containing %q", err, tc.want)
			}
		})
	}
}

func TestOptions(t *testing.T) {
	path := t.TempDir() + "/config.yaml"
	if err := writeTestFile(path, "region: us-east-1\n"+member); err != nil {
		t.Fatal(err)
	}
	o := NewOptions()
	if err := command.ParseOptions("igw-global", o, []string{"--config", path, "--region", "eu-west-1", "--log-level", "debug"}); err != nil {
		t.Fatal(err)
	}
	if o.Resolved.Region != "eu-west-1" || o.GRPCPort != 9002 || o.MetricsPort != 9090 || o.HTTPPort != 0 {
		t.Errorf("options %+v, want --region over the file's and the contract's ports", o)
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--config", ""}, "--config is required"},
		{[]string{"--config", path, "--grpc-port", "9090"}, "--grpc-port and --metrics-port are both 9090"},
		{[]string{"--config", path, "--log-level", "loud"}, "--log-level"},
		{[]string{"--config", path + ".missing"}, "no such file"},
		{[]string{"--config", path, "--trusted-cidrs", "edge"}, "--trusted-cidrs \"edge\""},
		{[]string{"--config", path, "--body-read-timeout", "0s"}, "--body-read-timeout"},
	} {
		err := command.ParseOptions("igw-global", NewOptions(), tc.args)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%v: %v, want %q", tc.args, err, tc.want)
		}
	}
}

func writeTestFile(path, content string) error { return os.WriteFile(path, []byte(content), 0o600) }

// FuzzParseConfig: any bytes give a configuration that validates, or an
// error; never a panic.
func FuzzParseConfig(f *testing.F) {
	f.Add([]byte("region: us-east-1\n" + member))
	f.Add([]byte("region: us-east-1\npolicy: global-blend\nweights: {queue: 500}\nmodels: [{name: l, regions: [us-east-1]}]\nhealth: {slowStart: 5s}\n" + member))
	f.Add([]byte("region: r\npipeline: 'filters: [member-health]'\n" + member))
	f.Fuzz(func(t *testing.T, data []byte) {
		c, err := ParseConfig(data)
		if err != nil {
			return
		}
		if err := c.Validate(); err != nil {
			t.Fatalf("a parsed configuration does not validate: %v", err)
		}
		if _, err := c.BuildPipeline(); err != nil {
			t.Fatalf("a valid configuration has no pipeline: %v", err)
		}
	})
}

// TestRenderedConfigsLoad: every hub configuration the operator renders (the
// render package's golden outputs) loads and builds its pipeline here, so
// the two sides of the configuration file cannot drift apart.
func TestRenderedConfigsLoad(t *testing.T) {
	files, err := filepath.Glob("../../render/testdata/global-*.out.yaml")
	if err != nil || len(files) == 0 {
		t.Fatalf("no rendered global configurations (%v)", err)
	}
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		found := 0
		for _, doc := range strings.Split(string(data), "\n---\n") {
			var cm struct {
				Kind string            `json:"kind"`
				Data map[string]string `json:"data"`
			}
			if err := yaml.Unmarshal([]byte(doc), &cm); err != nil {
				t.Fatalf("%s: %v", f, err)
			}
			text, ok := cm.Data["config.yaml"]
			if cm.Kind != "ConfigMap" || !ok {
				continue
			}
			found++
			c, err := ParseConfig([]byte(text))
			if err != nil {
				t.Fatalf("%s: the rendered configuration does not load: %v", f, err)
			}
			if _, err := c.BuildPipeline(); err != nil {
				t.Fatalf("%s: the rendered configuration's pipeline: %v", f, err)
			}
		}
		if found != 1 {
			t.Fatalf("%s: %d hub configurations, want 1", f, found)
		}
	}
}
