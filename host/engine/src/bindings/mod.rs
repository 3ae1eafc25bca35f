//! Host bindings, one module per contract version (as wasmtime-wasi lays out `p1` and `p2`): the host links
//! and serves every version here, choosing by the name of a component's `evaluate` export.

pub(crate) mod v0_1;
pub(crate) mod v0_2;
