//! The example checks, built from source, through the engine's API, on objects that take every branch
//! (the same through `preflight run`: host/cli/tests/all/cli.rs).

use preflight_engine::action::{self, Action};
use preflight_engine::{Engine, EngineConfig, FailureKind, Limits, Request, Target};
use preflight_test_support::{check_bytes, fixture};
use serde_json::Value;
use std::time::{Duration, SystemTime};

/// Proceed with no re-check.
const PROCEED: Action = Action::Proceed {
    recheck_after: None,
};

/// Saturday 2026-12-05 12:00 UTC.
const SATURDAY_NOON: &str = "2026-12-05T12:00:00Z";

fn document(name: &str) -> Value {
    let text = std::fs::read_to_string(fixture(name)).unwrap();
    if name.ends_with(".json") {
        serde_json::from_str(&text).unwrap()
    } else {
        serde_norway::from_str(&text).unwrap()
    }
}

fn request(object: &str, config: Option<&str>, now: SystemTime) -> Request {
    let object = document(object);
    Request {
        target: Target::of_object(&object),
        object: object.to_string(),
        config: config.map_or_else(|| "{}".to_owned(), |name| document(name).to_string()),
        now,
    }
}

fn saturday_noon() -> SystemTime {
    humantime::parse_rfc3339(SATURDAY_NOON).unwrap()
}

async fn action_of(package: &str, request: &Request) -> (Action, preflight_engine::CheckOutcome) {
    let engine = Engine::new(EngineConfig::default()).unwrap();
    let check = engine.load(&check_bytes(package)).unwrap();
    let evaluation = engine.evaluate(&check, request, &Limits::default()).await;
    (
        action::decide([&evaluation.outcome], 0).action,
        evaluation.outcome,
    )
}

#[tokio::test]
async fn dependency_ready_requeues_with_jitter_until_the_dependency_exists() {
    let config = Some("dependency-ready-config.yaml");
    let (action, outcome) = action_of(
        "dependency-ready",
        &request("app-waiting.yaml", config, SystemTime::now()),
    )
    .await;
    let verdict = outcome.unwrap();
    assert!(!verdict.proceed);
    assert_eq!(verdict.reason, "DependencyMissing");
    assert_eq!(
        verdict.message,
        "waiting for redis; checking again every 600 s"
    );
    let Action::Requeue(delay) = action else {
        panic!("expected a requeue, got {action:?}")
    };
    assert!(
        delay >= Duration::from_secs(600) && delay < Duration::from_secs(660),
        "{delay:?}"
    );

    let (action, _) = action_of(
        "dependency-ready",
        &request("app-ready.yaml", config, SystemTime::now()),
    )
    .await;
    assert_eq!(action, PROCEED);

    let (action, outcome) = action_of(
        "dependency-ready",
        &request("app-malformed.json", config, SystemTime::now()),
    )
    .await;
    let failure = outcome.unwrap_err();
    assert_eq!(
        (failure.kind, failure.reason.as_str()),
        (FailureKind::CheckError, "InvalidObject")
    );
    assert!(
        failure.message.contains("does not match the check's type"),
        "{}",
        failure.message
    );
    assert_eq!(action, Action::Backoff(Duration::from_millis(5)));
}

#[tokio::test]
async fn maintenance_window_requeues_until_it_opens_and_proceeds_inside() {
    let config = Some("maintenance-window-config.yaml");
    let (action, outcome) = action_of(
        "maintenance-window",
        &request("app-ready.yaml", config, saturday_noon()),
    )
    .await;
    assert_eq!(outcome.unwrap().reason, "MaintenanceWindowClosed");
    assert_eq!(action, Action::Requeue(Duration::from_secs(10 * 3600)));

    let one_am = saturday_noon() + Duration::from_secs(13 * 3600);
    let (action, _) = action_of(
        "maintenance-window",
        &request("app-ready.yaml", config, one_am),
    )
    .await;
    assert_eq!(
        action,
        Action::Proceed {
            recheck_after: Some(Duration::from_secs(3600))
        }
    );

    let (action, outcome) = action_of(
        "maintenance-window",
        &request("app-ready.yaml", None, saturday_noon()),
    )
    .await;
    assert_eq!(outcome.unwrap_err().reason, "InvalidMaintenanceWindow");
    assert!(matches!(action, Action::Backoff(_)));
}

#[tokio::test]
async fn required_metadata_blocks_without_requeue() {
    let config = Some("required-metadata-config.yaml");
    let (action, outcome) = action_of(
        "required-metadata",
        &request("app-waiting.yaml", config, SystemTime::now()),
    )
    .await;
    assert_eq!(
        outcome.unwrap().message,
        "missing annotation(s): example.com/owner"
    );
    assert_eq!(action, Action::AwaitChange);

    let (action, _) = action_of(
        "required-metadata",
        &request("app-ready.yaml", config, SystemTime::now()),
    )
    .await;
    assert_eq!(action, PROCEED);
}
