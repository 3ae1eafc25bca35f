//! What-if: evaluate a candidate check against every live object of the kind it gates, read-only, and
//! report the objects whose verdict would differ from what their `Preflight` condition says now. The
//! "kubectl diff" of a check rollout: run it before applying a check, or before switching one from
//! `monitor` to `enforce`.
//!
//! The candidate is evaluated as the operator would evaluate it (same limits, grants, projection,
//! isolation, selector and versions; credentials read from their Secret, lookups served from watch caches),
//! always as if enforced. Nothing is written: the objects are listed, and lookups and Secrets read.

use crate::api_answer::api_answer;
use crate::check_set::{CheckSet, LoadedCheck};
use crate::check_source;
use crate::check_watcher::{parts_of, prepare, verify};
use crate::condition::{PreflightCondition, condition_of};
use crate::controllers::resolve;
use crate::gate::{Gate, GateResult};
use crate::lookups::ObjectCaches;
use crate::oci_source::OciSources;
use crate::signing::Signing;
use crate::vocabulary::{CheckMode, CheckSource};
use futures::{StreamExt, stream};
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, DynamicObject, ListParams};
use kube::{Client, ResourceExt};
use preflight_engine::action::Action;
use preflight_engine::{Engine, Limits};
use serde::Serialize;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Objects listed per request.
const PAGE: u32 = 500;

/// Why a what-if could not run at all.
#[derive(Debug, thiserror::Error)]
pub enum WhatIfError {
    /// The check ConfigMap could not be read.
    #[error("cannot read the check ConfigMap {name}: {}", api_answer(.source))]
    ReadCheck {
        /// `namespace/name`.
        name: String,
        /// The API error.
        source: kube::Error,
    },
    /// The check is not usable (what the operator would report on its ConfigMap).
    #[error("the check cannot be used: {0}")]
    Rejected(String),
    /// The kind is not served.
    #[error("{0}")]
    KindNotServed(String),
    /// The objects could not be listed.
    #[error("cannot list the objects of {kind}: {source}")]
    List {
        /// The kind.
        kind: String,
        /// The API error.
        source: kube::Error,
    },
}

/// Which objects to evaluate, and how many at once.
#[derive(Debug, Clone)]
pub struct WhatIfOptions {
    /// Only objects in this namespace; `None`: every namespace.
    pub namespace: Option<String>,
    /// Evaluations in flight at once.
    pub concurrency: usize,
}

/// How an object's verdict would change.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Change {
    /// It may be reconciled now (or has no condition: no check gates it) and would be held.
    ProceedToHold,
    /// It is held now and the candidate would let it proceed (other checks of its kind may still hold it).
    HoldToProceed,
    /// Held now and held by the candidate, for another reason.
    ReasonChanged,
}

/// One object whose verdict would change.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Difference {
    /// Its namespace (empty for a cluster-scoped kind).
    pub namespace: String,
    /// Its name.
    pub name: String,
    /// How the verdict changes.
    pub change: Change,
    /// What its `Preflight` condition says now (`status/reason`), `none` without one.
    pub now: String,
    /// What the candidate would say (`status/reason`).
    pub would: String,
    /// The candidate's message.
    pub message: String,
}

/// An object the candidate could not decide on (it failed, trapped, timed out, ...), with why.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct NotEvaluated {
    /// Its namespace.
    pub namespace: String,
    /// Its name.
    pub name: String,
    /// The failure's reason (`CheckTimeout`, `CheckTrapped`, the check's own error reason ...).
    pub reason: String,
    /// What failed.
    pub message: String,
}

/// Counts over every object listed.
#[derive(Debug, Clone, Default, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Totals {
    /// Objects of the kind listed.
    pub objects: usize,
    /// Objects outside the candidate's selector or versions: not evaluated by it.
    pub not_selected: usize,
    /// Objects whose verdict would stay what it is.
    pub unchanged: usize,
    /// See [`Change::ProceedToHold`].
    pub proceed_to_hold: usize,
    /// See [`Change::HoldToProceed`].
    pub hold_to_proceed: usize,
    /// See [`Change::ReasonChanged`].
    pub reason_changed: usize,
    /// Objects the candidate failed on ([`Report::not_evaluated`]).
    pub not_evaluated: usize,
}

