package controllers

import (
	"context"
	"fmt"
	"strings"
	"sync"

	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/tools/events"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/source"
)

// conditions builds a status's condition list from the previous one, so that a
// condition whose status did not change keeps its lastTransitionTime and an
// unchanged object gets an identical status (and no write).
type conditions struct {
	list       []metav1.Condition
	generation int64
}

func newConditions(prev []metav1.Condition, generation int64) *conditions {
	c := &conditions{generation: generation}
	for _, p := range prev {
		c.list = append(c.list, *p.DeepCopy())
	}
	return c
}

func (c *conditions) set(typ string, ok bool, reason, format string, args ...any) {
	status := metav1.ConditionFalse
	if ok {
		status = metav1.ConditionTrue
	}
	c.put(typ, status, reason, format, args...)
}

// setUnknown says the condition could not be determined this time.
func (c *conditions) setUnknown(typ, reason, format string, args ...any) {
	c.put(typ, metav1.ConditionUnknown, reason, format, args...)
}

func (c *conditions) put(typ string, status metav1.ConditionStatus, reason, format string, args ...any) {
	meta.SetStatusCondition(&c.list, metav1.Condition{Type: typ, Status: status, Reason: reason,
		Message: fmt.Sprintf(format, args...), ObservedGeneration: c.generation})
}

func (c *conditions) isTrue(typ string) bool { return meta.IsStatusConditionTrue(c.list, typ) }

// patchStatus writes obj's status when it differs from the one read (orig
// holds it); an object deleted meanwhile needs no status.
func patchStatus(ctx context.Context, c client.Client, orig, obj client.Object, oldStatus, newStatus any) error {
	if equality.Semantic.DeepEqual(oldStatus, newStatus) {
		return nil
	}
	return client.IgnoreNotFound(c.Status().Patch(ctx, obj, client.MergeFrom(orig)))
}

// lazyWatches adds a controller's watches on optional kinds once their CRDs are
// served, so that a missing CRD is a status condition instead of a manager that
// cannot start, and installing it later needs no restart.
type lazyWatches struct {
	ctrl    controller.Controller
	cache   cache.Cache
	scheme  *runtime.Scheme
	kinds   *Kinds
	handler func(schema.GroupVersionKind) handler.EventHandler
	want    []schema.GroupVersionKind

	mu    sync.Mutex
	added map[schema.GroupVersionKind]bool
}

// ensure adds the watches of every wanted kind that is now served.
func (w *lazyWatches) ensure() error {
	if w == nil { // a reconciler built without Setup, as in tests
		return nil
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.added == nil {
		w.added = map[schema.GroupVersionKind]bool{}
	}
	for _, gvk := range w.want {
		if w.added[gvk] || !w.kinds.Has(gvk) {
			continue
		}
		obj, err := w.scheme.New(gvk)
		if err != nil {
			return err
		}
		if err := w.ctrl.Watch(source.Kind(w.cache, obj.(client.Object), w.handler(gvk))); err != nil {
			return fmt.Errorf("watching %s: %w", gvk.Kind, err)
		}
		w.added[gvk] = true
	}
	return nil
}

// recorder emits events about what a reconcile did.
type recorder struct {
	events.EventRecorder
}

func (r recorder) warn(obj runtime.Object, reason, format string, args ...any) {
	if r.EventRecorder != nil {
		r.Eventf(obj, nil, "Warning", reason, "Reconcile", format, args...)
	}
}

// changeLog gathers what one reconcile created, updated and deleted, and
// reports it as one event: nothing for an object left as it was (so an
// idempotent reconcile writes no events either), and not one event per child.
type changeLog struct {
	created, updated, deleted []string
}

// any reports whether anything was created, updated or deleted.
func (c *changeLog) any() bool { return len(c.created)+len(c.updated)+len(c.deleted) > 0 }

func (c *changeLog) applied(res ApplyResult, kind string, obj client.Object) {
	name := kind + " " + obj.GetName()
	switch res {
	case Created:
		c.created = append(c.created, name)
	case Updated:
		c.updated = append(c.updated, name)
	}
}

func (c *changeLog) emit(r recorder, obj runtime.Object) {
	if r.EventRecorder == nil {
		return
	}
	var parts []string
	for _, p := range []struct {
		verb  string
		names []string
	}{{"created", c.created}, {"updated", c.updated}, {"deleted", c.deleted}} {
		if len(p.names) > 0 {
			parts = append(parts, p.verb+" "+strings.Join(p.names, ", "))
		}
	}
	if len(parts) == 0 {
		return
	}
	note := strings.Join(parts, "; ")
	if len(note) > maxEventNote {
		note = note[:maxEventNote-3] + "..."
	}
	r.Eventf(obj, nil, "Normal", "Applied", "Apply", "%s", note)
}

// maxEventNote keeps a note under the API's 1 KiB limit.
const maxEventNote = 1000

// warnOnNewReason emits a warning when one of the condition types turns False
// or changes its reason: once per change, not on every reconcile.
func warnOnNewReason(ev recorder, obj runtime.Object, prev, next []metav1.Condition, types ...string) {
	for _, t := range types {
		n := meta.FindStatusCondition(next, t)
		if n == nil || n.Status == metav1.ConditionTrue {
			continue
		}
		if p := meta.FindStatusCondition(prev, t); p != nil && p.Status == n.Status && p.Reason == n.Reason {
			continue
		}
		ev.warn(obj, n.Reason, "%s: %s", t, n.Message)
	}
}
