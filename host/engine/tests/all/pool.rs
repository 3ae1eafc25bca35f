//! Admission by the pool's room: a check whose instance needs more of the pooling allocator than one
//! evaluation slot holds (a Python check has tens of core instances; a slot holds 8) takes several slots, so that
//! evaluations beyond the pool's room wait instead of failing to instantiate.

use preflight_engine::{Engine, EngineConfig, Limits, Request, Target};
use preflight_test_support::build_python_check;
use std::sync::Arc;
use std::time::SystemTime;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn evaluations_of_a_check_larger_than_a_slot_wait_for_room_instead_of_failing() {
    // Eight slots: the pool holds 64 core instances, 8 per slot; a Python instance needs several slots'
    // worth, so eight evaluations in flight (as `preflight bench --concurrency 8` runs them) do not fit.
    let engine = Arc::new(
        Engine::new(EngineConfig {
            max_concurrent_evaluations: 8,
            ..EngineConfig::default()
        })
        .unwrap(),
    );
    let bytes = std::fs::read(build_python_check("plugins/dependency-ready")).unwrap();
    let check = engine.load(&bytes).unwrap();
    let request = Arc::new(Request {
        object: r#"{"apiVersion":"apps.example.com/v1","kind":"App","metadata":{"name":"a","namespace":"shop"},"spec":{"dependsOn":["db"]}}"#.into(),
        config: r#"{"available":["db"]}"#.into(),
        target: Target {
            group: "apps.example.com".into(),
            version: "v1".into(),
            kind: "App".into(),
            namespace: Some("shop".into()),
            name: "a".into(),
        },
        now: SystemTime::now(),
    });
    let evaluations: Vec<_> = (0..32)
        .map(|_| {
            let (engine, check, request) = (engine.clone(), check.clone(), request.clone());
            tokio::spawn(async move {
                engine
                    .evaluate(&check, &request, &Limits::default())
                    .await
                    .outcome
            })
        })
        .collect();
    for evaluation in evaluations {
        let outcome = evaluation.await.unwrap().expect("every evaluation runs");
        assert!(outcome.proceed, "the dependency is available");
    }
}
