//! A loaded check: compiled once per digest, pre-instantiated, ready for a fresh instance per evaluation.

use crate::bindings::v0_1::PreflightCheckPre;
use crate::digest::Digest;
use crate::guest_state::GuestState;

/// A validated, compiled and pre-instantiated check. Cheap to share (`Arc<Check>`); each evaluation
/// instantiates it afresh, so no state leaks from one evaluation to the next.
pub struct Check {
    pub(crate) pre: PreflightCheckPre<GuestState>,
    info: CheckInfo,
}

/// What a check is: identity, size, contract version, imports and exports.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CheckInfo {
    /// SHA-256 of the component's bytes.
    pub digest: Digest,
    /// Size of the component in bytes.
    pub size: usize,
    /// The world the check implements, with its version.
    pub world: String,
    /// What the component imports.
    pub imports: Vec<String>,
    /// What the component exports.
    pub exports: Vec<String>,
}

impl Check {
    pub(crate) fn new(
        pre: PreflightCheckPre<GuestState>,
        digest: Digest,
        size: usize,
        contract_version: &str,
        imports: Vec<String>,
        exports: Vec<String>,
    ) -> Self {
        let world = format!("preflight:check/preflight-check@{contract_version}");
        Self {
            pre,
            info: CheckInfo {
                digest,
                size,
                world,
                imports,
                exports,
            },
        }
    }

    /// The check's identity and interface.
    pub fn info(&self) -> &CheckInfo {
        &self.info
    }

    /// SHA-256 of the component's bytes.
    pub fn digest(&self) -> Digest {
        self.info.digest
    }
}

impl std::fmt::Debug for Check {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Check")
            .field("info", &self.info)
            .finish_non_exhaustive()
    }
}
