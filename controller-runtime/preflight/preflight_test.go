package preflight

import (
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
)

// object returns an App at generation 3 with conditions in its status.
func object(conditions ...map[string]any) *unstructured.Unstructured {
	entries := make([]any, 0, len(conditions))
	for _, condition := range conditions {
		entries = append(entries, condition)
	}
	app := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "apps.example.com/v1",
		"kind":       "App",
		"metadata":   map[string]any{"name": "shop", "namespace": "default", "generation": int64(3)},
		"status":     map[string]any{"conditions": entries},
	}}
	return app
}

func preflightCondition(status string, generation int64) map[string]any {
	return map[string]any{
		"type": "Preflight", "status": status, "reason": "DependencyMissing",
		"message": "deps: waiting for redis", "observedGeneration": generation,
		"lastTransitionTime": "2026-12-03T07:00:00Z",
	}
}

// withoutGeneration drops observedGeneration, as the API server does on kinds whose condition schema has
// none (Deployment, Job).
func withoutGeneration(condition map[string]any) map[string]any {
	delete(condition, "observedGeneration")
	return condition
}

func TestAllowedFollowsTheConditionAtTheCurrentGeneration(t *testing.T) {
	ready := map[string]any{"type": "Ready", "status": "True", "reason": "Running", "message": "",
		"lastTransitionTime": "2026-12-03T07:00:00Z"}
	cases := []struct {
		name    string
		object  client.Object
		allowed bool
		result  ctrl.Result
	}{
		{"True at the current generation", object(ready, preflightCondition("True", 3)), true, ctrl.Result{}},
		{"False waits for the condition to change", object(preflightCondition("False", 3)), false, ctrl.Result{}},
		{"True of an older generation is not enough", object(preflightCondition("True", 2)), false,
			ctrl.Result{RequeueAfter: NotEvaluatedRecheck}},
		{"True without a generation (a built-in kind's status drops it) is not enough",
			object(withoutGeneration(preflightCondition("True", 3))), false, ctrl.Result{RequeueAfter: NotEvaluatedRecheck}},
		{"no condition yet", object(ready), false, ctrl.Result{RequeueAfter: NotEvaluatedRecheck}},
	}
	for _, c := range cases {
		allowed, result := Allowed(c.object)
		if allowed != c.allowed || result != c.result {
			t.Errorf("%s: got (%v, %+v), want (%v, %+v)", c.name, allowed, result, c.allowed, c.result)
		}
	}
}

func TestTheAnnotationAndTypedObjectsAreRead(t *testing.T) {
	deployment := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: "web", Generation: 5, Annotations: map[string]string{
		ConditionAnnotation: `{"type":"Preflight","status":"True","reason":"Proceed","message":"ok","observedGeneration":5,"lastTransitionTime":"2026-12-03T07:00:00Z"}`,
	}}}
	if allowed, _ := Allowed(deployment); !allowed {
		t.Fatal("a True annotation at the current generation allows")
	}
	deployment.Generation = 6
	if allowed, _ := Allowed(deployment); allowed {
		t.Fatal("a stale annotation does not allow")
	}
	deployment.Annotations[ConditionAnnotation] = "{not json"
	if _, err := Condition(deployment); err == nil {
		t.Fatal("a malformed annotation is an error")
	}
	if allowed, _ := Allowed(deployment); allowed {
		t.Fatal("an unreadable condition does not allow")
	}
}

func TestConditionChangedLetsOnlyVerdictChangesThrough(t *testing.T) {
	changed := ConditionChanged()
	waiting := object(preflightCondition("False", 3))
	open := object(preflightCondition("True", 3))
	if !changed.Update(event.UpdateEvent{ObjectOld: waiting, ObjectNew: open}) {
		t.Error("False to True passes")
	}
	if !changed.Update(event.UpdateEvent{ObjectOld: object(), ObjectNew: waiting}) {
		t.Error("a first condition passes")
	}
	relabelled := waiting.DeepCopy()
	relabelled.SetLabels(map[string]string{"team": "web"})
	if changed.Update(event.UpdateEvent{ObjectOld: waiting, ObjectNew: relabelled}) {
		t.Error("a change that leaves the condition alone is not let through by this predicate")
	}
	later := object(preflightCondition("False", 3))
	later.Object["status"].(map[string]any)["conditions"].([]any)[0].(map[string]any)["lastTransitionTime"] =
		time.Date(2026, 12, 3, 8, 0, 0, 0, time.UTC).Format(time.RFC3339)
	if changed.Update(event.UpdateEvent{ObjectOld: waiting, ObjectNew: later}) {
		t.Error("the transition time alone is no news")
	}
	if changed.Create(event.CreateEvent{Object: waiting}) {
		t.Error("creations are left to the other predicates")
	}
}