/// What a what-if found.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Report {
    /// The candidate check (`namespace/name`).
    pub check: String,
    /// The kind it gates.
    pub kind: String,
    /// Objects whose verdict would change, by namespace and name.
    pub differences: Vec<Difference>,
    /// Objects the candidate could not decide on.
    pub not_evaluated: Vec<NotEvaluated>,
    /// Counts.
    pub totals: Totals,
    /// Wall time of listing and evaluating, in seconds.
    pub seconds: f64,
}

/// Where the checks that ConfigMaps name by `source: oci://…` are pulled from, and the keys every check
/// must be signed with: what the operator is started with.
#[derive(Debug, Clone, Default)]
pub struct Sources {
    /// How registries are reached.
    pub registry: preflight_oci::RegistryOptions,
    /// The operator's `--verify-key` keys.
    pub verify_keys: Vec<preflight_oci::VerificationKey>,
}

/// Reads the check ConfigMap `namespace/name` from the cluster as the operator would: its parts, or its
/// component pulled from the registry its `source` names (with its pull secret), verified against the
/// signatures its `verify` key and `sources`' keys ask for.
pub async fn candidate_from_cluster(
    client: &Client,
    namespace: &str,
    name: &str,
    default_limits: &Limits,
    sources: &Sources,
) -> Result<CheckSource, WhatIfError> {
    let read_error = |source| WhatIfError::ReadCheck {
        name: format!("{namespace}/{name}"),
        source,
    };
    let config_map = Api::<ConfigMap>::namespaced(client.clone(), namespace)
        .get(name)
        .await
        .map_err(read_error)?;
    let parts = parts_of(client, &config_map).await.map_err(read_error)?;
    let policy = Signing::new(sources.verify_keys.clone())
        .policy_for(client, &config_map)
        .await
        .map_err(|problem| WhatIfError::Rejected(problem.problem))?;
    let pulled = OciSources::new(&sources.registry, None)
        .pull(client, &config_map, Some(&policy))
        .await;
    let (component, unsigned) = match pulled {
        Some(pulled) => (Some(pulled.component), pulled.unsigned),
        None => (None, None),
    };
    check_source::with_pulled(&config_map, &parts, component, default_limits)
        .and_then(|source| {
            verify(&source, &config_map, &Ok(policy), unsigned)?;
            Ok(source)
        })
        .map_err(|rejection| WhatIfError::Rejected(rejection.problem))
}

/// Reads a check from its ConfigMap and parts (as `preflight pack` writes them, or read from the cluster).
pub fn candidate_from_config_maps(
    config_map: &ConfigMap,
    parts: &[ConfigMap],
    default_limits: &Limits,
) -> Result<CheckSource, WhatIfError> {
    check_source::from_config_maps(config_map, parts, default_limits)
        .map_err(|rejection| WhatIfError::Rejected(rejection.problem))
}

