//! Admission by the pool's room: a check whose instance needs more of the pooling allocator than one
//! evaluation slot holds (a Python check has tens of core instances; a slot holds 8) takes several slots, so that
//! evaluations beyond the pool's room wait instead of failing to instantiate. And a small pool keeps its
//! room: the slots freed instances leave for decommitting in batches never starve the next evaluation.

use preflight_engine::{Engine, EngineConfig, Limits, Request, Target};
use preflight_test_support::{build_check, build_python_check};
use std::sync::Arc;
use std::time::SystemTime;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn evaluations_of_a_check_larger_than_a_slot_wait_for_room_instead_of_failing() {
    // Eight slots: the pool holds 64 core instances, 8 per slot; a Python instance needs several slots'
    // worth, so eight evaluations in flight (as `preflight bench --concurrency 8` runs them) do not fit.
    let engine = Arc::new(engine_with_slots(8));
    let bytes = std::fs::read(build_python_check("plugins/dependency-ready")).unwrap();
    let check = engine.load(&bytes).unwrap();
    let request = Arc::new(app_whose_dependency_is_available());
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

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_small_pool_runs_every_evaluation_its_slots_admit() {
    // Two slots, two evaluations always in flight, fresh instances. The freed memories and tables wait in
    // decommit batches; a batch larger than this pool left none to allocate and failed about one
    // evaluation in a hundred ("maximum concurrent limit of 4 for memory stripe 0 reached").
    let engine = Arc::new(engine_with_slots(2));
    let bytes = std::fs::read(build_check("dependency-ready")).unwrap();
    let check = engine.load(&bytes).unwrap();
    let request = Arc::new(app_whose_dependency_is_available());
    let workers: Vec<_> = (0..2)
        .map(|_| {
            let (engine, check, request) = (engine.clone(), check.clone(), request.clone());
            tokio::spawn(async move {
                let mut failures = Vec::new();
                for _ in 0..2000 {
                    let outcome = engine
                        .evaluate(&check, &request, &Limits::default())
                        .await
                        .outcome;
                    if let Err(failure) = outcome {
                        failures.push(failure.to_string());
                    }
                }
                failures
            })
        })
        .collect();
    for worker in workers {
        let failures = worker.await.unwrap();
        assert!(
            failures.is_empty(),
            "{} of 2000 evaluations failed; the first: {}",
            failures.len(),
            failures[0]
        );
    }
}

/// An engine whose pool holds `slots` evaluations.
fn engine_with_slots(slots: u32) -> Engine {
    Engine::new(EngineConfig {
        max_concurrent_evaluations: slots,
        ..EngineConfig::default()
    })
    .unwrap()
}

/// An App that depends on `db`, with a configuration in which `db` is available: the check proceeds.
fn app_whose_dependency_is_available() -> Request {
    Request {
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
    }
}
