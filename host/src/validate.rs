//! Is this a preflight check? Precise answers for bytes that are not one, before and after compiling.

use crate::bindings::{CHECK_FUNCTION, CONTRACT_VERSION, EVALUATE_EXPORT};
use crate::error::Error;
use crate::imports::is_provided;
use wasmtime::component::types::ComponentItem;

const WASM_MAGIC: &[u8; 4] = b"\0asm";
/// Version and layer fields of a core module (version 1, layer 0).
const CORE_MODULE_HEADER: [u8; 4] = [1, 0, 0, 0];
/// Layer field (bytes 6..8) of a component.
const COMPONENT_LAYER: [u8; 2] = [1, 0];

/// Rejects bytes that are not a WebAssembly component, naming what they are instead.
pub(crate) fn check_header(bytes: &[u8]) -> Result<(), Error> {
    let invalid = |message: String| Err(Error::InvalidComponent(message));
    if bytes.len() < 8 || &bytes[..4] != WASM_MAGIC {
        let start = &bytes[..bytes.len().min(8)];
        return invalid(format!(
            "not a WebAssembly binary: it does not start with \\0asm (first bytes: {start:02x?})"
        ));
    }
    if bytes[4..8] == CORE_MODULE_HEADER {
        return invalid(
            "this is a core WebAssembly module, not a component: build for the wasm32-wasip2 target \
             (or wrap it with `wasm-tools component new`)"
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

    /// Checks that the component exports `evaluate.check` of this contract version and imports only what
    /// the host provides. Signature mismatches are found later, when the host pre-instantiates it.
    pub fn check_contract(
        &self,
        component: &wasmtime::component::Component,
        engine: &wasmtime::Engine,
    ) -> Result<(), Error> {
        let unsupported: Vec<&str> = self
            .imports
            .iter()
            .map(String::as_str)
            .filter(|name| !is_provided(name))
            .collect();
        if !unsupported.is_empty() {
            return Err(Error::InvalidComponent(format!(
                "it imports what the host does not provide: {}. Checks get no filesystem, network or \
                 environment: they log through preflight:check/log and get the object and time in the request",
                unsupported.join(", ")
            )));
        }
        let component_type = component.component_type();
        let Some(ComponentItem::ComponentInstance(evaluate)) = component_type
            .get_export(engine, EVALUATE_EXPORT)
            .map(|export| export.ty)
        else {
            return Err(Error::InvalidComponent(self.describe_missing_export()));
        };
        if evaluate.get_export(engine, CHECK_FUNCTION).is_none() {
            return Err(Error::InvalidComponent(format!(
                "its {EVALUATE_EXPORT} export has no `{CHECK_FUNCTION}` function"
            )));
        }
        Ok(())
    }

    fn describe_missing_export(&self) -> String {
        let (interface, _) = EVALUATE_EXPORT
            .split_once('@')
            .unwrap_or((EVALUATE_EXPORT, ""));
        if let Some(other) = self
            .exports
            .iter()
            .find(|name| name.starts_with(&format!("{interface}@")))
        {
            return format!(
                "it exports {other}, but this host implements preflight:check@{CONTRACT_VERSION}; \
                 build the check against that version or run a host that supports it"
            );
        }
        let exports = if self.exports.is_empty() {
            "nothing".to_owned()
        } else {
            self.exports.join(", ")
        };
        format!(
            "it does not export {EVALUATE_EXPORT} (it exports {exports}): is it built for the \
             preflight:check/preflight-check world?"
        )
    }
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
