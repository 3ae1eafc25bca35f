//! Hostile checks, each a real component built from source: every one is contained with the right
//! classification within a bounded time, and the engine keeps serving a good check afterwards and at the
//! same time.

use preflight_engine::{
    ComponentProblem, Engine, EngineConfig, FailureKind, Limits, Request, Target,
};
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
    check: &preflight_engine::Check,
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
    // The message says what is wrong; the problem names the rule broken, for code that branches on it.
    let refused = |bytes: &[u8], problem: ComponentProblem| {
        let error = engine.load(bytes).expect_err("must be rejected");
        assert_eq!(error.component_problem(), Some(problem), "{error}");
        error
    };
    let rejection = |bytes: &[u8], problem| refused(bytes, problem).to_string();

    assert!(
        rejection(b"#!/bin/sh\nrm -rf /\n", ComponentProblem::Encoding)
            .contains("not a WebAssembly binary")
    );
    assert!(
        rejection(b"\0asm\x01\0\0\0", ComponentProblem::Encoding)
            .contains("core WebAssembly module, not a component")
    );
    let truncated = &check_bytes("required-metadata")[..4096];
    let compile = refused(truncated, ComponentProblem::Compile);
    assert!(compile.to_string().contains("does not compile"));
    // wasmtime's own error is kept as the source, not only quoted.
    let source = std::error::Error::source(&compile).expect("the compile error is kept");
    assert!(
        compile.to_string().contains(&source.to_string()),
        "{compile} / {source}"
    );
    assert!(
        rejection(&check_bytes("other-world"), ComponentProblem::Contract).contains(
            "does not export preflight:check/evaluate@0.2.0 (it exports example:greeter/greet@1.0.0)"
        )
    );
    // It also imports an interface of its own contract version: the version is named first.
    let future = rejection(&check_bytes("future-contract"), ComponentProblem::Contract);
    assert!(
        future.contains(
            "it is built for contract preflight:check@0.9.0; this host serves preflight:check@0.1.x, \
             preflight:check@0.2.x"
        ),
        "{future}"
    );
    assert!(!future.contains("filesystem"), "{future}");
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

