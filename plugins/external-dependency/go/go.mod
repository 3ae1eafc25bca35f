module github.com/preflight-wasm/preflight/plugins/external-dependency/go

go 1.26

require github.com/preflight-wasm/preflight/guest-sdk/go v0.0.0

require go.bytecodealliance.org/pkg v0.2.3 // indirect

replace github.com/preflight-wasm/preflight/guest-sdk/go => ../../../guest-sdk/go
