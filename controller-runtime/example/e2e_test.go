//go:build e2e

// The example reconciler against the real control plane (tests/cluster) with the preflight operator (the
// Rust binary) writing the Preflight condition: it does not reconcile while Preflight=False and does once
// the condition turns True. Run by scripts/test:
//
//	KUBECONFIG=… PREFLIGHT_BIN=…/preflight PREFLIGHT_CHECK=…/required_metadata.wasm go test -tags e2e ./...
package example

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/clientcmd"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/preflight-wasm/preflight/controller-runtime/preflight"
)

func required(t *testing.T, name string) string {
	value := os.Getenv(name)
	if value == "" {
		t.Fatalf("%s is not set: run this test through scripts/test, or set KUBECONFIG, PREFLIGHT_BIN and PREFLIGHT_CHECK", name)
	}
	return value
}

// eventually polls probe every 100 ms until it returns true, failing the test after timeout.
func eventually(t *testing.T, what string, timeout time.Duration, probe func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !probe() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for %s", timeout, what)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func TestTheExampleReconcilesOnlyOncePreflightAllows(t *testing.T) {
	config, err := clientcmd.BuildConfigFromFlags("", required(t, "KUBECONFIG"))
	if err != nil {
		t.Fatal(err)
	}
	binary, check := required(t, "PREFLIGHT_BIN"), required(t, "PREFLIGHT_CHECK")
	component, err := os.ReadFile(check)
	if err != nil {
		t.Fatal(err)
	}
	scheme := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{clientgoscheme.AddToScheme, apiextensionsv1.AddToScheme} {
		if err := add(scheme); err != nil {
			t.Fatal(err)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	admin, err := client.New(config, client.Options{Scheme: scheme})
	if err != nil {
		t.Fatal(err)
	}

	namespace := fmt.Sprintf("gohelper-%d", time.Now().UnixNano()%1_000_000_000)
	group := namespace + ".e2e.preflight.test"
	kind := schema.GroupVersionKind{Group: group, Version: "v1", Kind: "Widget"}
	must(t, admin.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: namespace}}))
	crd := widgetDefinition(group)
	must(t, admin.Create(ctx, crd))
	defer func() { _ = admin.Delete(context.Background(), crd) }()
	eventually(t, "the CRD to be established", 30*time.Second, func() bool {
		var current apiextensionsv1.CustomResourceDefinition
		if admin.Get(ctx, client.ObjectKeyFromObject(crd), &current) != nil {
			return false
		}
		for _, condition := range current.Status.Conditions {
			if condition.Type == apiextensionsv1.Established && condition.Status == apiextensionsv1.ConditionTrue {
				return true
			}
		}
		return false
	})
	must(t, admin.Create(ctx, &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: "meta", Namespace: namespace,
			Labels: map[string]string{"preflight.dev/gates": "Widget." + group}},
		Data:       map[string]string{"config": `{"labels": ["team"]}`},
		BinaryData: map[string][]byte{"check.wasm": component},
	}))

	operator := exec.Command(binary, "operator", "--namespace", namespace, "--leader-election=false",
		"--listen", "127.0.0.1:0", "--log-format", "text")
	operator.Env = append(os.Environ(), "RUST_LOG=warn")
	operator.Stdout, operator.Stderr = os.Stderr, os.Stderr
	must(t, operator.Start())
	defer func() { _ = operator.Process.Kill(); _ = operator.Wait() }()

	manager, err := ctrl.NewManager(config, ctrl.Options{
		Scheme:                 scheme,
		Metrics:                metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress: "0",
		Cache:                  cache.Options{DefaultNamespaces: map[string]cache.Config{namespace: {}}},
	})
	must(t, err)
	must(t, (&Reconciler{Client: manager.GetClient(), Kind: kind}).SetupWithManager(manager))
	go func() { _ = manager.Start(ctx) }()

	widget := &unstructured.Unstructured{}
	widget.SetGroupVersionKind(kind)
	widget.SetName("w1")
	widget.SetNamespace(namespace)
	widget.Object["spec"] = map[string]any{"size": int64(1)}
	must(t, admin.Create(ctx, widget))
	read := func() *unstructured.Unstructured {
		current := &unstructured.Unstructured{}
		current.SetGroupVersionKind(kind)
		if err := admin.Get(ctx, client.ObjectKeyFromObject(widget), current); err != nil {
			t.Fatal(err)
		}
		return current
	}
	eventually(t, "Preflight=False", 60*time.Second, func() bool {
		condition, _ := preflight.Condition(read())
		return condition != nil && condition.Status == metav1.ConditionFalse
	})
	time.Sleep(3 * time.Second)
	if reconciled, found := read().GetAnnotations()[ReconciledAnnotation]; found {
		t.Fatalf("the example reconciled (generation %s) while Preflight=False", reconciled)
	}

	current := read()
	labels := map[string]string{"team": "web"}
	current.SetLabels(labels)
	must(t, admin.Update(ctx, current))
	eventually(t, "the example to reconcile once Preflight=True", 60*time.Second, func() bool {
		current := read()
		condition, _ := preflight.Condition(current)
		return condition != nil && condition.Status == metav1.ConditionTrue &&
			current.GetAnnotations()[ReconciledAnnotation] == strconv.FormatInt(current.GetGeneration(), 10)
	})
	_ = admin.Delete(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: namespace}})
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// widgetDefinition is a namespaced kind with a status subresource, as a kubebuilder project would have.
func widgetDefinition(group string) *apiextensionsv1.CustomResourceDefinition {
	preserve := true
	return &apiextensionsv1.CustomResourceDefinition{
		ObjectMeta: metav1.ObjectMeta{Name: "widgets." + group},
		Spec: apiextensionsv1.CustomResourceDefinitionSpec{
			Group: group,
			Names: apiextensionsv1.CustomResourceDefinitionNames{Kind: "Widget", Plural: "widgets", Singular: "widget"},
			Scope: apiextensionsv1.NamespaceScoped,
			Versions: []apiextensionsv1.CustomResourceDefinitionVersion{{
				Name: "v1", Served: true, Storage: true,
				Subresources: &apiextensionsv1.CustomResourceSubresources{Status: &apiextensionsv1.CustomResourceSubresourceStatus{}},
				Schema: &apiextensionsv1.CustomResourceValidation{OpenAPIV3Schema: &apiextensionsv1.JSONSchemaProps{
					Type: "object",
					Properties: map[string]apiextensionsv1.JSONSchemaProps{
						"spec":   {Type: "object", XPreserveUnknownFields: &preserve},
						"status": {Type: "object", XPreserveUnknownFields: &preserve},
					},
				}},
			}},
		},
	}
}
