//! What the host provides to checks, in one place: the linker setup and the list the validator uses.
//!
//! A check gets `preflight:check/log`, and a locked-down WASI subset so that ordinary toolchains work:
//! `wasi:io`, `wasi:clocks`, `wasi:random` and `wasi:cli` with an empty environment, no arguments, a closed
//! stdin and stdout/stderr that are discarded (log through `preflight:check/log` instead). A 0.2 check may
//! also import `preflight:check/cluster` and `wasi:http` (types and outgoing-handler): both are linked for
//! every check, and both refuse every call that the check's grants do not allow. A check never gets
//! `wasi:filesystem` or `wasi:sockets`: no ambient authority.

use crate::bindings::{v0_1, v0_2};
use crate::guest_state::GuestState;
use crate::validate::{minor, same_minor};
use wasmtime::component::{HasData, HasSelf, Linker, ResourceTable};
use wasmtime_wasi::WasiView;
use wasmtime_wasi::cli::{WasiCli, WasiCliView};
use wasmtime_wasi::clocks::{WasiClocks, WasiClocksView};
use wasmtime_wasi::p2::bindings::{cli, clocks, random};
use wasmtime_wasi::random::WasiRandom;
use wasmtime_wasi_io::bindings::wasi::io;

/// Interfaces of contract 0.1 the host provides, at any `0.1.x`.
const PREFLIGHT_INTERFACES_0_1: [&str; 2] = ["preflight:check/log", "preflight:check/types"];
/// Interfaces of contract 0.2 the host provides, at any `0.2.x`.
const PREFLIGHT_INTERFACES_0_2: [&str; 3] = [
    "preflight:check/log",
    "preflight:check/types",
    "preflight:check/cluster",
];
/// The `wasi:http` interfaces a 0.2 check may import (at any `0.2.x`), for outbound requests only.
const WASI_HTTP_INTERFACES: [&str; 2] = ["wasi:http/types", "wasi:http/outgoing-handler"];
/// The WASI interfaces the host provides, at any `0.2.x`.
const WASI_INTERFACES: [&str; 18] = [
    "wasi:io/error",
    "wasi:io/poll",
    "wasi:io/streams",
    "wasi:clocks/wall-clock",
    "wasi:clocks/monotonic-clock",
    "wasi:random/random",
    "wasi:random/insecure",
    "wasi:random/insecure-seed",
    "wasi:cli/exit",
    "wasi:cli/environment",
    "wasi:cli/stdin",
    "wasi:cli/stdout",
    "wasi:cli/stderr",
    "wasi:cli/terminal-input",
    "wasi:cli/terminal-output",
    "wasi:cli/terminal-stdin",
    "wasi:cli/terminal-stdout",
    "wasi:cli/terminal-stderr",
];
const WASI_VERSION: &str = "0.2";

/// Adds everything a check may import to `linker`.
pub(crate) fn link(linker: &mut Linker<GuestState>) -> wasmtime::Result<()> {
    v0_1::PreflightCheck::add_to_linker::<GuestState, HasSelf<GuestState>>(linker, |state| state)?;
    v0_2::PreflightCheck::add_to_linker::<GuestState, HasSelf<GuestState>>(linker, |state| state)?;
    wasmtime_wasi_http::p2::add_only_http_to_linker_async(linker)?;
    let l = linker;
    io::error::add_to_linker::<GuestState, ResourceTableOf>(l, GuestState::table)?;
    io::poll::add_to_linker::<GuestState, ResourceTableOf>(l, GuestState::table)?;
    io::streams::add_to_linker::<GuestState, ResourceTableOf>(l, GuestState::table)?;
    clocks::wall_clock::add_to_linker::<GuestState, WasiClocks>(l, GuestState::clocks)?;
    clocks::monotonic_clock::add_to_linker::<GuestState, WasiClocks>(l, GuestState::clocks)?;
    random::random::add_to_linker::<GuestState, WasiRandom>(l, |s| s.ctx().ctx.random())?;
    random::insecure::add_to_linker::<GuestState, WasiRandom>(l, |s| s.ctx().ctx.random())?;
    random::insecure_seed::add_to_linker::<GuestState, WasiRandom>(l, |s| s.ctx().ctx.random())?;
    cli::exit::add_to_linker::<GuestState, WasiCli>(l, GuestState::cli)?;
    cli::environment::add_to_linker::<GuestState, WasiCli>(l, GuestState::cli)?;
    cli::stdin::add_to_linker::<GuestState, WasiCli>(l, GuestState::cli)?;
    cli::stdout::add_to_linker::<GuestState, WasiCli>(l, GuestState::cli)?;
    cli::stderr::add_to_linker::<GuestState, WasiCli>(l, GuestState::cli)?;
    cli::terminal_input::add_to_linker::<GuestState, WasiCli>(l, GuestState::cli)?;
    cli::terminal_output::add_to_linker::<GuestState, WasiCli>(l, GuestState::cli)?;
    cli::terminal_stdin::add_to_linker::<GuestState, WasiCli>(l, GuestState::cli)?;
    cli::terminal_stdout::add_to_linker::<GuestState, WasiCli>(l, GuestState::cli)?;
    cli::terminal_stderr::add_to_linker::<GuestState, WasiCli>(l, GuestState::cli)?;
    Ok(())
}

