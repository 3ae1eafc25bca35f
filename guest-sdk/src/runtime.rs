//! The glue between the WIT export and a check function: typed decoding, panic reporting, encoding.

use crate::bindings::preflight::check::types::{CheckRequest, Datetime, Output, PreflightResult};
use crate::{IntoOutcome, Outcome, Request, Target};
use serde::de::DeserializeOwned;
use std::time::{Duration, SystemTime};

/// Runs `function` on a raw request from the host. Called by [`crate::check!`].
pub fn run<T, C, R>(request: CheckRequest, function: fn(Request<T, C>) -> R) -> PreflightResult
where
    T: DeserializeOwned,
    C: DeserializeOwned,
    R: IntoOutcome,
{
    report_panics_to_host();
    let target = Target {
        group: request.target.group,
        version: request.target.version,
        kind: request.target.kind,
        namespace: request.target.namespace,
        name: request.target.name,
    };
    encode(decode_and_call(
        request.object,
        &request.config,
        target,
        to_system_time(request.now),
        function,
    ))
}

/// Deserialises the configuration, then the object, then calls `function`; decoding failures become errors.
/// The configuration first, in every SDK: a bad one is the administrator's to fix, whatever the object.
pub(crate) fn decode_and_call<T, C, R>(
    raw_object: String,
    raw_config: &str,
    target: Target,
    now: SystemTime,
    function: fn(Request<T, C>) -> R,
) -> Outcome
where
    T: DeserializeOwned,
    C: DeserializeOwned,
    R: IntoOutcome,
{
    let config = match decode_config(raw_config) {
        Ok(config) => config,
        Err(error) => {
            return Outcome::error(format!("invalid check configuration: {error}"))
                .because("InvalidConfig", "");
        }
    };
    let object = match serde_json::from_str(&raw_object) {
        Ok(object) => object,
        Err(error) => {
            return Outcome::error(format!(
                "the object does not match the check's type: {error}"
            ))
            .because("InvalidObject", "");
        }
    };
    function(Request {
        object,
        config,
        target,
        now,
        raw_object,
    })
    .into_outcome()
}

/// The configuration decoded into the check's type; empty text is `{}`.
fn decode_config<C: DeserializeOwned>(raw_config: &str) -> Result<C, serde_json::Error> {
    serde_json::from_str(if raw_config.trim().is_empty() {
        "{}"
    } else {
        raw_config
    })
}

/// The `configure.validate-config` export: `raw_config` must decode into the configuration type of
/// `function`, then `validator` must accept it. Called by [`crate::check!`].
pub fn validate_config<T, C, R, E>(
    raw_config: &str,
    _function: fn(Request<T, C>) -> R,
    validator: fn(&C) -> Result<(), E>,
) -> Result<(), String>
where
    C: DeserializeOwned,
    E: std::fmt::Display,
{
    report_panics_to_host();
    let config = decode_config::<C>(raw_config)
        .map_err(|error| format!("invalid check configuration: {error}"))?;
    validator(&config).map_err(|error| error.to_string())
}

/// The validator of checks that give none: any configuration that decodes is accepted.
pub fn accept_any<C>(_config: &C) -> Result<(), std::convert::Infallible> {
    Ok(())
}

fn encode(outcome: Outcome) -> PreflightResult {
    PreflightResult {
        proceed: outcome.proceed,
        requeue_after_ms: outcome.requeue_after.map(duration_to_ms),
        error: outcome.error,
        reason: outcome.reason,
        message: outcome.message,
        outputs: outcome
            .outputs
            .into_iter()
            .map(|(key, value)| Output { key, value })
            .collect(),
    }
}

/// Milliseconds, rounded up so that a sub-millisecond delay is not mistaken for "no delay", saturating at u32::MAX.
fn duration_to_ms(delay: Duration) -> u32 {
    let ms = delay.as_nanos().div_ceil(1_000_000);
    u32::try_from(ms).unwrap_or(u32::MAX)
}

fn to_system_time(now: Datetime) -> SystemTime {
    SystemTime::UNIX_EPOCH + Duration::new(now.seconds, now.nanoseconds)
}

/// Sends a panic's message to the host's log at error level before the instance traps, so the host can
/// quote it; without this the message would go to a stderr the host does not provide.
fn report_panics_to_host() {
    std::panic::set_hook(Box::new(|info| {
        crate::error(&format!("check panicked: {info}"))
    }));
}

/// The size of the `preflight-reads` custom section for `paths`: each path and a newline. Called by
/// [`crate::reads!`].
pub const fn reads_section_len(paths: &[&str]) -> usize {
    let mut len = 0;
    let mut index = 0;
    while index < paths.len() {
        len += paths[index].len() + 1;
        index += 1;
    }
    len
}

/// The `preflight-reads` custom section for `paths`: each path followed by a newline (the host parses and
/// checks them when it loads the component). A path that is empty or holds a newline fails the build.
/// Called by [`crate::reads!`].
pub const fn reads_section<const LEN: usize>(paths: &[&str]) -> [u8; LEN] {
    let mut section = [0u8; LEN];
    let mut at = 0;
    let mut index = 0;
    while index < paths.len() {
        let path = paths[index].as_bytes();
        assert!(!path.is_empty(), "preflight_guest::reads!: an empty path");
        let mut byte = 0;
        while byte < path.len() {
            assert!(
                path[byte] != b'\n',
                "preflight_guest::reads!: a path holds a newline"
            );
            section[at] = path[byte];
            at += 1;
            byte += 1;
        }
        section[at] = b'\n';
        at += 1;
        index += 1;
    }
    section
}

#[cfg(test)]
mod tests {
    use super::*;

    fn check(_: Request<serde_json::Value, std::collections::BTreeSet<u32>>) -> Outcome {
        Outcome::proceed()
    }

    fn at_most_three(config: &std::collections::BTreeSet<u32>) -> Result<(), String> {
        match config.len() {
            0..=3 => Ok(()),
            n => Err(format!("{n} entries; at most 3")),
        }
    }

    #[test]
    fn configurations_must_decode_then_pass_the_validator() {
        assert_eq!(validate_config("[1,2]", check, at_most_three), Ok(()));
        assert_eq!(
            validate_config("[1,2,3,4]", check, at_most_three),
            Err("4 entries; at most 3".to_owned())
        );
        let undecodable = validate_config("{\"a\":1}", check, accept_any).unwrap_err();
        assert!(
            undecodable.starts_with("invalid check configuration"),
            "{undecodable}"
        );
        assert_eq!(validate_config("[]", check, accept_any), Ok(()));
    }

    #[test]
    fn a_bad_configuration_is_told_before_a_bad_object_as_in_every_sdk() {
        let both_bad = decode_and_call(
            "not an object".to_owned(),
            "[1",
            Target::default(),
            SystemTime::now(),
            check,
        );
        assert_eq!(both_bad.reason(), "InvalidConfig");
        let object_bad = decode_and_call(
            "not an object".to_owned(),
            "[1]",
            Target::default(),
            SystemTime::now(),
            check,
        );
        assert_eq!(object_bad.reason(), "InvalidObject");
    }

    #[test]
    fn delays_round_up_to_whole_milliseconds_and_saturate() {
        assert_eq!(duration_to_ms(Duration::from_micros(1)), 1);
        assert_eq!(duration_to_ms(Duration::from_millis(1500)), 1500);
        assert_eq!(
            duration_to_ms(Duration::from_secs(100 * 24 * 3600)),
            u32::MAX
        );
    }
}
