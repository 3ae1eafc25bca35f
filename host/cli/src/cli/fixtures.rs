//! `preflight test`: fixtures as unit tests for a check, as `opa test` and `kyverno test` do for policies.
//! A YAML file lists cases (an object, a configuration, a time, what is expected); each case is one
//! evaluation in a fresh instance; a table shows expected against actual and a last line counts them.
//!
//! ```yaml
//! config: {available: [postgres-main]}     # default for every case (optional)
//! now: 2026-12-05T12:00:00Z                # default time (optional; else the current time)
//! cases:
//!   - name: waits for redis
//!     object: {apiVersion: apps.example.com/v1, kind: App, metadata: {name: shop}, spec: {dependsOn: [redis]}}
//!     expect: {proceed: false, reason: DependencyMissing, requeueAfter: {min: 10m, max: 11m}}
//!   - name: a malformed object is an error
//!     objectFile: app-malformed.json       # relative to this file
//!     expect: {error: check, action: backoff}
//!   - name: records the dependency's key
//!     object: {apiVersion: apps.example.com/v1, kind: App, metadata: {name: shop}, spec: {dependsOn: []}}
//!     timeout: 300ms                       # this case's budget (optional; else --timeout)
//!     expect: {proceed: true, outputs: {dependencyKey: K-1}}   # every output, exactly
//! ```
//!
//! A configuration the check refuses when it is loaded (its `validate-config`, which the operator calls
//! before it installs a ConfigMap) is the case's answer (`error: invalid-config`, reason
//! `InvalidCheckConfig`, action `stop`): the operator would never evaluate the check with it.
//!
//! A check that declares the parts of the object it reads gets, as in the operator, only those; each case
//! then also runs with the whole object and fails if the check answers otherwise (a path left out of the
//! declaration): the same proceed, delay, reason, outputs and failure kind, and the same message unless
//! the check failed (a parse error names a column, which differs).

use super::input::{engine, parse_document, request as request_for};
use super::run::summary;
use super::{EXIT_FAILED_TESTS, EXIT_PROCEED, Problem, TestArgs};
use preflight_engine::action;
use preflight_engine::{Evaluation, Failure, Limits, Request};
use serde::Deserialize;
use std::collections::BTreeMap;
use std::path::Path;
use std::time::{Duration, SystemTime};

/// A fixtures file.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct Fixtures {
    #[serde(default)]
    config: Option<serde_json::Value>,
    #[serde(default)]
    now: Option<String>,
    cases: Vec<Case>,
}

/// One case: the input of an evaluation and what it must give.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct Case {
    name: String,
    #[serde(default)]
    object: Option<serde_json::Value>,
    #[serde(default)]
    object_file: Option<String>,
    #[serde(default)]
    config: Option<serde_json::Value>,
    #[serde(default)]
    now: Option<String>,
    /// This case's time budget (e.g. `300ms`), instead of `--timeout`.
    #[serde(default)]
    timeout: Option<String>,
    expect: Expect,
}

/// What a case expects; every field is optional and only what is given is compared.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct Expect {
    proceed: Option<bool>,
    reason: Option<String>,
    message_contains: Option<String>,
    /// A failure kind: `check`, `timeout`, `memory`, `trap`, `invalid-component`, `invalid-result`, or `none`.
    error: Option<String>,
    /// The controller action: `proceed`, `requeue`, `await-change`, `backoff`, `stop`.
    action: Option<String>,
    requeue_after: Option<DurationRange>,
    /// Every output of the result, exactly (`{}`: none).
    outputs: Option<BTreeMap<String, String>>,
}

/// An exact duration (`10m`) or a range (`{min: 10m, max: 11m}`, for checks that add jitter).
#[derive(Debug, Deserialize)]
#[serde(untagged)]
enum DurationRange {
    Exact(String),
    Range { min: String, max: String },
}

/// The outcome of one case.
struct Verdict {
    name: String,
    failures: Vec<String>,
    actual: String,
}

