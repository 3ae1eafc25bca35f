//! A loaded check: compiled once per digest, pre-instantiated, ready for a fresh instance per evaluation.

use crate::bindings::{v0_1, v0_2};
use crate::digest::Digest;
use crate::guest_state::GuestState;
use crate::projection::Projection;
use wasmtime::component::ComponentExportIndex;

/// A validated, compiled and pre-instantiated check. Cheap to share (`Arc<Check>`); each evaluation
/// instantiates it afresh, so no state leaks from one evaluation to the next.
pub struct Check {
    pub(crate) contract: Contract,
    info: CheckInfo,
    projection: Option<Projection>,
    /// Evaluation slots of the engine's pool one instance takes (see `Footprint`).
    pub(crate) slots: u32,
}

/// A check pre-instantiated with the bindings of its contract version.
pub(crate) enum Contract {
    /// `preflight:check@0.1.x`.
    V0_1(v0_1::PreflightCheckPre<GuestState>),
    /// `preflight:check@0.2.x`, with its `configure.validate-config` export when it has one.
    V0_2 {
        pre: v0_2::PreflightCheckPre<GuestState>,
        validate_config: Option<ComponentExportIndex>,
    },
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
    /// The parts of the object the check declared it reads (see [`Projection`]); `None` when it declared
    /// nothing and gets the whole object.
    pub reads: Option<Vec<String>>,
}

impl Check {
    pub(crate) fn new(
        contract: Contract,
        digest: Digest,
        size: usize,
        contract_version: &str,
        imports: Vec<String>,
        exports: Vec<String>,
        projection: Option<Projection>,
    ) -> Self {
        let world = format!("preflight:check/preflight-check@{contract_version}");
        Self {
            contract,
            info: CheckInfo {
                digest,
                size,
                world,
                imports,
                exports,
                reads: projection.as_ref().map(|p| p.declared().to_vec()),
            },
            projection,
            slots: 1,
        }
    }

    /// The same check, taking `slots` evaluation slots per instance.
    pub(crate) fn taking_slots(self, slots: u32) -> Self {
        Self { slots, ..self }
    }

    /// The check's identity and interface.
    pub fn info(&self) -> &CheckInfo {
        &self.info
    }

    /// What to send the check of an object: the parts it declared it reads, or `None` for the whole object.
    pub fn projection(&self) -> Option<&Projection> {
        self.projection.as_ref()
    }

    /// The object as the check receives it: the projection of `object` when the check declared its reads,
    /// else all of it.
    pub fn input(&self, object: &serde_json::Value) -> String {
        match &self.projection {
            Some(projection) => projection.apply(object).to_string(),
            None => object.to_string(),
        }
    }

    /// SHA-256 of the component's bytes.
    pub fn digest(&self) -> Digest {
        self.info.digest
    }

    /// Whether the check exports `configure.validate-config` (contract 0.2), which
    /// [`crate::Engine::validate_config`] calls.
    pub fn validates_config(&self) -> bool {
        matches!(
            self.contract,
            Contract::V0_2 {
                validate_config: Some(_),
                ..
            }
        )
    }
}

impl std::fmt::Debug for Check {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Check")
            .field("info", &self.info)
            .finish_non_exhaustive()
    }
}
