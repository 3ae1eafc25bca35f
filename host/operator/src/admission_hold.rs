//! Hold at admission: for each gated kind with a pause switch, a MutatingAdmissionPolicy (and its binding)
//! that sets the switch in the request that creates an object, or that changes its data, so that the kind's
//! controller never sees it unpaused before a check said yes. A switch set after creation loses that race: a
//! Deployment's ReplicaSet is written milliseconds after the Deployment.
//!
//! What the policy does, in the API server, for CREATE and UPDATE of the kind's resource (not its `status`
//! or `scale` subresources):
//! - it matches only when the switch does not already say pause (a pause someone set is left as it is);
//! - on UPDATE, only when something outside `metadata`, `status` and the switch itself changed: a change of
//!   the object's data (a template, an image) gives it a new generation, for which no check has said
//!   proceed yet; an annotation or label edit changes nothing the controller acts on, and is not held;
//! - it sets the switch and [`HELD_AT_ADMISSION_ANNOTATION`] (the mark), which tells the operator that the
//!   pause is preflight's: the operator takes the switch over as its own field manager and withdraws both
//!   when the checks proceed, at once when they proceed from the start.
//!
//! An admission policy cannot name a field manager: what it sets belongs to no one (a field the API server
//! defaults, such as a Job's `spec.suspend`, to the creator). The mark is what makes release certain. A
//! pause a person sets without the mark is never the operator's to release; one set while the mark is there
//! cannot be told from preflight's (set it by server-side apply under your own field manager to keep it).
//!
//! `failurePolicy: Ignore`: should the policy fail to evaluate, the request is admitted unpaused and the
//! operator sets the switch right after creation (the race above), rather than every create of the kind
//! being refused. The policies are labelled `app.kubernetes.io/managed-by: preflight`, installed by
//! server-side apply under [`FIELD_MANAGER`](crate::FIELD_MANAGER), replaced when the switch changes and
//! deleted when the kind's last check goes (or hold at admission is turned off); they stay while the
//! operator is down, so that nothing rolls out unchecked meanwhile. While it runs, it watches them: one
//! deleted or changed by someone else is put back within seconds (at most once every few seconds, so that
//! two replicas that disagree during a rolling update do not fight in a tight loop).

use crate::api_answer::api_answer;
use crate::field_managers::FIELD_MANAGER;
use crate::pause::{HELD_AT_ADMISSION_ANNOTATION, PauseSwitch, SwitchTarget};
use crate::vocabulary::ObjectSelector;
use crate::watch_failures;
use futures::StreamExt;
use kube::api::{Api, ApiResource, DeleteParams, DynamicObject, ListParams, Patch, PatchParams};
use kube::core::PartialObjectMeta;
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Client, ResourceExt};
use serde_json::{Value, json};
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::time::Duration;
use tokio::sync::mpsc;
use tokio::time::Instant;
use tracing::{info, warn};

/// The label every policy and binding the operator installs carries (and the value), to find them again.
const MANAGED_BY: (&str, &str) = ("app.kubernetes.io/managed-by", "preflight");

/// The shortest time between two rechecks of the holds that put something back ([`AdmissionHolds::recheck_at`]).
const RECHECK_PAUSE: Duration = Duration::from_secs(5);

/// The label naming the installation (the namespace of its check ConfigMaps) that owns a policy: an
/// operator removes only its own installation's leftovers.
const INSTALLATION_LABEL: &str = "preflight.dev/checks-namespace";

/// The API group and version of admission policies (GA and served by default since Kubernetes 1.36).
const POLICY_API: (&str, &str) = ("admissionregistration.k8s.io", "v1");

/// Top-level fields an UPDATE may change without being held: they are not the object's data.
const NOT_DATA: [&str; 4] = ["metadata", "status", "apiVersion", "kind"];

/// CEL's reserved words, which cannot name a field in an apply configuration.
const RESERVED: [&str; 21] = [
    "as",
    "break",
    "const",
    "continue",
    "else",
    "false",
    "for",
    "function",
    "if",
    "import",
    "in",
    "let",
    "loop",
    "namespace",
    "null",
    "package",
    "return",
    "true",
    "var",
    "void",
    "while",
];

/// The admission policy and binding that hold one kind's objects, ready to apply.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct HoldPolicy {
    /// The name of both the policy and its binding: `preflight-hold.<plural>.<group>` (`core` for `""`).
    pub name: String,
    /// The MutatingAdmissionPolicy.
    pub policy: Value,
    /// The MutatingAdmissionPolicyBinding.
    pub binding: Value,
}

/// The name of the policy that holds `resource`.
fn policy_name(resource: &ApiResource) -> String {
    format!(
        "preflight-hold.{}.{}",
        resource.plural,
        group_name(&resource.group)
    )
}

/// The API group a policy named by [`policy_name`] holds (`core` for the core group), if the name is one.
fn group_of(name: &str) -> Option<&str> {
    let (_plural, group) = name.strip_prefix("preflight-hold.")?.split_once('.')?;
    Some(group)
}

/// The name [`policy_name`] gives a group: `core` for the core group.
pub(crate) fn group_name(group: &str) -> &str {
    if group.is_empty() { "core" } else { group }
}

/// Whether `name` can be written as a CEL field name.
fn is_identifier(name: &str) -> bool {
    let mut characters = name.chars();
    characters
        .next()
        .is_some_and(|first| first.is_ascii_alphabetic() || first == '_')
        && characters.all(|next| next.is_ascii_alphanumeric() || next == '_')
        && !RESERVED.contains(&name)
}

/// A CEL string literal.
fn string_literal(text: &str) -> String {
    // JSON's string escapes are a subset of CEL's.
    Value::String(text.to_owned()).to_string()
}

/// A CEL literal of a switch's paused value (a boolean, number or string).
fn literal(value: &Value) -> Result<String, String> {
    match value {
        Value::Bool(_) | Value::Number(_) => Ok(value.to_string()),
        Value::String(text) => Ok(string_literal(text)),
        _ => Err(format!(
            "a switch value of {value} cannot be set by an admission policy"
        )),
    }
}

/// CEL: whether `object`'s switch already says pause.
fn already_paused(switch: &PauseSwitch) -> Result<String, String> {
    Ok(match &switch.target {
        SwitchTarget::Annotation { key, value } => format!(
            "object.metadata.?annotations[?{}] == optional.of({})",
            string_literal(key),
            string_literal(value)
        ),
        SwitchTarget::Field { path, value } => format!(
            "object.?{} == optional.of({})",
            path.join(".?"),
            literal(value)?
        ),
    })
}

