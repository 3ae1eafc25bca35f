//! The vocabulary of a check as the operator applies it: its settings, its source (settings and component),
//! its failure policy, and why a version was rejected. The ConfigMap parser ([`crate::check_source`]) produces
//! these, the check set and the gate consume them, and library users build them in code.

use crate::capabilities::CapabilitySettings;
use crate::kind::GatedKind;
use crate::pause::PauseSwitch;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
use kube::core::{Selector, SelectorExt};
use preflight_engine::{ComponentProblem, Limits};
use std::collections::BTreeMap;

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

/// Whether a check's verdict decides (`enforce`, the default) or is only recorded (`monitor`): a new check
/// or version is watched on live objects before it may hold any of them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Hash)]
pub enum CheckMode {
    /// The verdict decides whether objects proceed, and sets the pause switch.
    #[default]
    Enforce,
    /// Evaluated exactly like an enforced check, but the verdict only goes to the `PreflightMonitor`
    /// condition, Events and metrics: it never holds an object.
    Monitor,
}

impl CheckMode {
    /// Parses the ConfigMap's `mode` key.
    pub fn parse(text: &str) -> Result<Self, String> {
        match text {
            "enforce" => Ok(Self::Enforce),
            "monitor" => Ok(Self::Monitor),
            other => Err(format!("mode `{other}` is neither enforce nor monitor")),
        }
    }

    /// `enforce` or `monitor`: the `mode` label of the metrics.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Enforce => "enforce",
            Self::Monitor => "monitor",
        }
    }
}

/// The objects a check gates, by label (the ConfigMap's `selector` key, a Kubernetes label selector:
/// `matchLabels` and `matchExpressions`); objects outside it are not evaluated by the check. Staged
/// enforcement: a team gates `env: staging` before production.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ObjectSelector(Selector);

impl ObjectSelector {
    /// Parses a label selector written in YAML or JSON (`matchLabels: {env: staging}`); an unknown key is
    /// refused rather than ignored (a misspelt `matchLabel` would otherwise select every object).
    pub fn parse(text: &str) -> Result<Self, String> {
        const KEYS: [&str; 2] = ["matchLabels", "matchExpressions"];
        let value: serde_json::Value = serde_norway::from_str(text)
            .map_err(|error| format!("selector is not YAML or JSON: {error}"))?;
        let fields = value.as_object().ok_or_else(|| {
            "selector is not a label selector (matchLabels, matchExpressions)".to_owned()
        })?;
        if let Some(unknown) = fields.keys().find(|key| !KEYS.contains(&key.as_str())) {
            return Err(format!(
                "selector has the unknown key `{unknown}` (known: matchLabels, matchExpressions)"
            ));
        }
        let selector: LabelSelector = serde_json::from_value(value)
            .map_err(|error| format!("selector is not a label selector: {error}"))?;
        Selector::try_from(selector)
            .map(Self)
            .map_err(|error| format!("selector is not a label selector: {}", error.0))
    }

    /// Whether an object with `labels` is gated by the check.
    pub fn matches(&self, labels: &BTreeMap<String, String>) -> bool {
        self.0.matches(labels)
    }

    /// The selector as Kubernetes writes it (for an admission binding's `objectSelector`).
    pub fn to_label_selector(&self) -> LabelSelector {
        LabelSelector::from(self.0.clone())
    }
}

impl std::fmt::Display for ObjectSelector {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.0.fmt(f)
    }
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
    /// Whether the verdict decides or is only recorded.
    pub mode: CheckMode,
    /// The objects the check gates; `None`: every object of its kind.
    pub selector: Option<ObjectSelector>,
}

impl CheckSettings {
    /// A rejection of this check for `problem`, caused by `cause`: reported on the objects it would gate.
    pub fn rejection(&self, cause: RejectionCause, problem: String) -> Rejection {
        Rejection {
            gates: Some(self.gates.clone()),
            failure_policy: self.failure_policy,
            mode: self.mode,
            selector: self.selector.clone(),
            pause: self.pause.clone().map(Box::new),
            problem,
            cause,
        }
    }
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
                mode: CheckMode::Enforce,
                selector: None,
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
    /// The mode, when the ConfigMap gives a valid one (else `enforce`): a broken monitored check holds
    /// nothing either.
    pub mode: CheckMode,
    /// The selector, when the ConfigMap gives a valid one: a broken staged check holds only its stage.
    pub selector: Option<ObjectSelector>,
    /// The pause switch, when the ConfigMap gives a valid one: a broken check that holds its objects
    /// (`failurePolicy: Fail`) keeps their controller paused, also after a restart that lost its last good
    /// version. Boxed: a rejection travels in `Result`s, which stay small.
    pub pause: Option<Box<PauseSwitch>>,
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
    /// The check's `validate-config` gave no verdict: it ran out of time or memory, or trapped. Unlike a
    /// refusal this may pass (a validation starved of CPU on a busy node), so the version is loaded again.
    Validation,
    /// The component lacks a signature the signature policy asks for (or the keys cannot be read): it is
    /// refused before it is compiled.
    Signature,
    /// The host could not finish loading it (the engine failed, or compiling was cut short).
    Host,
}

impl RejectionCause {
    /// The metric label: `config-map`, `encoding`, `compile`, `contract`, `imports`, `reads-section`,
    /// `grant`, `configuration`, `validation`, `signature` or `host`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::ConfigMap => "config-map",
            Self::Component(problem) => problem.as_str(),
            Self::Grant => "grant",
            Self::Configuration => "configuration",
            Self::Validation => "validation",
            Self::Signature => "signature",
            Self::Host => "host",
        }
    }
}
