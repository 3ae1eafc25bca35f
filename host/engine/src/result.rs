//! A check's result, checked against the contract: the record any contract version returns, and the verdict or
//! failure it makes (reason pattern, output caps, result size, contradictions).

use crate::bindings::{v0_1, v0_2};
use crate::limits::Limits;
use crate::outcome::{CheckOutcome, Failure, FailureKind, Verdict};
use std::collections::BTreeMap;
use std::time::Duration;

/// Longest condition reason Kubernetes accepts.
const MAX_REASON_LEN: usize = 1024;
/// Most outputs one result may carry.
const MAX_OUTPUTS: usize = 16;
/// Most bytes of output keys and values in one result.
const MAX_OUTPUT_BYTES: usize = 4 << 10;
/// Longest output key (a Kubernetes label name's length).
const MAX_OUTPUT_KEY_LEN: usize = 63;

/// A check's result in any contract version: a 0.1 result has no outputs.
pub(crate) struct RawResult {
    pub proceed: bool,
    pub requeue_after_ms: Option<u32>,
    pub error: Option<String>,
    pub reason: String,
    pub message: String,
    pub outputs: Vec<(String, String)>,
}

impl From<v0_1::PreflightResult> for RawResult {
    fn from(result: v0_1::PreflightResult) -> Self {
        Self {
            proceed: result.proceed,
            requeue_after_ms: result.requeue_after_ms,
            error: result.error,
            reason: result.reason,
            message: result.message,
            outputs: Vec::new(),
        }
    }
}

impl From<v0_2::PreflightResult> for RawResult {
    fn from(result: v0_2::PreflightResult) -> Self {
        Self {
            proceed: result.proceed,
            requeue_after_ms: result.requeue_after_ms,
            error: result.error,
            reason: result.reason,
            message: result.message,
            outputs: result
                .outputs
                .into_iter()
                .map(|output| (output.key, output.value))
                .collect(),
        }
    }
}

/// Checks a returned result against the contract and turns it into a verdict or a failure.
pub(crate) fn verdict_of(result: RawResult, limits: &Limits) -> CheckOutcome {
    let RawResult {
        proceed,
        requeue_after_ms,
        error,
        reason,
        message,
        outputs,
    } = result;
    let size = reason.len() + message.len() + error.as_ref().map_or(0, String::len);
    if size > limits.max_result_bytes {
        return Err(Failure::new(
            FailureKind::InvalidResult,
            format!(
                "the check returned {size} bytes of reason, message and error; the limit is {}",
                limits.max_result_bytes
            ),
        ));
    }
    if !is_valid_reason(&reason) {
        let shown: String = reason.chars().take(64).collect();
        return Err(Failure::new(
            FailureKind::InvalidResult,
            format!(
                "reason {shown:?} is not a valid condition reason: start with a letter, then letters, digits, \
                 '_', ',' or ':' (UpperCamelCase, at most {MAX_REASON_LEN} characters)"
            ),
        ));
    }
    if let Some(error) = error {
        if proceed {
            return Err(Failure::new(
                FailureKind::InvalidResult,
                format!("the check both proceeded and returned an error ({error})"),
            ));
        }
        let reason = if reason.is_empty() {
            FailureKind::CheckError.default_reason().to_owned()
        } else {
            reason
        };
        return Err(Failure {
            kind: FailureKind::CheckError,
            reason,
            message: error,
        });
    }
    let outputs = outputs_of(outputs)?;
    let requeue_after = requeue_after_ms
        .filter(|ms| *ms > 0)
        .map(|ms| Duration::from_millis(ms.into()));
    Ok(Verdict {
        proceed,
        requeue_after,
        reason,
        message,
        outputs,
    })
}

/// Checks a result's outputs against the contract's caps: at most [`MAX_OUTPUTS`], unique keys of letters,
/// digits, `-`, `_` and `.` up to [`MAX_OUTPUT_KEY_LEN`], [`MAX_OUTPUT_BYTES`] in all.
fn outputs_of(outputs: Vec<(String, String)>) -> Result<BTreeMap<String, String>, Failure> {
    let invalid = |why: String| Err(Failure::new(FailureKind::InvalidResult, why));
    if outputs.len() > MAX_OUTPUTS {
        return invalid(format!(
            "the check returned {} outputs; the limit is {MAX_OUTPUTS}",
            outputs.len()
        ));
    }
    let bytes: usize = outputs
        .iter()
        .map(|(key, value)| key.len() + value.len())
        .sum();
    if bytes > MAX_OUTPUT_BYTES {
        return invalid(format!(
            "the check returned {bytes} bytes of outputs; the limit is {MAX_OUTPUT_BYTES}"
        ));
    }
    let mut map = BTreeMap::new();
    for (key, value) in outputs {
        let valid_key = !key.is_empty()
            && key.len() <= MAX_OUTPUT_KEY_LEN
            && key
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.'));
        if !valid_key {
            let shown: String = key.chars().take(MAX_OUTPUT_KEY_LEN + 1).collect();
            return invalid(format!(
                "output key {shown:?} is not valid: 1 to {MAX_OUTPUT_KEY_LEN} letters, digits, '-', '_' or '.'"
            ));
        }
        if map.contains_key(&key) {
            return invalid(format!("output key {key:?} appears twice"));
        }
        map.insert(key, value);
    }
    Ok(map)
}