/// CEL: whether the map `new` differs from `old` anywhere but under `skip` (one path, top level first),
/// ignoring the keys in `ignored` at this level.
fn changed_except(new: &str, old: &str, ignored: &[&str], skip: &[String]) -> String {
    let mut excluded: Vec<String> = ignored.iter().map(|key| string_literal(key)).collect();
    if let Some(first) = skip.first() {
        excluded.push(string_literal(first));
    }
    let excluded = excluded.join(", ");
    let mut alternatives = vec![
        format!("{new}.exists(k, !(k in [{excluded}]) && (!(k in {old}) || {new}[k] != {old}[k]))"),
        format!("{old}.exists(k, !(k in [{excluded}]) && !(k in {new}))"),
    ];
    // The switch itself may come and go; the containers on its path may not.
    if let Some((first, rest)) = skip.split_first()
        && !rest.is_empty()
    {
        let key = string_literal(first);
        alternatives.push(format!("(({key} in {new}) != ({key} in {old}))"));
        let inner = changed_except(
            &format!("{new}[{key}]"),
            &format!("{old}[{key}]"),
            &[],
            rest,
        );
        alternatives.push(format!("({key} in {new} && ({inner}))"));
    }
    alternatives.join(" || ")
}

/// CEL: the request creates the object, or changes its data (anything but metadata, status and the switch).
fn created_or_changed(switch: &PauseSwitch) -> String {
    let skip: &[String] = match &switch.target {
        SwitchTarget::Annotation { .. } => &[],
        SwitchTarget::Field { path, .. } => path,
    };
    format!(
        "request.operation == 'CREATE' || {}",
        changed_except("object", "oldObject", &NOT_DATA, skip)
    )
}

/// CEL: the apply configuration that sets the switch and the mark.
fn mutation(switch: &PauseSwitch) -> Result<String, String> {
    let mark = format!(
        "{}: {}",
        string_literal(HELD_AT_ADMISSION_ANNOTATION),
        string_literal(&switch.to_string())
    );
    Ok(match &switch.target {
        SwitchTarget::Annotation { key, value } => format!(
            "Object{{metadata: Object.metadata{{annotations: {{{}: {}, {mark}}}}}}}",
            string_literal(key),
            string_literal(value)
        ),
        SwitchTarget::Field { path, value } => {
            if let Some(bad) = path.iter().find(|step| !is_identifier(step)) {
                return Err(format!(
                    "`{bad}` in the switch's path cannot be named in an admission policy"
                ));
            }
            let (last, containers) = path.split_last().ok_or("the switch has no path")?;
            let mut fields = format!("{last}: {}", literal(value)?);
            for depth in (1..=containers.len()).rev() {
                fields = format!(
                    "{}: Object.{}{{{fields}}}",
                    path[depth - 1],
                    path[..depth].join(".")
                );
            }
            format!("Object{{metadata: Object.metadata{{annotations: {{{mark}}}}}, {fields}}}")
        }
    })
}

/// The policy and binding that hold `resource`'s objects with `switch`, or why that switch cannot be set at
/// admission.
pub(crate) fn hold_policy(
    resource: &ApiResource,
    switch: &PauseSwitch,
    selector: Option<&ObjectSelector>,
    installation: &str,
) -> Result<HoldPolicy, String> {
    let name = policy_name(resource);
    let labels = json!({ MANAGED_BY.0: MANAGED_BY.1, INSTALLATION_LABEL: installation });
    let api_version = format!("{}/{}", POLICY_API.0, POLICY_API.1);
    let policy = json!({
        "apiVersion": api_version,
        "kind": "MutatingAdmissionPolicy",
        "metadata": {"name": name, "labels": labels},
        "spec": {
            "failurePolicy": "Ignore",
            "reinvocationPolicy": "IfNeeded",
            "matchConstraints": {"resourceRules": [{
                "apiGroups": [resource.group],
                "apiVersions": ["*"],
                "operations": ["CREATE", "UPDATE"],
                "resources": [resource.plural],
            }]},
            "matchConditions": [
                {"name": "not-paused-already", "expression": format!("!({})", already_paused(switch)?)},
                {"name": "created-or-data-changed", "expression": created_or_changed(switch)},
            ],
            "mutations": [{
                "patchType": "ApplyConfiguration",
                "applyConfiguration": {"expression": mutation(switch)?},
            }],
        },
    });
    let mut binding = json!({
        "apiVersion": api_version,
        "kind": "MutatingAdmissionPolicyBinding",
        "metadata": {"name": name, "labels": labels},
        "spec": {"policyName": name},
    });
    // Objects outside every enforced check's selector are never held, not even for a moment.
    if let Some(selector) = selector {
        binding["spec"]["matchResources"] = json!({"objectSelector": selector.to_label_selector()});
    }
    Ok(HoldPolicy {
        name,
        policy,
        binding,
    })
}

/// How a failure of the watch of the holds is said ([`WatchReports::failed`]).
#[derive(Debug, PartialEq, Eq)]
enum WatchReport {
    /// The API server expired the watch (410 Gone, as after it restarts): listed again at once, routine.
    Expired,
    /// A failure not said yet for this object (no access, no API server): at warn, once.
    New,
    /// The same failure again, at each backoff step: at debug.
    Again,
}

/// The failures of the watch of each object type of the holds, so that each is said once at warn, and its
/// end once at info, whatever the backoff's pace.
#[derive(Debug, Default)]
struct WatchReports {
    failing: HashMap<HoldObject, String>,
}

impl WatchReports {
    /// Records a failure of the watch of `object`, and says how to report it.
    fn failed(&mut self, object: HoldObject, failure: &watcher::Error) -> WatchReport {
        if watch_failures::is_expired(failure) {
            return WatchReport::Expired;
        }
        let problem = failure.to_string();
        match self.failing.insert(object, problem.clone()) {
            Some(earlier) if earlier == problem => WatchReport::Again,
            _ => WatchReport::New,
        }
    }

    /// Records that the watch of `object` works; true when it had failed.
    fn succeeded(&mut self, object: HoldObject) -> bool {
        self.failing.remove(&object).is_some()
    }
}

/// One of the two objects a hold is made of.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) enum HoldObject {
    /// The MutatingAdmissionPolicy.
    Policy,
    /// Its MutatingAdmissionPolicyBinding.
    Binding,
}

/// What the watch on this installation's policies and bindings saw ([`watch_installed`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum PolicyEvent {
    /// A full list of one object type begins (the first, or again after the watch expired).
    Listing(HoldObject),
    /// An object exists at this resourceVersion: listed, created or changed.
    Present {
        object: HoldObject,
        name: String,
        version: String,
    },
    /// The list begun by [`PolicyEvent::Listing`] is complete.
    Listed(HoldObject),
    /// An object was deleted, or lost the labels that make it this installation's.
    Gone { object: HoldObject, name: String },
}

/// The resourceVersions of a hold's policy and binding (`None`: not there, or not known).
#[derive(Debug, Clone, Default, PartialEq)]
struct Versions {
    policy: Option<String>,
    binding: Option<String>,
}

impl Versions {
    fn of(&self, object: HoldObject) -> Option<&str> {
        match object {
            HoldObject::Policy => self.policy.as_deref(),
            HoldObject::Binding => self.binding.as_deref(),
        }
    }

    fn set(&mut self, object: HoldObject, version: Option<String>) {
        match object {
            HoldObject::Policy => self.policy = version,
            HoldObject::Binding => self.binding = version,
        }
    }
}

