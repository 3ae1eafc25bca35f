package preflight

import (
	"encoding/json"
	"fmt"
	"strings"

	"github.com/preflight-wasm/preflight/guest-sdk/go/bindings/preflight_check_cluster"
	types "github.com/preflight-wasm/preflight/guest-sdk/go/bindings/preflight_check_types"
	witTypes "go.bytecodealliance.org/pkg/wit/types"
)

// LookupError is a lookup the host refused or that failed: its message names what is not granted (only the
// kinds, and Secrets by name, that the check's ConfigMap grants can be read).
type LookupError struct {
	Message string
}

func (lookup *LookupError) Error() string { return lookup.Message }

// Get reads the object name of kind in apiVersion ("v1", "apps/v1") into into; found is false when it does
// not exist. An empty namespace is the gated object's. The operator answers from its watch caches.
func Get(apiVersion, kind, namespace, name string, into any) (found bool, err error) {
	answer := preflight_check_cluster.Get(objectKind(apiVersion, kind), namespaceOption(namespace), name)
	if answer.IsErr() {
		return false, &LookupError{Message: answer.Err()}
	}
	object := answer.Ok()
	if object.IsNone() {
		return false, nil
	}
	if err := json.Unmarshal([]byte(object.Some()), into); err != nil {
		return true, fmt.Errorf("%s %s is not what the check expects: %w", kind, name, err)
	}
	return true, nil
}

// List reads the objects of kind in apiVersion matching labelSelector ("app=db,tier!=cache"; empty: all)
// into into, a pointer to a slice, sorted by namespace and name. An empty namespace is the gated object's.
func List(apiVersion, kind, namespace, labelSelector string, into any) error {
	answer := preflight_check_cluster.List(objectKind(apiVersion, kind), namespaceOption(namespace), labelSelector)
	if answer.IsErr() {
		return &LookupError{Message: answer.Err()}
	}
	objects := "[" + strings.Join(answer.Ok(), ",") + "]"
	if err := json.Unmarshal([]byte(objects), into); err != nil {
		return fmt.Errorf("the %s objects are not what the check expects: %w", kind, err)
	}
	return nil
}

func objectKind(apiVersion, kind string) types.ObjectKind {
	group, version := "", apiVersion
	if slash := strings.LastIndex(apiVersion, "/"); slash >= 0 {
		group, version = apiVersion[:slash], apiVersion[slash+1:]
	}
	return types.ObjectKind{Group: group, Version: version, Kind: kind}
}

func namespaceOption(namespace string) witTypes.Option[string] {
	if namespace == "" {
		return witTypes.None[string]()
	}
	return witTypes.Some(namespace)
}
