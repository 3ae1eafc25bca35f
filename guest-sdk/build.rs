//! Refuses, with the fix, a `wasm32-unknown-unknown` build that would link a core module instead of a
//! component: on that target only the `wasm-component-ld` linker (shipped with rustc) turns the check into
//! the component the host runs, and without it the mistake would surface only when the host refuses the
//! file.

fn main() {
    println!("cargo::rustc-check-cfg=cfg(preflight_core_module_build)");
    println!("cargo::rerun-if-env-changed=RUSTC_LINKER");
    println!("cargo::rerun-if-env-changed=CARGO_ENCODED_RUSTFLAGS");
    let target = std::env::var("TARGET").unwrap_or_default();
    if target != "wasm32-unknown-unknown" {
        return;
    }
    let linker = std::env::var("RUSTC_LINKER").unwrap_or_default();
    let flags = std::env::var("CARGO_ENCODED_RUSTFLAGS").unwrap_or_default();
    let component_linker = |text: &str| text.contains("wasm-component-ld");
    if !component_linker(&linker) && !component_linker(&flags) {
        println!("cargo::rustc-cfg=preflight_core_module_build");
    }
}
