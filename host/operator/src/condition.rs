//! The `Preflight` condition: built from a gate summary, compared with what the object already says (no write
//! when nothing changed), and merged into a conditions list without touching anyone else's entries.

use crate::summary::Summary;
use kube::ResourceExt;
use kube::api::DynamicObject;
use serde::{Deserialize, Serialize};
use std::time::SystemTime;

/// The condition type the gate owns.
pub const CONDITION_TYPE: &str = "Preflight";
/// The annotation holding the condition (as JSON) on kinds without a status subresource.
pub const CONDITION_ANNOTATION: &str = "preflight.dev/condition";
/// The condition type of the monitored checks' verdict (`mode: monitor`): what they would decide, never
/// what holds the object.
pub const MONITOR_CONDITION_TYPE: &str = "PreflightMonitor";
/// The annotation holding the monitor condition on kinds without a status subresource.
pub const MONITOR_CONDITION_ANNOTATION: &str = "preflight.dev/monitor-condition";

/// Which of the operator's two conditions: the verdict that decides, or the monitored checks' verdict.
/// Both have the same shape, rules and placement; only their type and annotation differ.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ConditionType {
    /// `Preflight`: the enforced checks' verdict.
    Preflight,
    /// `PreflightMonitor`: the monitored checks' verdict.
    Monitor,
}

impl ConditionType {
    /// Both types.
    pub const ALL: [Self; 2] = [Self::Preflight, Self::Monitor];

    /// The condition's `type`.
    pub fn name(self) -> &'static str {
        match self {
            Self::Preflight => CONDITION_TYPE,
            Self::Monitor => MONITOR_CONDITION_TYPE,
        }
    }

    /// The annotation that holds it where the status cannot.
    pub fn annotation(self) -> &'static str {
        match self {
            Self::Preflight => CONDITION_ANNOTATION,
            Self::Monitor => MONITOR_CONDITION_ANNOTATION,
        }
    }

    /// The condition to write after a gate result, or `None` when `existing` already says the same (so a
    /// steady state costs no writes). `lastTransitionTime` moves only when the status changes.
    ///
    /// Kinds whose condition type has no `observedGeneration` (Deployment, Job and the other built-in kinds
    /// with their own condition types) lose the field on write: once the existing condition shows it was
    /// dropped, it is neither written nor compared, so those kinds converge too instead of being rewritten on
    /// every evaluation.
    pub fn next(
        self,
        existing: Option<&PreflightCondition>,
        summary: &Summary,
        generation: Option<i64>,
        now: SystemTime,
    ) -> Option<PreflightCondition> {
        let status = if summary.proceed { "True" } else { "False" };
        let last_transition_time = match existing {
            Some(existing) if existing.status == status => existing.last_transition_time.clone(),
            _ => humantime::format_rfc3339_seconds(now).to_string(),
        };
        let desired = PreflightCondition {
            type_: self.name().to_owned(),
            status: status.to_owned(),
            reason: summary.reason.clone(),
            message: summary.message.clone(),
            observed_generation: generation
                .filter(|_| existing.is_none_or(|existing| existing.observed_generation.is_some())),
            last_transition_time,
        };
        (existing != Some(&desired)).then_some(desired)
    }
}

/// A `metav1.Condition` of type `Preflight` (or `PreflightMonitor`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PreflightCondition {
    /// `Preflight` (or `PreflightMonitor`).
    #[serde(rename = "type")]
    pub type_: String,
    /// `True` when the object may be reconciled, else `False`.
    pub status: String,
    /// The deciding check's reason.
    pub reason: String,
    /// What the deciding check said.
    pub message: String,
    /// The generation the gate evaluated.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,
    /// When `status` last changed (RFC 3339, seconds).
    pub last_transition_time: String,
}

impl PreflightCondition {
    /// Whether the object may proceed according to this condition.
    pub fn is_true(&self) -> bool {
        self.status == "True"
    }
}

/// Whether going from `old` to `new` is worth an Event: what the condition says changed (its status, reason
/// or message), not merely the generation it was checked at.
pub fn is_transition(old: Option<&PreflightCondition>, new: &PreflightCondition) -> bool {
    old.is_none_or(|old| {
        old.status != new.status || old.reason != new.reason || old.message != new.message
    })
}

