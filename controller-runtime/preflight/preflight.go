// Package preflight lets a controller-runtime operator wait for the preflight gate: a reconcile starts with
// Allowed, which reads the Preflight condition the preflight operator writes (condition contract v1,
// docs/condition-contract.md in the preflight repository), and ConditionChanged lets the condition's changes
// through when the controller otherwise filters on generation.
//
//	func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
//		var app v1.App
//		if err := r.Get(ctx, req.NamespacedName, &app); err != nil {
//			return ctrl.Result{}, client.IgnoreNotFound(err)
//		}
//		if ok, result := preflight.Allowed(&app); !ok {
//			return result, nil
//		}
//		// ... your reconcile ...
//	}
//
//	ctrl.NewControllerManagedBy(mgr).For(&v1.App{}, builder.WithPredicates(
//		predicate.Or(predicate.GenerationChangedPredicate{}, preflight.ConditionChanged())))
package preflight

import (
	"encoding/json"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
)

const (
	// ConditionType is the type of the condition the preflight operator writes.
	ConditionType = "Preflight"
	// ConditionAnnotation holds the condition (as JSON) on kinds without a status subresource.
	ConditionAnnotation = "preflight.dev/condition"
	// NotEvaluatedRecheck is how soon Allowed asks to look again at an object the gate has not evaluated at
	// its current generation yet (a safety net: the condition's arrival also triggers a reconcile when the
	// controller uses ConditionChanged).
	NotEvaluatedRecheck = 10 * time.Second
)

// Condition returns the Preflight condition obj carries: its annotation when present, else the entry of
// status.conditions; nil when it has none.
func Condition(obj client.Object) (*metav1.Condition, error) {
	if text, ok := obj.GetAnnotations()[ConditionAnnotation]; ok {
		var condition metav1.Condition
		if err := json.Unmarshal([]byte(text), &condition); err != nil {
			return nil, err
		}
		return &condition, nil
	}
	content, err := contentOf(obj)
	if err != nil {
		return nil, err
	}
	conditions, found, err := unstructured.NestedSlice(content, "status", "conditions")
	if err != nil || !found {
		return nil, err
	}
	for _, entry := range conditions {
		fields, ok := entry.(map[string]any)
		if !ok || fields["type"] != ConditionType {
			continue
		}
		var condition metav1.Condition
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(fields, &condition); err != nil {
			return nil, err
		}
		return &condition, nil
	}
	return nil, nil
}

// Allowed reports whether obj may be reconciled now: its Preflight condition is True and was written for
// obj's current generation. When it may not, the result says what to return from Reconcile: nothing to
// requeue while the gate says False (the operator re-checks and the condition's change triggers the next
// reconcile), a short recheck while the gate has not evaluated this generation yet. An object whose
// condition cannot be read is not allowed, nor one whose condition carries no generation (built-in kinds
// such as Deployment and Job, whose condition schema has none): hold those by their pause switch.
func Allowed(obj client.Object) (bool, ctrl.Result) {
	condition, err := Condition(obj)
	if err != nil || condition == nil || condition.ObservedGeneration != obj.GetGeneration() {
		return false, ctrl.Result{RequeueAfter: NotEvaluatedRecheck}
	}
	if condition.Status != metav1.ConditionTrue {
		return false, ctrl.Result{}
	}
	return true, ctrl.Result{}
}

// ConditionChanged lets through updates that change the Preflight condition (its status, reason,
// message or observed generation), so that a controller filtering on generation still wakes when the gate
// opens. Combine it: predicate.Or(predicate.GenerationChangedPredicate{}, preflight.ConditionChanged()).
func ConditionChanged() predicate.Predicate {
	return predicate.Funcs{
		CreateFunc:  func(event.CreateEvent) bool { return false },
		DeleteFunc:  func(event.DeleteEvent) bool { return false },
		GenericFunc: func(event.GenericEvent) bool { return false },
		UpdateFunc: func(update event.UpdateEvent) bool {
			if update.ObjectOld == nil || update.ObjectNew == nil {
				return false
			}
			return !sameVerdict(update.ObjectOld, update.ObjectNew)
		},
	}
}

// sameVerdict reports whether two versions of an object carry the same Preflight condition.
func sameVerdict(old, new client.Object) bool {
	before, errBefore := Condition(old)
	after, errAfter := Condition(new)
	if errBefore != nil || errAfter != nil || before == nil || after == nil {
		return before == nil && after == nil && errBefore == nil && errAfter == nil
	}
	return before.Status == after.Status && before.Reason == after.Reason &&
		before.Message == after.Message && before.ObservedGeneration == after.ObservedGeneration
}

// contentOf returns obj as unstructured content, converting typed objects.
func contentOf(obj client.Object) (map[string]any, error) {
	if object, ok := obj.(*unstructured.Unstructured); ok {
		return object.Object, nil
	}
	return runtime.DefaultUnstructuredConverter.ToUnstructured(obj)
}
