// Package registry holds the check a component registered, between the SDK (package preflight, which
// registers it) and the contract's exports (package bindings/wit_exports, which call it). It exists to break
// the import cycle between the two.
package registry

import (
	types "github.com/preflight-wasm/preflight/guest-sdk/go/bindings/preflight_check_types"
)

// Evaluate answers the contract's `evaluate.check`; set by preflight.Handle.
var Evaluate func(types.CheckRequest) types.PreflightResult

// Validate answers the contract's `configure.validate-config`: "" accepts the configuration, anything
// else is the refusal's message; set by preflight.Handle.
var Validate func(config string) string
