//! The vocabulary of a check as the operator applies it: its settings, its source (settings and component),
//! its failure policy, and why a version was rejected. The ConfigMap parser ([`crate::check_source`]) produces
//! these, the check set and the gate consume them, and library users build them in code.

use crate::capabilities::CapabilitySettings;
use crate::kind::GatedKind;
use crate::pause::PauseSwitch;
use preflight_engine::{ComponentProblem, Limits};

/// What the gate does with an object when a check cannot run (failed, trapped, timed out, or has no
/// usable version).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum FailurePolicy {
    /// Block the object, as the check's failure says (the default: a preflight check exists to block).
    #[default]
    Fail,
    /// Let the object proceed, and say on its condition that the check was ignored.
    Ignore,
}

/// How a check is applied: everything but the component itself.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CheckSettings {
    /// A unique name: `namespace/name` of the ConfigMap.
    pub name: String,
    /// The kind the check gates.
    pub gates: GatedKind,
    /// The versions it applies to; empty means every version.
    pub versions: Vec<String>,
    /// Checks of a kind run in ascending order, then by name.
    pub order: i32,
    /// The evaluation budget.
    pub limits: Limits,
    /// What to do when the check cannot run.
    pub failure_policy: FailurePolicy,
    /// A suspended check is not evaluated: objects pass it, and their condition says so. Takes a check out
    /// of the way (a misbehaving one, or to measure the gate's cost) without deleting its ConfigMap.
    pub suspended: bool,
    /// Configuration handed to the check, as JSON.
    pub config: String,
    /// The switch that pauses the kind's own controller while an object may not proceed; every check of a
    /// kind must name the same one (or none).
    pub pause: Option<PauseSwitch>,
    /// What the check may reach beyond its object (contract 0.2): outbound HTTP, lookups.
    pub capabilities: CapabilitySettings,
    /// Where the check's outputs are recorded on the object.
    pub outputs: OutputsPlacement,
}

/// Where a check's outputs go on the object.
#[derive(Debug, Clone, PartialEq, Eq, Default, Hash, PartialOrd, Ord)]
pub enum OutputsPlacement {
    /// The `preflight.dev/outputs` annotation, a JSON object (the default: it works for every kind, while
    /// a structural schema prunes status fields its CRD does not declare).
    #[default]
    Annotation,
    /// An object field under `status` that the CRD declares, as a path: `["dependency"]` for
    /// `status.dependency`.
    Status(Vec<String>),
}

impl OutputsPlacement {
    /// Parses the ConfigMap's `outputs` key: `annotation`, or `status.<field>[.<field>...]`.
    pub fn parse(text: &str) -> Result<Self, String> {
        if text == "annotation" {
            return Ok(Self::Annotation);
        }
        let path: Vec<String> = text
            .strip_prefix("status.")
            .map(|path| path.split('.').map(str::to_owned).collect())
            .unwrap_or_default();
        let valid = !path.is_empty()
            && path.iter().all(|field| {
                !field.is_empty()
                    && field
                        .bytes()
                        .all(|b| b.is_ascii_alphanumeric() || b == b'_')
            });
        if valid {
            Ok(Self::Status(path))
        } else {
            Err(format!(
                "outputs `{text}` is neither `annotation` nor a status path such as status.dependency"
            ))
        }
    }
}

impl std::fmt::Display for OutputsPlacement {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Annotation => f.write_str("annotation"),
            Self::Status(path) => write!(f, "status.{}", path.join(".")),
        }
    }
}

/// A check and its settings, read from a ConfigMap (or built in code by an operator in library mode).
#[derive(Debug, Clone)]
pub struct CheckSource {
    /// How the check is applied.
    pub settings: CheckSettings,
    /// The component's bytes, decompressed.
    pub component: Vec<u8>,
}

impl CheckSource {
    /// A check with default settings: order 0, default limits, `Fail`, no configuration.
    pub fn new(name: impl Into<String>, gates: GatedKind, component: Vec<u8>) -> Self {
        Self {
            settings: CheckSettings {
                name: name.into(),
                gates,
                versions: Vec::new(),
                order: 0,
                limits: Limits::default(),
                failure_policy: FailurePolicy::Fail,
                suspended: false,
                config: "{}".into(),
                pause: None,
                capabilities: CapabilitySettings::default(),
                outputs: OutputsPlacement::Annotation,
            },
            component,
        }
    }
}

/// Why a ConfigMap does not yield a usable check, with what could still be read from it so that the
/// problem can be reported on the gated objects.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rejection {
    /// The kind, when the ConfigMap names a valid one.
    pub gates: Option<GatedKind>,
    /// The failure policy, when the ConfigMap gives a valid one (else `Fail`).
    pub failure_policy: FailurePolicy,
    /// Every problem found, for humans.
    pub problem: String,
    /// What was wrong, for code and metrics.
    pub cause: RejectionCause,
}

/// What was wrong with a rejected version: the `cause` label of `preflight_check_load_failures_total`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RejectionCause {
    /// The ConfigMap itself: a missing or invalid key or label, a missing or inconsistent part, a digest
    /// that does not match.
    ConfigMap,
    /// The component is not a usable check; the problem names the rule it broke.
    Component(ComponentProblem),
    /// A grant cannot be honoured (the Secret holding a credential is missing, say).
    Grant,
    /// The check's `validate-config` refused its configuration.
    Configuration,
    /// The host could not finish loading it (the engine failed, or compiling was cut short).
    Host,
}

impl RejectionCause {
    /// The metric label: `config-map`, `encoding`, `compile`, `contract`, `imports`, `reads-section`,
    /// `grant`, `configuration` or `host`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::ConfigMap => "config-map",
            Self::Component(problem) => problem.as_str(),
            Self::Grant => "grant",
            Self::Configuration => "configuration",
            Self::Host => "host",
        }
    }
}
