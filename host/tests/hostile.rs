//! Hostile checks, each a real component built from source: every one is contained with the right
//! classification within a bounded time, and the engine keeps serving a good check afterwards and at the
//! same time.

use preflight::{Engine, EngineConfig, FailureKind, Limits, Request, Target};
use preflight_test_support::check_bytes;
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

const TIMEOUT: Duration = Duration::from_millis(300);
/// Generous bound on how long containing any hostile check may take (timeouts included).
const CONTAINED_WITHIN: Duration = Duration::from_secs(3);

fn limits() -> Limits {
    Limits {
        timeout: TIMEOUT,
        memory_bytes: 32 << 20,
        ..Limits::default()
    }
}

fn request(config: &str) -> Request {
    Request {
        object: r#"{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"x","namespace":"default"}}"#.into(),
        config: config.into(),
        target: Target { version: "v1".into(), kind: "ConfigMap".into(), namespace: Some("default".into()), name: "x".into(), ..Target::default() },
        now: SystemTime::now(),
    }
}

fn mode(name: &str) -> Request {
    request(&format!(r#"{{"mode":"{name}"}}"#))
}

async fn expect_contained(
    engine: &Engine,
    check: &preflight::Check,
    mode_name: &str,
    kind: FailureKind,
    says: &str,
) {
    let started = Instant::now();
    let evaluation = engine.evaluate(check, &mode(mode_name), &limits()).await;
    let elapsed = started.elapsed();
    let failure = evaluation.outcome.expect_err(mode_name);
    assert_eq!(failure.kind, kind, "{mode_name}: {failure}");
    assert!(
        failure.message.contains(says),
        "{mode_name}: {:?} does not mention {says:?}",
        failure.message
    );
    assert!(elapsed < CONTAINED_WITHIN, "{mode_name} took {elapsed:?}");
}

#[tokio::test]
async fn each_misbehaviour_is_contained_and_classified_then_a_good_check_still_runs() {
    let engine = Engine::new(EngineConfig::default()).unwrap();
    let misbehave = engine.load(&check_bytes("misbehave")).unwrap();
    let good = engine.load(&check_bytes("required-metadata")).unwrap();

    expect_contained(
        &engine,
        &misbehave,
        "loop",
        FailureKind::Timeout,
        "time limit",
    )
    .await;
    expect_contained(
        &engine,
        &misbehave,
        "memory",
        FailureKind::MemoryLimit,
        "its limit is 33554432 bytes",
    )
    .await;
    expect_contained(
        &engine,
        &misbehave,
        "recursion",
        FailureKind::Trap,
        "trapped",
    )
    .await;
    expect_contained(
        &engine,
        &misbehave,
        "huge-result",
        FailureKind::InvalidResult,
        "the limit is 65536",
    )
    .await;
    expect_contained(
        &engine,
        &misbehave,
        "panic",
        FailureKind::Trap,
        "the dependency table is corrupt",
    )
    .await;
    expect_contained(&engine, &misbehave, "exit", FailureKind::Trap, "exited").await;
    expect_contained(
        &engine,
        &misbehave,
        "bad-reason",
        FailureKind::InvalidResult,
        "not a valid condition reason",
    )
    .await;

    let flood = engine
        .evaluate(&misbehave, &mode("log-flood"), &limits())
        .await;
    assert!(
        flood.outcome.unwrap().proceed,
        "a chatty check still gets its verdict through"
    );
    assert!(
        flood.logs_dropped > 10_000,
        "the log cap held: {} dropped",
        flood.logs_dropped
    );
    assert!(
        flood
            .logs
            .iter()
            .map(|line| line.message.len())
            .sum::<usize>()
            <= 16 << 10
    );

    let behaved = engine.evaluate(&misbehave, &mode("none"), &limits()).await;
    assert_eq!(
        behaved.outcome.unwrap().reason,
        "Behaved",
        "a fresh instance carries nothing over"
    );
    let config = r#"{"labels":["team"]}"#;
    let evaluation = engine.evaluate(&good, &request(config), &limits()).await;
    assert_eq!(
        evaluation.outcome.unwrap().reason,
        "RequiredMetadataMissing"
    );
}

#[tokio::test]
async fn components_that_are_not_checks_are_rejected_with_what_is_wrong() {
    let engine = Engine::new(EngineConfig::default()).unwrap();
    let rejection = |bytes: &[u8]| {
        engine
            .load(bytes)
            .expect_err("must be rejected")
            .to_string()
    };

    assert!(rejection(b"#!/bin/sh\nrm -rf /\n").contains("not a WebAssembly binary"));
    assert!(rejection(b"\0asm\x01\0\0\0").contains("core WebAssembly module, not a component"));
    let truncated = &check_bytes("required-metadata")[..4096];
    assert!(rejection(truncated).contains("does not compile"));
    assert!(rejection(&check_bytes("other-world")).contains(
        "does not export preflight:check/evaluate@0.1.0 (it exports example:greeter/greet@1.0.0)"
    ));
    assert!(rejection(&check_bytes("future-contract")).contains(
        "exports preflight:check/evaluate@0.9.0, but this host implements preflight:check@0.1.0"
    ));
    let ambient = rejection(&check_bytes("ambient-authority"));
    assert!(
        ambient.contains("imports what the host does not provide"),
        "{ambient}"
    );
    assert!(
        ambient.contains("wasi:filesystem/") && ambient.contains("wasi:sockets/"),
        "{ambient}"
    );

    let good = engine.load(&check_bytes("required-metadata")).unwrap();
    assert!(
        engine
            .evaluate(&good, &request(r#"{"labels":["x"]}"#), &limits())
            .await
            .outcome
            .is_ok()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hostile_and_good_checks_run_at_once_without_harming_the_good_ones() {
    let engine = Arc::new(
        Engine::new(EngineConfig {
            max_concurrent_evaluations: 32,
            ..EngineConfig::default()
        })
        .unwrap(),
    );
    let misbehave = engine.load(&check_bytes("misbehave")).unwrap();
    let good = engine.load(&check_bytes("required-metadata")).unwrap();

    // The endless loops get a long budget, so that "the good checks were not stuck behind them" shows as an
    // ordering (the good ones finish while the loops still run), not as a tight timing bound.
    let long = Limits {
        timeout: Duration::from_secs(3),
        ..limits()
    };
    let mut loops = Vec::new();
    for _ in 0..4 {
        let (engine, check) = (Arc::clone(&engine), Arc::clone(&misbehave));
        loops.push(tokio::spawn(async move {
            engine.evaluate(&check, &mode("loop"), &long).await.outcome
        }));
    }
    let mut others = Vec::new();
    for name in ["memory", "memory", "recursion", "panic", "huge-result"] {
        let (engine, check) = (Arc::clone(&engine), Arc::clone(&misbehave));
        others.push(tokio::spawn(async move {
            engine
                .evaluate(&check, &mode(name), &limits())
                .await
                .outcome
                .is_err()
        }));
    }
    let mut good_runs = Vec::new();
    for _ in 0..200 {
        let (engine, check) = (Arc::clone(&engine), Arc::clone(&good));
        good_runs.push(tokio::spawn(async move {
            engine
                .evaluate(&check, &request(r#"{"labels":["team"]}"#), &limits())
                .await
                .outcome
        }));
    }
    for run in good_runs {
        let verdict = run
            .await
            .unwrap()
            .expect("a good check is unaffected by its neighbours");
        assert_eq!(verdict.reason, "RequiredMetadataMissing");
    }
    assert!(
        loops.iter().any(|run| !run.is_finished()),
        "the good checks finished only after the endless loops were stopped: they were stuck behind them"
    );
    for run in others {
        assert!(run.await.unwrap(), "every hostile check failed, contained");
    }
    for run in loops {
        assert_eq!(run.await.unwrap().unwrap_err().kind, FailureKind::Timeout);
    }
}
