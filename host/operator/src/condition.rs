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

/// A `metav1.Condition` of type `Preflight`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PreflightCondition {
    /// Always `Preflight`.
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

/// The condition to write after a gate result, or `None` when `existing` already says the same (so a
/// steady state costs no writes). `lastTransitionTime` moves only when the status changes.
///
/// Kinds whose condition type has no `observedGeneration` (Deployment, Job and the other built-in kinds
/// with their own condition types) lose the field on write: once the existing condition shows it was
/// dropped, it is neither written nor compared, so those kinds converge too instead of being rewritten on
/// every evaluation.
pub fn next(
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
        type_: CONDITION_TYPE.to_owned(),
        status: status.to_owned(),
        reason: summary.reason.clone(),
        message: summary.message.clone(),
        observed_generation: generation
            .filter(|_| existing.is_none_or(|existing| existing.observed_generation.is_some())),
        last_transition_time,
    };
    (existing != Some(&desired)).then_some(desired)
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
    let placement = if object.annotations().contains_key(CONDITION_ANNOTATION) {
        Placement::Annotation
    } else {
        Placement::Status
    };
    existing_condition(object, placement)
}

/// Where a kind's condition lives.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Placement {
    /// In `status.conditions`, through the status subresource.
    Status,
    /// In the [`CONDITION_ANNOTATION`] annotation.
    Annotation,
}

/// The `Preflight` condition the object carries now, where its kind keeps it.
pub(crate) fn existing_condition(
    object: &DynamicObject,
    placement: Placement,
) -> Option<PreflightCondition> {
    match placement {
        Placement::Status => {
            find(object.data.pointer("/status/conditions")).or_else(|| annotated_condition(object))
        }
        Placement::Annotation => annotated_condition(object),
    }
}

/// The condition in the [`CONDITION_ANNOTATION`] annotation: where a kind without a status subresource keeps
/// it, and where it goes on a kind whose status has no conditions list (a CronJob's: the API server prunes
/// a condition written there).
pub(crate) fn annotated_condition(object: &DynamicObject) -> Option<PreflightCondition> {
    object
        .annotations()
        .get(CONDITION_ANNOTATION)
        .and_then(|text| serde_json::from_str(text).ok())
}

/// Finds the `Preflight` entry of a conditions list (as JSON).
pub fn find(conditions: Option<&serde_json::Value>) -> Option<PreflightCondition> {
    conditions?
        .as_array()?
        .iter()
        .find(|condition| condition.get("type").and_then(|t| t.as_str()) == Some(CONDITION_TYPE))
        .and_then(|condition| PreflightCondition::deserialize(condition).ok())
}

/// The conditions list with `ours` in place of the `Preflight` entry (appended when absent); every other
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
        .find(|condition| condition.get("type").and_then(|t| t.as_str()) == Some(CONDITION_TYPE))
    {
        Some(entry) => *entry = ours_json,
        None => list.push(ours_json),
    }
    serde_json::Value::Array(list)
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
        let first = next(None, &summary(false, "DependencyMissing"), Some(3), at(0)).unwrap();
        assert_eq!(first.status, "False");
        assert_eq!(first.last_transition_time, "2027-01-15T08:00:00Z");
        assert_eq!(
            next(
                Some(&first),
                &summary(false, "DependencyMissing"),
                Some(3),
                at(60)
            ),
            None
        );
        let new_generation = next(
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
        let new_reason = next(
            Some(&first),
            &summary(false, "WindowClosed"),
            Some(3),
            at(60),
        )
        .unwrap();
        assert_eq!(new_reason.last_transition_time, first.last_transition_time);
        assert!(is_transition(Some(&first), &new_reason));
        let proceed = next(
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
        let written = next(None, &summary(true, "Ok"), Some(3), at(0)).unwrap();
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
                next(
                    Some(&kept_by_the_server),
                    &summary(true, "Ok"),
                    generation,
                    at(60)
                ),
                None,
                "no rewrite for a field the kind cannot hold"
            );
        }
        let turned = next(
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
        let ours = next(None, &summary(true, "Ok"), None, at(0)).unwrap();
        let others = json!([
            {"type": "Ready", "status": "True", "reason": "Reconciled", "message": "", "lastTransitionTime": "2026-01-01T00:00:00Z", "custom": 1},
            {"type": "Preflight", "status": "False", "reason": "Old", "message": "", "lastTransitionTime": "2026-01-01T00:00:00Z"},
            {"type": "Synced", "status": "Unknown"},
        ]);
        let merged = merge(Some(&others), &ours);
        assert_eq!(merged[0], others[0]);
        assert_eq!(merged[2], others[2]);
        assert_eq!(find(Some(&merged)), Some(ours.clone()));
        let appended = merge(Some(&json!([others[0].clone()])), &ours);
        assert_eq!(appended.as_array().unwrap().len(), 2);
        assert_eq!(
            merge(None, &ours),
            json!([serde_json::to_value(&ours).unwrap()])
        );
        assert_eq!(find(Some(&json!([{"type": "Ready"}]))), None);
    }
}
