//! Projected input through the engine: a check's declared reads travel in its component, the engine reads
//! them at load, and the check answers the projection as it answers the whole object; a malformed
//! declaration is refused at load with the path and the problem.

use preflight_engine::{ComponentProblem, Engine, EngineConfig, Error, Limits, Request, Target};
use preflight_test_support::{check_bytes, fixture, with_custom_section};
use serde_json::{Value, json};
use std::time::SystemTime;

fn yaml(name: &str) -> Value {
    serde_norway::from_str(&std::fs::read_to_string(fixture(name)).unwrap()).unwrap()
}

#[tokio::test]
async fn a_declaring_check_answers_its_projection_as_it_answers_the_whole_object() {
    let engine = Engine::new(EngineConfig::default()).unwrap();
    let check = engine.load(&check_bytes("dependency-ready")).unwrap();
    assert_eq!(
        check.info().reads.as_deref(),
        Some(&["spec.dependsOn".to_owned()][..])
    );
    let config = json!({"available": ["postgres-main"], "retryAfterSeconds": 600}).to_string();
    for name in ["app-waiting.yaml", "app-ready.yaml"] {
        let object = yaml(name);
        let projected: Value = serde_json::from_str(&check.input(&object)).unwrap();
        assert!(projected.get("status").is_none(), "{projected}");
        assert_eq!(projected["spec"]["dependsOn"], object["spec"]["dependsOn"]);
        let mut answers = Vec::new();
        for sent in [object.to_string(), check.input(&object)] {
            let request = Request {
                object: sent,
                config: config.clone(),
                target: Target::of_object(&object),
                now: SystemTime::UNIX_EPOCH,
            };
            let verdict = engine
                .evaluate(&check, &request, &Limits::default())
                .await
                .outcome
                .unwrap();
            answers.push((verdict.proceed, verdict.requeue_after, verdict.message));
        }
        assert_eq!(answers[0], answers[1], "{name}");
    }
}

#[test]
fn a_check_that_declares_nothing_gets_the_whole_object() {
    let engine = Engine::new(EngineConfig::default()).unwrap();
    let check = engine.load(&check_bytes("misbehave")).unwrap();
    assert_eq!(check.info().reads, None);
    let object = yaml("app-waiting.yaml");
    assert_eq!(check.input(&object), object.to_string());
}

#[test]
fn a_declaration_added_to_a_built_component_is_read_and_a_malformed_one_is_refused() {
    let engine = Engine::new(EngineConfig::default()).unwrap();
    let bytes = check_bytes("misbehave");
    let declared = with_custom_section(&bytes, "preflight-reads", b"spec.mode\nmetadata.labels\n");
    let check = engine.load(&declared).unwrap();
    assert_eq!(
        check.info().reads.as_deref(),
        Some(&["metadata.labels".to_owned(), "spec.mode".to_owned()][..])
    );
    let malformed = with_custom_section(&bytes, "preflight-reads", b"spec..mode\n");
    match engine.load(&malformed) {
        Err(Error::InvalidComponent {
            problem, message, ..
        }) => assert_eq!(
            (problem, message.as_str()),
            (
                ComponentProblem::ReadsSection,
                "its `preflight-reads` section: path `spec..mode`: an empty key"
            )
        ),
        other => panic!("expected a refusal, got {other:?}"),
    }
    let not_text = with_custom_section(&bytes, "preflight-reads", &[0xff, 0xfe]);
    let error = engine.load(&not_text).unwrap_err().to_string();
    assert!(
        error.ends_with("its `preflight-reads` section: not UTF-8"),
        "{error}"
    );
}
