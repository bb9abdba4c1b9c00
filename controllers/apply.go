package controllers

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"reflect"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/igw-dev/igw/pkg/render"
)

// FieldOwner is the one server-side apply field manager of everything the operator writes.
const FieldOwner = "igw-operator"

// AnnotationAppliedHash records a digest of what the operator last applied to a
// child. Together with the check that every applied field still holds its value,
// it lets a reconcile of an unchanged object skip the write entirely, while a
// field dropped from the rendering (which a subset check alone would not see)
// changes the digest and so is applied, and thereby removed.
const AnnotationAppliedHash = "gateway.igw.dev/applied-hash"

// ApplyResult says what Apply did.
type ApplyResult int

const (
	Unchanged ApplyResult = iota
	Created
	Updated
)

func (r ApplyResult) String() string {
	return [...]string{"unchanged", "created", "updated"}[r]
}

// ConflictError is returned for a child name already taken by an object the
// operator does not own; the operator leaves such objects alone.
type ConflictError struct {
	Kind, Namespace, Name string
}

func (e *ConflictError) Error() string {
	return fmt.Sprintf("%s %s/%s exists and is not managed by this object: delete or rename it", e.Kind, e.Namespace, e.Name)
}

// Applier writes children with server-side apply, but only when they differ
// from what is in the cache.
type Applier struct {
	Client client.Client
	// APIReader lists children for a PruneScope that asks for a live list.
	APIReader client.Reader
	Scheme    *runtime.Scheme
}

// Apply makes the child match desired and reports whether it wrote.
// beforeWrite, when not nil, is asked just before a write and stops it with its error.
func (a *Applier) Apply(ctx context.Context, desired client.Object, beforeWrite func(context.Context) error) (ApplyResult, error) {
	u, err := render.ApplyForm(desired)
	if err != nil {
		return Unchanged, err
	}
	digest, err := appliedHash(u)
	if err != nil {
		return Unchanged, err
	}
	ann := u.GetAnnotations()
	if ann == nil {
		ann = map[string]string{}
	}
	ann[AnnotationAppliedHash] = digest
	u.SetAnnotations(ann)

	gvk := u.GroupVersionKind()
	live, err := a.Scheme.New(gvk)
	if err != nil {
		return Unchanged, err
	}
	liveObj := live.(client.Object)
	result := Updated
	switch err := a.Client.Get(ctx, client.ObjectKeyFromObject(u), liveObj); {
	case apierrors.IsNotFound(err):
		result = Created
	case err != nil:
		return Unchanged, err
	default:
		if !sameOwner(u, liveObj) {
			return Unchanged, &ConflictError{Kind: gvk.Kind, Namespace: u.GetNamespace(), Name: u.GetName()}
		}
		have, err := runtime.DefaultUnstructuredConverter.ToUnstructured(liveObj)
		if err != nil {
			return Unchanged, err
		}
		if liveObj.GetAnnotations()[AnnotationAppliedHash] == digest && contains(u.Object, have) {
			return Unchanged, nil
		}
	}
	if beforeWrite != nil {
		if err := beforeWrite(ctx); err != nil {
			return Unchanged, err
		}
	}
	if err := a.Client.Apply(ctx, client.ApplyConfigurationFromUnstructured(u), client.FieldOwner(FieldOwner), client.ForceOwnership); err != nil {
		return Unchanged, err
	}
	return result, nil
}

func appliedHash(u *unstructured.Unstructured) (string, error) {
	b, err := json.Marshal(u.Object) // map keys are sorted: stable
	if err != nil {
		return "", err
	}
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:16]), nil
}

// sameOwner reports whether live belongs to the owner desired names: its
// controller reference, or for children in another namespace, the labels that
// stand in for one.
func sameOwner(desired *unstructured.Unstructured, live client.Object) bool {
	if refs := desired.GetOwnerReferences(); len(refs) > 0 {
		c := metav1.GetControllerOfNoCopy(live)
		return c != nil && c.UID == refs[0].UID
	}
	want, have := desired.GetLabels(), live.GetLabels()
	return have[render.LabelConfigNamespace] == want[render.LabelConfigNamespace] && have[render.LabelConfig] == want[render.LabelConfig]
}

