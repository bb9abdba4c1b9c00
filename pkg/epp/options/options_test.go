package options

import (
	"os"
	"strings"
	"testing"
	"time"

	"github.com/igw-dev/igw/internal/command"
)

func parse(args ...string) (*Options, error) {
	o := New()
	return o, command.ParseOptions("epp", o, args)
}

func TestDefaultsAndValidation(t *testing.T) {
	t.Setenv("POD_NAMESPACE", "models")
	o, err := parse("--pool-name", "llama")
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
		if _, err := parse(args...); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}

// TestModelsIntervalZeroTurnsReadsOff: 0 is a valid interval (no model list
// reads), and then the read timeout does not matter.
func TestModelsIntervalZeroTurnsReadsOff(t *testing.T) {
	o, err := parse("--pool-name", "a", "--models-interval", "0", "--models-timeout", "0s")
	if err != nil || o.ModelsInterval != 0 {
		t.Fatalf("interval %v, err %v", o.ModelsInterval, err)
	}
}

// TestLeaderElection: the Lease defaults come from the pool, two processes
// never share a default identity, and timings client-go's elector would
// refuse (or that would let two leaders overlap) fail here, by flag name.
func TestLeaderElection(t *testing.T) {
	t.Setenv("POD_NAMESPACE", "models")
	o, err := parse("--pool-name", "llama", "--leader-elect")
	if err != nil {
		t.Fatal(err)
	}
	host, _ := os.Hostname()
	if o.LeaseName != "llama-epp" || o.LeaseNamespace != "models" || !strings.HasPrefix(o.Identity, host+"_") ||
		o.LeaseDuration != 15*time.Second || o.RenewDeadline != 10*time.Second || o.RetryPeriod != 2*time.Second {
		t.Fatalf("defaults %+v", o)
	}
	if other, _ := parse("--pool-name", "llama", "--leader-elect"); other.Identity == o.Identity {
		t.Fatalf("two processes got the same identity %q", o.Identity)
	}
	o, err = parse("--pool-name", "llama", "--pool-namespace", "a", "--leader-elect", "--leader-elect-lease-name", "l",
		"--leader-elect-lease-namespace", "b", "--leader-elect-identity", "pod-0")
	if err != nil || o.LeaseName != "l" || o.LeaseNamespace != "b" || o.Identity != "pod-0" {
		t.Fatalf("overrides %+v, %v", o, err)
	}
	if o, err := parse("--pool-name", "llama"); err != nil || o.LeaseName != "" || o.Identity != "" {
		t.Fatalf("without --leader-elect: %+v, %v", o, err)
	}

	for name, c := range map[string]struct {
		args []string
		want string
	}{
		"endpoints file":   {[]string{"--endpoints-file", "f"}, "--leader-elect needs an InferencePool source"},
		"fractional lease": {[]string{"--pool-name", "a", "--leader-elect-lease-duration", "1500ms", "--leader-elect-renew-deadline", "1s", "--leader-elect-retry-period", "100ms"}, "whole number of seconds"},
		"renew >= lease":   {[]string{"--pool-name", "a", "--leader-elect-lease-duration", "10s"}, "--leader-elect-renew-deadline (10s) must be positive and shorter"},
		"retry too long":   {[]string{"--pool-name", "a", "--leader-elect-retry-period", "9s"}, "--leader-elect-retry-period (9s)"},
		"no retry":         {[]string{"--pool-name", "a", "--leader-elect-retry-period", "0s"}, "--leader-elect-retry-period (0s)"},
	} {
		_, err := parse(append(c.args, "--leader-elect")...)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: error %v, want it to contain %q", name, err, c.want)
		}
	}
	// The same timings are fine without --leader-elect, which ignores them.
	if _, err := parse("--pool-name", "a", "--leader-elect-retry-period", "0s"); err != nil {
		t.Fatalf("timings checked without --leader-elect: %v", err)
	}
}

// TestTelemetryReportsStalePolicyBesideAnInterval: the EPP and the gateway
// validate their telemetry flags with one Validate, which names a bad stale
// policy beside a bad interval rather than only the first of them.
func TestTelemetryReportsStalePolicyBesideAnInterval(t *testing.T) {
	tel := DefaultTelemetry()
	tel.ScrapeInterval, tel.StalePolicy = 0, "ignore"
	tel.Complete()
	err := tel.Validate()
	if err == nil || !strings.Contains(err.Error(), "--scrape-interval") || !strings.Contains(err.Error(), "--stale-policy") {
		t.Fatalf("error %v, want both --scrape-interval and --stale-policy named", err)
	}
	tel = DefaultTelemetry()
	tel.Complete()
	if err := tel.Validate(); err != nil {
		t.Fatalf("completed defaults rejected: %v", err)
	}
}
