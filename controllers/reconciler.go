package controllers

import (
	"context"
	"errors"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	igwv1 "github.com/igw-dev/igw/api/v1alpha1"
	"github.com/igw-dev/igw/pkg/render"
)

// Common is what both reconcilers are made of.
type Common struct {
	// Client reads from the manager's cache and writes to the API server.
	Client client.Client
	// APIReader reads from the API server itself. Whether an owner still
	// exists, and which of its children are left when it goes, are decided on
	// it: the cache may not have seen a deletion yet, nor a child just created.
	APIReader client.Reader
	Scheme    *runtime.Scheme
	Kinds     *Kinds
	Applier   *Applier
	Images    render.Images
	Events    recorder
	// Hook, when set, says when Envoy Gateway last called the extension hook;
	// configs on Envoy Gateway then get ExtensionHookActive, False once a
	// change went HookBound without a call.
	Hook      HookCalls
	HookBound time.Duration
}

// owner is an object of the kinds that own children (the igw kinds).
type owner[O any] interface {
	client.Object
	DeepCopy() O
	GetConditions() []metav1.Condition
}

// statusAccess reaches one kind's status, so that one
// deferred status write serves every reconciler.
type statusAccess[O owner[O], S any] struct {
	of func(O) *S
	// warn are the condition types whose newly wrong reason is a warning event.
	warn []string
}

// end is the deferred end of a reconcile of obj, whose status was prev when it
// was read: a warning for a condition that newly went wrong, the status patch
// to next when the status changed, and a re-check while references are
// missing (an error backs off instead). wrote is false when the status is not
// this reconcile's to write: the owner went while it ran (what made it go is
// an event on the object, which queues it again), or the object changed since
// it was read (the retry reads it afresh, and a condition about a write that
// lost a race would only be noise).
func (a statusAccess[O, S]) end(ctx context.Context, c *Common, obj O, prev, next S, refsOK bool, err error) (res ctrl.Result, wrote bool, _ error) {
	if errors.Is(err, ErrOwnerGone) {
		return ctrl.Result{}, false, nil
	}
	if apierrors.IsConflict(err) {
		return ctrl.Result{}, false, err
	}
	base := obj.DeepCopy()
	*a.of(base), *a.of(obj) = prev, next
	warnOnNewReason(c.Events, obj, base.GetConditions(), obj.GetConditions(), a.warn...)
	if err = errors.Join(err, patchStatus(ctx, c.Client, base, obj, prev, next)); err != nil || refsOK {
		return ctrl.Result{}, true, err
	}
	return ctrl.Result{RequeueAfter: requeueWhileMissing}, true, nil
}

// observation is what one reconcile of an owner observed, for its pure
// status function; refsResolved says whether its references resolved.
type observation[Obs any] interface {
	*Obs
	refsResolved() bool
}

// ownerHooks are what a kind's reconcile adds to the frame of reconcileOwner.
type ownerHooks[O any, Obs any] struct {
	// gone runs when the owner no longer exists (nil: nothing to do).
	gone func() error
	// runDeleting reconciles an owner being deleted too; otherwise its
	// children are left to the garbage collector through their owner
	// references.
	runDeleting bool
	// written, when set, adjusts the result once the status was written and
	// no error is left.
	written func(O, *Obs, *ctrl.Result)
}

