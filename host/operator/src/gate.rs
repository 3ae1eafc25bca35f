//! The gate: run a kind's checks on one object, apply each check's failure policy, combine with
//! [`crate::action::decide`], and summarise the result as a condition. This is the library API an operator
//! calls at the top of its own reconcile; the preflight operator is a thin controller around it.

use crate::check_set::{CheckSet, GateEntry, LoadedCheck};
use crate::kind::GatedKind;
use crate::summary::{CheckRun, Summary, summarize};
use crate::vocabulary::{CheckMode, CheckSettings, FailurePolicy, OutputsPlacement};
use preflight_engine::action::{Action, BACKOFF_MAX, Decision, decide};
use preflight_engine::{
    Check, CheckOutcome, Engine, Evaluation, Failure, FailureKind, LogLevel, Request, Target,
    Verdict,
};
use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime};

/// Runs the checks of a kind on objects and keeps each object's consecutive-failure count for backoff.
pub struct Gate {
    engine: Arc<Engine>,
    checks: Arc<CheckSet>,
    failures: Mutex<FailureCounts>,
}

/// What the gate decided for one object.
#[derive(Debug, Clone)]
pub struct GateResult {
    /// The controller action and the object's failure count.
    pub decision: Decision,
    /// The condition to record: whether the object may proceed, why, in a sentence.
    pub summary: Summary,
    /// Every enforced check that ran, in order.
    pub runs: Vec<CheckRun>,
    /// What the kind's monitored checks (`mode: monitor`) would have decided; `None` when none of them
    /// gates the object. Never part of [`GateResult::decision`].
    pub monitor: Option<MonitorResult>,
}

/// The verdict of the monitored checks of a kind on one object, combined as if they were enforced alone.
#[derive(Debug, Clone)]
pub struct MonitorResult {
    /// What they would have decided (with their own failure count: a failing monitored check never backs
    /// off the enforced evaluation).
    pub decision: Decision,
    /// The `PreflightMonitor` condition to record.
    pub summary: Summary,
    /// Every monitored check that ran, in order.
    pub runs: Vec<CheckRun>,
}

impl GateResult {
    /// Whether the object may be reconciled now.
    pub fn proceed(&self) -> bool {
        self.summary.proceed
    }

    /// The outputs to record, per placement (a later check in order wins a key two checks output). `None`
    /// when some check did not decide (failed, its failure was ignored, or it is suspended): the outputs on
    /// the object then stay as they are, rather than being cleared by a transient failure.
    pub fn outputs(&self) -> Option<BTreeMap<OutputsPlacement, BTreeMap<String, String>>> {
        let mut outputs: BTreeMap<OutputsPlacement, BTreeMap<String, String>> = BTreeMap::new();
        for run in &self.runs {
            let verdict = run
                .outcome
                .as_ref()
                .ok()
                .filter(|_| run.ignored.is_none() && !run.suspended)?;
            outputs
                .entry(run.outputs_placement.clone())
                .or_default()
                .extend(verdict.outputs.clone());
        }
        Some(outputs)
    }
}

impl Gate {
    /// A gate over `checks`, evaluated by `engine`.
    pub fn new(engine: Arc<Engine>, checks: Arc<CheckSet>) -> Self {
        Self {
            engine,
            checks,
            failures: Mutex::default(),
        }
    }

    /// The checks this gate runs.
    pub fn checks(&self) -> &Arc<CheckSet> {
        &self.checks
    }