/// A hold as this operator last applied it, and the resourceVersions the API server answered with: a
/// version seen later that differs means someone else changed or deleted it.
#[derive(Debug, Clone, PartialEq)]
struct Installed {
    /// What was applied; `None` for an earlier run's leftover (its content unknown: applied again if wanted).
    hold: Option<HoldPolicy>,
    /// The versions after the apply (or as last listed).
    versions: Versions,
    /// The checks namespace of another installation that applied its own hold over this one: reported, and
    /// looked at again at every sync until it is gone.
    taken_over_by: Option<String>,
}

impl Installed {
    /// An earlier run's leftover: nothing known of it.
    const UNKNOWN: Self = Self {
        hold: None,
        versions: Versions {
            policy: None,
            binding: None,
        },
        taken_over_by: None,
    };
}

/// One hold as the API server has it, listed.
#[derive(Debug, Clone, Default)]
struct Found {
    /// The versions listed; `None` for an object that is not there.
    versions: Versions,
    /// The field managers other than this operator's that own fields of either.
    others: BTreeSet<String>,
}

impl Found {
    /// How someone else changed it, if they did: half of it deleted, or fields written by another manager.
    fn tampering(&self) -> Option<Tampering> {
        if self.versions.policy.is_none() || self.versions.binding.is_none() {
            Some(Tampering::Deleted)
        } else if self.others.is_empty() {
            None
        } else {
            Some(Tampering::ChangedBy(self.others.iter().cloned().collect()))
        }
    }

    /// `hold`, installed at the versions listed.
    fn as_installed(&self, hold: HoldPolicy) -> Installed {
        Installed {
            hold: Some(hold),
            versions: self.versions.clone(),
            taken_over_by: None,
        }
    }
}

/// How a hold was changed behind the operator's back.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Tampering {
    /// Its policy, its binding or both were deleted.
    Deleted,
    /// These field managers own fields of it.
    ChangedBy(Vec<String>),
    /// Another installation (its checks in this namespace) applied its own over it.
    TakenOver(String),
}

impl std::fmt::Display for Tampering {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Deleted => formatter.write_str("deleted"),
            Self::ChangedBy(managers) => write!(formatter, "changed by {}", managers.join(", ")),
            Self::TakenOver(other) => {
                write!(formatter, "taken over by the installation in {other}")
            }
        }
    }
}

/// What a watch event on one of the installation's policies or bindings says, if anything.
fn policy_event(
    object: HoldObject,
    event: watcher::Event<PartialObjectMeta<DynamicObject>>,
) -> Option<PolicyEvent> {
    Some(match event {
        watcher::Event::Init => PolicyEvent::Listing(object),
        watcher::Event::InitDone => PolicyEvent::Listed(object),
        watcher::Event::InitApply(meta) | watcher::Event::Apply(meta) => PolicyEvent::Present {
            object,
            version: meta.resource_version()?,
            name: meta.name_any(),
        },
        watcher::Event::Delete(meta) => PolicyEvent::Gone {
            object,
            name: meta.name_any(),
        },
    })
}

/// The policies the operator has installed, kept in step with the gated kinds' switches, and put back when
/// someone else deletes or changes them while the operator runs (an `argocd` prune, a mistaken
/// uninstall): a deleted hold would let the next object roll out unchecked.
pub(crate) struct AdmissionHolds {
    policies: Api<DynamicObject>,
    bindings: Api<DynamicObject>,
    /// The same, for their metadata only (what the watch reads).
    policy_metadata: Api<PartialObjectMeta<DynamicObject>>,
    binding_metadata: Api<PartialObjectMeta<DynamicObject>>,
    /// The installation's label value ([`INSTALLATION_LABEL`]).
    installation: String,
    /// What is installed, by name; `None` until the leftovers of an earlier run were listed.
    installed: Option<BTreeMap<String, Installed>>,
    /// Set when the watch saw something this operator did not do: the next sync lists what is there and
    /// puts back what someone else changed.
    recheck: bool,
    /// No recheck is due before this: set for [`RECHECK_PAUSE`] after a recheck that put something back
    /// or failed.
    not_before: Option<Instant>,
    /// The names seen so far by a list in progress, by object type.
    listing: HashMap<HoldObject, BTreeSet<String>>,
    /// The holds put back since [`Self::take_put_back`] was last called, with what was done to them.
    put_back: Vec<(String, String)>,
}

impl AdmissionHolds {
    /// Installs nothing yet. `installation` names this operator's installation: the namespace of its check
    /// ConfigMaps, or `all-namespaces`.
    pub fn new(client: &Client, installation: String) -> Self {
        let resource = |kind: &str, plural: &str| {
            ApiResource::from_gvk_with_plural(
                &kube::api::GroupVersionKind::gvk(POLICY_API.0, POLICY_API.1, kind),
                plural,
            )
        };
        let policy = resource("MutatingAdmissionPolicy", "mutatingadmissionpolicies");
        let binding = resource(
            "MutatingAdmissionPolicyBinding",
            "mutatingadmissionpolicybindings",
        );
        Self {
            policies: Api::all_with(client.clone(), &policy),
            bindings: Api::all_with(client.clone(), &binding),
            policy_metadata: Api::all_with(client.clone(), &policy),
            binding_metadata: Api::all_with(client.clone(), &binding),
            installation,
            installed: None,
            recheck: false,
            not_before: None,
            listing: HashMap::new(),
            put_back: Vec::new(),
        }
    }