pub async fn test(args: TestArgs) -> Result<u8, Problem> {
    let bytes = super::oci::read_check(&args.check, &args.registry).await?;
    let engine = engine(1, args.memory_limit)?;
    let check = engine.load(&bytes).map_err(Problem::Unusable)?;
    let grants = args.grant.grants()?;
    let limits = Limits {
        timeout: args.timeout,
        memory_bytes: args.memory_limit,
        ..Limits::default()
    };
    let mut verdicts = Vec::new();
    // What validate-config says of each configuration, asked once per configuration.
    let mut refusals: BTreeMap<String, Option<Failure>> = BTreeMap::new();
    for file in &args.fixtures {
        let fixtures = load(file)?;
        for case in &fixtures.cases {
            let (object, config, now) = inputs(file, &fixtures, case)?;
            let limits = match &case.timeout {
                Some(timeout) => Limits {
                    timeout: duration(timeout).map_err(|problem| {
                        Problem::Input(format!(
                            "{}: case `{}`: {problem}",
                            file.display(),
                            case.name
                        ))
                    })?,
                    ..limits
                },
                None => limits,
            };
            let request = request_for(check.input(&object), &object, &config, now);
            let refused = match refusals.get(&request.config) {
                Some(refused) => refused.clone(),
                None => {
                    let refused = engine
                        .validate_config(&check, &request.config, &limits)
                        .await
                        .err();
                    refusals.insert(request.config.clone(), refused.clone());
                    refused
                }
            };
            // A configuration the check refuses when it is loaded is the case's answer: the operator
            // rejects such a ConfigMap and never evaluates the check with it.
            let evaluated = refused.is_none();
            let evaluation = match refused {
                Some(refusal) => Evaluation {
                    outcome: Err(refusal),
                    duration: Duration::ZERO,
                    logs: Vec::new(),
                    logs_dropped: 0,
                    refusals: Vec::new(),
                },
                None => {
                    engine
                        .evaluate_with(&check, &request, &limits, &grants)
                        .await
                }
            };
            let mut verdict = judge(case, &evaluation);
            if let Some(projection) = check.projection().filter(|_| evaluated) {
                let whole = Request {
                    object: object.to_string(),
                    ..request
                };
                let whole = engine.evaluate_with(&check, &whole, &limits, &grants).await;
                if let Some(difference) = difference(&whole, &evaluation) {
                    verdict.failures.push(format!(
                        "the declared reads ({}) change the answer: {difference}",
                        projection.declared().join(", ")
                    ));
                }
            }
            verdicts.push(verdict);
        }
    }
    let failed = verdicts.iter().filter(|v| !v.failures.is_empty()).count();
    print!("{}", table(&verdicts));
    println!("{} passed, {failed} failed", verdicts.len() - failed);
    Ok(if failed == 0 {
        EXIT_PROCEED
    } else {
        EXIT_FAILED_TESTS
    })
}

/// Reads a fixtures file; a mistake is reported with where it is (`cases[3].expect.proceed: …`).
fn load(file: &Path) -> Result<Fixtures, Problem> {
    let document = parse_document(file)?;
    if !document.is_object() {
        return Err(Problem::Input(format!(
            "{} must hold a mapping with `cases` (and optionally `config` and `now`): see `preflight test --help`",
            file.display()
        )));
    }
    serde_path_to_error::deserialize(document).map_err(|error| {
        // The path of the file's top level is `.`: a missing `cases` is said without it.
        let place = match error.path().to_string() {
            top if top == "." => String::new(),
            place => format!("{place}: "),
        };
        Problem::Input(format!("{}: {place}{}", file.display(), error.into_inner()))
    })
}

fn time(text: Option<&str>, file: &Path) -> Result<SystemTime, Problem> {
    text.map_or(Ok(SystemTime::now()), |text| {
        humantime::parse_rfc3339_weak(text).map_err(|error| {
            Problem::Input(format!(
                "{}: `{text}` is not a time: {error}",
                file.display()
            ))
        })
    })
}

/// A case's object, configuration and time.
fn inputs(
    file: &Path,
    fixtures: &Fixtures,
    case: &Case,
) -> Result<(serde_json::Value, serde_json::Value, SystemTime), Problem> {
    let problem =
        |what: &str| Problem::Input(format!("{}: case `{}`: {what}", file.display(), case.name));
    let object = match (&case.object, &case.object_file) {
        (Some(object), None) => object.clone(),
        (None, Some(relative)) => {
            parse_document(&file.parent().unwrap_or(Path::new(".")).join(relative))?
        }
        _ => return Err(problem("give either `object` or `objectFile`")),
    };
    if !object.is_object() {
        return Err(problem("the object must be a mapping"));
    }
    let config = case
        .config
        .as_ref()
        .or(fixtures.config.as_ref())
        .cloned()
        .unwrap_or_else(|| serde_json::json!({}));
    let now = time(case.now.as_deref().or(fixtures.now.as_deref()), file)?;
    Ok((object, config, now))
}