    /// Runs every check of `kind` that gates `object` (a Kubernetes object as JSON: its version and labels
    /// pick the checks) in order and decides on the enforced ones; the monitored ones are combined apart.
    /// Never fails: whatever a check does ends up classified in the result.
    pub async fn evaluate(&self, kind: &GatedKind, object: serde_json::Value) -> GateResult {
        let target = Target::of_object(&object);
        let key = object_key(&object, &target);
        let entries = self.checks.for_kind(kind);
        let labels = labels_for(&entries, &object);
        // One request for every check of the object; the configuration, and the object's projection for
        // checks that declared their reads, change between checks.
        let mut input = Input::new(object);
        let mut request = Request {
            object: String::new(),
            config: String::new(),
            target,
            now: SystemTime::now(),
        };
        let mut runs = Vec::new();
        let mut monitored = Vec::new();
        for entry in entries {
            let (run, mode) = match entry {
                GateEntry::Ready(check) if !applies(&check.settings, &request.target, &labels) => {
                    continue;
                }
                GateEntry::Ready(check) if check.settings.suspended => {
                    (suspended(&check), check.settings.mode)
                }
                GateEntry::Ready(check) => {
                    request.object = input.take_for(&check.check);
                    let run = self.run(&check, &mut request).await;
                    input.give_back(&check.check, std::mem::take(&mut request.object));
                    (run, check.settings.mode)
                }
                GateEntry::Unavailable { selector, .. }
                    if selector
                        .as_ref()
                        .is_some_and(|selector| !selector.matches(&labels)) =>
                {
                    continue;
                }
                GateEntry::Unavailable {
                    name,
                    failure_policy,
                    mode,
                    problem,
                    ..
                } => (
                    with_policy(
                        name.clone(),
                        failure_policy,
                        Err(Failure::new(
                            FailureKind::InvalidComponent,
                            format!("no usable version of the check: {problem}"),
                        )),
                        Duration::ZERO,
                        OutputsPlacement::default(),
                    ),
                    mode,
                ),
            };
            match mode {
                CheckMode::Enforce => runs.push(run),
                CheckMode::Monitor => monitored.push(run),
            }
        }
        let monitor = (!monitored.is_empty()).then(|| {
            let decision = self.decide(format!("{key}{MONITOR_KEY_SUFFIX}"), &monitored);
            MonitorResult {
                summary: summarize(&decision, &monitored),
                decision,
                runs: monitored,
            }
        });
        let decision = self.decide(key, &runs);
        GateResult {
            summary: summarize(&decision, &runs),
            decision,
            runs,
            monitor,
        }
    }

    /// Combines `runs` with the failure count kept under `key`, and keeps the new count.
    fn decide(&self, key: String, runs: &[CheckRun]) -> Decision {
        let mut failures = self.failures.lock().unwrap_or_else(|p| p.into_inner());
        let decision = decide(runs.iter().map(|run| &run.outcome), failures.get(&key));
        failures.set(key, decision.failures, Instant::now());
        decision
    }

    async fn run(&self, check: &LoadedCheck, request: &mut Request) -> CheckRun {
        request.config.clone_from(&check.settings.config);
        let evaluation = self
            .engine
            .evaluate_with(&check.check, request, &check.settings.limits, &check.grants)
            .await;
        forward_logs(&check.settings.name, &evaluation);
        CheckRun {
            note: check.stand_in_note.clone(),
            ..with_policy(
                check.settings.name.clone(),
                check.settings.failure_policy,
                with_refusals(evaluation.outcome, &evaluation.refusals),
                evaluation.duration,
                check.settings.outputs.clone(),
            )
        }
    }
}

/// The tracing target of the lines checks log: filter them with `RUST_LOG=preflight::check=debug`.
pub const CHECK_LOG_TARGET: &str = "preflight::check";

/// Sends the lines a check logged to the host's logs at the check's level, tagged with the check's name,
/// inside the caller's span (the operator's reconcile span names the object), as the contract promises;
/// says how many lines the per-evaluation cap dropped, and what the host refused the check (outbound
/// requests and lookups, each with its destination) at warn level.
fn forward_logs(check: &str, evaluation: &Evaluation) {
    for refusal in &evaluation.refusals {
        tracing::warn!(target: CHECK_LOG_TARGET, check, refused = %refusal, "the host refused or could not complete a request of the check");
    }
    for line in &evaluation.logs {
        let text = line.message.as_str();
        match line.level {
            LogLevel::Trace => tracing::trace!(target: CHECK_LOG_TARGET, check, "{text}"),
            LogLevel::Debug => tracing::debug!(target: CHECK_LOG_TARGET, check, "{text}"),
            LogLevel::Info => tracing::info!(target: CHECK_LOG_TARGET, check, "{text}"),
            LogLevel::Warn => tracing::warn!(target: CHECK_LOG_TARGET, check, "{text}"),
            LogLevel::Error => tracing::error!(target: CHECK_LOG_TARGET, check, "{text}"),
        }
    }
    if evaluation.logs_dropped > 0 {
        tracing::warn!(
            target: CHECK_LOG_TARGET,
            check,
            dropped = evaluation.logs_dropped,
            "the check logged more than its per-evaluation cap; further lines were dropped"
        );
    }
}

