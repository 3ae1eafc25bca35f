//! Is this a preflight check? Precise answers for bytes that are not one, before and after compiling.

use crate::bindings::{SERVED_CONTRACTS, minor, same_minor, v0_2};
use crate::error::{ComponentProblem, Error};
use crate::imports::is_provided;
use wasmtime::component::types::ComponentItem;

const WASM_MAGIC: &[u8; 4] = b"\0asm";
/// Version and layer fields of a core module (version 1, layer 0).
const CORE_MODULE_HEADER: [u8; 4] = [1, 0, 0, 0];
/// Layer field (bytes 6..8) of a component.
const COMPONENT_LAYER: [u8; 2] = [1, 0];
/// The interface every check exports, without its version.
const EVALUATE_INTERFACE: &str = "preflight:check/evaluate";
/// The function inside it.
const CHECK_FUNCTION: &str = "check";

/// Rejects bytes that are not a WebAssembly component, naming what they are instead.
pub(crate) fn check_header(bytes: &[u8]) -> Result<(), Error> {
    let invalid = |message: String| Err(Error::invalid(ComponentProblem::Encoding, message));
    if bytes.len() < 8 || &bytes[..4] != WASM_MAGIC {
        let start = &bytes[..bytes.len().min(8)];
        return invalid(format!(
            "not a WebAssembly binary: it does not start with \\0asm (first bytes: {start:02x?})"
        ));
    }
    if bytes[4..8] == CORE_MODULE_HEADER {
        return invalid(
            "this is a core WebAssembly module, not a component: a Rust check built for \
             wasm32-unknown-unknown needs `linker = \"wasm-component-ld\"` for that target in \
             .cargo/config.toml (or build for wasm32-wasip2, or make it a component with \
             `preflight componentize`)"
                .to_owned(),
        );
    }
    if bytes[6..8] != COMPONENT_LAYER {
        return invalid(format!(
            "unknown WebAssembly encoding (version/layer bytes {:02x?})",
            &bytes[4..8]
        ));
    }
    Ok(())
}

/// The names a compiled component imports and exports.
pub(crate) struct Interface {
    pub imports: Vec<String>,
    pub exports: Vec<String>,
}

impl Interface {
    pub fn of(component: &wasmtime::component::Component, engine: &wasmtime::Engine) -> Self {
        let ty = component.component_type();
        Self {
            imports: ty
                .imports(engine)
                .map(|(name, _)| name.to_owned())
                .collect(),
            exports: ty
                .exports(engine)
                .map(|(name, _)| name.to_owned())
                .collect(),
        }
    }

    /// Checks, in this order, that the component is built for a contract version this host serves (a
    /// `0.1.y` or `0.2.y` `evaluate` export, whatever `y`: patch releases only add interfaces), that it imports only
    /// what the host provides, and that its `evaluate` export has the `check` function. The version comes
    /// first: a check of a future contract is told so, not that it wants something the host refuses.
    /// Signature mismatches are found later, when the host pre-instantiates it. Returns the check's contract
    /// version (`0.1.1`).
    pub fn check_contract(
        &self,
        component: &wasmtime::component::Component,
        engine: &wasmtime::Engine,
    ) -> Result<String, Error> {
        let (evaluate_export, version) = self.evaluate_export()?;
        let unsupported: Vec<&str> = self
            .imports
            .iter()
            .map(String::as_str)
            .filter(|name| !is_provided(name, version))
            .collect();
        if !unsupported.is_empty() {
            return Err(Error::invalid(
                ComponentProblem::Imports,
                format!(
                    "it imports what the host does not provide to a {version} check: {}. Checks get no \
                 filesystem, sockets or environment: they log through preflight:check/log and get the \
                 object and time in the request; from contract 0.2 they may look up objects through \
                 preflight:check/cluster and send HTTP through wasi:http, where their ConfigMap grants \
                 it; an interface of a newer patch release needs a newer host",
                    unsupported.join(", ")
                ),
            ));
        }
        let component_type = component.component_type();
        let Some(ComponentItem::ComponentInstance(evaluate)) = component_type
            .get_export(engine, evaluate_export)
            .map(|export| export.ty)
        else {
            return Err(Error::invalid(
                ComponentProblem::Contract,
                format!("its {evaluate_export} export is not an interface"),
            ));
        };
        if evaluate.get_export(engine, CHECK_FUNCTION).is_none() {
            return Err(Error::invalid(
                ComponentProblem::Contract,
                format!("its {evaluate_export} export has no `{CHECK_FUNCTION}` function"),
            ));
        }
        Ok(version.to_owned())
    }

    /// The name and contract version of the component's `evaluate` export, when it is of a version this host
    /// serves.
    fn evaluate_export(&self) -> Result<(&str, &str), Error> {
        let versioned = self.exports.iter().find_map(|name| {
            let version = name.strip_prefix(EVALUATE_INTERFACE)?.strip_prefix('@')?;
            Some((name.as_str(), version))
        });
        match versioned {
            Some((name, version))
                if SERVED_CONTRACTS
                    .iter()
                    .any(|served| same_minor(version, served)) =>
            {
                Ok((name, version))
            }
            Some((_, version)) => Err(Error::invalid(
                ComponentProblem::Contract,
                format!(
                    "it is built for contract preflight:check@{version}; this host serves {}. Build the \
                 check against one of those or run a host that serves {version}",
                    served_contracts()
                ),
            )),
            None => {
                let exports = if self.exports.is_empty() {
                    "nothing".to_owned()
                } else {
                    self.exports.join(", ")
                };
                Err(Error::invalid(
                    ComponentProblem::Contract,
                    format!(
                        "it does not export {} (it exports {exports}): is it built for the \
                     preflight:check/preflight-check world?",
                        v0_2::EVALUATE_EXPORT
                    ),
                ))
            }
        }
    }
}

/// The served contracts as `preflight:check@0.1.x, preflight:check@0.2.x`.
pub(crate) fn served_contracts() -> String {
    SERVED_CONTRACTS
        .iter()
        .map(|version| format!("preflight:check@{}.x", minor(version)))
        .collect::<Vec<_>>()
        .join(", ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn headers_say_what_the_bytes_are() {
        let message = |bytes: &[u8]| check_header(bytes).unwrap_err().to_string();
        assert!(message(b"hello world").contains("not a WebAssembly binary"));
        assert!(message(b"").contains("not a WebAssembly binary"));
        assert!(message(b"\0asm\x01\0\0\0").contains("core WebAssembly module"));
        assert!(message(b"\0asm\x0d\0\x07\0").contains("unknown WebAssembly encoding"));
        assert!(check_header(b"\0asm\x0d\0\x01\0").is_ok());
    }
}