    /// Makes the installed policies exactly `wanted`: applies what is new or changed and deletes the rest
    /// (on the first call, also what an earlier run left behind). After [`Self::notice`] saw a change that
    /// was not this operator's, what is there is listed again, and a hold whose policy or binding is missing,
    /// or has fields another field manager owns, is applied again and logged; one written by another replica
    /// of this operator (the same field manager) is left as it is. Returns the problems, by policy name;
    /// what failed is tried again at the next call.
    ///
    /// `pending_groups` are the API groups of kinds still wanted whose holds cannot be made yet (their
    /// controller is not running: at start, or while discovery does not serve them): an earlier run's hold
    /// in one of those groups is left in place, not deleted, so that a restart or a new leader never leaves
    /// a gated kind unheld for a moment.
    pub async fn sync(
        &mut self,
        wanted: Vec<HoldPolicy>,
        pending_groups: &BTreeSet<String>,
    ) -> Vec<(String, String)> {
        let mut problems = Vec::new();
        let recheck = std::mem::take(&mut self.recheck);
        let (installed, found) = match self.installed.take() {
            Some(known) if !recheck => (known, None),
            known => match self.found().await {
                Ok(found) => {
                    let mut merged = known.unwrap_or_default();
                    for name in found.keys() {
                        merged.entry(name.clone()).or_insert(Installed::UNKNOWN);
                    }
                    (merged, Some(found))
                }
                // Hold at admission is off and the operator may not read policies: it installed none.
                Err(kube::Error::Api(status))
                    if status.code == 403 && wanted.is_empty() && known.is_none() =>
                {
                    tracing::debug!(%status, "cannot list admission policies; none to remove");
                    (BTreeMap::new(), None)
                }
                Err(error) => {
                    problems.push((
                        "admission policies".to_owned(),
                        format!("cannot list them: {}", api_answer(&error)),
                    ));
                    self.installed = known;
                    self.recheck = recheck;
                    self.not_before = Some(Instant::now() + RECHECK_PAUSE);
                    return problems;
                }
            },
        };
        let mut kept = BTreeMap::new();
        let wanted: BTreeMap<String, HoldPolicy> = wanted
            .into_iter()
            .map(|hold| (hold.name.clone(), hold))
            .collect();
        for (name, old) in installed {
            let pending = old.hold.is_none()
                && group_of(&name).is_some_and(|group| pending_groups.contains(group));
            if wanted.contains_key(&name) || pending {
                kept.insert(name, old);
            } else if let Err(error) = self.delete(&name).await {
                problems.push((
                    name.clone(),
                    format!("cannot delete it: {}", api_answer(&error)),
                ));
                kept.insert(name, old);
            } else {
                info!(policy = %name, "admission hold removed");
            }
        }
        for (name, hold) in wanted {
            let previous = kept.remove(&name).unwrap_or(Installed::UNKNOWN);
            let unchanged = previous.hold.as_ref() == Some(&hold);
            // `None`: not listed by this sync; `Some(None)`: listed, and not there.
            let listed = found.as_ref().map(|found| found.get(&name));
            let taken_over = previous.taken_over_by.is_some();
            let tampered = match listed {
                None if unchanged && taken_over => Some(self.absent(&name).await),
                None => None,
                Some(None) if unchanged => Some(self.absent(&name).await),
                Some(None) => Some(Tampering::Deleted),
                Some(Some(listed)) => listed.tampering(),
            };
            if let (true, Some(Tampering::TakenOver(other))) = (unchanged, tampered.clone()) {
                // Putting it back would start a tug of war with the other installation: it is reported.
                problems.push((
                    name.clone(),
                    format!(
                        "another installation of preflight (its checks in namespace {other}) holds the \
                         same kind at admission, with the same policy, and took it over; it is left to \
                         that one: gate the kind from one installation"
                    ),
                ));
                let taken_over_by = Some(other);
                kept.insert(
                    name,
                    Installed {
                        taken_over_by,
                        ..previous
                    },
                );
                continue;
            }
            if unchanged && tampered.is_none() {
                // As this operator (or another replica of it) left it: nothing to put back.
                let current = match listed.flatten() {
                    Some(listed) => listed.as_installed(hold),
                    None => previous,
                };
                kept.insert(name, current);
                continue;
            }
            match self.apply(&hold).await {
                Ok(now) => {
                    match tampered {
                        Some(tampering) if unchanged => {
                            warn!(
                                policy = %name, change = %tampering,
                                "admission hold deleted or changed by someone else; put back"
                            );
                            let note = format!(
                                "admission policy {name} was {tampering} while the operator ran; put back"
                            );
                            self.put_back.push((name.clone(), note));
                            self.not_before = Some(Instant::now() + RECHECK_PAUSE);
                        }
                        _ => info!(policy = %name, "admission hold installed"),
                    }
                    kept.insert(name, now);
                }
                Err(error) => {
                    problems.push((name, format!("cannot install it: {}", api_answer(&error))));
                }
            }
        }
        self.installed = Some(kept);
        problems
    }

    /// The holds the syncs since the last call put back, each with a sentence that says what had been
    /// done to it (to report where the kind's checks are).
    pub fn take_put_back(&mut self) -> Vec<(String, String)> {
        std::mem::take(&mut self.put_back)
    }

    /// When the holds are due to be checked against the API server ([`Self::sync`] then does it), if the
    /// watch saw a change that was not this operator's: at once, or [`RECHECK_PAUSE`] after the last
    /// recheck that put something back or failed, so that two replicas that disagree on a hold (during a
    /// rolling update) put theirs back at that pace, not in a tight loop.
    pub fn recheck_at(&self) -> Option<Instant> {
        self.recheck
            .then(|| self.not_before.unwrap_or_else(Instant::now))
    }

    /// Takes in what the watch on this installation's policies saw ([`watch_installed`]). Returns true when
    /// it is not what this operator last applied (a hold deleted, changed, or missing from a list; an
    /// object it does not know): the next [`Self::sync`] then lists and applies again. Nothing counts
    /// before the first sync.
    pub fn notice(&mut self, event: PolicyEvent) -> bool {
        let Some(installed) = &self.installed else {
            return false;
        };
        let changed = match event {
            PolicyEvent::Listing(object) => {
                self.listing.insert(object, BTreeSet::new());
                false
            }
            PolicyEvent::Present {
                object,
                name,
                version,
            } => {
                let ours = installed
                    .get(&name)
                    .is_some_and(|known| known.versions.of(object) == Some(version.as_str()));
                if let Some(seen) = self.listing.get_mut(&object) {
                    seen.insert(name);
                }
                !ours
            }
            PolicyEvent::Listed(object) => {
                let seen = self.listing.remove(&object).unwrap_or_default();
                installed.keys().any(|name| !seen.contains(name))
            }
            PolicyEvent::Gone { name, .. } => installed.contains_key(&name),
        };
        self.recheck |= changed;
        changed
    }