/// Consecutive failures per object, the input of its backoff. Bounded: an object that keeps failing is
/// evaluated at least every [`BACKOFF_MAX`], so an entry untouched for twice that belongs to an object that
/// is gone, and is dropped.
#[derive(Debug)]
struct FailureCounts {
    entries: HashMap<String, (u32, Instant)>,
    next_prune: Instant,
}

impl Default for FailureCounts {
    fn default() -> Self {
        Self {
            entries: HashMap::new(),
            next_prune: Instant::now() + BACKOFF_MAX,
        }
    }
}

impl FailureCounts {
    fn get(&self, key: &str) -> u32 {
        self.entries.get(key).map_or(0, |(failures, _)| *failures)
    }

    fn set(&mut self, key: String, failures: u32, now: Instant) {
        if failures == 0 {
            self.entries.remove(&key);
        } else {
            self.entries.insert(key, (failures, now));
        }
        if now >= self.next_prune {
            self.entries
                .retain(|_, (_, seen)| now.duration_since(*seen) <= 2 * BACKOFF_MAX);
            self.next_prune = now + BACKOFF_MAX;
        }
    }
}

/// The kube-rs controller action for a gate decision: a delay requeues, "wait for a change" awaits one.
pub fn controller_action(action: Action) -> kube::runtime::controller::Action {
    use kube::runtime::controller::Action as Controller;
    match action.delay() {
        Some(delay) => Controller::requeue(delay),
        None => Controller::await_change(),
    }
}

/// The controller action after an evaluation with monitored checks: the enforced decision's, unless the
/// monitored checks ask to be evaluated sooner (a monitored verdict stays as fresh as it would be
/// enforced, so that switching to `enforce` holds what the monitor said it would).
pub(crate) fn next_evaluation(
    enforced: Action,
    monitored: Option<Action>,
) -> kube::runtime::controller::Action {
    let sooner = match (enforced.delay(), monitored.and_then(Action::delay)) {
        (Some(enforced_delay), Some(monitored_delay)) if monitored_delay < enforced_delay => {
            Action::Requeue(monitored_delay)
        }
        (None, Some(monitored_delay)) => Action::Requeue(monitored_delay),
        _ => enforced,
    };
    controller_action(sooner)
}

/// Appended to an object's key for the failure count of its monitored checks.
const MONITOR_KEY_SUFFIX: &str = "\0monitor";

/// Whether a check gates an object of this version with these labels (its `versions` and `selector`).
fn applies(settings: &CheckSettings, target: &Target, labels: &BTreeMap<String, String>) -> bool {
    (settings.versions.is_empty() || settings.versions.contains(&target.version))
        && settings
            .selector
            .as_ref()
            .is_none_or(|selector| selector.matches(labels))
}

/// The object's labels, when some of `entries` has a selector (empty otherwise, or when it has none).
fn labels_for(entries: &[GateEntry], object: &serde_json::Value) -> BTreeMap<String, String> {
    let selects = entries.iter().any(|entry| match entry {
        GateEntry::Ready(check) => check.settings.selector.is_some(),
        GateEntry::Unavailable { selector, .. } => selector.is_some(),
    });
    object
        .pointer("/metadata/labels")
        .and_then(|labels| labels.as_object())
        .filter(|_| selects)
        .map(|labels| {
            labels
                .iter()
                .filter_map(|(key, value)| Some((key.clone(), value.as_str()?.to_owned())))
                .collect()
        })
        .unwrap_or_default()
}

/// The object a gate evaluates, without `metadata.managedFields` (the API server's bookkeeping, often the
/// largest part of an object, never a check's business), serialised once, and lent rather than copied, for
/// the checks that take it whole.
struct Input {
    object: serde_json::Value,
    whole: Option<String>,
}

impl Input {
    fn new(mut object: serde_json::Value) -> Self {
        if let Some(metadata) = object.get_mut("metadata").and_then(|m| m.as_object_mut()) {
            metadata.remove("managedFields");
        }
        Self {
            object,
            whole: None,
        }
    }

