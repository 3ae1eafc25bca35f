// Package example is a controller-runtime reconciler gated by preflight: the shape a kubebuilder operator
// takes when it waits for the preflight operator's verdict before doing its own work.
package example

import (
	"context"
	"strconv"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/predicate"

	"github.com/preflight-wasm/preflight/controller-runtime/preflight"
)

// ReconciledAnnotation is where the example records the generation it last reconciled: its "real work".
const ReconciledAnnotation = "example.preflight.dev/reconciled-generation"

// Reconciler reconciles objects of one kind, but only once preflight allows it.
type Reconciler struct {
	client.Client
	// Kind is the kind reconciled.
	Kind schema.GroupVersionKind
}

// Reconcile starts with preflight.Allowed: while the gate says no, it returns at once.
func (r *Reconciler) Reconcile(ctx context.Context, request ctrl.Request) (ctrl.Result, error) {
	object := &unstructured.Unstructured{}
	object.SetGroupVersionKind(r.Kind)
	if err := r.Get(ctx, request.NamespacedName, object); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if allowed, result := preflight.Allowed(object); !allowed {
		return result, nil
	}
	generation := strconv.FormatInt(object.GetGeneration(), 10)
	if object.GetAnnotations()[ReconciledAnnotation] == generation {
		return ctrl.Result{}, nil
	}
	original := object.DeepCopy()
	annotations := object.GetAnnotations()
	if annotations == nil {
		annotations = map[string]string{}
	}
	annotations[ReconciledAnnotation] = generation
	object.SetAnnotations(annotations)
	return ctrl.Result{}, r.Patch(ctx, object, client.MergeFrom(original))
}

// SetupWithManager watches the kind, letting through generation changes and the Preflight condition's.
func (r *Reconciler) SetupWithManager(manager ctrl.Manager) error {
	object := &unstructured.Unstructured{}
	object.SetGroupVersionKind(r.Kind)
	return ctrl.NewControllerManagedBy(manager).
		Named("preflight-example").
		For(object, builder.WithPredicates(
			predicate.Or(predicate.GenerationChangedPredicate{}, preflight.ConditionChanged()))).
		Complete(r)
}
