package options

import (
	"testing"
	"time"

	"github.com/spf13/pflag"
)

func parse(t *testing.T, args ...string) (*Options, error) {
	t.Helper()
	o := New()
	fs := pflag.NewFlagSet("epp", pflag.ContinueOnError)
	o.AddFlags(fs)
	if err := fs.Parse(args); err != nil {
		return nil, err
	}
	o.Complete()
	return o, o.Validate()
}

func TestDefaultsAndValidation(t *testing.T) {
	t.Setenv("POD_NAMESPACE", "models")
	o, err := parse(t, "--pool-name", "llama")
	if err != nil {
		t.Fatal(err)
	}
	if o.GRPCPort != 9002 || o.HealthPort != 9003 || o.MetricsPort != 9090 || o.ScrapeInterval != 50*time.Millisecond ||
		o.ScrapeTimeout != 50*time.Millisecond || o.MetricsStaleness != 200*time.Millisecond || o.StalePolicy != "saturated" || o.PoolNamespace != "models" ||
		o.ModelsInterval != 5*time.Second || o.ModelsTimeout != 2*time.Second {
		t.Fatalf("defaults %+v", o)
	}
	for name, args := range map[string][]string{
		"no source":    {},
		"two sources":  {"--pool-name", "a", "--endpoints-file", "f"},
		"same ports":   {"--pool-name", "a", "--grpc-port", "9090"},
		"stale policy": {"--pool-name", "a", "--stale-policy", "ignore"},
		"interval":     {"--pool-name", "a", "--scrape-interval", "0s", "--scrape-timeout", "1s"},
		"models":       {"--pool-name", "a", "--models-interval", "-1s"},
		"models read":  {"--pool-name", "a", "--models-timeout", "0s"},
	} {
		if _, err := parse(t, args...); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}

// TestModelsIntervalZeroTurnsReadsOff: 0 is a valid interval (no model list
// reads), and then the read timeout does not matter.
func TestModelsIntervalZeroTurnsReadsOff(t *testing.T) {
	o, err := parse(t, "--pool-name", "a", "--models-interval", "0", "--models-timeout", "0s")
	if err != nil || o.ModelsInterval != 0 {
		t.Fatalf("interval %v, err %v", o.ModelsInterval, err)
	}
}
