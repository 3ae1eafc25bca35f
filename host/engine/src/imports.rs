//! What the host provides to checks, in one place: the linker setup and the list the validator uses.
//!
//! A check gets `preflight:check/log`, and a locked-down WASI subset so that ordinary toolchains work:
//! `wasi:io`, `wasi:clocks`, `wasi:random` and `wasi:cli` with an empty environment, no arguments, a closed
//! stdin and stdout/stderr that are discarded (log through `preflight:check/log` instead). It never gets
//! `wasi:filesystem`, `wasi:sockets` or `wasi:http`: no ambient authority.

use crate::bindings::v0_1::{CONTRACT_VERSION, PreflightCheck};
use crate::guest_state::GuestState;
use crate::validate::{minor, same_minor};
use wasmtime::component::{HasData, HasSelf, Linker, ResourceTable};
use wasmtime_wasi::WasiView;
use wasmtime_wasi::cli::{WasiCli, WasiCliView};
use wasmtime_wasi::clocks::{WasiClocks, WasiClocksView};
use wasmtime_wasi::p2::bindings::{cli, clocks, random};
use wasmtime_wasi::random::WasiRandom;
use wasmtime_wasi_io::bindings::wasi::io;

/// Interfaces of this contract the host provides, at any `0.1.x`.
const PREFLIGHT_INTERFACES: [&str; 2] = ["preflight:check/log", "preflight:check/types"];
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
    PreflightCheck::add_to_linker::<GuestState, HasSelf<GuestState>>(linker, |state| state)?;
    let l = linker;
    io::error::add_to_linker::<GuestState, ResourceTableOf>(l, |s| s.ctx().table)?;
    io::poll::add_to_linker::<GuestState, ResourceTableOf>(l, |s| s.ctx().table)?;
    io::streams::add_to_linker::<GuestState, ResourceTableOf>(l, |s| s.ctx().table)?;
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

/// Whether the host provides `import` (`namespace:package/interface@version`) at a semver-compatible version.
pub(crate) fn is_provided(import: &str) -> bool {
    let (interface, version) = import.split_once('@').unwrap_or((import, ""));
    (PREFLIGHT_INTERFACES.contains(&interface) && same_minor(version, CONTRACT_VERSION))
        || (WASI_INTERFACES.contains(&interface) && minor(version) == WASI_VERSION)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_contract_and_safe_wasi_are_provided_at_compatible_versions() {
        assert!(is_provided("preflight:check/log@0.1.0"));
        assert!(is_provided("preflight:check/types@0.1.7"));
        assert!(is_provided("wasi:cli/stderr@0.2.6"));
        assert!(is_provided("wasi:io/streams@0.2.0"));
        assert!(!is_provided("preflight:check/log@0.2.0"));
        assert!(!is_provided("preflight:check/log"));
        assert!(!is_provided("wasi:filesystem/types@0.2.6"));
        assert!(!is_provided("wasi:sockets/tcp@0.2.6"));
        assert!(!is_provided("wasi:http/outgoing-handler@0.2.6"));
        assert!(!is_provided("wasi:cli/stderr@0.3.0"));
    }
}