/// Evaluates `candidate` (as if enforced) on every object of its kind and compares with their condition.
pub async fn what_if(
    client: &Client,
    engine: Arc<Engine>,
    mut candidate: CheckSource,
    options: &WhatIfOptions,
) -> Result<Report, WhatIfError> {
    let started = Instant::now();
    candidate.settings.mode = CheckMode::Enforce;
    candidate.settings.suspended = false;
    let kind = candidate.settings.gates.clone();
    let (resource, _) = resolve(client, &kind, &candidate.settings.versions)
        .await
        .map_err(WhatIfError::KindNotServed)?;
    let loaded = {
        let engine = engine.clone();
        tokio::task::spawn_blocking(move || LoadedCheck::load(&engine, candidate))
            .await
            .map_err(|error| WhatIfError::Rejected(format!("compiling did not finish: {error}")))?
            .map_err(|rejection| WhatIfError::Rejected(rejection.problem))?
    };
    let lookups = ObjectCaches::new(client.clone());
    let loaded = prepare(client, &engine, &lookups, loaded)
        .await
        .map_err(|rejection| WhatIfError::Rejected(rejection.problem))?;
    let check = loaded.settings.name.clone();
    let checks = Arc::new(CheckSet::new());
    checks.install(loaded);
    let gate = Gate::new(engine, checks);

    let api: Api<DynamicObject> = match &options.namespace {
        Some(namespace) => Api::namespaced_with(client.clone(), namespace, &resource),
        None => Api::all_with(client.clone(), &resource),
    };
    let objects = list_all(&api).await.map_err(|source| WhatIfError::List {
        kind: kind.to_string(),
        source,
    })?;
    let mut totals = Totals {
        objects: objects.len(),
        ..Totals::default()
    };
    let gate = &gate;
    let kind = &kind;
    let verdicts: Vec<Verdict> = stream::iter(objects)
        .map(|object| async move {
            let json = serde_json::to_value(&object).unwrap_or_default();
            let result = gate.evaluate(kind, json).await;
            let key = (object.namespace().unwrap_or_default(), object.name_any());
            classify(key, condition_of(&object).as_ref(), &result)
        })
        .buffer_unordered(options.concurrency.max(1))
        .collect()
        .await;
    let mut differences = Vec::new();
    let mut not_evaluated = Vec::new();
    for verdict in verdicts {
        match verdict {
            Verdict::NotSelected => totals.not_selected += 1,
            Verdict::Unchanged => totals.unchanged += 1,
            Verdict::NotEvaluated(failure) => not_evaluated.push(failure),
            Verdict::Changed(difference) => {
                match difference.change {
                    Change::ProceedToHold => totals.proceed_to_hold += 1,
                    Change::HoldToProceed => totals.hold_to_proceed += 1,
                    Change::ReasonChanged => totals.reason_changed += 1,
                }
                differences.push(difference);
            }
        }
    }
    totals.not_evaluated = not_evaluated.len();
    differences.sort_by(|a, b| (&a.namespace, &a.name).cmp(&(&b.namespace, &b.name)));
    not_evaluated.sort_by(|a, b| (&a.namespace, &a.name).cmp(&(&b.namespace, &b.name)));
    Ok(Report {
        check,
        kind: kind.to_string(),
        differences,
        not_evaluated,
        totals,
        seconds: Duration::as_secs_f64(&started.elapsed()),
    })
}

/// Where an object goes in the report: its condition now against what the candidate decided. A failure is
/// "not evaluated" (the candidate could not decide); an object without a condition counts as proceeding (no
/// check gates it).
fn classify(
    (namespace, name): (String, String),
    now: Option<&PreflightCondition>,
    result: &GateResult,
) -> Verdict {
    if result.runs.is_empty() {
        return Verdict::NotSelected;
    }
    let summary = &result.summary;
    if matches!(result.decision.action, Action::Backoff(_) | Action::Stop) {
        return Verdict::NotEvaluated(NotEvaluated {
            namespace,
            name,
            reason: summary.reason.clone(),
            message: summary.message.clone(),
        });
    }
    let proceeds_now = now.is_none_or(PreflightCondition::is_true);
    let change = match (proceeds_now, summary.proceed) {
        (true, false) => Change::ProceedToHold,
        (false, true) => Change::HoldToProceed,
        (false, false) if now.map(|now| now.reason.as_str()) != Some(summary.reason.as_str()) => {
            Change::ReasonChanged
        }
        _ => return Verdict::Unchanged,
    };
    Verdict::Changed(Difference {
        namespace,
        name,
        change,
        now: now.map_or_else(
            || "none".to_owned(),
            |now| format!("{}/{}", now.status, now.reason),
        ),
        would: format!(
            "{}/{}",
            if summary.proceed { "True" } else { "False" },
            summary.reason
        ),
        message: summary.message.clone(),
    })
}

/// One object's place in the report.
#[derive(Debug)]
enum Verdict {
    NotSelected,
    Unchanged,
    Changed(Difference),
    NotEvaluated(NotEvaluated),
}

