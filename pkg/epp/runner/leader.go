package runner

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/go-logr/logr"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	coordinationv1client "k8s.io/client-go/kubernetes/typed/coordination/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/leaderelection"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
	"k8s.io/klog/v2"

	"github.com/igw-dev/igw/pkg/epp/options"
)

// leadership runs the picker's side of an active-passive deployment: one
// client-go leader elector over a coordination.k8s.io Lease, campaigning for
// as long as the process runs.
//
// Losing the lease puts the replica back to standby at once and it campaigns
// again; it does not exit. Controllers exit on a lost lease because their
// half-done work cannot be fenced; a picker has nothing to fence (a pick made
// by an ex-leader during the hand-over is as valid as anyone's, it only splits
// the prefix index for a moment), while a restart would throw away exactly
// what makes it a good standby: its endpoint view, telemetry, learned speeds
// and prefix index, and would add the kubelet's crash back-off to a replica
// that may be the next leader.
//
// A renewal that fails while no other holder is seen (the API server is down
// or unreachable) does not stop picks either: the replica holds over, serving
// as before, until it sees another replica hold the lease or renews it
// itself. Stepping down there would leave no replica serving for as long as
// the API server is out, while the worst a held-over leader can do is pick
// beside a new one for a moment, as during any hand-over.
type leadership struct {
	identity string
	lease    string // namespace/name, for messages
	elector  *leaderelection.LeaderElector
	log      *slog.Logger
	// changed is called after every change of leading, outside the lock; it
	// reads the state again, so calls racing each other end right.
	changed func()

	mu      sync.Mutex
	leading bool
	term    int // counts terms, so a late start callback cannot revive an ended one
	// heldSince is when the replica began holding over: leading on a lease
	// it could not renew, no other holder seen. Zero while the lease is held.
	heldSince time.Time
	// campaign is run's context: a replica whose campaign has ended (it is
	// shutting down) does not hold over.
	campaign context.Context
}

func newLeadership(cfg *rest.Config, o *options.Options, log *slog.Logger, changed func()) (*leadership, error) {
	lc := rest.CopyConfig(cfg)
	// A request must not outlive the deadline after which the leader steps
	// down: a hung renewal would otherwise keep it serving on an expired lease.
	lc.Timeout = o.RenewDeadline
	client, err := coordinationv1client.NewForConfig(rest.AddUserAgent(lc, "igw-epp-leader-election"))
	if err != nil {
		return nil, fmt.Errorf("leader election client: %w", err)
	}
	l := &leadership{identity: o.Identity, lease: o.LeaseNamespace + "/" + o.LeaseName, log: log, changed: changed}
	l.elector, err = leaderelection.NewLeaderElector(leaderelection.LeaderElectionConfig{
		Lock: &resourcelock.LeaseLock{
			LeaseMeta:  metav1.ObjectMeta{Namespace: o.LeaseNamespace, Name: o.LeaseName},
			Client:     client,
			LockConfig: resourcelock.ResourceLockConfig{Identity: o.Identity},
		},
		LeaseDuration: o.LeaseDuration,
		RenewDeadline: o.RenewDeadline,
		RetryPeriod:   o.RetryPeriod,
		// A leader that stops (rollout, eviction, scale-down) hands over in
		// one retry period instead of a whole lease duration. Safe here
		// although its last streams may still be finishing: picks need no
		// fencing, the overlap only splits state for a moment.
		ReleaseOnCancel: true,
		Name:            l.lease,
		Callbacks: leaderelection.LeaderCallbacks{
			OnStartedLeading: l.started,
			OnStoppedLeading: l.stopped,
			OnNewLeader:      l.observed,
		},
	})
	if err != nil {
		return nil, fmt.Errorf("leader election: %w", err)
	}
	return l, nil
}