// contains reports whether every value in want is also in have. Lists must match
// element by element; maps may hold more keys (fields the API server defaulted or
// other managers own).
func contains(want, have any) bool {
	switch w := want.(type) {
	case map[string]any:
		h, ok := have.(map[string]any)
		if !ok {
			return have == nil && len(w) == 0
		}
		for k, wv := range w {
			hv, ok := h[k]
			if !ok {
				if isEmpty(wv) {
					continue
				}
				return false
			}
			if !contains(wv, hv) {
				return false
			}
		}
		return true
	case []any:
		h, ok := have.([]any)
		if !ok {
			return have == nil && len(w) == 0
		}
		if len(h) != len(w) {
			return false
		}
		for i := range w {
			if !contains(w[i], h[i]) {
				return false
			}
		}
		return true
	default:
		return scalarEqual(want, have)
	}
}

func isEmpty(v any) bool {
	switch t := v.(type) {
	case map[string]any:
		return len(t) == 0
	case []any:
		return len(t) == 0
	}
	return false
}

func scalarEqual(a, b any) bool {
	if fa, ok := number(a); ok {
		fb, ok := number(b)
		return ok && fa == fb
	}
	return reflect.DeepEqual(a, b)
}

func number(v any) (float64, bool) {
	switch n := v.(type) {
	case int64:
		return float64(n), true
	case int32:
		return float64(n), true
	case int:
		return float64(n), true
	case float64:
		return n, true
	}
	return 0, false
}

// PruneScope says which existing children of one kind belong to an owner.
type PruneScope struct {
	GVK       schema.GroupVersionKind
	Namespace string // "" for every namespace
	Selector  labels.Selector
	// Owned reports whether an object that carries the owner's labels is really its child.
	Owned func(client.Object) bool
	// Live lists from the API server instead of the cache: a final cleanup
	// must also see a child created a moment ago, which the cache may not hold yet.
	Live bool
}

// ChildKey names a child: children of different kinds may share a name.
type ChildKey struct {
	GVK schema.GroupVersionKind
	types.NamespacedName
}

// Prune deletes the owner's children in scope that are not in keep, and
// returns what it deleted as "Kind namespace/name".
func (a *Applier) Prune(ctx context.Context, scope PruneScope, keep map[ChildKey]bool) ([]string, error) {
	listGVK := scope.GVK.GroupVersion().WithKind(scope.GVK.Kind + "List")
	l, err := a.Scheme.New(listGVK)
	if err != nil {
		return nil, err
	}
	list := l.(client.ObjectList)
	opts := []client.ListOption{client.MatchingLabelsSelector{Selector: scope.Selector}}
	if scope.Namespace != "" {
		opts = append(opts, client.InNamespace(scope.Namespace))
	}
	var reader client.Reader = a.Client
	if scope.Live {
		reader = a.APIReader
	}
	if err := reader.List(ctx, list, opts...); err != nil {
		return nil, err
	}
	items, err := metaItems(list)
	if err != nil {
		return nil, err
	}
	var deleted []string
	for _, obj := range items {
		if keep[ChildKey{scope.GVK, client.ObjectKeyFromObject(obj)}] || !scope.Owned(obj) || obj.GetDeletionTimestamp() != nil {
			continue
		}
		if err := a.Client.Delete(ctx, obj); err != nil && !apierrors.IsNotFound(err) {
			return deleted, err
		}
		deleted = append(deleted, fmt.Sprintf("%s %s/%s", scope.GVK.Kind, obj.GetNamespace(), obj.GetName()))
	}
	return deleted, nil
}

func metaItems(list client.ObjectList) ([]client.Object, error) {
	objs, err := apimeta.ExtractList(list)
	if err != nil {
		return nil, err
	}
	out := make([]client.Object, 0, len(objs))
	for _, o := range objs {
		obj, ok := o.(client.Object)
		if !ok {
			return nil, fmt.Errorf("%T items are not objects", list)
		}
		out = append(out, obj)
	}
	return out, nil
}

// controlledBy returns an Owned function for children controlled by uid.
func controlledBy(uid types.UID) func(client.Object) bool {
	return func(o client.Object) bool {
		c := metav1.GetControllerOfNoCopy(o)
		return c != nil && c.UID == uid
	}
}
