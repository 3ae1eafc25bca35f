//! The check set with real components: a good version is swapped in atomically, a broken one never replaces
//! it, revisions move only when what objects see changes, and checks run in order.

use preflight_operator::engine::ComponentProblem;
use preflight_operator::engine::{Engine, EngineConfig};
use preflight_operator::{
    CheckMode, CheckSet, CheckSource, FailurePolicy, GateEntry, GatedKind, LoadedCheck,
};
use preflight_operator::{Rejection, RejectionCause};
use preflight_test_support::check_bytes;

fn app() -> GatedKind {
    GatedKind::parse("App.apps.example.com").unwrap()
}

fn load(engine: &Engine, name: &str, package: &str, gates: GatedKind, order: i32) -> LoadedCheck {
    let mut source = CheckSource::new(name, gates, check_bytes(package));
    source.settings.order = order;
    LoadedCheck::load(engine, source).unwrap()
}

fn broken(gates: Option<GatedKind>) -> Rejection {
    Rejection {
        gates,
        failure_policy: FailurePolicy::Ignore,
        mode: CheckMode::Enforce,
        selector: None,
        pause: None,
        problem: "invalid check component: not a WebAssembly binary".into(),
        cause: RejectionCause::Component(ComponentProblem::Encoding),
    }
}

fn names(entries: &[GateEntry]) -> Vec<&str> {
    entries.iter().map(GateEntry::name).collect()
}

#[test]
fn a_broken_version_never_replaces_the_last_good_one() {
    let engine = Engine::new(EngineConfig::default()).unwrap();
    let checks = CheckSet::new();
    let good = load(&engine, "ns/meta", "required-metadata", app(), 0);
    let digest = good.digest();
    assert!(checks.install(good));
    let revision = checks.revision(&app());
    assert!(revision > 0);

    assert!(
        !checks.reject("ns/meta", broken(Some(app()))),
        "a good version still serves"
    );
    assert_eq!(checks.revision(&app()), revision, "objects see no change");
    match checks.for_kind(&app()).as_slice() {
        [GateEntry::Ready(check)] => assert_eq!(check.digest(), digest),
        other => panic!("expected the good version, got {other:?}"),
    }

    assert!(
        !checks.install(load(&engine, "ns/meta", "required-metadata", app(), 0)),
        "the same version again is no change"
    );
    assert_eq!(checks.revision(&app()), revision);
    assert!(checks.install(load(&engine, "ns/meta", "dependency-ready", app(), 0)));
    assert!(
        checks.revision(&app()) > revision,
        "a new version re-checks the kind"
    );
}

#[test]
fn a_check_without_any_good_version_is_unavailable_with_its_problem() {
    let checks = CheckSet::new();
    assert!(checks.reject("ns/broken", broken(Some(app()))));
    assert!(checks.revision(&app()) > 0);
    match checks.for_kind(&app()).as_slice() {
        [
            GateEntry::Unavailable {
                name,
                failure_policy,
                problem,
                ..
            },
        ] => {
            assert_eq!(name, "ns/broken");
            assert_eq!(*failure_policy, FailurePolicy::Ignore);
            assert!(problem.contains("not a WebAssembly binary"), "{problem}");
        }
        other => panic!("expected an unavailable check, got {other:?}"),
    }
    assert!(checks.reject("ns/nameless", broken(None)));
    assert_eq!(
        checks.kinds().len(),
        1,
        "a check naming no kind gates nothing"
    );
    assert_eq!(checks.remove("ns/broken"), Some(app()));
    assert!(checks.kinds().is_empty());
}

#[test]
fn checks_run_in_order_then_by_name_and_moving_a_check_rechecks_both_kinds() {
    let engine = Engine::new(EngineConfig::default()).unwrap();
    let checks = CheckSet::new();
    let changes = checks.subscribe();
    checks.install(load(&engine, "ns/c", "required-metadata", app(), 5));
    checks.install(load(&engine, "ns/b", "required-metadata", app(), -1));
    checks.install(load(&engine, "ns/a", "dependency-ready", app(), 5));
    assert!(changes.has_changed().unwrap(), "changes are announced");
    assert_eq!(names(&checks.for_kind(&app())), ["ns/b", "ns/a", "ns/c"]);

    let database = GatedKind::parse("Database.db.example.com").unwrap();
    let (app_before, database_before) = (checks.revision(&app()), checks.revision(&database));
    checks.install(load(
        &engine,
        "ns/a",
        "dependency-ready",
        database.clone(),
        5,
    ));
    assert!(checks.revision(&app()) > app_before);
    assert!(checks.revision(&database) > database_before);
    assert_eq!(names(&checks.for_kind(&database)), ["ns/a"]);
    assert_eq!(names(&checks.for_kind(&app())), ["ns/b", "ns/c"]);
    assert_eq!(checks.loaded_per_kind().get(&app()), Some(&2));
}

#[tokio::test]
async fn a_suspended_check_is_not_evaluated_and_the_object_passes_it_saying_so() {
    let engine = std::sync::Arc::new(Engine::new(EngineConfig::default()).unwrap());
    let checks = std::sync::Arc::new(CheckSet::new());
    let mut source = CheckSource::new("ns/deps", app(), check_bytes("dependency-ready"));
    source.settings.config = r#"{"available": []}"#.into();
    checks.install(LoadedCheck::load(&engine, source.clone()).unwrap());
    let gate = preflight_operator::Gate::new(engine.clone(), checks.clone());
    let object = serde_json::json!({"apiVersion": "apps.example.com/v1", "kind": "App",
        "metadata": {"name": "shop", "namespace": "ns"}, "spec": {"dependsOn": ["redis"]}});

    let evaluated = gate.evaluate(&app(), object.clone()).await;
    assert!(!evaluated.proceed());
    assert_eq!(evaluated.summary.reason, "DependencyMissing");
    assert!(!evaluated.runs[0].duration.is_zero());

    source.settings.suspended = true;
    checks.install(LoadedCheck::load(&engine, source).unwrap());
    let passed = gate.evaluate(&app(), object).await;
    assert!(passed.proceed());
    assert_eq!(passed.summary.reason, "CheckSuspended");
    assert_eq!(
        passed.summary.message,
        "deps: suspended by its ConfigMap (suspend: \"true\"), not evaluated"
    );
    assert!(passed.runs[0].suspended);
    assert!(passed.runs[0].duration.is_zero(), "not evaluated");
    assert_eq!(passed.outputs(), None, "the outputs on the object stay");
}