    /// What `check` receives: the parts it declared it reads, else the whole object (to give back).
    fn take_for(&mut self, check: &Check) -> String {
        match check.projection() {
            Some(projection) => projection.apply(&self.object).to_string(),
            None => self.whole.take().unwrap_or_else(|| self.object.to_string()),
        }
    }

    /// Takes back what [`Input::take_for`] gave `check`, keeping the whole object for the next check.
    fn give_back(&mut self, check: &Check, sent: String) {
        if check.projection().is_none() {
            self.whole = Some(sent);
        }
    }
}

/// The key of an object's failure count: its uid, else its namespace and name.
fn object_key(object: &serde_json::Value, target: &Target) -> String {
    match object.pointer("/metadata/uid").and_then(|uid| uid.as_str()) {
        Some(uid) => uid.to_owned(),
        None => format!(
            "{}/{}",
            target.namespace.as_deref().unwrap_or_default(),
            target.name
        ),
    }
}

/// An outcome that does not proceed, after the host refused the check some requests or lookups, with the
/// host's reasons added to its message (`kubectl describe` then tells "not in the allow-list" from "a
/// private address"). The reasons are the host's own words about destinations, never response data.
fn with_refusals(outcome: CheckOutcome, refusals: &[String]) -> CheckOutcome {
    if refusals.is_empty() {
        return outcome;
    }
    let note = format!(" [refused by the host: {}]", refusals.join("; "));
    match outcome {
        Ok(mut verdict) if !verdict.proceed => {
            verdict.message.push_str(&note);
            Ok(verdict)
        }
        Err(mut failure) => {
            failure.message.push_str(&note);
            Err(failure)
        }
        proceeding => proceeding,
    }
}

/// Applies a failure policy: under `Ignore`, a failure becomes a proceeding verdict that says so.
fn with_policy(
    name: String,
    policy: FailurePolicy,
    outcome: CheckOutcome,
    duration: Duration,
    outputs_placement: OutputsPlacement,
) -> CheckRun {
    let (outcome, ignored) = match (outcome, policy) {
        (Err(failure), FailurePolicy::Ignore) => (
            Ok(Verdict {
                proceed: true,
                requeue_after: None,
                reason: "CheckFailureIgnored".into(),
                message: format!("failed and its failurePolicy is Ignore: {failure}"),
                outputs: BTreeMap::new(),
            }),
            Some(failure),
        ),
        (outcome, _) => (outcome, None),
    };
    CheckRun {
        name,
        outcome,
        ignored,
        suspended: false,
        duration,
        outputs_placement,
        note: None,
    }
}