    /// Watches this installation's policies and bindings (their metadata only, filtered by label on the
    /// server) and sends what it sees to `events`, for [`Self::notice`], until the receiver goes. Needs
    /// `watch` on both; without it, or while the watch fails, a hold deleted or changed by someone else is
    /// put back only when its kind's checks change: said once at warn, with the API server's answer, and
    /// its end at info (the first list after it puts back what changed meanwhile). A watch the API server
    /// expired is listed again at once: said at info.
    pub fn watch_installed(
        &self,
        events: mpsc::Sender<PolicyEvent>,
    ) -> impl Future<Output = ()> + Send + 'static {
        let config = watcher::Config::default().labels(&self.label_selector());
        let watch = |api: &Api<PartialObjectMeta<DynamicObject>>, object: HoldObject| {
            watcher(api.clone(), config.clone())
                .default_backoff()
                .map(move |event| (object, event))
        };
        let mut seen = futures::stream::select(
            watch(&self.policy_metadata, HoldObject::Policy),
            watch(&self.binding_metadata, HoldObject::Binding),
        )
        .boxed();
        async move {
            let mut reports = WatchReports::default();
            while let Some((object, event)) = seen.next().await {
                let event = match event {
                    Ok(event) => {
                        if reports.succeeded(object) {
                            info!(?object, "watching the admission holds again");
                        }
                        event
                    }
                    Err(failure) => {
                        match reports.failed(object, &failure) {
                            WatchReport::Expired => info!(
                                problem = %failure, ?object,
                                "watching the admission holds: the API server expired the watch; \
                                 listing again"
                            ),
                            WatchReport::New => warn!(
                                problem = %failure, ?object,
                                "cannot watch the admission holds (tried again after a backoff): until a \
                                 watch succeeds, one deleted or changed by someone else is put back only \
                                 when its kind's checks change"
                            ),
                            WatchReport::Again => {
                                tracing::debug!(problem = %failure, ?object, "cannot watch the admission holds")
                            }
                        }
                        continue;
                    }
                };
                let Some(event) = policy_event(object, event) else {
                    continue;
                };
                if events.send(event).await.is_err() {
                    return;
                }
            }
        }
    }

    /// What the API server holds of this installation's policies and bindings (an earlier run's, another
    /// replica's, or this one's), by name.
    async fn found(&self) -> Result<BTreeMap<String, Found>, kube::Error> {
        let selector = ListParams::default().labels(&self.label_selector());
        let mut found: BTreeMap<String, Found> = BTreeMap::new();
        for (object, api) in [
            (HoldObject::Policy, &self.policies),
            (HoldObject::Binding, &self.bindings),
        ] {
            for item in api.list_metadata(&selector).await?.items {
                let entry = found.entry(item.name_any()).or_default();
                entry.versions.set(object, item.resource_version());
                let managers = item
                    .managed_fields()
                    .iter()
                    .filter_map(|entry| entry.manager.clone());
                entry
                    .others
                    .extend(managers.filter(|manager| manager != FIELD_MANAGER));
            }
        }
        Ok(found)
    }

    /// Why a hold is not among this installation's: deleted, or taken over by another installation (its
    /// policy labelled with another checks namespace).
    async fn absent(&self, name: &str) -> Tampering {
        let owner = match self.policies.get_metadata_opt(name).await {
            Ok(Some(policy)) => policy.labels().get(INSTALLATION_LABEL).cloned(),
            Ok(None) | Err(_) => None,
        };
        match owner {
            Some(other) if other != self.installation => Tampering::TakenOver(other),
            _ => Tampering::Deleted,
        }
    }

    /// The label selector of this installation's policies and bindings.
    fn label_selector(&self) -> String {
        format!(
            "{}={},{INSTALLATION_LABEL}={}",
            MANAGED_BY.0, MANAGED_BY.1, self.installation
        )
    }

    /// Applies a policy, then its binding (a binding to a missing policy would hold nothing and warn), and
    /// returns what is installed, with the versions the API server gave them.
    async fn apply(&self, hold: &HoldPolicy) -> Result<Installed, kube::Error> {
        let params = PatchParams::apply(FIELD_MANAGER).force();
        let policy = self
            .policies
            .patch(&hold.name, &params, &Patch::Apply(&hold.policy))
            .await?;
        let binding = self
            .bindings
            .patch(&hold.name, &params, &Patch::Apply(&hold.binding))
            .await?;
        Ok(Installed {
            hold: Some(hold.clone()),
            versions: Versions {
                policy: policy.resource_version(),
                binding: binding.resource_version(),
            },
            taken_over_by: None,
        })
    }

    /// Deletes a binding, then its policy; either being gone already is fine.
    async fn delete(&self, name: &str) -> Result<(), kube::Error> {
        for api in [&self.bindings, &self.policies] {
            match api.delete(name, &DeleteParams::default()).await {
                Ok(_) => {}
                Err(kube::Error::Api(status)) if status.code == 404 => {}
                Err(error) => return Err(error),
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use http::{Method, Request, Response, StatusCode};
    use kube::client::Body;
    use tower_test::mock;

    fn deployments() -> ApiResource {
        ApiResource::from_gvk_with_plural(
            &kube::api::GroupVersionKind::gvk("apps", "v1", "Deployment"),
            "deployments",
        )
    }

    fn expression(hold: &HoldPolicy, pointer: &str) -> String {
        hold.policy
            .pointer(pointer)
            .and_then(Value::as_str)
            .unwrap_or_else(|| panic!("no {pointer} in {}", hold.policy))
            .to_owned()
    }

    #[test]
    fn a_failing_watch_of_the_holds_is_said_once_and_an_expired_one_is_routine() {
        use HoldObject::{Binding, Policy};
        let status = |code: u16| {
            watcher::Error::WatchError(Box::new(
                kube::core::Status::failure(&format!("failed with {code}"), "Reason")
                    .with_code(code),
            ))
        };
        let mut reports = WatchReports::default();
        assert_eq!(reports.failed(Policy, &status(410)), WatchReport::Expired);
        assert!(!reports.succeeded(Policy), "an expired watch did not fail");
        let failures = [
            (Policy, 403, WatchReport::New),
            (Policy, 403, WatchReport::Again),
            (Binding, 403, WatchReport::New),
            (Policy, 500, WatchReport::New),
        ];
        for (object, code, report) in failures {
            assert_eq!(
                reports.failed(object, &status(code)),
                report,
                "{object:?} {code}"
            );
        }
        assert!(reports.succeeded(Policy));
        assert!(!reports.succeeded(Policy), "its end is said once");
        assert_eq!(reports.failed(Policy, &status(500)), WatchReport::New);
    }

    #[test]
    fn each_switch_gets_the_cel_that_sets_it() {
        let cases = [
            (
                "field:spec.paused=true,force",
                "!(object.?spec.?paused == optional.of(true))",
                r#"Object{metadata: Object.metadata{annotations: {"preflight.dev/held-at-admission": "field:spec.paused=true,force"}}, spec: Object.spec{paused: true}}"#,
            ),
            (
                "field:spec.template.suspend=yes",
                r#"!(object.?spec.?template.?suspend == optional.of("yes"))"#,
                r#"Object{metadata: Object.metadata{annotations: {"preflight.dev/held-at-admission": "field:spec.template.suspend=yes"}}, spec: Object.spec{template: Object.spec.template{suspend: "yes"}}}"#,
            ),
            (
                "annotation:example.com/paused=true",
                r#"!(object.metadata.?annotations[?"example.com/paused"] == optional.of("true"))"#,
                r#"Object{metadata: Object.metadata{annotations: {"example.com/paused": "true", "preflight.dev/held-at-admission": "annotation:example.com/paused=true"}}}"#,
            ),
        ];
        for (switch, not_paused, mutation) in cases {
            let switch = PauseSwitch::parse(switch).expect("valid switch");
            let hold = hold_policy(&deployments(), &switch, None, "preflight-system")
                .expect("can be held");
            assert_eq!(hold.name, "preflight-hold.deployments.apps");
            assert_eq!(
                expression(&hold, "/spec/matchConditions/0/expression"),
                not_paused,
                "{switch}"
            );
            assert_eq!(
                expression(&hold, "/spec/mutations/0/applyConfiguration/expression"),
                mutation,
                "{switch}"
            );
            assert_eq!(hold.binding["spec"]["policyName"], json!(hold.name));
            assert_eq!(
                hold.binding["metadata"]["labels"][INSTALLATION_LABEL],
                "preflight-system"
            );
        }
    }

    #[test]
    fn an_update_is_held_when_it_changes_data_other_than_the_switch() {
        let spec_paused = PauseSwitch::parse("field:spec.paused=true").expect("valid");
        assert_eq!(
            created_or_changed(&spec_paused),
            "request.operation == 'CREATE' || \
             object.exists(k, !(k in [\"metadata\", \"status\", \"apiVersion\", \"kind\", \"spec\"]) && (!(k in oldObject) || object[k] != oldObject[k])) || \
             oldObject.exists(k, !(k in [\"metadata\", \"status\", \"apiVersion\", \"kind\", \"spec\"]) && !(k in object)) || \
             ((\"spec\" in object) != (\"spec\" in oldObject)) || \
             (\"spec\" in object && (object[\"spec\"].exists(k, !(k in [\"paused\"]) && (!(k in oldObject[\"spec\"]) || object[\"spec\"][k] != oldObject[\"spec\"][k])) || \
             oldObject[\"spec\"].exists(k, !(k in [\"paused\"]) && !(k in object[\"spec\"]))))"
        );
        let annotation = PauseSwitch::parse("annotation:a/b=c").expect("valid");
        assert_eq!(
            created_or_changed(&annotation),
            "request.operation == 'CREATE' || \
             object.exists(k, !(k in [\"metadata\", \"status\", \"apiVersion\", \"kind\"]) && (!(k in oldObject) || object[k] != oldObject[k])) || \
             oldObject.exists(k, !(k in [\"metadata\", \"status\", \"apiVersion\", \"kind\"]) && !(k in object))"
        );
    }

    #[test]
    fn a_switch_an_admission_policy_cannot_write_is_refused_with_its_reason() {
        for (switch, reason) in [
            ("field:spec.my-flag=true", "`my-flag`"),
            ("field:spec.in=true", "`in`"),
            ("field:spec.paused=null", "null"),
        ] {
            let switch = PauseSwitch::parse(switch).expect("valid switch");
            let problem = hold_policy(&deployments(), &switch, None, "preflight-system")
                .expect_err("cannot be held");
            assert!(problem.contains(reason), "{switch}: {problem}");
        }
    }

    #[test]
    fn a_staged_kind_binds_the_policy_to_its_selector_only() {
        let switch = PauseSwitch::parse("field:spec.paused=true").unwrap();
        let everything = hold_policy(&deployments(), &switch, None, "ops").unwrap();
        assert!(everything.binding["spec"].get("matchResources").is_none());
        let staging = ObjectSelector::parse(
            "matchLabels: {env: staging}\nmatchExpressions: [{key: tier, operator: Exists}]",
        )
        .unwrap();
        let staged = hold_policy(&deployments(), &switch, Some(&staging), "ops").unwrap();
        assert_eq!(
            staged.binding["spec"]["matchResources"]["objectSelector"],
            json!({
                "matchLabels": {"env": "staging"},
                "matchExpressions": [{"key": "tier", "operator": "Exists"}],
            })
        );
    }

    #[test]
    fn the_core_group_is_named_core() {
        let pods = ApiResource::from_gvk_with_plural(
            &kube::api::GroupVersionKind::gvk("", "v1", "Pod"),
            "pods",
        );
        assert_eq!(policy_name(&pods), "preflight-hold.pods.core");
    }

    type Handle = mock::Handle<Request<Body>, Response<Body>>;

    fn respond(status: StatusCode, body: Value) -> Response<Body> {
        Response::builder()
            .status(status)
            .body(Body::from(serde_json::to_vec(&body).unwrap()))
            .unwrap()
    }

    fn forbidden() -> Response<Body> {
        respond(
            StatusCode::FORBIDDEN,
            json!({"kind": "Status", "apiVersion": "v1", "status": "Failure", "reason": "Forbidden",
                "message": "mutatingadmissionpolicies is forbidden", "code": 403}),
        )
    }

    fn not_found() -> Response<Body> {
        respond(
            StatusCode::NOT_FOUND,
            json!({"kind": "Status", "apiVersion": "v1", "status": "Failure", "reason": "NotFound",
                "message": "not found", "code": 404}),
        )
    }

    fn empty_list() -> Response<Body> {
        respond(
            StatusCode::OK,
            json!({"apiVersion": "meta.k8s.io/v1", "kind": "PartialObjectMetadataList",
                "metadata": {}, "items": []}),
        )
    }

    /// Answers the next request, which must be `method` on a path starting with `path`; returns its query.
    async fn answer(
        handle: &mut Handle,
        method: Method,
        path: &str,
        response: Response<Body>,
    ) -> String {
        let (request, send) = handle.next_request().await.expect("a request");
        assert_eq!(request.method(), method, "{}", request.uri());
        assert!(request.uri().path().starts_with(path), "{}", request.uri());
        send.send_response(response);
        request.uri().query().unwrap_or_default().to_owned()
    }

    /// No kind waits for its controller.
    const NONE_PENDING: &BTreeSet<String> = &BTreeSet::new();

    const POLICIES: &str = "/apis/admissionregistration.k8s.io/v1/mutatingadmissionpolicies";
    const BINDINGS: &str = "/apis/admissionregistration.k8s.io/v1/mutatingadmissionpolicybindings";

    #[tokio::test]
    async fn turned_off_without_the_rbac_it_asks_once_and_never_again() {
        let (service, mut handle) = mock::pair::<Request<Body>, Response<Body>>();
        let mut holds = AdmissionHolds::new(&Client::new(service, "default"), "ops".into());
        let server = tokio::spawn(async move {
            answer(&mut handle, Method::GET, POLICIES, forbidden()).await;
            handle
        });
        assert!(
            holds.sync(Vec::new(), NONE_PENDING).await.is_empty(),
            "not a problem"
        );
        let _handle = server.await.unwrap();
        // A request now would never be answered: the sync would not finish.
        let again = tokio::time::timeout(
            std::time::Duration::from_millis(200),
            holds.sync(Vec::new(), NONE_PENDING),
        );
        assert_eq!(
            again.await.ok(),
            Some(Vec::new()),
            "the second sync sends nothing"
        );
    }

    #[tokio::test]
    async fn installs_once_then_removes_what_is_no_longer_wanted() {
        let (service, mut handle) = mock::pair::<Request<Body>, Response<Body>>();
        let mut holds = AdmissionHolds::new(&Client::new(service, "default"), "ops".into());
        let switch = PauseSwitch::parse("field:spec.paused=true").unwrap();
        let hold = hold_policy(&deployments(), &switch, None, "ops").unwrap();
        let name = "preflight-hold.deployments.apps";
        let server = tokio::spawn(async move {
            let query = answer(&mut handle, Method::GET, POLICIES, empty_list()).await;
            assert!(
                query.contains("preflight.dev%2Fchecks-namespace%3Dops"),
                "only this installation's leftovers: {query}"
            );
            answer(&mut handle, Method::GET, BINDINGS, empty_list()).await;
            for api in [POLICIES, BINDINGS] {
                let query = answer(
                    &mut handle,
                    Method::PATCH,
                    &format!("{api}/{name}"),
                    applied(name, "1"),
                )
                .await;
                assert!(
                    query.contains("fieldManager=preflight") && query.contains("force=true"),
                    "{query}"
                );
            }
            for api in [BINDINGS, POLICIES] {
                answer(
                    &mut handle,
                    Method::DELETE,
                    &format!("{api}/{name}"),
                    empty_list(),
                )
                .await;
            }
        });
        assert!(
            holds
                .sync(vec![hold.clone()], NONE_PENDING)
                .await
                .is_empty()
        );
        assert!(
            holds.sync(vec![hold], NONE_PENDING).await.is_empty(),
            "unchanged: nothing sent"
        );
        assert!(holds.sync(Vec::new(), NONE_PENDING).await.is_empty());
        server.await.unwrap();
    }

    /// The object a server-side apply answers with, at `version`.
    fn applied(name: &str, version: &str) -> Response<Body> {
        respond(
            StatusCode::OK,
            json!({"metadata": {"name": name, "resourceVersion": version}}),
        )
    }

    /// A sync that installed the Deployments' hold, its policy at version 1 and its binding at 2.
    async fn installed_holds() -> (AdmissionHolds, HoldPolicy, Handle) {
        let (service, handle) = mock::pair::<Request<Body>, Response<Body>>();
        let mut holds = AdmissionHolds::new(&Client::new(service, "default"), "ops".into());
        let switch = PauseSwitch::parse("field:spec.paused=true").unwrap();
        let hold = hold_policy(&deployments(), &switch, None, "ops").unwrap();
        let listed = [empty_list(), empty_list()];
        let server = serve_install(handle, hold.name.clone(), listed, None, ["1", "2"]);
        assert!(
            holds
                .sync(vec![hold.clone()], NONE_PENDING)
                .await
                .is_empty()
        );
        (holds, hold, server.await.unwrap())
    }

    /// Answers the requests of a sync that installs hold `name`: its list of policies and of bindings with
    /// `listed`, its two applies with an object at `versions`.
    /// `looked_up` answers the read of the policy by name that a recheck sends when the list lacks it.
    fn serve_install(
        mut handle: Handle,
        name: String,
        listed: [Response<Body>; 2],
        looked_up: Option<Response<Body>>,
        versions: [&'static str; 2],
    ) -> tokio::task::JoinHandle<Handle> {
        tokio::spawn(async move {
            let [policies, bindings] = listed;
            answer(&mut handle, Method::GET, POLICIES, policies).await;
            answer(&mut handle, Method::GET, BINDINGS, bindings).await;
            if let Some(looked_up) = looked_up {
                let path = format!("{POLICIES}/{name}");
                answer(&mut handle, Method::GET, &path, looked_up).await;
            }
            for (api, version) in [(POLICIES, versions[0]), (BINDINGS, versions[1])] {
                let path = format!("{api}/{name}");
                answer(&mut handle, Method::PATCH, &path, applied(&name, version)).await;
            }
            handle
        })
    }

    #[tokio::test]
    async fn only_what_the_operator_did_not_do_counts_as_a_change() {
        use HoldObject::{Binding, Policy};
        let name = || "preflight-hold.deployments.apps".to_owned();
        let present = |object, name: String, version: &str| PolicyEvent::Present {
            object,
            name,
            version: version.to_owned(),
        };
        let (service, _handle) = mock::pair::<Request<Body>, Response<Body>>();
        let mut before_sync = AdmissionHolds::new(&Client::new(service, "default"), "ops".into());
        assert!(
            !before_sync.notice(PolicyEvent::Gone {
                object: Policy,
                name: name()
            }),
            "nothing counts before the first sync"
        );
        let cases: Vec<(&str, Vec<PolicyEvent>, bool)> = vec![
            (
                "its own writes, seen",
                vec![present(Policy, name(), "1"), present(Binding, name(), "2")],
                false,
            ),
            (
                "the policy changed",
                vec![present(Policy, name(), "7")],
                true,
            ),
            (
                "the binding at the policy's version",
                vec![present(Binding, name(), "1")],
                true,
            ),
            (
                "the binding deleted",
                vec![PolicyEvent::Gone {
                    object: Binding,
                    name: name(),
                }],
                true,
            ),
            (
                "an object it does not know",
                vec![present(Policy, "preflight-hold.jobs.batch".into(), "3")],
                true,
            ),
            (
                "a deletion of one it does not keep",
                vec![PolicyEvent::Gone {
                    object: Policy,
                    name: "preflight-hold.jobs.batch".into(),
                }],
                false,
            ),
            (
                "a list that shows it",
                vec![
                    PolicyEvent::Listing(Policy),
                    present(Policy, name(), "1"),
                    PolicyEvent::Listed(Policy),
                ],
                false,
            ),
            (
                "a list without it (deleted while the watch was down)",
                vec![PolicyEvent::Listing(Binding), PolicyEvent::Listed(Binding)],
                true,
            ),
        ];
        for (case, events, changed) in cases {
            let (mut holds, _, _handle) = installed_holds().await;
            let mut noticed = false;
            for event in events {
                noticed |= holds.notice(event);
            }
            assert_eq!(noticed, changed, "{case}");
        }
    }

    #[tokio::test]
    async fn a_hold_deleted_by_someone_else_is_applied_again_once() {
        let (mut holds, hold, handle) = installed_holds().await;
        assert!(holds.notice(PolicyEvent::Gone {
            object: HoldObject::Policy,
            name: hold.name.clone(),
        }));
        let listed = [empty_list(), empty_list()];
        let server = serve_install(
            handle,
            hold.name.clone(),
            listed,
            Some(not_found()),
            ["5", "2"],
        );
        assert!(
            holds
                .sync(vec![hold.clone()], NONE_PENDING)
                .await
                .is_empty()
        );
        let _handle = server.await.unwrap();
        assert_eq!(
            holds.take_put_back(),
            vec![(
                hold.name.clone(),
                format!(
                    "admission policy {} was deleted while the operator ran; put back",
                    hold.name
                )
            )]
        );
        assert!(holds.take_put_back().is_empty(), "each is reported once");
        assert!(
            !holds.notice(PolicyEvent::Present {
                object: HoldObject::Policy,
                name: hold.name.clone(),
                version: "5".into(),
            }),
            "the version it put back is its own"
        );
        // A request now would never be answered: the sync would not finish.
        let again = tokio::time::timeout(
            std::time::Duration::from_millis(200),
            holds.sync(vec![hold.clone()], NONE_PENDING),
        );
        assert_eq!(
            again.await.ok(),
            Some(Vec::new()),
            "nothing changed since: nothing sent"
        );
        assert_eq!(holds.recheck_at(), None, "nothing is due");
        assert!(holds.notice(PolicyEvent::Gone {
            object: HoldObject::Binding,
            name: hold.name.clone(),
        }));
        let paced = holds.recheck_at().expect("a recheck is due");
        assert!(
            paced > Instant::now() + RECHECK_PAUSE / 2,
            "after putting something back, the next recheck waits"
        );
    }

    /// A metadata list of one object `name` at `version`, whose fields `managers` own.
    fn listed(name: &str, version: &str, managers: &[&str]) -> Response<Body> {
        let managed: Vec<Value> = managers
            .iter()
            .map(|manager| json!({"manager": manager, "operation": "Apply"}))
            .collect();
        respond(
            StatusCode::OK,
            json!({"apiVersion": "meta.k8s.io/v1", "kind": "PartialObjectMetadataList", "metadata": {},
                "items": [{"apiVersion": "meta.k8s.io/v1", "kind": "PartialObjectMetadata",
                    "metadata": {"name": name, "resourceVersion": version, "managedFields": managed}}]}),
        )
    }

    #[tokio::test]
    async fn a_recheck_puts_back_only_what_another_field_manager_wrote() {
        // Another replica of the operator rewrote the policy (version 9): it stays as it is, and version 9
        // is known from then on.
        let (mut holds, hold, mut handle) = installed_holds().await;
        let name = hold.name.clone();
        let policy_at_9 = || PolicyEvent::Present {
            object: HoldObject::Policy,
            name: hold.name.clone(),
            version: "9".into(),
        };
        assert!(holds.notice(policy_at_9()));
        let server = tokio::spawn(async move {
            answer(
                &mut handle,
                Method::GET,
                POLICIES,
                listed(&name, "9", &["preflight"]),
            )
            .await;
            answer(
                &mut handle,
                Method::GET,
                BINDINGS,
                listed(&name, "2", &["preflight"]),
            )
            .await;
            handle
        });
        let sync = tokio::time::timeout(
            std::time::Duration::from_millis(500),
            holds.sync(vec![hold.clone()], NONE_PENDING),
        );
        assert_eq!(sync.await.ok(), Some(Vec::new()), "listed, nothing applied");
        let _handle = server.await.unwrap();
        assert!(!holds.notice(policy_at_9()), "the version listed is known");
        holds.notice(PolicyEvent::Gone {
            object: HoldObject::Binding,
            name: hold.name.clone(),
        });
        assert!(
            holds.recheck_at().expect("a recheck is due") <= Instant::now(),
            "a recheck that put nothing back does not delay the next"
        );

        // Someone edited it (their field manager owns a field): it is applied again.
        let (mut holds, hold, handle) = installed_holds().await;
        let name = hold.name.clone();
        assert!(holds.notice(policy_at_9()));
        let edited = [
            listed(&name, "9", &["preflight", "kubectl-edit"]),
            listed(&name, "2", &["preflight"]),
        ];
        let server = serve_install(handle, name, edited, None, ["10", "2"]);
        assert!(holds.sync(vec![hold], NONE_PENDING).await.is_empty());
        server.await.unwrap();
    }

    #[tokio::test]
    async fn an_earlier_runs_hold_of_a_kind_not_running_yet_stays() {
        let (service, handle) = mock::pair::<Request<Body>, Response<Body>>();
        let mut holds = AdmissionHolds::new(&Client::new(service, "default"), "ops".into());
        let switch = PauseSwitch::parse("field:spec.paused=true").unwrap();
        let hold = hold_policy(&deployments(), &switch, None, "ops").unwrap();
        let (kept, gone) = (
            "preflight-hold.deployments.apps",
            "preflight-hold.widgets.example.com",
        );
        let leftovers = move || {
            let item = |name| json!({"metadata": {"name": name, "resourceVersion": "4"}});
            respond(
                StatusCode::OK,
                json!({"apiVersion": "meta.k8s.io/v1", "kind": "PartialObjectMetadataList",
                    "metadata": {}, "items": [item(kept), item(gone)]}),
            )
        };
        let server = tokio::spawn(async move {
            let mut handle = handle;
            answer(&mut handle, Method::GET, POLICIES, leftovers()).await;
            answer(&mut handle, Method::GET, BINDINGS, leftovers()).await;
            for api in [BINDINGS, POLICIES] {
                let path = format!("{api}/{gone}");
                answer(&mut handle, Method::DELETE, &path, empty_list()).await;
            }
            handle
        });
        // At start no controller runs yet: Deployments are wanted, their group pending.
        let pending = BTreeSet::from(["apps".to_owned()]);
        let first = tokio::time::timeout(
            std::time::Duration::from_millis(500),
            holds.sync(Vec::new(), &pending),
        );
        assert_eq!(
            first.await.ok(),
            Some(Vec::new()),
            "only the hold of a group no kind is pending in is deleted"
        );
        let handle = server.await.unwrap();
        // Once the Deployments' controller runs, their hold is applied over the leftover.
        let server = tokio::spawn(async move {
            let mut handle = handle;
            for api in [POLICIES, BINDINGS] {
                let path = format!("{api}/{kept}");
                answer(&mut handle, Method::PATCH, &path, applied(kept, "5")).await;
            }
        });
        let applied_over = holds.sync(vec![hold], NONE_PENDING).await;
        assert!(applied_over.is_empty());
        server.await.unwrap();
    }

    #[tokio::test]
    async fn a_hold_another_installation_took_over_is_reported_not_fought_for() {
        let (mut holds, hold, mut handle) = installed_holds().await;
        let name = hold.name.clone();
        // The other installation's apply moved the labels: to this one's watch, its hold is gone.
        assert!(holds.notice(PolicyEvent::Gone {
            object: HoldObject::Policy,
            name: name.clone(),
        }));
        let server = tokio::spawn(async move {
            answer(&mut handle, Method::GET, POLICIES, empty_list()).await;
            answer(&mut handle, Method::GET, BINDINGS, empty_list()).await;
            let theirs = respond(
                StatusCode::OK,
                json!({"apiVersion": "meta.k8s.io/v1", "kind": "PartialObjectMetadata",
                    "metadata": {"name": name, "resourceVersion": "8",
                        "labels": {INSTALLATION_LABEL: "team-b"}}}),
            );
            answer(
                &mut handle,
                Method::GET,
                &format!("{POLICIES}/{name}"),
                theirs,
            )
            .await;
            handle
        });
        let recheck = tokio::time::timeout(
            std::time::Duration::from_millis(500),
            holds.sync(vec![hold.clone()], NONE_PENDING),
        );
        let problems = recheck.await.expect("nothing applied over theirs");
        let handle = server.await.unwrap();
        assert_eq!(problems.len(), 1, "{problems:?}");
        assert!(
            problems[0].1.contains("namespace team-b")
                && problems[0]
                    .1
                    .contains("gate the kind from one installation"),
            "{problems:?}"
        );
        // Every later sync looks again; once the other installation's hold is gone, this one's is applied.
        let name = hold.name.clone();
        let server = tokio::spawn(async move {
            let mut handle = handle;
            let path = format!("{POLICIES}/{name}");
            answer(&mut handle, Method::GET, &path, not_found()).await;
            for api in [POLICIES, BINDINGS] {
                let path = format!("{api}/{name}");
                answer(&mut handle, Method::PATCH, &path, applied(&name, "9")).await;
            }
        });
        assert!(holds.sync(vec![hold], NONE_PENDING).await.is_empty());
        server.await.unwrap();
    }
}
