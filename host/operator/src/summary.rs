//! What a gate evaluation reads as: each check's run, and the condition's wording for the decision (the
//! deciding check's reason, a message naming it, cut to a readable length).

use crate::vocabulary::OutputsPlacement;
use preflight_engine::action::{Action, Decision};
use preflight_engine::{CheckOutcome, Failure, Verdict};
use std::time::Duration;

/// Longest condition message written; Kubernetes allows 32 KiB, people read the first lines.
const MAX_MESSAGE_CHARS: usize = 4096;

/// One check's part in a gate result.
#[derive(Debug, Clone)]
pub struct CheckRun {
    /// The check's name.
    pub name: String,
    /// The outcome after the failure policy (an ignored failure becomes a proceeding verdict).
    pub outcome: CheckOutcome,
    /// The failure that `failurePolicy: Ignore` turned into "proceed", if any.
    pub ignored: Option<Failure>,
    /// The check is suspended (`suspend: "true"`): it was not evaluated, and the object passed it.
    pub suspended: bool,
    /// Time spent in the check; zero when it could not run.
    pub duration: Duration,
    /// Where the check's outputs go on the object.
    pub outputs_placement: OutputsPlacement,
    /// Said after the decision's message: the version that ran is a stand-in (see
    /// `LoadedCheck::stand_in_note`).
    pub note: Option<String>,
}

/// The condition-shaped summary of a gate result.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Summary {
    /// The object may be reconciled now.
    pub proceed: bool,
    /// UpperCamelCase reason.
    pub reason: String,
    /// Human message naming the deciding check.
    pub message: String,
}

/// The condition for a decision: the deciding check's reason, and a message naming it (and, when the object
/// is held, every other check that holds it).
pub fn summarize(decision: &Decision, runs: &[CheckRun]) -> Summary {
    let (proceed, reason, message) = match decision.action {
        Action::Proceed { .. } => match runs {
            [] => (
                true,
                "NoChecks".to_owned(),
                "no preflight check gates this object".to_owned(),
            ),
            [run] => {
                let verdict = run.outcome.as_ref().ok();
                let reason = verdict.map_or("Proceed", Verdict::condition_reason);
                let message = verdict.map_or("", |v| v.message.as_str());
                (
                    true,
                    reason.to_owned(),
                    line(run, or_default(message, "proceed").as_str()),
                )
            }
            runs => {
                let ignored = runs.iter().any(|run| run.ignored.is_some());
                let messages: Vec<String> = runs
                    .iter()
                    .map(|run| {
                        let message = run.outcome.as_ref().map_or("", |v| v.message.as_str());
                        line(run, or_default(message, "proceed").as_str())
                    })
                    .collect();
                let reason = if ignored {
                    "CheckFailureIgnored"
                } else {
                    "AllChecksPassed"
                };
                (true, reason.to_owned(), messages.join("; "))
            }
        },
        Action::Requeue(_) | Action::AwaitChange => {
            let deciding = runs
                .iter()
                .position(|run| run.outcome.as_ref().is_ok_and(|v| !v.proceed));
            let reason = deciding
                .and_then(|index| runs[index].outcome.as_ref().ok())
                .map(|verdict| verdict.condition_reason().to_owned())
                .unwrap_or_default();
            (false, reason, holding_lines(runs, deciding))
        }
        Action::Backoff(_) | Action::Stop => {
            let retryable = matches!(decision.action, Action::Backoff(_));
            let deciding = runs.iter().position(|run| {
                run.outcome
                    .as_ref()
                    .is_err_and(|failure| failure.kind.is_retryable() == retryable)
            });
            let reason = deciding
                .and_then(|index| runs[index].outcome.as_ref().err())
                .map(|failure| failure.reason.clone())
                .unwrap_or_default();
            (false, reason, holding_lines(runs, deciding))
        }
    };
    let notes: String = runs
        .iter()
        .filter_map(|run| {
            Some(format!(
                " [{}: {}]",
                short_name(&run.name),
                run.note.as_ref()?
            ))
        })
        .collect();
    Summary {
        proceed,
        reason,
        message: truncate(message + &notes),
    }
}

/// `<check>: <what it said>` for every check that holds the object (failed, or did not proceed), the
/// deciding one first, then the others in order, `; `-separated: whoever reads the condition learns at once
/// every check that stands in the way, not one at a time.
fn holding_lines(runs: &[CheckRun], deciding: Option<usize>) -> String {
    let holding = |run: &CheckRun| match &run.outcome {
        Ok(verdict) if !verdict.proceed => Some(or_default(&verdict.message, "not ready")),
        Ok(_) => None,
        Err(failure) => Some(failure.message.clone()),
    };
    let others = (0..runs.len()).filter(|index| Some(*index) != deciding);
    deciding
        .into_iter()
        .chain(others)
        .filter_map(|index| Some(line(&runs[index], &holding(&runs[index])?)))
        .collect::<Vec<_>>()
        .join("; ")
}

/// `<check>: <text>`: one check's part of the message.
fn line(run: &CheckRun, text: &str) -> String {
    format!("{}: {text}", short_name(&run.name))
}

/// A check's name without the ConfigMap namespace, as people call it.
fn short_name(name: &str) -> &str {
    name.rsplit_once('/').map_or(name, |(_, short)| short)
}

fn or_default(text: &str, default: &str) -> String {
    if text.is_empty() { default } else { text }.to_owned()
}

fn truncate(mut message: String) -> String {
    if let Some((index, _)) = message.char_indices().nth(MAX_MESSAGE_CHARS) {
        message.truncate(index);
        message.push('…');
    }
    message
}

#[cfg(test)]
mod tests {
    use super::*;
    use preflight_engine::action::decide;

    #[test]
    fn a_stand_in_version_is_named_after_the_decision() {
        let run = |name: &str, proceed: bool, note: Option<&str>| CheckRun {
            name: format!("ns/{name}"),
            outcome: Ok(Verdict {
                proceed,
                requeue_after: None,
                reason: if proceed { "Ready" } else { "NotReady" }.into(),
                message: format!("{name} says so"),
                outputs: Default::default(),
            }),
            ignored: None,
            suspended: false,
            duration: Duration::ZERO,
            outputs_placement: OutputsPlacement::default(),
            note: note.map(str::to_owned),
        };
        let table = [
            (vec![run("a", true, None)], "a: a says so"),
            (
                vec![run("a", true, Some("serving a copy"))],
                "a: a says so [a: serving a copy]",
            ),
            (
                vec![
                    run("a", false, None),
                    run("b", true, Some("serving a copy")),
                ],
                "a: a says so [b: serving a copy]",
            ),
        ];
        for (runs, message) in table {
            let decision = decide(runs.iter().map(|run| &run.outcome), 0);
            assert_eq!(summarize(&decision, &runs).message, message);
        }
    }

    #[test]
    fn truncates_long_messages_on_a_character_boundary() {
        let long = "é".repeat(MAX_MESSAGE_CHARS + 10);
        let truncated = truncate(long);
        assert_eq!(truncated.chars().count(), MAX_MESSAGE_CHARS + 1);
        assert!(truncated.ends_with('…'));
    }
}
