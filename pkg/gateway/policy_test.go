package gateway

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/spf13/pflag"

	"github.com/igw-dev/igw/internal/testfile"
	"github.com/igw-dev/igw/pkg/apierror"
	"github.com/igw-dev/igw/pkg/epp/datastore"
	"github.com/igw-dev/igw/pkg/epp/director"
	"github.com/igw-dev/igw/pkg/epp/scheduling"
)

// recorder is a registered policy's picker that sends every request to the
// pool's first endpoint and records the lifecycle the gateway reports.
type recorder struct {
	store *datastore.Store
	mu    sync.Mutex
	log   []string
}

func (r *recorder) record(format string, a ...any) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.log = append(r.log, fmt.Sprintf(format, a...))
}

// ended reports whether the latest pick recorded has ended.
func (r *recorder) ended() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := len(r.log)
	return n > 0 && (strings.HasPrefix(r.log[n-1], "completion") || strings.HasPrefix(r.log[n-1], "failure"))
}

// take returns what was recorded so far and starts again.
func (r *recorder) take() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := r.log
	r.log = nil
	return out
}

func (r *recorder) Resolve(model, _ string) (string, string) { return model, "" }

func (r *recorder) Pick(_ context.Context, _ *scheduling.Request, _ bool, _ time.Time) (*Pick, *apierror.Error) {
	eps := r.store.Endpoints(nil)
	if len(eps) == 0 {
		return nil, apierror.Unavailable("no endpoints")
	}
	r.record("pick")
	return &Pick{Endpoint: eps[0].Key()}, nil
}

func (r *recorder) Reroute(*Pick, string, time.Time) { r.record("reroute") }

func (r *recorder) ObserveFirstToken(*Pick, time.Time) { r.record("first token") }

func (r *recorder) ObserveTokens(_ *Pick, n int, _ time.Time) { r.record("tokens %d", n) }

func (r *recorder) ObserveCompletion(_ *Pick, out int, _ time.Time) {
	r.record("completion %d", out)
}

func (r *recorder) ObserveFailure(_ *Pick, f director.Failure, _ time.Time) {
	r.record("failure %d", f.Status)
}

func (r *recorder) UpdateMetrics(string, datastore.Metrics, time.Time) bool { return true }

// TestRegisteredPolicyFollowsThePickLifecycle: a policy registered besides
// igw serves a pool, and the gateway reports every pick's life to it: first
// token, later tokens and completion with the usage for a whole stream; a
// failure with the status for an error answer, and with none for a server
// that cannot be reached.
func TestRegisteredPolicyFollowsThePickLifecycle(t *testing.T) {
	var rec *recorder
	reg := NewRegistry()
	if err := reg.Register("first", Policy{New: func(env PolicyEnv) (Picker, error) {
		rec = &recorder{store: env.Store}
		return rec, nil
	}}); err != nil {
		t.Fatal(err)
	}
	u := startUpstream(t, "a")
	g := startGatewayWith(t, reg, "--endpoints-file", endpointsFile(t, u), "--served-model-name", "m", "--policy", "first")
	lifecycle := func(what string, want ...string) {
		t.Helper()
		waitFor(t, what+" ends its pick", rec.ended)
		if got := sumTokens(rec.take()); strings.Join(got, ", ") != strings.Join(want, ", ") {
			t.Fatalf("%s: lifecycle %q, want %q", what, got, want)
		}
	}

	if r := post(t, g, "/v1/completions", `{"model":"m","prompt":"hello","max_tokens":3,"stream":true}`); r.status != http.StatusOK {
		t.Fatalf("stream: %d %s", r.status, r.body)
	}
	lifecycle("a whole stream", "pick", "first token", "tokens 2", "completion 3")

	u.mu.Lock()
	u.status = http.StatusInternalServerError
	u.mu.Unlock()
	if r := post(t, g, "/v1/completions", completion); r.status != http.StatusInternalServerError {
		t.Fatalf("failing server: %d, want its 500 passed on", r.status)
	}
	lifecycle("an error answer", "pick", "failure 500")

	u.Close()
	if r := post(t, g, "/v1/completions", completion); r.status != http.StatusBadGateway {
		t.Fatalf("unreachable server: %d, want 502", r.status)
	}
	lifecycle("an unreachable server", "pick", "failure 0")
}

// sumTokens folds consecutive "tokens N" entries into one: how many tokens
// each read of the stream carries depends on how the network coalesced the
// chunks, the total does not.
func sumTokens(events []string) []string {
	var out []string
	for _, e := range events {
		var n, prev int
		if _, err := fmt.Sscanf(e, "tokens %d", &n); err == nil && len(out) > 0 {
			if _, err := fmt.Sscanf(out[len(out)-1], "tokens %d", &prev); err == nil {
				out[len(out)-1] = fmt.Sprintf("tokens %d", prev+n)
				continue
			}
		}
		out = append(out, e)
	}
	return out
}

// TestPolicyMustBeKnown: a gateway runs igw and the policies registered with
// it, nothing else; the error names what it knows.
func TestPolicyMustBeKnown(t *testing.T) {
	reg := NewRegistry()
	if err := reg.Register("first", Policy{New: func(PolicyEnv) (Picker, error) { return &recorder{}, nil }}); err != nil {
		t.Fatal(err)
	}
	for _, bad := range []string{PolicyIGW, "first"} {
		if err := reg.Register(bad, Policy{New: func(PolicyEnv) (Picker, error) { return &recorder{}, nil }}); err == nil {
			t.Errorf("registering %q again succeeded", bad)
		}
	}
	eps := endpointsFile(t)
	for _, tc := range []struct {
		reg  *Registry
		args []string
		want string
	}{
		{nil, []string{"--endpoints-file", eps, "--policy", "round-robin"}, `--policy must be one of igw, got "round-robin"`},
		{reg, []string{"--endpoints-file", eps, "--policy", "random"}, `--policy must be one of igw, first, got "random"`},
		{nil, []string{"--config", testfile.Write(t, "", "gateway.yaml", "pools:\n- {name: p, endpointsFile: "+eps+", policy: first}\n")},
			`pool "p": unknown policy "first" (known: igw)`},
	} {
		o := NewOptions()
		o.Policies = tc.reg
		fs := pflag.NewFlagSet("igw-gateway", pflag.ContinueOnError)
		o.AddFlags(fs)
		if err := fs.Parse(tc.args); err != nil {
			t.Fatal(err)
		}
		err := o.Complete()
		if err == nil {
			err = o.Validate()
		}
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%v: error %v, want %q", tc.args, err, tc.want)
		}
	}
}