/// Empty, or a Kubernetes condition reason: `^[A-Za-z]([A-Za-z0-9_,:]*[A-Za-z0-9_])?$`, at most 1024 bytes.
fn is_valid_reason(reason: &str) -> bool {
    let bytes = reason.as_bytes();
    let inner = |b: &u8| b.is_ascii_alphanumeric() || matches!(b, b'_' | b',' | b':');
    match bytes {
        [] => true,
        [first, rest @ ..] => {
            reason.len() <= MAX_REASON_LEN
                && first.is_ascii_alphabetic()
                && rest.iter().all(inner)
                && rest
                    .last()
                    .is_none_or(|b| b.is_ascii_alphanumeric() || *b == b'_')
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn result(
        proceed: bool,
        requeue_after_ms: Option<u32>,
        error: Option<&str>,
        reason: &str,
    ) -> RawResult {
        RawResult {
            proceed,
            requeue_after_ms,
            error: error.map(Into::into),
            reason: reason.into(),
            message: "m".into(),
            outputs: Vec::new(),
        }
    }

    #[test]
    fn outputs_are_checked_against_their_caps() {
        let limits = Limits::default();
        let with = |outputs: Vec<(String, String)>| {
            verdict_of(
                RawResult {
                    outputs,
                    ..result(true, None, None, "")
                },
                &limits,
            )
        };
        let pair = |key: &str, value: &str| (key.to_owned(), value.to_owned());
        let verdict = with(vec![pair("databaseId", "db-42"), pair("region.name", "eu")]).unwrap();
        assert_eq!(verdict.outputs["databaseId"], "db-42");
        assert_eq!(verdict.outputs.len(), 2);
        let refusal = |outputs| with(outputs).unwrap_err();
        for (outputs, why) in [
            (vec![pair("a b", "x")], "not valid"),
            (vec![pair("", "x")], "not valid"),
            (vec![pair(&"k".repeat(64), "x")], "not valid"),
            (vec![pair("k", "1"), pair("k", "2")], "appears twice"),
            (
                (0..17).map(|i| pair(&format!("k{i}"), "")).collect(),
                "17 outputs",
            ),
            (vec![pair("k", &"v".repeat(5000))], "bytes of outputs"),
        ] {
            let failure = refusal(outputs);
            assert_eq!(failure.kind, FailureKind::InvalidResult);
            assert!(failure.message.contains(why), "{}", failure.message);
        }
    }

    #[test]
    fn condition_reasons_follow_the_kubernetes_pattern() {
        for good in ["", "A", "DependencyMissing", "Not_Ready", "a:b,c_", "X1"] {
            assert!(is_valid_reason(good), "{good}");
        }
        for bad in [
            "1Abc",
            "Has Space",
            "Trailing:",
            "Trailing,",
            "émoji",
            &"A".repeat(1025),
        ] {
            assert!(!is_valid_reason(bad), "{bad}");
        }
    }

    #[test]
    fn results_are_checked_against_the_contract() {
        let limits = Limits::default();
        let verdict = verdict_of(result(false, Some(1500), None, "Waiting"), &limits).unwrap();
        assert_eq!(verdict.requeue_after, Some(Duration::from_millis(1500)));
        assert_eq!(
            verdict_of(result(false, Some(0), None, ""), &limits)
                .unwrap()
                .requeue_after,
            None
        );

        let error = verdict_of(result(false, None, Some("db down"), ""), &limits).unwrap_err();
        assert_eq!(
            (error.kind, error.reason.as_str(), error.message.as_str()),
            (FailureKind::CheckError, "CheckError", "db down")
        );
        let error =
            verdict_of(result(false, None, Some("db down"), "DbDown"), &limits).unwrap_err();
        assert_eq!(error.reason, "DbDown");

        let contradiction = verdict_of(result(true, None, Some("x"), ""), &limits).unwrap_err();
        assert_eq!(contradiction.kind, FailureKind::InvalidResult);
        assert_eq!(
            verdict_of(result(true, None, None, "not a reason"), &limits)
                .unwrap_err()
                .kind,
            FailureKind::InvalidResult
        );

        let small = Limits {
            max_result_bytes: 10,
            ..Limits::default()
        };
        let too_big = verdict_of(result(true, None, None, "ElevenChars"), &small).unwrap_err();
        assert_eq!(too_big.kind, FailureKind::InvalidResult);
        assert!(
            too_big.message.contains("limit is 10"),
            "{}",
            too_big.message
        );
    }
}
