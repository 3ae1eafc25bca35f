//! Host bindings, one module per contract version (as wasmtime-wasi lays out `p1` and `p2`), so that the
//! next version's bindings sit beside these and a loaded check can hold either.

pub(crate) mod v0_1;