/// `wasi:io` host functions work on the store's resource table.
struct ResourceTableOf;

impl HasData for ResourceTableOf {
    type Data<'a> = &'a mut ResourceTable;
}

/// Whether the host provides `import` (`namespace:package/interface@version`) at a semver-compatible
/// version to a check of contract version `contract` (`0.1.0`, `0.2.3`): a check uses the preflight
/// interfaces of its own contract version, and only a 0.2 check gets `wasi:http`.
pub(crate) fn is_provided(import: &str, contract: &str) -> bool {
    let (interface, version) = import.split_once('@').unwrap_or((import, ""));
    let preflight: &[&str] = if same_minor(contract, v0_1::CONTRACT_VERSION) {
        &PREFLIGHT_INTERFACES_0_1
    } else {
        &PREFLIGHT_INTERFACES_0_2
    };
    let wasi_http =
        same_minor(contract, v0_2::CONTRACT_VERSION) && WASI_HTTP_INTERFACES.contains(&interface);
    (preflight.contains(&interface) && same_minor(version, contract))
        || ((WASI_INTERFACES.contains(&interface) || wasi_http) && minor(version) == WASI_VERSION)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_contract_and_safe_wasi_are_provided_at_compatible_versions() {
        let v0_1 = |import| is_provided(import, "0.1.0");
        assert!(v0_1("preflight:check/log@0.1.0"));
        assert!(v0_1("preflight:check/types@0.1.7"));
        assert!(v0_1("wasi:cli/stderr@0.2.6"));
        assert!(v0_1("wasi:io/streams@0.2.0"));
        assert!(!v0_1("preflight:check/log@0.2.0"));
        assert!(!v0_1("preflight:check/log"));
        assert!(!v0_1("preflight:check/cluster@0.1.0"));
        assert!(!v0_1("wasi:filesystem/types@0.2.6"));
        assert!(!v0_1("wasi:sockets/tcp@0.2.6"));
        assert!(!v0_1("wasi:http/outgoing-handler@0.2.6"));
        assert!(!v0_1("wasi:cli/stderr@0.3.0"));
    }

    #[test]
    fn a_0_2_check_may_import_lookups_and_outbound_http_but_no_sockets() {
        let v0_2 = |import| is_provided(import, "0.2.1");
        assert!(v0_2("preflight:check/log@0.2.0"));
        assert!(v0_2("preflight:check/cluster@0.2.1"));
        assert!(v0_2("wasi:http/outgoing-handler@0.2.4"));
        assert!(v0_2("wasi:http/types@0.2.6"));
        assert!(!v0_2("preflight:check/log@0.1.0"));
        assert!(!v0_2("wasi:http/incoming-handler@0.2.4"));
        assert!(!v0_2("wasi:sockets/tcp@0.2.6"));
        assert!(!v0_2("wasi:filesystem/preopens@0.2.6"));
    }
}