/// Every object, page by page.
async fn list_all(api: &Api<DynamicObject>) -> Result<Vec<DynamicObject>, kube::Error> {
    let mut objects = Vec::new();
    let mut params = ListParams::default().limit(PAGE);
    loop {
        let page = api.list(&params).await?;
        objects.extend(page.items);
        match page.metadata.continue_.filter(|token| !token.is_empty()) {
            Some(token) => params = params.continue_token(&token),
            None => return Ok(objects),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::summary::{CheckRun, Summary};
    use preflight_engine::action::Decision;
    use preflight_engine::{Failure, FailureKind, Verdict as CheckVerdict};

    fn condition(status: &str, reason: &str) -> PreflightCondition {
        PreflightCondition {
            type_: "Preflight".into(),
            status: status.into(),
            reason: reason.into(),
            message: String::new(),
            observed_generation: Some(1),
            last_transition_time: "2026-12-04T07:00:00Z".into(),
        }
    }

    fn verdict(proceed: bool) -> CheckVerdict {
        CheckVerdict {
            proceed,
            requeue_after: None,
            reason: String::new(),
            message: String::new(),
            outputs: Default::default(),
        }
    }

    #[test]
    fn a_check_config_map_that_cannot_be_read_is_said_in_the_api_server_s_words() {
        let status =
            kube::core::Status::failure("configmaps \"deps\" not found", "NotFound").with_code(404);
        let error = WhatIfError::ReadCheck {
            name: "ops/deps".into(),
            source: kube::Error::Api(Box::new(status)),
        };
        assert_eq!(
            error.to_string(),
            "cannot read the check ConfigMap ops/deps: configmaps \"deps\" not found (404)"
        );
    }

    /// A result of one run that proceeds, waits with `reason`, or fails.
    fn result(outcome: &str, reason: &str) -> GateResult {
        let (action, run_outcome) = match outcome {
            "proceed" => (
                Action::Proceed {
                    recheck_after: None,
                },
                Ok(verdict(true)),
            ),
            "wait" => (Action::AwaitChange, Ok(verdict(false))),
            _ => (
                Action::Backoff(std::time::Duration::from_secs(1)),
                Err(Failure::new(FailureKind::Trap, "trapped")),
            ),
        };
        GateResult {
            decision: Decision {
                action,
                failures: 0,
            },
            summary: Summary {
                proceed: outcome == "proceed",
                reason: reason.into(),
                message: String::new(),
            },
            runs: vec![CheckRun {
                name: "ns/candidate".into(),
                outcome: run_outcome,
                ignored: None,
                suspended: false,
                duration: std::time::Duration::ZERO,
                outputs_placement: Default::default(),
                note: None,
            }],
            monitor: None,
        }
    }

    fn place(now: Option<PreflightCondition>, result: &GateResult) -> String {
        match classify(("ns".into(), "o".into()), now.as_ref(), result) {
            Verdict::NotSelected => "not-selected".into(),
            Verdict::Unchanged => "unchanged".into(),
            Verdict::NotEvaluated(failure) => format!("not-evaluated {}", failure.reason),
            Verdict::Changed(difference) => {
                format!(
                    "{:?} {} -> {}",
                    difference.change, difference.now, difference.would
                )
            }
        }
    }

    #[test]
    fn each_object_lands_where_its_verdict_would_move() {
        let held = || Some(condition("False", "Missing"));
        let proceeding = || Some(condition("True", "Ok"));
        let table = [
            (
                None,
                result("wait", "Missing"),
                "ProceedToHold none -> False/Missing",
            ),
            (None, result("proceed", "Ok"), "unchanged"),
            (
                proceeding(),
                result("wait", "Missing"),
                "ProceedToHold True/Ok -> False/Missing",
            ),
            (proceeding(), result("proceed", "Other"), "unchanged"),
            (
                held(),
                result("proceed", "Ok"),
                "HoldToProceed False/Missing -> True/Ok",
            ),
            (held(), result("wait", "Missing"), "unchanged"),
            (
                held(),
                result("wait", "Closed"),
                "ReasonChanged False/Missing -> False/Closed",
            ),
            (
                proceeding(),
                result("fail", "CheckTrapped"),
                "not-evaluated CheckTrapped",
            ),
        ];
        for (now, result, expected) in table {
            assert_eq!(place(now.clone(), &result), expected, "{now:?}");
        }
        let mut outside = result("wait", "Missing");
        outside.runs.clear();
        assert_eq!(place(held(), &outside), "not-selected");
    }
}
