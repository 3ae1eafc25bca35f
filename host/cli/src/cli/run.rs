//! `preflight run`: one evaluation, printed as text or JSON, with the action it maps to.

use super::{EXIT_FAILED, EXIT_NOT_PROCEED, EXIT_PROCEED, Format, Problem, RunArgs, input, oci};
use preflight_engine::action::{self, Decision};
use preflight_engine::{CheckOutcome, Digest, Error, Evaluation, Failure, FailureKind};
use serde_json::json;
use std::time::Duration;

pub async fn run(args: RunArgs) -> Result<u8, Problem> {
    let prepared = args.evaluate.prepare(
        1,
        oci::read_check(&args.evaluate.check, &args.evaluate.registry).await?,
    )?;
    let digest = Digest::of(&prepared.bytes);
    let mut config_refused = None;
    let evaluation = match prepared.engine.load(&prepared.bytes) {
        Ok(check) => {
            let request = prepared.request(&check);
            config_refused =
                input::refused_config(&prepared.engine, &check, &request.config, &prepared.limits)
                    .await;
            if let Some(why) = &config_refused {
                eprintln!(
                    "warning: the check refuses this configuration when it is loaded (validate-config): \
                     {why}; the operator would reject the ConfigMap (CheckRejected) and never evaluate it"
                );
            }
            prepared
                .engine
                .evaluate_with(&check, &request, &prepared.limits, &prepared.grants)
                .await
        }
        Err(error) => Evaluation {
            outcome: Err(Failure::new(
                FailureKind::InvalidComponent,
                unusable_reason(error),
            )),
            duration: Duration::ZERO,
            logs: Vec::new(),
            logs_dropped: 0,
            refusals: Vec::new(),
        },
    };
    let decision = action::decide([&evaluation.outcome], 0);
    match args.output {
        Format::Json => {
            let mut json = to_json(&evaluation, decision, digest);
            json["configRefused"] = json!(config_refused);
            println!("{json:#}");
        }
        Format::Text => print!(
            "{}",
            to_text(&evaluation, decision, digest, &args.evaluate.check)
        ),
    }
    Ok(match &evaluation.outcome {
        Ok(verdict) if verdict.proceed => EXIT_PROCEED,
        Ok(_) => EXIT_NOT_PROCEED,
        Err(_) => EXIT_FAILED,
    })
}

fn unusable_reason(error: Error) -> String {
    match error {
        Error::InvalidComponent { message, .. } => message,
        other => other.to_string(),
    }
}

fn millis(delay: Option<Duration>) -> Option<u128> {
    delay.map(|delay| delay.as_millis())
}

fn to_json(evaluation: &Evaluation, decision: Decision, digest: Digest) -> serde_json::Value {
    let (proceed, requeue_after, reason, message, error) = summary(&evaluation.outcome);
    json!({
        "proceed": proceed,
        "requeueAfterMs": millis(requeue_after),
        "reason": reason,
        "message": message,
        "error": error.map(|failure| json!({"kind": failure.kind.as_str(), "message": failure.message})),
        "action": decision.action.as_str(),
        "actionDelayMs": millis(decision.action.delay()),
        "durationUs": evaluation.duration.as_micros(),
        "sha256": digest.to_string(),
        "logs": evaluation.logs.iter().map(|line| json!({"level": line.level.to_string(), "message": line.message})).collect::<Vec<_>>(),
        "logsDropped": evaluation.logs_dropped,
        "outputs": evaluation.outcome.as_ref().map(|verdict| verdict.outputs.clone()).unwrap_or_default(),
        "refused": evaluation.refusals,
    })
}

fn to_text(evaluation: &Evaluation, decision: Decision, digest: Digest, check: &str) -> String {
    let (proceed, requeue_after, reason, message, error) = summary(&evaluation.outcome);
    let mut out = format!("check     {check} (sha256:{digest})\n");
    out += &format!("took      {:?}\n", evaluation.duration);
    match error {
        // A failure's message is the error line: it is not repeated as a message.
        Some(failure) => {
            out += &format!("error     {}: {}\n", failure.kind, failure.message);
            out += &format!("reason    {reason}\n");
        }
        None => {
            out += &format!("proceed   {}\n", if proceed { "yes" } else { "no" });
            if let Some(delay) = requeue_after {
                out += &format!("requeue   after {}\n", humantime::format_duration(delay));
            }
            out += &format!("reason    {reason}\n");
            if !message.is_empty() {
                out += &format!("message   {message}\n");
            }
        }
    }
    if let Ok(verdict) = &evaluation.outcome {
        for (key, value) in &verdict.outputs {
            out += &format!("output    {key}={value}\n");
        }
    }
    for refusal in &evaluation.refusals {
        out += &format!("refused   {refusal}\n");
    }
    out += &format!("action    {}", decision.action.as_str());
    if let Some(delay) = decision.action.delay() {
        out += &format!(" (after {})", humantime::format_duration(delay));
    }
    out += "\n";
    for line in &evaluation.logs {
        out += &format!("log       [{}] {}\n", line.level, line.message);
    }
    if evaluation.logs_dropped > 0 {
        out += &format!(
            "log       ({} more lines dropped: over the log cap)\n",
            evaluation.logs_dropped
        );
    }
    out
}

/// proceed, requeue-after, reason, message and the failure (if any) of an outcome.
pub fn summary(outcome: &CheckOutcome) -> (bool, Option<Duration>, &str, &str, Option<&Failure>) {
    match outcome {
        Ok(verdict) => (
            verdict.proceed,
            verdict.requeue_after,
            verdict.condition_reason(),
            &verdict.message,
            None,
        ),
        Err(failure) => (
            false,
            None,
            &failure.reason,
            &failure.message,
            Some(failure),
        ),
    }
}