/// The `Preflight` condition `object` carries: in its annotation when it has one (kinds without a status
/// subresource), else in `status.conditions`. What another controller reads to know whether it may proceed.
pub fn condition_of(object: &DynamicObject) -> Option<PreflightCondition> {
    carried(object, ConditionType::Preflight)
}

/// The `PreflightMonitor` condition `object` carries (where [`condition_of`] looks): what the kind's
/// monitored checks would decide. Informational: it never holds the object.
pub fn monitor_condition_of(object: &DynamicObject) -> Option<PreflightCondition> {
    carried(object, ConditionType::Monitor)
}

fn carried(object: &DynamicObject, condition_type: ConditionType) -> Option<PreflightCondition> {
    let placement = if object
        .annotations()
        .contains_key(condition_type.annotation())
    {
        Placement::Annotation
    } else {
        Placement::Status
    };
    existing_condition(object, placement, condition_type)
}

/// Where a kind's condition lives.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Placement {
    /// In `status.conditions`, through the status subresource.
    Status,
    /// In the condition type's annotation.
    Annotation,
}

/// The condition of `condition_type` the object carries now, where its kind keeps it.
pub(crate) fn existing_condition(
    object: &DynamicObject,
    placement: Placement,
    condition_type: ConditionType,
) -> Option<PreflightCondition> {
    match placement {
        Placement::Status => find(object.data.pointer("/status/conditions"), condition_type)
            .or_else(|| annotated_condition(object, condition_type)),
        Placement::Annotation => annotated_condition(object, condition_type),
    }
}

/// The condition in the condition type's annotation: where a kind without a status subresource keeps it,
/// and where it goes on a kind whose status has no conditions list (a CronJob's: the API server prunes a
/// condition written there).
pub(crate) fn annotated_condition(
    object: &DynamicObject,
    condition_type: ConditionType,
) -> Option<PreflightCondition> {
    object
        .annotations()
        .get(condition_type.annotation())
        .and_then(|text| serde_json::from_str(text).ok())
}

/// Finds the entry of `condition_type` in a conditions list (as JSON).
pub fn find(
    conditions: Option<&serde_json::Value>,
    condition_type: ConditionType,
) -> Option<PreflightCondition> {
    conditions?
        .as_array()?
        .iter()
        .find(|condition| is_of(condition, condition_type.name()))
        .and_then(|condition| PreflightCondition::deserialize(condition).ok())
}

/// The conditions list with `ours` in place of the entry of its type (appended when absent); every other
/// entry is kept verbatim and in place.
pub fn merge(
    conditions: Option<&serde_json::Value>,
    ours: &PreflightCondition,
) -> serde_json::Value {
    let ours_json = serde_json::to_value(ours).unwrap_or_default();
    let mut list: Vec<serde_json::Value> = conditions
        .and_then(|conditions| conditions.as_array())
        .cloned()
        .unwrap_or_default();
    match list
        .iter_mut()
        .find(|condition| is_of(condition, &ours.type_))
    {
        Some(entry) => *entry = ours_json,
        None => list.push(ours_json),
    }
    serde_json::Value::Array(list)
}

/// The conditions list without the entry of `condition_type`; every other entry kept verbatim and in place.
pub fn without(
    conditions: Option<&serde_json::Value>,
    condition_type: ConditionType,
) -> serde_json::Value {
    let list = conditions
        .and_then(|conditions| conditions.as_array())
        .map(|list| {
            list.iter()
                .filter(|condition| !is_of(condition, condition_type.name()))
                .cloned()
                .collect()
        })
        .unwrap_or_default();
    serde_json::Value::Array(list)
}

