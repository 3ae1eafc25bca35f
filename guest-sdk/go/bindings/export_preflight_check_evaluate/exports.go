// Package export_preflight_check_evaluate is the contract's `evaluate` export, as the generated
// bindings (wit_exports) expect it: it calls the check preflight.Handle registered.
package export_preflight_check_evaluate

import (
	types "github.com/preflight-wasm/preflight/guest-sdk/go/bindings/preflight_check_types"
	"github.com/preflight-wasm/preflight/guest-sdk/go/internal/registry"
	witTypes "go.bytecodealliance.org/pkg/wit/types"
)

// Check decides whether the object may be reconciled now.
func Check(request types.CheckRequest) types.PreflightResult {
	if registry.Evaluate == nil {
		message := "the component registered no check: call preflight.Handle in an init function"
		return types.PreflightResult{Error: witTypes.Some(message)}
	}
	return registry.Evaluate(request)
}
