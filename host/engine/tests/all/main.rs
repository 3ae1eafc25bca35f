//! The engine's integration tests in one test binary, as wasmtime keeps its `tests/all`: wasmtime is linked
//! once for all of them instead of once per file. Each module is one subject;
//! `cargo test -p preflight-engine --test all -- hostile::` runs one of them.

mod boundary;
mod capabilities;
mod disk_cache;
mod examples;
mod hostile;
mod load;
mod pool;
mod projection;
mod reuse;