fn is_of(condition: &serde_json::Value, type_name: &str) -> bool {
    condition.get("type").and_then(|t| t.as_str()) == Some(type_name)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;
    use std::time::Duration;

    fn summary(proceed: bool, reason: &str) -> Summary {
        Summary {
            proceed,
            reason: reason.into(),
            message: format!("{reason} message"),
        }
    }

    fn at(seconds: u64) -> SystemTime {
        SystemTime::UNIX_EPOCH + Duration::from_secs(1_800_000_000 + seconds)
    }

    #[test]
    fn writes_only_what_changed_and_moves_the_transition_time_on_status_changes() {
        let first = ConditionType::Preflight
            .next(None, &summary(false, "DependencyMissing"), Some(3), at(0))
            .unwrap();
        assert_eq!(first.status, "False");
        assert_eq!(first.last_transition_time, "2027-01-15T08:00:00Z");
        assert_eq!(
            ConditionType::Preflight.next(
                Some(&first),
                &summary(false, "DependencyMissing"),
                Some(3),
                at(60)
            ),
            None
        );
        let new_generation = ConditionType::Preflight
            .next(
                Some(&first),
                &summary(false, "DependencyMissing"),
                Some(4),
                at(60),
            )
            .unwrap();
        assert_eq!(
            new_generation.last_transition_time,
            first.last_transition_time
        );
        assert!(!is_transition(Some(&first), &new_generation));
        let new_reason = ConditionType::Preflight
            .next(
                Some(&first),
                &summary(false, "WindowClosed"),
                Some(3),
                at(60),
            )
            .unwrap();
        assert_eq!(new_reason.last_transition_time, first.last_transition_time);
        assert!(is_transition(Some(&first), &new_reason));
        let proceed = ConditionType::Preflight
            .next(
                Some(&first),
                &summary(true, "DependenciesAvailable"),
                Some(3),
                at(60),
            )
            .unwrap();
        assert_eq!(proceed.last_transition_time, "2027-01-15T08:01:00Z");
        assert!(proceed.is_true() && is_transition(Some(&first), &proceed));
        let new_message = PreflightCondition {
            message: "waiting for postgres".into(),
            ..first.clone()
        };
        assert!(
            is_transition(Some(&first), &new_message),
            "news with the same reason is news"
        );
    }

    #[test]
    fn a_kind_that_drops_the_observed_generation_converges() {
        let written = ConditionType::Preflight
            .next(None, &summary(true, "Ok"), Some(3), at(0))
            .unwrap();
        assert_eq!(
            written.observed_generation,
            Some(3),
            "offered on first write"
        );
        let kept_by_the_server = PreflightCondition {
            observed_generation: None,
            ..written
        };
        for generation in [Some(3), Some(4)] {
            assert_eq!(
                ConditionType::Preflight.next(
                    Some(&kept_by_the_server),
                    &summary(true, "Ok"),
                    generation,
                    at(60)
                ),
                None,
                "no rewrite for a field the kind cannot hold"
            );
        }
        let turned = ConditionType::Preflight
            .next(
                Some(&kept_by_the_server),
                &summary(false, "Missing"),
                Some(4),
                at(60),
            )
            .unwrap();
        assert_eq!(turned.observed_generation, None);
    }

    #[test]
    fn merges_without_touching_other_conditions() {
        let ours = ConditionType::Preflight
            .next(None, &summary(true, "Ok"), None, at(0))
            .unwrap();
        let others = json!([
            {"type": "Ready", "status": "True", "reason": "Reconciled", "message": "", "lastTransitionTime": "2026-01-01T00:00:00Z", "custom": 1},
            {"type": "Preflight", "status": "False", "reason": "Old", "message": "", "lastTransitionTime": "2026-01-01T00:00:00Z"},
            {"type": "Synced", "status": "Unknown"},
        ]);
        let merged = merge(Some(&others), &ours);
        assert_eq!(merged[0], others[0]);
        assert_eq!(merged[2], others[2]);
        assert_eq!(
            find(Some(&merged), ConditionType::Preflight),
            Some(ours.clone())
        );
        let appended = merge(Some(&json!([others[0].clone()])), &ours);
        assert_eq!(appended.as_array().unwrap().len(), 2);
        assert_eq!(
            merge(None, &ours),
            json!([serde_json::to_value(&ours).unwrap()])
        );
        assert_eq!(
            find(Some(&json!([{"type": "Ready"}])), ConditionType::Preflight),
            None
        );
    }
}