// run campaigns until ctx ends. It waits for warm first: a replica that has
// not yet seen the pool or loaded a configuration would take the lease only
// to report not ready, keeping a warm standby from serving.
func (l *leadership) run(ctx context.Context, warm func() bool) {
	t := time.NewTicker(50 * time.Millisecond)
	for !warm() {
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
	}
	t.Stop()
	// client-go logs through klog; hand it this runner's logger instead of
	// the process-wide one.
	ctx = klog.NewContext(ctx, logr.FromSlogHandler(l.log.Handler()))
	l.log.Info("campaigning for leadership", "lease", l.lease, "identity", l.identity)
	l.mu.Lock()
	l.campaign = ctx
	l.mu.Unlock()
	defer context.AfterFunc(ctx, func() { l.end(0) })()
	for ctx.Err() == nil {
		// Run returns when the lease is lost (or ctx ends, after releasing
		// it); stopped has then already made this replica a standby, or
		// left it holding over until it renews or sees another holder.
		l.elector.Run(ctx)
	}
}

// started is client-go's OnStartedLeading; it runs in its own goroutine, so
// it may start after the term it belongs to has ended: it then does nothing.
func (l *leadership) started(term context.Context) {
	l.mu.Lock()
	if term.Err() != nil {
		l.mu.Unlock()
		return
	}
	l.term++
	mine := l.term
	heldOver := !l.heldSince.IsZero()
	l.leading, l.heldSince = true, time.Time{}
	l.mu.Unlock()
	if heldOver {
		l.log.Info("leading again: the lease is renewed", "lease", l.lease, "identity", l.identity)
	} else {
		l.log.Info("leading: serving picks", "lease", l.lease, "identity", l.identity)
	}
	l.changed()
	<-term.Done()
	l.end(mine)
}

// stopped is client-go's OnStoppedLeading, called whenever Run returns,
// whether or not this replica led.
func (l *leadership) stopped() { l.end(0) }

// observed is client-go's OnNewLeader. It runs in its own goroutine, so it
// reads the holder again rather than trusting its argument: another holder
// ends a hold-over.
func (l *leadership) observed(string) {
	if l.otherHolder() {
		l.end(0)
	}
}

// otherHolder reports whether the lease was last seen held by another replica.
func (l *leadership) otherHolder() bool {
	h := l.leader()
	return h != "" && h != l.identity
}

// end makes the replica a standby, or holds over while it still runs and no
// other holder is seen; term 0 ends whatever term is current.
func (l *leadership) end(term int) {
	other := l.otherHolder()
	l.mu.Lock()
	was := l.leading
	running := l.campaign != nil && l.campaign.Err() == nil
	startedHolding := false
	if term == 0 || term == l.term {
		switch {
		case running && !other && l.leading && l.heldSince.IsZero():
			l.heldSince, startedHolding = time.Now(), true
		case !running || other:
			l.leading, l.heldSince = false, time.Time{}
		}
	}
	now := l.leading
	l.mu.Unlock()
	if startedHolding {
		l.log.Warn("the lease could not be renewed and no other holder is seen: still serving picks", "lease", l.lease, "identity", l.identity)
	}
	if was && !now {
		l.log.Info("standby: lost or released the lease", "lease", l.lease, "identity", l.identity)
		l.changed()
	}
}

// holdingOver returns when the replica began leading on a lease it could not
// renew; zero when it holds the lease or does not lead.
func (l *leadership) holdingOver() time.Time {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.heldSince
}

func (l *leadership) isLeading() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.leading
}

// leader is the holder of the lease as last observed, "" when none is known.
func (l *leadership) leader() string { return l.elector.GetLeader() }

// standby describes a replica that does not lead, for /readyz and the
// ext_proc refusal.
func (l *leadership) standby() string {
	leader := l.leader()
	if leader == "" || leader == l.identity {
		// Never observed, released, or this replica's own record just after
		// it lost the lease.
		leader = "none known"
	}
	return "standby (leader: " + leader + ")"
}
