//! The operator's tests (against a real API server, and of its check set) in one test binary, as wasmtime
//! keeps its `tests/all`: wasmtime and kube are linked once for all of them instead of once per file. Each
//! module is one subject; `cargo test -p preflight-operator --test all -- pause_switches::` runs one of them.
//! (`operator_restart` is a binary of its own: it restarts the API server the others share.)

mod operator_support;

mod capabilities;
mod check_set;
mod hold;
mod oci;
mod operator;
mod operator_lifecycle;
mod packing;
mod pause_switches;
mod rollout;
mod sharding;
mod signatures;
