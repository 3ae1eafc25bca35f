module github.com/preflight-wasm/preflight/guest-sdk/go

go 1.26

require go.bytecodealliance.org/pkg v0.2.3
