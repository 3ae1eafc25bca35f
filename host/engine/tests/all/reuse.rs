//! Opt-in instance reuse (`Isolation::Reuse`), with the conformance check (`tests/conformance`), whose
//! `count` behaviour reports how many evaluations its instance has served: a fresh instance has always
//! served one; a reused one serves its check, configuration and namespace only, up to its limit, and is
//! retired after a trap or a timeout; idle instances never keep a fresh evaluation from running.

use preflight_engine::{
    Engine, EngineConfig, Evaluation, GrantHolder, Grants, Isolation, Limits, Request, Target,
};
use preflight_test_support::check_bytes;
use std::time::{Duration, SystemTime};

fn probe(behave: &str, namespace: &str, config: &str) -> Request {
    Request {
        object: format!(
            r#"{{"apiVersion":"conformance.example.com/v1","kind":"Probe","metadata":{{"name":"p","namespace":"{namespace}"}},"spec":{{"behave":"{behave}"}}}}"#
        ),
        config: config.into(),
        target: Target {
            group: "conformance.example.com".into(),
            version: "v1".into(),
            kind: "Probe".into(),
            namespace: Some(namespace.into()),
            name: "p".into(),
        },
        now: SystemTime::now(),
    }
}

fn limits(isolation: Isolation) -> Limits {
    Limits {
        timeout: Duration::from_millis(500),
        isolation,
        ..Limits::default()
    }
}

fn output<'a>(evaluation: &'a Evaluation, key: &str) -> &'a str {
    let verdict = evaluation
        .outcome
        .as_ref()
        .unwrap_or_else(|failure| panic!("{failure}"));
    verdict.outputs.get(key).map_or("", String::as_str)
}