// reconcileOwner is the frame of every reconciler: the watches on kinds served
// since the last reconcile, obj read from the API server rather than the cache
// (a cached copy can predate a deletion whose cleanup already ran, and applying
// from it would leave children that nothing deletes), run, and the status of
// what run observed written on every path, errors included, by one deferred
// end.
func reconcileOwner[O owner[O], S, Obs any, PObs observation[Obs]](ctx context.Context, c *Common, w *lazyWatches, key types.NamespacedName, obj O,
	a statusAccess[O, S], run func(context.Context, O, *Obs) error, status func(O, Obs, error) S, hooks ownerHooks[O, Obs]) (res ctrl.Result, err error) {
	if err := w.ensure(); err != nil {
		return ctrl.Result{}, err
	}
	if err := c.APIReader.Get(ctx, key, obj); err != nil {
		if apierrors.IsNotFound(err) && hooks.gone != nil {
			return ctrl.Result{}, hooks.gone()
		}
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if obj.GetDeletionTimestamp() != nil && !hooks.runDeleting {
		return ctrl.Result{}, nil
	}
	prev := *a.of(obj.DeepCopy())
	var o Obs
	defer func() {
		var wrote bool
		res, wrote, err = a.end(ctx, c, obj, prev, status(obj, o, err), PObs(&o).refsResolved(), err)
		if wrote && err == nil && hooks.written != nil {
			hooks.written(obj, &o, &res)
		}
	}()
	return ctrl.Result{}, run(ctx, obj, &o)
}

// getIfExists reads key into obj; found is false when it does not exist.
func getIfExists(ctx context.Context, c client.Reader, key types.NamespacedName, obj client.Object) (found bool, err error) {
	if err := c.Get(ctx, key, obj); err != nil {
		return false, client.IgnoreNotFound(err)
	}
	return true, nil
}

// existing reads the object key names; nil when it does not exist.
func existing[T any, P interface {
	*T
	client.Object
}](ctx context.Context, c client.Reader, key types.NamespacedName) (P, error) {
	obj := P(new(T))
	if found, err := getIfExists(ctx, c, key, obj); !found {
		return nil, err
	}
	return obj, nil
}

// applyChildren applies an owner's rendered children whose kinds are served,
// deletes those in scopes that the rendering no longer has, and tells what it
// changed in one event. A name taken by another object or a kind the API
// server stopped serving is a reference problem; any other failure is one too
// (ApplyFailed), and is returned so that the reconcile backs off.
func (c *Common) applyChildren(ctx context.Context, owner client.Object, objs []client.Object, scopes []PruneScope, refs *refProblems) (changed bool, err error) {
	changes := &changeLog{}
	defer changes.emit(c.Events, owner)
	defer func() { changed = changes.any() }()
	failed := func(err error) (bool, error) {
		refs.add(igwv1.ReasonApplyFailed, err.Error())
		return false, err
	}
	guard := &ownerGuard{reader: c.APIReader, scheme: c.Scheme, owner: owner}
	keep := map[ChildKey]bool{}
	for _, obj := range objs {
		gvk, err := gvkOf(c.Scheme, obj)
		if err != nil {
			return failed(err)
		}
		if !c.Kinds.Has(gvk) {
			continue
		}
		keep[ChildKey{gvk, client.ObjectKeyFromObject(obj)}] = true
		res, err := c.Applier.Apply(ctx, obj, guard.check)
		var conflict *ConflictError
		switch {
		case errors.Is(err, ErrOwnerGone):
			return false, err
		case errors.As(err, &conflict):
			refs.add(igwv1.ReasonNameConflict, conflict.Error())
			continue
		case isNoMatch(err):
			c.Kinds.Forget(gvk)
			refs.add(igwv1.ReasonCRDsMissing, describeMissing([]schema.GroupVersionKind{gvk}))
			continue
		case err != nil:
			return failed(fmt.Errorf("applying %s %s: %w", gvk.Kind, obj.GetName(), err))
		}
		changes.applied(res, gvk.Kind, obj)
	}
	deleted, err := c.prune(ctx, scopes, keep)
	changes.deleted = deleted
	if err != nil {
		return failed(err)
	}
	return false, nil
}

// ErrOwnerGone stops a reconcile that was about to write a child of an owner
// that is gone, replaced under its name, or being deleted since it was read.
var ErrOwnerGone = errors.New("the owner is gone or being deleted")

// ownerGuard reads the owner from the API server once, before a reconcile's
// first write of a child. The reconcile read it at its start, but rendering,
// reads and writes of other children take time, more under load: a child
// written after the owner went would be left to the garbage collector, and one
// beside a Gateway in another namespace to the orphan sweep. A reconcile that
// writes nothing reads nothing more.
type ownerGuard struct {
	reader client.Reader
	scheme *runtime.Scheme
	owner  client.Object
	done   bool
	err    error
}

func (g *ownerGuard) check(ctx context.Context) error {
	if g.done {
		return g.err
	}
	gvk, err := gvkOf(g.scheme, g.owner)
	if err != nil {
		return err
	}
	live := &metav1.PartialObjectMetadata{}
	live.SetGroupVersionKind(gvk)
	switch err := g.reader.Get(ctx, client.ObjectKeyFromObject(g.owner), live); {
	case apierrors.IsNotFound(err):
		g.err = fmt.Errorf("%s %s: %w", gvk.Kind, g.owner.GetName(), ErrOwnerGone)
	case err != nil:
		return err // not remembered: the next write asks again
	case live.UID != g.owner.GetUID() || live.DeletionTimestamp != nil:
		g.err = fmt.Errorf("%s %s: %w", gvk.Kind, g.owner.GetName(), ErrOwnerGone)
	}
	g.done = true
	return g.err
}

// prune deletes the children in scopes that are not in keep, and returns what it deleted.
func (c *Common) prune(ctx context.Context, scopes []PruneScope, keep map[ChildKey]bool) ([]string, error) {
	var all []string
	for _, s := range scopes {
		if !c.Kinds.Has(s.GVK) {
			continue
		}
		deleted, err := c.Applier.Prune(ctx, s, keep)
		all = append(all, deleted...)
		if err != nil {
			return all, fmt.Errorf("deleting stale %s children: %w", s.GVK.Kind, err)
		}
	}
	return all, nil
}

func gvkOf(scheme *runtime.Scheme, obj client.Object) (schema.GroupVersionKind, error) {
	if gvk := obj.GetObjectKind().GroupVersionKind(); !gvk.Empty() {
		return gvk, nil
	}
	gvks, _, err := scheme.ObjectKinds(obj)
	if err != nil || len(gvks) == 0 {
		return schema.GroupVersionKind{}, fmt.Errorf("no kind for %T: %w", obj, err)
	}
	return gvks[0], nil
}

// rawConfigMapRef is a key of a ConfigMap that an owner names (at field)
// as the raw configuration of its picker.
type rawConfigMapRef struct {
	field, namespace, name, key string
	// check accepts what the picker would; invalid says what that is.
	check   func([]byte) error
	invalid string
}

// readRawConfigMap reads ref and checks it; usable is false when it cannot be
// used. A ConfigMap that is missing or unusable is a reference problem; one
// that cannot be read is one too, and its error is returned for a retry with
// backoff.
func (c *Common) readRawConfigMap(ctx context.Context, refs *refProblems, ref rawConfigMapRef) (data []byte, usable bool, err error) {
	var cm corev1.ConfigMap
	if err := c.Client.Get(ctx, types.NamespacedName{Namespace: ref.namespace, Name: ref.name}, &cm); err != nil {
		if apierrors.IsNotFound(err) {
			refs.add(igwv1.ReasonConfigMapNotFound, fmt.Sprintf("ConfigMap %q of %s not found in namespace %q: create it or drop configMapRef", ref.name, ref.field, ref.namespace))
			return nil, false, nil
		}
		refs.add(igwv1.ReasonConfigMapUnreadable, fmt.Sprintf("ConfigMap %q of %s cannot be read (the picker keeps its last good configuration): %v", ref.name, ref.field, err))
		return nil, false, fmt.Errorf("reading ConfigMap %s of %s: %w", ref.name, ref.field, err)
	}
	content, ok := cm.Data[ref.key]
	if !ok {
		refs.add(igwv1.ReasonConfigMapKeyMissing, fmt.Sprintf("ConfigMap %q has no key %q: add it or set %s.key", ref.name, ref.key, ref.field))
		return nil, false, nil
	}
	if err := ref.check([]byte(content)); err != nil {
		refs.add(igwv1.ReasonInvalidEPPConfig, fmt.Sprintf("ConfigMap %q key %q is not %s: %v", ref.name, ref.key, ref.invalid, err))
		return nil, false, nil
	}
	return []byte(content), true, nil
}
