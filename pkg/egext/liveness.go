package egext

import (
	"errors"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc/status"

	"github.com/igw-dev/igw/pkg/wire"
)

// HookPostTranslateModify is the hook label of PostTranslateModify calls.
const HookPostTranslateModify = "PostTranslateModify"

// Liveness records the calls Envoy Gateway makes to the extension server: as
// Prometheus metrics, and as the time of the last call, which the operator
// compares with the time of a config's last change (the ExtensionHookActive
// condition). Each operator replica knows only the calls it served.
type Liveness struct {
	calls    *prometheus.CounterVec
	errors   *prometheus.CounterVec
	lastCall *prometheus.GaugeVec
	last     atomic.Int64 // unix nanoseconds; 0 before the first call
	now      func() time.Time

	mu        sync.Mutex
	listeners []func()
}

// NewLiveness registers the extension server's metrics on reg (the manager's
// registry). A registry that already holds them (a second operator in one
// process, as in tests) shares them.
func NewLiveness(reg prometheus.Registerer) (*Liveness, error) {
	l := &Liveness{now: time.Now}
	var err error
	if l.calls, err = register(reg, prometheus.NewCounterVec(prometheus.CounterOpts{Name: wire.ExtensionServerCalls,
		Help: "Calls of igw's Envoy Gateway extension hook, by hook and result (ok, or the gRPC code of the error)."},
		[]string{"hook", "result"})); err != nil {
		return nil, err
	}
	if l.errors, err = register(reg, prometheus.NewCounterVec(prometheus.CounterOpts{Name: wire.ExtensionServerErrors,
		Help: "Calls of igw's Envoy Gateway extension hook that returned an error, by hook."},
		[]string{"hook"})); err != nil {
		return nil, err
	}
	if l.lastCall, err = register(reg, prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: wire.ExtensionServerLastCall,
		Help: "Unix time in seconds of the last call of igw's Envoy Gateway extension hook, by hook."},
		[]string{"hook"})); err != nil {
		return nil, err
	}
	// Zero from the start, so that a rate over them is defined before the
	// first call. The last call's time stays absent until there is one.
	l.calls.WithLabelValues(HookPostTranslateModify, "ok")
	l.errors.WithLabelValues(HookPostTranslateModify)
	return l, nil
}

func register[C prometheus.Collector](reg prometheus.Registerer, c C) (C, error) {
	if err := reg.Register(c); err != nil {
		var already prometheus.AlreadyRegisteredError
		if errors.As(err, &already) {
			if existing, ok := already.ExistingCollector.(C); ok {
				return existing, nil
			}
		}
		return c, err
	}
	return c, nil
}

// Observe records one call of hook that ended with err, then tells the listeners.
func (l *Liveness) Observe(hook string, err error) {
	if l == nil {
		return
	}
	now := l.now()
	result := "ok"
	if err != nil {
		result = status.Code(err).String()
		l.errors.WithLabelValues(hook).Inc()
	}
	l.calls.WithLabelValues(hook, result).Inc()
	l.lastCall.WithLabelValues(hook).Set(float64(now.UnixNano()) / 1e9)
	l.last.Store(now.UnixNano())
	l.mu.Lock()
	listeners := l.listeners
	l.mu.Unlock()
	for _, f := range listeners {
		f()
	}
}

// LastCall is the time of the last call, whatever its result; zero before the first.
func (l *Liveness) LastCall() time.Time {
	if n := l.last.Load(); n != 0 {
		return time.Unix(0, n)
	}
	return time.Time{}
}

// OnCall adds f to what runs after every call. f must not block: the hook's
// answer to Envoy Gateway waits for it.
func (l *Liveness) OnCall(f func()) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.listeners = append(l.listeners, f)
}
