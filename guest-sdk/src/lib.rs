//! Write a preflight check in a few lines of Rust.
//!
//! A check is a function from a typed [`Request`] to an [`Outcome`]; [`check!`] turns it into the
//! `preflight:check/evaluate@0.2.0` export of a WebAssembly component, and exports
//! `configure.validate-config` so that a configuration that does not decode into the check's type (or
//! that your own validator refuses) is reported once, at load. The SDK deserialises the object and the
//! configuration into your types, routes panics and logs to the host, and hides `wit-bindgen`.
//! Checks may also look beyond the object where their ConfigMap grants it: [`http`] and [`cluster`].
//!
//! ```
//! use preflight_guest::{Object, Outcome, Request};
//! use serde::Deserialize;
//! use std::time::Duration;
//!
//! #[derive(Deserialize)]
//! #[serde(rename_all = "camelCase")]
//! struct Spec {
//!     database: String,
//! }
//!
//! fn check(request: Request<Object<Spec>>) -> Outcome {
//!     if request.object.spec.database.is_empty() {
//!         return Outcome::requeue_after(Duration::from_secs(600))
//!             .because("DependencyMissing", "spec.database is not set yet");
//!     }
//!     Outcome::proceed()
//! }
//!
//! preflight_guest::check!(check);
//! ```
//!
//! Build with `cargo build --target wasm32-unknown-unknown --release`, with rustc's `wasm-component-ld` as
//! that target's linker in `.cargo/config.toml` (`preflight scaffold rust` writes it), and run the result
//! with `preflight run --check target/wasm32-unknown-unknown/release/my_check.wasm --object object.yaml`.
//! On that target the check imports nothing but the contract, and its heap (talc) starts in the memory the
//! instance already has: the leanest and fastest fresh instance. A check that calls WASI itself (files,
//! clocks, environment) builds for `wasm32-wasip2` instead.
//! On the host's own target the same function can be unit-tested with [`testing::evaluate`].

#![warn(missing_docs)]

#[cfg(preflight_core_module_build)]
compile_error!(
    "wasm32-unknown-unknown links a core module, not a component, unless the linker is wasm-component-ld \
     (it ships with rustc): add to .cargo/config.toml\n\n[target.wasm32-unknown-unknown]\nlinker = \"wasm-component-ld\""
);

#[cfg(all(
    feature = "allocator",
    target_arch = "wasm32",
    target_os = "unknown",
    not(target_feature = "atomics")
))]
mod allocator;
pub mod cluster;
pub mod http;
mod jitter;
mod log;
mod object;
mod outcome;
mod request;
#[doc(hidden)]
pub mod runtime;
#[cfg(any(
    test,
    all(
        feature = "allocator",
        target_arch = "wasm32",
        target_os = "unknown",
        not(target_feature = "atomics")
    )
))]
mod small_blocks;
pub mod testing;
mod time;

pub use jitter::with_jitter;
pub use log::{debug, error, info, trace, warn};
pub use object::{Metadata, Object};
pub use outcome::{IntoOutcome, Outcome};
pub use request::{Request, Target};
pub use time::parse_time;

/// The `wit-bindgen` bindings of the `preflight-check-with-config` world. Used by [`check!`]; not part of
/// the API.
#[doc(hidden)]
pub mod bindings {
    wit_bindgen::generate!({
        path: "../wit/v0.2",
        world: "preflight-check-with-config",
        pub_export_macro: true,
        export_macro_name: "export_preflight_check",
        default_bindings_module: "preflight_guest::bindings",
    });
}

/// Declares the parts of the object the check reads, so that the host sends only those instead of the
/// whole object (a projection: less to copy into the instance and less for the check to parse).
///
/// Each path names a field by its keys from the object's root, separated by dots (`spec.dependsOn`,
/// `metadata.labels`); a key containing a dot goes in brackets (`metadata.annotations[example.com/tier]`).
/// A path that meets a list applies to each of its items (`spec.containers.image` keeps every container's
/// image, and the list's length). The object's identity (`apiVersion`, `kind`, `metadata.name`,
/// `metadata.namespace`, `metadata.uid`) is always sent. A check that declares nothing gets the whole object.
///
/// The declaration travels in the component (a `preflight-reads` custom section) and is also the constant
/// `PREFLIGHT_READS`. A path left out makes the check decide on a missing field: `preflight test` runs every
/// fixture both ways and fails on any difference.
///
/// ```
/// preflight_guest::reads!("spec.dependsOn");
/// assert_eq!(PREFLIGHT_READS, ["spec.dependsOn"]);
/// ```
#[macro_export]
macro_rules! reads {
    ($($path:literal),+ $(,)?) => {
        /// The parts of the object this check reads (see `preflight_guest::reads!`).
        pub const PREFLIGHT_READS: &[&str] = &[$($path),+];

        #[cfg(target_arch = "wasm32")]
        #[doc(hidden)]
        #[used]
        #[unsafe(link_section = "preflight-reads")]
        static PREFLIGHT_READS_SECTION: [u8; $crate::runtime::reads_section_len(PREFLIGHT_READS)] =
            $crate::runtime::reads_section(PREFLIGHT_READS);
    };
}

/// Exports `function` as the component's check.
///
/// `function` takes a [`Request<T, C>`] for any deserialisable object type `T` and configuration type `C`,
/// and returns an [`Outcome`] or a `Result<Outcome, E>` with `E: Display` (an `Err` becomes
/// [`Outcome::error`]). Use it once per crate, at the top level.
///
/// The host validates each new configuration once: it must decode into `C`, and with
/// `check!(function, validate = validator)`, `validator(&C) -> Result<(), E>` (`E: Display`) must accept
/// it. A rejected configuration keeps the last good version of the check running and is reported on its
/// ConfigMap.
#[macro_export]
macro_rules! check {
    ($function:path) => {
        $crate::check!($function, validate = $crate::runtime::accept_any);
    };
    ($function:path, validate = $validator:path) => {
        // Only a WebAssembly build exports the check; natively the function stays a plain Rust function
        // for unit tests and benchmarks (see `preflight_guest::testing`).
        #[cfg(target_arch = "wasm32")]
        const _: () = {
            struct PreflightCheckExport;

            impl $crate::bindings::exports::preflight::check::evaluate::Guest for PreflightCheckExport {
                fn check(
                    request: $crate::bindings::preflight::check::types::CheckRequest,
                ) -> $crate::bindings::preflight::check::types::PreflightResult {
                    $crate::runtime::run(request, $function)
                }
            }

            impl $crate::bindings::exports::preflight::check::configure::Guest for PreflightCheckExport {
                fn validate_config(config: ::std::string::String) -> ::std::result::Result<(), ::std::string::String> {
                    $crate::runtime::validate_config(&config, $function, $validator)
                }
            }

            $crate::bindings::export_preflight_check!(PreflightCheckExport with_types_in $crate::bindings);
        };
    };
}