#[tokio::test]
async fn a_reused_instance_serves_one_check_configuration_and_namespace_until_retired() {
    let engine = Engine::new(EngineConfig::default()).unwrap();
    let check = engine.load(&check_bytes("conformance")).unwrap();
    let (fresh, reuse) = (
        limits(Isolation::Fresh),
        limits(Isolation::Reuse { max_uses: 3 }),
    );
    let calls = |namespace: &'static str, config: &'static str, limits: Limits| {
        let (engine, check) = (&engine, &check);
        async move {
            let evaluation = engine
                .evaluate(check, &probe("count", namespace, config), &limits)
                .await;
            output(&evaluation, "calls").to_owned()
        }
    };

    for _ in 0..3 {
        assert_eq!(
            calls("a", "{}", fresh).await,
            "1",
            "fresh instances share nothing"
        );
    }
    let mut served = Vec::new();
    for _ in 0..5 {
        served.push(calls("a", "{}", reuse).await);
    }
    assert_eq!(
        served,
        ["1", "2", "3", "1", "2"],
        "three uses, then a new instance"
    );
    assert_eq!(
        calls("b", "{}", reuse).await,
        "1",
        "another namespace: its own instance"
    );
    assert_eq!(
        calls("a", r#"{"greeting":"hi"}"#, reuse).await,
        "1",
        "another configuration: its own instance"
    );
    assert_eq!(
        calls("a", "{}", reuse).await,
        "3",
        "the first instance went on"
    );

    // A check's own error keeps the instance; a trap or a timeout retires it.
    let error = engine
        .evaluate(&check, &probe("error", "c", "{}"), &reuse)
        .await;
    assert!(error.outcome.is_err());
    assert_eq!(
        calls("c", "{}", reuse).await,
        "2",
        "kept after its own error"
    );
    for failing in ["trap", "loop"] {
        let failed = engine
            .evaluate(&check, &probe(failing, "d", "{}"), &reuse)
            .await;
        assert!(failed.outcome.is_err(), "{failing}");
        assert_eq!(
            calls("d", "{}", reuse).await,
            "1",
            "retired after a {failing}"
        );
    }

    // Each evaluation of a reused instance gets its own request: its time and its identity.
    let mut first = probe("proceed", "e", r#"{"greeting":"x"}"#);
    first.now = SystemTime::UNIX_EPOCH + Duration::from_secs(1_000);
    let mut second = first.clone();
    second.now = SystemTime::UNIX_EPOCH + Duration::from_secs(2_000);
    let first = engine.evaluate(&check, &first, &reuse).await;
    let second = engine.evaluate(&check, &second, &reuse).await;
    assert_eq!(
        (output(&first, "now"), output(&second, "now")),
        ("1000000", "2000000")
    );
}

/// Two check ConfigMaps of one component and configuration (two grant holders, only one of them granted
/// something), or one gating two kinds, never share an instance: what an evaluation under one holder's
/// grants left in guest memory is not seen under the other's.
#[tokio::test]
async fn a_reused_instance_serves_one_grant_holder_and_one_kind() {
    let engine = Engine::new(EngineConfig::default()).unwrap();
    let check = engine.load(&check_bytes("conformance")).unwrap();
    let reuse = limits(Isolation::Reuse { max_uses: 100 });
    let (granted, plain) = (
        Grants {
            holder: GrantHolder::new("operator/with-secret"),
            lookups_per_evaluation: 1,
            ..Grants::default()
        },
        Grants {
            holder: GrantHolder::new("operator/without"),
            ..Grants::default()
        },
    );
    let calls = |request: Request, grants: &Grants| {
        let (engine, check, grants) = (&engine, &check, grants.clone());
        async move {
            let evaluation = engine.evaluate_with(check, &request, &reuse, &grants).await;
            output(&evaluation, "calls").to_owned()
        }
    };
    assert_eq!(calls(probe("count", "a", "{}"), &granted).await, "1");
    assert_eq!(calls(probe("count", "a", "{}"), &granted).await, "2");
    assert_eq!(
        calls(probe("count", "a", "{}"), &plain).await,
        "1",
        "another holder of grants: its own instance"
    );
    let mut other_kind = probe("count", "a", "{}");
    other_kind.target.kind = "OtherProbe".into();
    assert_eq!(
        calls(other_kind, &granted).await,
        "1",
        "another kind: its own instance"
    );
    assert_eq!(calls(probe("count", "a", "{}"), &granted).await, "3");
    assert_ne!(
        GrantHolder::new("same"),
        GrantHolder::new("same"),
        "each holder is distinct, even under the same name"
    );
}

#[tokio::test]
async fn idle_instances_give_way_to_fresh_evaluations() {
    // Two pool slots: one idle reused instance may be kept, and it must not keep two fresh evaluations from
    // running at once.
    let engine = Engine::new(EngineConfig {
        max_concurrent_evaluations: 2,
        ..EngineConfig::default()
    })
    .unwrap();
    let check = engine.load(&check_bytes("conformance")).unwrap();
    let reuse = limits(Isolation::Reuse { max_uses: 100 });
    for namespace in ["a", "b"] {
        let evaluation = engine
            .evaluate(&check, &probe("count", namespace, "{}"), &reuse)
            .await;
        assert_eq!(output(&evaluation, "calls"), "1");
    }
    let fresh = limits(Isolation::Fresh);
    let (one, two) = (probe("count", "f", "{}"), probe("count", "g", "{}"));
    let both = tokio::time::timeout(Duration::from_secs(10), async {
        tokio::join!(
            engine.evaluate(&check, &one, &fresh),
            engine.evaluate(&check, &two, &fresh)
        )
    })
    .await
    .expect("both fresh evaluations got a slot");
    assert_eq!(
        (output(&both.0, "calls"), output(&both.1, "calls")),
        ("1", "1")
    );
}

/// The SDK's allocator frees (src/allocator.rs in the guest SDK): an instance reused for many evaluations of
/// a 256 KiB object, each parsing it anew (the conformance check reads the whole object), stays within a
/// memory limit that an allocator which never freed would pass within a few evaluations.
#[tokio::test]
async fn a_reused_rust_check_frees_what_each_evaluation_allocated() {
    let engine = Engine::new(EngineConfig::default()).unwrap();
    let check = engine.load(&check_bytes("conformance")).unwrap();
    const EVALUATIONS: u32 = 40;
    let limits = Limits {
        memory_bytes: 8 << 20,
        ..limits(Isolation::Reuse {
            max_uses: EVALUATIONS,
        })
    };
    let mut request = probe("count", "a", "{}");
    let padding = "x".repeat(256 << 10);
    request.object = request.object.replacen(
        r#""namespace":"a"}"#,
        &format!(r#""namespace":"a","annotations":{{"example.com/padding":"{padding}"}}}}"#),
        1,
    );
    assert!(
        request.object.contains(&padding),
        "the object carries its padding"
    );
    for evaluation in 1..=EVALUATIONS {
        let result = engine.evaluate(&check, &request, &limits).await;
        assert_eq!(
            output(&result, "calls"),
            evaluation.to_string(),
            "one instance serves every evaluation"
        );
    }
}
