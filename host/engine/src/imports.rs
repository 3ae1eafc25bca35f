//! What the host provides to checks, in one place: the linker setup and the list the validator uses.
//!
//! A check gets `preflight:check/log`, and a locked-down WASI subset so that ordinary toolchains work:
//! `wasi:io`, `wasi:clocks`, `wasi:random` and `wasi:cli` with an empty environment, no arguments, a closed
//! stdin and stdout/stderr that are discarded (log through `preflight:check/log` instead). A 0.2 check may
//! also import `preflight:check/cluster` and `wasi:http` (types and outgoing-handler), which refuse every
//! call the check's grants do not allow, and `wasi:filesystem` and `wasi:sockets`, which language runtimes
//! import whatever the check does and which grant nothing: no preopened directory, no network. A 0.1
//! check is refused all four, as it always was. No ambient authority either way.

use crate::bindings::{minor, same_minor};
use crate::bindings::{v0_1, v0_2};
use crate::guest_state::GuestState;
use wasmtime::component::{HasSelf, Linker};

/// Interfaces of contract 0.1 the host provides, at any `0.1.x`.
const PREFLIGHT_INTERFACES_0_1: [&str; 2] = ["preflight:check/log", "preflight:check/types"];
/// Interfaces of contract 0.2 the host provides, at any `0.2.x`.
const PREFLIGHT_INTERFACES_0_2: [&str; 3] = [
    "preflight:check/log",
    "preflight:check/types",
    "preflight:check/cluster",
];
/// What a 0.2 check may import beyond the WASI a 0.1 check gets (at any `0.2.x`): `wasi:http` for outbound
/// requests (the send hook enforces the grants), and the filesystem and sockets interfaces that language
/// runtimes (CPython, SpiderMonkey, Go) import whether or not a check uses them: linked, but with no
/// preopened directory and every socket address, name lookup, TCP and UDP use denied.
const WASI_0_2_ONLY_INTERFACES: [&str; 11] = [
    "wasi:http/types",
    "wasi:http/outgoing-handler",
    "wasi:filesystem/types",
    "wasi:filesystem/preopens",
    "wasi:sockets/network",
    "wasi:sockets/instance-network",
    "wasi:sockets/tcp",
    "wasi:sockets/tcp-create-socket",
    "wasi:sockets/udp",
    "wasi:sockets/udp-create-socket",
    "wasi:sockets/ip-name-lookup",
];
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

/// Adds everything a check may import to `linker`: both contract versions, all of WASI 0.2 (whose context
/// grants nothing: see [`crate::guest_state`]), and `wasi:http` (whose send hook enforces the grants).
pub(crate) fn link(linker: &mut Linker<GuestState>) -> wasmtime::Result<()> {
    v0_1::PreflightCheck::add_to_linker::<GuestState, HasSelf<GuestState>>(linker, |state| state)?;
    v0_2::PreflightCheck::add_to_linker::<GuestState, HasSelf<GuestState>>(linker, |state| state)?;
    wasmtime_wasi::p2::add_to_linker_async(linker)?;
    wasmtime_wasi_http::p2::add_only_http_to_linker_async(linker)
}

/// Whether the host provides `import` (`namespace:package/interface@version`) at a semver-compatible
/// version to a check of contract version `contract` (`0.1.0`, `0.2.3`): a check uses the preflight
/// interfaces of its own contract version, and only a 0.2 check gets `wasi:http` and the (empty)
/// filesystem and sockets interfaces.
pub(crate) fn is_provided(import: &str, contract: &str) -> bool {
    let (interface, version) = import.split_once('@').unwrap_or((import, ""));
    let preflight: &[&str] = if same_minor(contract, v0_1::CONTRACT_VERSION) {
        &PREFLIGHT_INTERFACES_0_1
    } else {
        &PREFLIGHT_INTERFACES_0_2
    };
    let wasi_0_2_only = same_minor(contract, v0_2::CONTRACT_VERSION)
        && WASI_0_2_ONLY_INTERFACES.contains(&interface);
    (preflight.contains(&interface) && same_minor(version, contract))
        || ((WASI_INTERFACES.contains(&interface) || wasi_0_2_only)
            && minor(version) == WASI_VERSION)
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
    fn a_0_2_check_may_import_lookups_outbound_http_and_the_empty_filesystem_and_sockets() {
        let v0_2 = |import| is_provided(import, "0.2.1");
        assert!(v0_2("preflight:check/log@0.2.0"));
        assert!(v0_2("preflight:check/cluster@0.2.1"));
        assert!(v0_2("wasi:http/outgoing-handler@0.2.4"));
        assert!(v0_2("wasi:http/types@0.2.6"));
        assert!(!v0_2("preflight:check/log@0.1.0"));
        assert!(!v0_2("wasi:http/incoming-handler@0.2.4"));
        assert!(v0_2("wasi:sockets/tcp@0.2.6"));
        assert!(v0_2("wasi:filesystem/preopens@0.2.9"));
        assert!(!v0_2("wasi:filesystem/preopens@0.3.0"));
    }
}