/// How the answer to the projected object differs from the answer to the whole object, if it does.
fn difference(whole: &Evaluation, projected: &Evaluation) -> Option<String> {
    fn key(evaluation: &Evaluation) -> impl PartialEq + '_ {
        let (proceed, delay, reason, message, failure) = summary(&evaluation.outcome);
        let outputs = evaluation.outcome.as_ref().map(|v| &v.outputs).ok();
        let message = failure.is_none().then_some(message);
        (
            proceed,
            delay,
            reason,
            message,
            failure.map(|f| f.kind),
            outputs,
        )
    }
    (key(whole) != key(projected)).then(|| {
        format!(
            "whole object: {}; declared reads only: {}",
            described(whole),
            described(projected)
        )
    })
}

/// One evaluation's answer in a line.
fn described(evaluation: &Evaluation) -> String {
    match &evaluation.outcome {
        Ok(verdict) => format!(
            "{} {} after {:?} {:?} outputs {:?}",
            if verdict.proceed {
                "proceed"
            } else {
                "not proceed"
            },
            verdict.condition_reason(),
            verdict.requeue_after,
            verdict.message,
            verdict.outputs
        ),
        Err(failure) => format!("{} error: {}", failure.kind, failure.message),
    }
}

fn duration(text: &str) -> Result<Duration, String> {
    humantime::parse_duration(text).map_err(|error| format!("`{text}` is not a duration: {error}"))
}

/// Compares an evaluation with what the case expects.
fn judge(case: &Case, evaluation: &Evaluation) -> Verdict {
    let expect = &case.expect;
    let decision = action::decide([&evaluation.outcome], 0);
    let (proceed, requeue_after, reason, message, failure) = summary(&evaluation.outcome);
    let error = failure.map_or("none", |failure| failure.kind.as_str());
    let mut failures = Vec::new();
    let mut compare = |what: &str, expected: String, actual: String| {
        if expected != actual {
            failures.push(format!("{what}: expected {expected}, got {actual}"));
        }
    };
    if let Some(expected) = expect.proceed {
        compare("proceed", expected.to_string(), proceed.to_string());
    }
    if let Some(expected) = &expect.reason {
        compare("reason", expected.clone(), reason.to_owned());
    }
    if let Some(expected) = &expect.error {
        compare("error", expected.clone(), error.to_owned());
    }
    if let Some(expected) = &expect.action {
        compare(
            "action",
            expected.clone(),
            decision.action.as_str().to_owned(),
        );
    }
    if let Some(expected) = &expect.message_contains
        && !message.contains(expected.as_str())
    {
        failures.push(format!(
            "message: expected to contain {expected:?}, got {message:?}"
        ));
    }
    if let Some(range) = &expect.requeue_after {
        let bounds = match range {
            DurationRange::Exact(exact) => duration(exact).map(|d| (d, d)),
            DurationRange::Range { min, max } => {
                duration(min).and_then(|min| Ok((min, duration(max)?)))
            }
        };
        match (bounds, requeue_after) {
            (Err(problem), _) => failures.push(format!("requeueAfter: {problem}")),
            (Ok((min, max)), Some(actual)) if actual >= min && actual <= max => {}
            (Ok((min, max)), actual) => failures.push(format!(
                "requeueAfter: expected {}{}, got {}",
                humantime::format_duration(min),
                if min == max {
                    String::new()
                } else {
                    format!("..{}", humantime::format_duration(max))
                },
                actual.map_or_else(
                    || "none".to_owned(),
                    |d| humantime::format_duration(d).to_string()
                )
            )),
        }
    }
    if let Some(expected) = &expect.outputs {
        let actual = evaluation
            .outcome
            .as_ref()
            .map(|verdict| verdict.outputs.clone())
            .unwrap_or_default();
        if &actual != expected {
            failures.push(format!("outputs: expected {expected:?}, got {actual:?}"));
        }
    }
    let action = decision.action.as_str();
    let actual = match failure {
        None if proceed => format!("proceed {reason} ({action})"),
        None => format!("not proceed {reason} ({action})"),
        Some(failure) => format!("{} error {reason} ({action})", failure.kind),
    };
    Verdict {
        name: case.name.clone(),
        failures,
        actual,
    }
}

/// One row per case: pass or fail, the case, what happened, and for a failure what was expected.
fn table(verdicts: &[Verdict]) -> String {
    let width = verdicts
        .iter()
        .map(|v| v.name.len())
        .max()
        .unwrap_or(4)
        .max(4);
    let mut out = format!("{:<4}  {:<width$}  {}\n", "", "case", "actual");
    for verdict in verdicts {
        let status = if verdict.failures.is_empty() {
            "ok"
        } else {
            "FAIL"
        };
        out += &format!(
            "{status:<4}  {:<width$}  {}\n",
            verdict.name, verdict.actual
        );
        for failure in &verdict.failures {
            out += &format!("{:<4}  {:<width$}    {failure}\n", "", "");
        }
    }
    out
}