/// Runs `future`, failing the test (instead of hanging it) if it takes longer than `bound`.
async fn within<T>(bound: Duration, what: &str, future: impl std::future::Future<Output = T>) -> T {
    tokio::time::timeout(bound, future)
        .await
        .unwrap_or_else(|_| panic!("{what} still running after {bound:?}"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_time_limit_holds_while_a_check_is_blocked_in_a_host_call() {
    let engine = Arc::new(
        Engine::new(EngineConfig {
            max_concurrent_evaluations: 4,
            ..EngineConfig::default()
        })
        .unwrap(),
    );
    let misbehave = engine.load(&check_bytes("misbehave")).unwrap();
    let good = engine.load(&check_bytes("required-metadata")).unwrap();

    let started = Instant::now();
    let evaluation = within(
        CONTAINED_WITHIN,
        "a check sleeping for an hour under a 300 ms limit",
        engine.evaluate(&misbehave, &mode("sleep"), &limits()),
    )
    .await;
    let failure = evaluation.outcome.unwrap_err();
    assert_eq!(failure.kind, FailureKind::Timeout, "{failure}");
    assert!(
        started.elapsed() >= TIMEOUT,
        "cut off at its deadline, not before"
    );

    // As many sleepers as pool slots: a good check gets a slot once their deadlines pass, not before.
    let sleepers_started = Instant::now();
    let sleepers: Vec<_> = (0..4)
        .map(|_| {
            let (engine, check) = (Arc::clone(&engine), Arc::clone(&misbehave));
            tokio::spawn(async move { engine.evaluate(&check, &mode("sleep"), &limits()).await })
        })
        .collect();
    tokio::time::sleep(Duration::from_millis(50)).await;
    assert!(
        sleepers.iter().all(|sleeper| !sleeper.is_finished()),
        "the sleepers hold every slot"
    );
    let evaluation = within(
        CONTAINED_WITHIN,
        "a good check behind as many sleepers as slots",
        engine.evaluate(&good, &request(r#"{"labels":["team"]}"#), &limits()),
    )
    .await;
    // It waited for a slot: none is free before the first sleeper's deadline.
    let waited = sleepers_started.elapsed();
    assert!(
        waited >= TIMEOUT,
        "the good check finished {waited:?} after the sleepers took every slot, before their {TIMEOUT:?} \
         deadline: the slot limit did not hold"
    );
    assert_eq!(
        evaluation.outcome.unwrap().reason,
        "RequiredMetadataMissing"
    );
    for sleeper in sleepers {
        let failure = sleeper.await.unwrap().outcome.unwrap_err();
        assert_eq!(failure.kind, FailureKind::Timeout);
    }
}

/// Evaluates the good check `count` times, 16 at a time, and returns how long that took.
async fn good_batch(
    engine: &Arc<Engine>,
    good: &Arc<preflight_engine::Check>,
    count: usize,
) -> Duration {
    let started = Instant::now();
    let mut runs = tokio::task::JoinSet::new();
    let slots = Arc::new(tokio::sync::Semaphore::new(16));
    for _ in 0..count {
        let (engine, check, slots) = (Arc::clone(engine), Arc::clone(good), Arc::clone(&slots));
        runs.spawn(async move {
            let _permit = slots.acquire().await.unwrap();
            engine
                .evaluate(&check, &request(r#"{"labels":["team"]}"#), &limits())
                .await
                .outcome
                .unwrap()
        });
    }
    while let Some(run) = runs.join_next().await {
        run.unwrap();
    }
    started.elapsed()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn checks_spinning_on_every_worker_do_not_starve_the_others() {
    let engine = Arc::new(Engine::new(EngineConfig::default()).unwrap());
    let misbehave = engine.load(&check_bytes("misbehave")).unwrap();
    let good = engine.load(&check_bytes("required-metadata")).unwrap();
    const GOOD: usize = 400;
    good_batch(&engine, &good, 50).await;
    let alone = good_batch(&engine, &good, GOOD).await;

    // Twice as many endless loops as worker threads, each with a long budget so that they outlast the batch.
    let spin_limit = Limits {
        timeout: Duration::from_secs(4),
        ..limits()
    };
    let spinners: Vec<_> = (0..4)
        .map(|_| {
            let (engine, check) = (Arc::clone(&engine), Arc::clone(&misbehave));
            tokio::spawn(async move {
                let started = Instant::now();
                let outcome = engine
                    .evaluate(&check, &mode("loop"), &spin_limit)
                    .await
                    .outcome;
                (outcome, started.elapsed())
            })
        })
        .collect();
    tokio::time::sleep(Duration::from_millis(100)).await;
    let beside_spinners = good_batch(&engine, &good, GOOD).await;
    assert!(
        spinners.iter().all(|spinner| !spinner.is_finished()),
        "the batch ran while every loop was still spinning"
    );
    // A ratio measured in this run, not a time: before the fix it was about 80x.
    let slowdown = beside_spinners.as_secs_f64() / alone.as_secs_f64();
    println!(
        "{GOOD} good checks: {alone:?} alone, {beside_spinners:?} beside 4 loops ({slowdown:.1}x)"
    );
    assert!(
        slowdown < 10.0,
        "{GOOD} good checks took {beside_spinners:?} beside the loops, {alone:?} alone ({slowdown:.1}x)"
    );
    for spinner in spinners {
        let (outcome, took) = spinner.await.unwrap();
        assert_eq!(outcome.unwrap_err().kind, FailureKind::Timeout);
        assert!(
            took < spin_limit.timeout + Duration::from_secs(1),
            "a loop's {:?} limit fired after {took:?}",
            spin_limit.timeout
        );
    }
}

#[tokio::test]
async fn a_result_larger_than_the_host_call_copy_budget_is_an_invalid_result() {
    let engine = Engine::new(EngineConfig {
        max_concurrent_evaluations: 2,
        max_memory_bytes: 512 << 20,
        ..EngineConfig::default()
    })
    .unwrap();
    let misbehave = engine.load(&check_bytes("misbehave")).unwrap();
    let roomy = Limits {
        timeout: Duration::from_secs(10),
        memory_bytes: 512 << 20,
        ..Limits::default()
    };
    // Past wasmtime's own copy budget (128 MiB): this was classified as a trap and retried forever.
    let huge = request(&format!(
        r#"{{"mode":"huge-result","bytes":{}}}"#,
        150 << 20
    ));
    let failure = engine
        .evaluate(&misbehave, &huge, &roomy)
        .await
        .outcome
        .unwrap_err();
    assert_eq!(failure.kind, FailureKind::InvalidResult, "{failure}");
    assert!(failure.message.contains("the limit is 65536"), "{failure}");

    // Just over the result cap: refused with its exact size.
    let over = request(&format!(r#"{{"mode":"huge-result","bytes":{}}}"#, 70_000));
    let failure = engine
        .evaluate(&misbehave, &over, &roomy)
        .await
        .outcome
        .unwrap_err();
    assert_eq!(failure.kind, FailureKind::InvalidResult, "{failure}");
    assert!(
        failure.message.contains("returned 70004 bytes"),
        "{failure}"
    );
}

#[tokio::test]
async fn a_panic_printed_to_stderr_is_quoted_in_the_trap() {
    let engine = Engine::new(EngineConfig::default()).unwrap();
    let misbehave = engine.load(&check_bytes("misbehave")).unwrap();
    expect_contained(
        &engine,
        &misbehave,
        "plain-panic",
        FailureKind::Trap,
        "its stderr ended with: thread '<unnamed>'",
    )
    .await;
    expect_contained(
        &engine,
        &misbehave,
        "plain-panic",
        FailureKind::Trap,
        "the quota table is corrupt",
    )
    .await;
}

#[tokio::test]
async fn the_guest_wall_clock_reads_the_request_time() {
    let engine = Engine::new(EngineConfig::default()).unwrap();
    let misbehave = engine.load(&check_bytes("misbehave")).unwrap();
    let replayed = Request {
        now: SystemTime::UNIX_EPOCH + Duration::from_secs(1_796_472_000),
        ..mode("clock")
    };
    let verdict = engine
        .evaluate(&misbehave, &replayed, &limits())
        .await
        .outcome
        .unwrap();
    assert_eq!(
        (verdict.reason.as_str(), verdict.message.as_str()),
        ("Clock", "1796472000")
    );
}

#[tokio::test]
async fn a_check_reaching_for_the_filesystem_and_the_network_finds_neither() {
    // A 0.2 check may import wasi:filesystem and wasi:sockets (language runtimes do), but gets no
    // preopened directory and no network: it reads nothing and connects nowhere.
    let engine = Engine::new(EngineConfig::default()).unwrap();
    let ambient = engine.load(&check_bytes("ambient-authority")).unwrap();
    let evaluation = engine.evaluate(&ambient, &mode("none"), &limits()).await;
    let verdict = evaluation.outcome.expect("the check runs");
    assert!(!verdict.proceed, "{verdict:?}");
    assert_ne!(verdict.reason, "Exfiltrated");
    assert!(verdict.message.is_empty(), "it read nothing: {verdict:?}");
}

#[tokio::test]
async fn a_check_of_a_patch_release_is_served_unless_it_imports_what_the_host_lacks() {
    let engine = Engine::new(EngineConfig::default()).unwrap();
    let patch = engine.load(&check_bytes("patch-contract")).unwrap();
    assert_eq!(patch.info().world, "preflight:check/preflight-check@0.1.1");
    let evaluation = engine.evaluate(&patch, &mode("none"), &limits()).await;
    let verdict = evaluation.outcome.unwrap();
    assert_eq!(
        (verdict.reason.as_str(), verdict.message.as_str()),
        ("PatchContract", "checked x")
    );
    assert_eq!(evaluation.logs[0].message, "built for 0.1.1");

    let refused = engine
        .load(&check_bytes("patch-contract-lookup"))
        .unwrap_err();
    assert_eq!(refused.component_problem(), Some(ComponentProblem::Imports));
    let refused = refused.to_string();
    assert!(
        refused.contains(
            "imports what the host does not provide to a 0.1.1 check: preflight:check/lookup@0.1.1"
        ),
        "{refused}"
    );
    assert!(refused.contains("needs a newer host"), "{refused}");
}

/// `bytes` as another component: the same code with a custom section appended, so another digest, another
/// compiled module, another check to the engine.
fn as_another_check(bytes: &[u8]) -> Vec<u8> {
    let name = b"preflight-isolation-test";
    let mut other = bytes.to_vec();
    other.push(0); // custom section
    other.push(u8::try_from(1 + name.len()).unwrap()); // section size (LEB128, < 128)
    other.push(u8::try_from(name.len()).unwrap());
    other.extend_from_slice(name);
    other
}

#[tokio::test]
async fn a_fresh_instance_never_sees_what_an_earlier_one_left_in_its_memory() {
    // One pool slot with one linear memory: every evaluation reuses the memory of the one before it,
    // whichever check it runs.
    let engine = Engine::new(EngineConfig {
        max_concurrent_evaluations: 1,
        memories_per_evaluation: 1,
        ..EngineConfig::default()
    })
    .unwrap();
    let bytes = check_bytes("misbehave");
    let dirtier = engine.load(&bytes).unwrap();
    let other = engine.load(&as_another_check(&bytes)).unwrap();
    assert_ne!(dirtier.digest(), other.digest());
    let roomy = Limits {
        memory_bytes: 64 << 20,
        ..limits()
    };
    // The scan sees a marker where there is one: in its own instance, after dirtying.
    let control = engine
        .evaluate(&other, &mode("dirty-then-scan"), &roomy)
        .await;
    assert!(
        control
            .outcome
            .unwrap()
            .message
            .starts_with("markers=2048 "),
        "the scan finds what the same instance wrote"
    );
    for (round, scanner) in [&other, &dirtier, &other].into_iter().enumerate() {
        let dirtied = engine.evaluate(&dirtier, &mode("dirty"), &roomy).await;
        let dirtied = dirtied.outcome.unwrap();
        assert_eq!(
            (dirtied.reason.as_str(), dirtied.message.as_str()),
            ("Dirtied", "2048"),
            "2,048 separate dirty pages: far more than 32 regions"
        );
        let scanned = engine.evaluate(scanner, &mode("scan"), &roomy).await;
        assert_eq!(
            scanned.outcome.unwrap().message,
            "markers=0 nonzero=0",
            "round {round}: the next instance saw the previous one's memory"
        );
    }
}

/// Issue 21, item 12: throughput measured with many in flight counts the evaluations that failed, so that a
/// rate made of traps is never reported as checks per second.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn throughput_counts_the_evaluations_that_failed() {
    let engine = Arc::new(Engine::new(EngineConfig::default()).unwrap());
    let check = engine.load(&check_bytes("misbehave")).unwrap();
    let grants = preflight_engine::Grants::default();
    let trapping = Arc::new(mode("panic"));
    let measured = preflight_engine::measure::evaluations_in_flight(
        &engine,
        &check,
        &trapping,
        limits(),
        &grants,
        40,
        8,
    )
    .await;
    assert_eq!(measured.failed, 40);
    assert_eq!(
        measured.first_failure.map(|failure| failure.kind),
        Some(FailureKind::Trap)
    );
    let proceeding = Arc::new(mode("proceed"));
    let measured = preflight_engine::measure::evaluations_in_flight(
        &engine,
        &check,
        &proceeding,
        limits(),
        &grants,
        40,
        8,
    )
    .await;
    assert_eq!(
        (measured.failed, measured.first_failure.is_none()),
        (0, true)
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pre_initialising_stops_an_endless_initialisation_and_refuses_a_component_without_one() {
    let engine = Engine::new(EngineConfig::default()).unwrap();
    let started = Instant::now();
    let endless = engine
        .pre_initialize(&check_bytes("endless-initialization"), &limits())
        .await
        .unwrap_err();
    assert!(
        started.elapsed() < CONTAINED_WITHIN,
        "{:?}",
        started.elapsed()
    );
    assert_eq!(
        endless.component_problem(),
        Some(ComponentProblem::Initialization)
    );
    assert!(
        endless
            .to_string()
            .contains("its start or `wizer-initialize` failed")
            && endless.to_string().contains("(timeout)"),
        "{endless}"
    );
    let without = engine
        .pre_initialize(&check_bytes("required-metadata"), &limits())
        .await
        .unwrap_err();
    assert_eq!(
        without.component_problem(),
        Some(ComponentProblem::Initialization)
    );
    assert!(
        without
            .to_string()
            .contains("it does not export `wizer-initialize`"),
        "{without}"
    );
}
