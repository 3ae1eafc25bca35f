//! The `preflight` command's tests, run as a user runs it, in one test binary, as wasmtime keeps its
//! `tests/all`: linked once for all of them instead of once per file. Each module is one subject;
//! `cargo test -p preflight --test all -- languages::` runs one of them.

#[path = "../../../operator/tests/all/operator_support/mod.rs"]
mod operator_support;

mod cli;
mod languages;
mod oci;
mod operator_process;
mod readme;
mod shard_ring;
mod what_if;