/// The part of a suspended check: not evaluated, the object passes it.
fn suspended(check: &LoadedCheck) -> CheckRun {
    CheckRun {
        name: check.settings.name.clone(),
        outcome: Ok(Verdict {
            proceed: true,
            requeue_after: None,
            reason: "CheckSuspended".into(),
            message: "suspended by its ConfigMap (suspend: \"true\"), not evaluated".into(),
            outputs: BTreeMap::new(),
        }),
        ignored: None,
        suspended: true,
        duration: Duration::ZERO,
        outputs_placement: check.settings.outputs.clone(),
        note: None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn monitored_checks_ask_for_an_evaluation_only_sooner_than_the_enforced_ones() {
        use kube::runtime::controller::Action as Controller;
        let seconds = Duration::from_secs;
        let proceed = Action::Proceed {
            recheck_after: None,
        };
        let table = [
            (proceed, None, Controller::await_change()),
            (
                proceed,
                Some(Action::AwaitChange),
                Controller::await_change(),
            ),
            (
                proceed,
                Some(Action::Requeue(seconds(10))),
                Controller::requeue(seconds(10)),
            ),
            (
                Action::Requeue(seconds(30)),
                Some(Action::Backoff(seconds(1))),
                Controller::requeue(seconds(1)),
            ),
            (
                Action::Requeue(seconds(5)),
                Some(Action::Requeue(seconds(60))),
                Controller::requeue(seconds(5)),
            ),
            (Action::Stop, Some(Action::Stop), Controller::await_change()),
        ];
        for (enforced, monitored, expected) in table {
            assert_eq!(
                next_evaluation(enforced, monitored),
                expected,
                "{enforced:?} with {monitored:?}"
            );
        }
    }

    fn verdict(proceed: bool, delay: Option<u64>, reason: &str, message: &str) -> CheckOutcome {
        Ok(Verdict {
            proceed,
            requeue_after: delay.map(Duration::from_secs),
            reason: reason.into(),
            message: message.into(),
            outputs: BTreeMap::new(),
        })
    }

    /// A check's name, failure policy and outcome.
    type NamedOutcome = (&'static str, FailurePolicy, CheckOutcome);

    fn runs(outcomes: Vec<NamedOutcome>) -> Vec<CheckRun> {
        outcomes
            .into_iter()
            .map(|(name, policy, outcome)| {
                with_policy(
                    format!("ns/{name}"),
                    policy,
                    outcome,
                    Duration::ZERO,
                    OutputsPlacement::default(),
                )
            })
            .collect()
    }

    fn summary_of(outcomes: Vec<NamedOutcome>) -> (Action, Summary) {
        let runs = runs(outcomes);
        let decision = decide(runs.iter().map(|run| &run.outcome), 0);
        (decision.action, summarize(&decision, &runs))
    }

    fn summary(proceed: bool, reason: &str, message: &str) -> Summary {
        Summary {
            proceed,
            reason: reason.into(),
            message: message.into(),
        }
    }

    #[test]
    fn summarises_each_action() {
        use FailurePolicy::{Fail, Ignore};
        let trap = || Err(Failure::new(FailureKind::Trap, "wasm trap: unreachable"));
        let invalid = || Err(Failure::new(FailureKind::InvalidComponent, "not wasm"));
        let table: Vec<(Vec<NamedOutcome>, Action, Summary)> = vec![
            (
                vec![],
                Action::Proceed {
                    recheck_after: None,
                },
                summary(true, "NoChecks", "no preflight check gates this object"),
            ),
            (
                vec![(
                    "deps",
                    Fail,
                    verdict(true, None, "DependenciesAvailable", "all there"),
                )],
                Action::Proceed {
                    recheck_after: None,
                },
                summary(true, "DependenciesAvailable", "deps: all there"),
            ),
            (
                vec![
                    ("a", Fail, verdict(true, None, "", "")),
                    ("b", Fail, verdict(true, None, "Open", "window open")),
                ],
                Action::Proceed {
                    recheck_after: None,
                },
                summary(true, "AllChecksPassed", "a: proceed; b: window open"),
            ),
            (
                vec![
                    ("a", Fail, verdict(true, None, "Ok", "fine")),
                    (
                        "deps",
                        Fail,
                        verdict(false, Some(600), "DependencyMissing", "waiting for redis"),
                    ),
                ],
                Action::Requeue(Duration::from_secs(600)),
                summary(false, "DependencyMissing", "deps: waiting for redis"),
            ),
            (
                vec![
                    (
                        "deps",
                        Fail,
                        verdict(false, Some(600), "DependencyMissing", "waiting for redis"),
                    ),
                    ("ok", Fail, verdict(true, None, "Ok", "fine")),
                    ("window", Fail, verdict(false, Some(60), "WindowClosed", "")),
                ],
                Action::Requeue(Duration::from_secs(60)),
                summary(
                    false,
                    "DependencyMissing",
                    "deps: waiting for redis; window: not ready",
                ),
            ),
            (
                vec![("labels", Fail, verdict(false, None, "", ""))],
                Action::AwaitChange,
                summary(false, "NotReady", "labels: not ready"),
            ),
            (
                vec![
                    ("deps", Fail, verdict(false, Some(5), "Missing", "m")),
                    ("crash", Fail, trap()),
                ],
                Action::Backoff(Duration::from_millis(5)),
                summary(
                    false,
                    "CheckTrapped",
                    "crash: wasm trap: unreachable; deps: m",
                ),
            ),
            (
                vec![("broken", Fail, invalid())],
                Action::Stop,
                summary(false, "InvalidCheck", "broken: not wasm"),
            ),
            (
                vec![
                    ("deps", Fail, verdict(false, None, "Missing", "m")),
                    ("broken", Fail, invalid()),
                    ("crash", Ignore, trap()),
                ],
                Action::Stop,
                summary(false, "InvalidCheck", "broken: not wasm; deps: m"),
            ),
            (
                vec![("crash", Ignore, trap())],
                Action::Proceed {
                    recheck_after: None,
                },
                summary(
                    true,
                    "CheckFailureIgnored",
                    "crash: failed and its failurePolicy is Ignore: CheckTrapped (trap): wasm trap: unreachable",
                ),
            ),
            (
                vec![
                    ("crash", Ignore, trap()),
                    ("ok", Fail, verdict(true, None, "Ok", "fine")),
                ],
                Action::Proceed {
                    recheck_after: None,
                },
                summary(
                    true,
                    "CheckFailureIgnored",
                    "crash: failed and its failurePolicy is Ignore: CheckTrapped (trap): wasm trap: unreachable; ok: fine",
                ),
            ),
        ];
        for (outcomes, action, expected) in table {
            let description = format!("{outcomes:?}");
            let (got_action, got) = summary_of(outcomes);
            assert_eq!((got_action, got), (action, expected), "{description}");
        }
    }

    #[test]
    fn maps_each_action_to_the_controller() {
        use kube::runtime::controller::Action as Controller;
        let minute = Duration::from_secs(60);
        let table = [
            (
                Action::Proceed {
                    recheck_after: None,
                },
                Controller::await_change(),
            ),
            (
                Action::Proceed {
                    recheck_after: Some(minute),
                },
                Controller::requeue(minute),
            ),
            (Action::Requeue(minute), Controller::requeue(minute)),
            (Action::AwaitChange, Controller::await_change()),
            (
                Action::Backoff(Duration::from_millis(5)),
                Controller::requeue(Duration::from_millis(5)),
            ),
            (Action::Stop, Controller::await_change()),
        ];
        for (action, expected) in table {
            assert_eq!(controller_action(action), expected, "{action:?}");
        }
    }

    #[test]
    fn failure_counts_reset_on_success_and_forget_objects_that_are_gone() {
        let start = Instant::now();
        let mut counts = FailureCounts::default();
        counts.set("failing".into(), 3, start);
        counts.set("recovered".into(), 2, start);
        counts.set("recovered".into(), 0, start);
        assert_eq!((counts.get("failing"), counts.get("recovered")), (3, 0));
        let later = start + 3 * BACKOFF_MAX;
        counts.set("still-failing".into(), 9, later);
        assert_eq!(
            counts.get("failing"),
            0,
            "untouched for 3 × BACKOFF_MAX: its object is gone"
        );
        assert_eq!(counts.get("still-failing"), 9);
    }

    #[test]
    fn the_host_s_refusals_are_told_when_the_check_does_not_proceed() {
        let refusals = vec!["HTTP GET http://db/: 10.0.0.5 is a private address".to_owned()];
        let with = |outcome: CheckOutcome| with_refusals(outcome, &refusals);
        let waiting = with(verdict(false, Some(5), "DependencyUnknown", "cannot ask")).unwrap();
        assert_eq!(
            waiting.message,
            "cannot ask [refused by the host: HTTP GET http://db/: 10.0.0.5 is a private address]"
        );
        let failed = with(Err(Failure::new(FailureKind::CheckError, "no answer"))).unwrap_err();
        assert!(
            failed.message.ends_with("10.0.0.5 is a private address]"),
            "{failed}"
        );
        let proceeding = with(verdict(true, None, "Ok", "fine")).unwrap();
        assert_eq!(
            proceeding.message, "fine",
            "a proceeding check is not second-guessed"
        );
        assert_eq!(
            with_refusals(verdict(false, None, "", "m"), &[])
                .unwrap()
                .message,
            "m"
        );
    }

    #[test]
    fn strips_managed_fields_only() {
        let object = serde_json::json!({"metadata": {"name": "a", "managedFields": [{"manager": "kubectl"}]}, "spec": {}});
        assert_eq!(
            Input::new(object).object.to_string(),
            r#"{"metadata":{"name":"a"},"spec":{}}"#
        );
    }
}
