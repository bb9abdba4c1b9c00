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
	for ctx.Err() == nil {
		// Run returns when the lease is lost (or ctx ends, after releasing
		// it); stopped has then already made this replica a standby.
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
	l.leading = true
	l.mu.Unlock()
	l.log.Info("leading: serving picks", "lease", l.lease, "identity", l.identity)
	l.changed()
	<-term.Done()
	l.end(mine)
}

// stopped is client-go's OnStoppedLeading, called whenever Run returns,
// whether or not this replica led.
func (l *leadership) stopped() { l.end(0) }

// end makes the replica a standby; term 0 ends whatever term is current.
func (l *leadership) end(term int) {
	l.mu.Lock()
	was := l.leading
	if term == 0 || term == l.term {
		l.leading = false
	}
	now := l.leading
	l.mu.Unlock()
	if was && !now {
		l.log.Info("standby: lost or released the lease", "lease", l.lease, "identity", l.identity)
		l.changed()
	}
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
