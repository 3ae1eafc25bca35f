// Package export_preflight_check_configure is the contract's `configure` export, as the generated
// bindings (wit_exports) expect it: it calls the validation preflight.Handle registered.
package export_preflight_check_configure

import (
	"github.com/preflight-wasm/preflight/guest-sdk/go/internal/registry"
	witTypes "go.bytecodealliance.org/pkg/wit/types"
)

// ValidateConfig checks a configuration once, when it is loaded.
func ValidateConfig(config string) witTypes.Result[witTypes.Unit, string] {
	if registry.Validate != nil {
		if refusal := registry.Validate(config); refusal != "" {
			return witTypes.Err[witTypes.Unit](refusal)
		}
	}
	return witTypes.Ok[witTypes.Unit, string](witTypes.Unit{})
}
