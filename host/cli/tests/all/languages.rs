//! The same example check written in every guest language this project supports (Rust, Python, JavaScript,
//! Go, C), built from source with each language's pinned toolchain, must answer identically: the shared
//! fixtures pass for each build (`preflight test`), and `preflight run` prints the same outcome, delay,
//! reason, message and action for each object, error cases included. And what a language's SDK owes a reused
//! instance: the Go SDK's collector keeps one within its memory limit.

use preflight_test_support::{
    build_c_check, build_check, build_go_check, build_js_check, build_python_check, fixture,
    pre_initialize_go_check, workspace_root,
};
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::Command;

/// Every language's build of `project` (a directory with `python/`, `javascript/`, `go/` and `c/` builds of
/// the check whose Rust build is the crate `package`): language and component. Go twice: as build.sh ships
/// it (pre-initialised) and without the snapshot, which must answer the same.
fn builds(project: &str, package: &str) -> Vec<(&'static str, PathBuf)> {
    vec![
        ("rust", build_check(package)),
        ("python", build_python_check(project)),
        ("javascript", build_js_check(project)),
        ("go", go_check(project)),
        (
            "go, not pre-initialised",
            build_go_check(project, this_binary()),
        ),
        ("c", build_c_check(project, this_binary())),
    ]
}

/// The Go build of `project` as a scaffolded build.sh makes it: pre-initialised by this binary's
/// `preflight snapshot`.
fn go_check(project: &str) -> PathBuf {
    pre_initialize_go_check(project, this_binary())
}

/// The `preflight` binary under test, which C and Go builds are componentized with as build.sh does it.
fn this_binary() -> &'static Path {
    Path::new(env!("CARGO_BIN_EXE_preflight"))
}

fn preflight(args: &[&str]) -> (i32, String) {
    // Compiled once for every run of this test binary (and the next), as `PREFLIGHT_CACHE_DIR` promises.
    let compiled = preflight_test_support::compiled_cache_dir();
    let output = Command::new(env!("CARGO_BIN_EXE_preflight"))
        .env("PREFLIGHT_CACHE_DIR", compiled)
        .args(args)
        .output()
        .expect("preflight runs");
    (
        output.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&output.stdout).into_owned(),
    )
}

/// `preflight run -o json` of `check` on `object` with `config` and `extra` arguments, without the fields
/// that differ between builds of the same check (timing, digest, log lines).
fn run(check: &Path, object: &Path, config: &Path, extra: &[&str]) -> Value {
    let mut args = vec![
        "run",
        "-o",
        "json",
        "--timeout",
        "10s",
        "--check",
        check.to_str().unwrap(),
        "--object",
        object.to_str().unwrap(),
        "--config",
        config.to_str().unwrap(),
    ];
    args.extend(extra);
    let (_, json) = preflight(&args);
    let mut answer: Value = serde_json::from_str(&json).unwrap();
    for varying in ["durationUs", "sha256", "logs", "logsDropped"] {
        answer.as_object_mut().unwrap().remove(varying);
    }
    answer
}

/// Runs `fixtures` against every build of `project` and asserts that each passes them all and that all print
/// the same table (the same outcome, reason and action for every case); returns that table.
fn every_build_passes(project: &str, package: &str, fixtures: &str, cases: usize) -> String {
    let fixtures = workspace_root().join(fixtures);
    let mut first: Option<(&str, String)> = None;
    for (language, check) in builds(project, package) {
        let (status, table) = preflight(&[
            "test",
            "--check",
            check.to_str().unwrap(),
            fixtures.to_str().unwrap(),
            "--timeout",
            "10s",
        ]);
        assert_eq!(status, 0, "{language}:\n{table}");
        assert!(
            table.contains(&format!("{cases} passed, 0 failed")),
            "{language}:\n{table}"
        );
        match &first {
            None => first = Some((language, table)),
            Some((first_language, first_table)) => assert_eq!(
                &table, first_table,
                "{language} and {first_language} disagree"
            ),
        }
    }
    first.map(|(_, table)| table).unwrap_or_default()
}

#[test]
fn every_language_passes_the_examples_fixtures() {
    let table = every_build_passes(
        "plugins/dependency-ready",
        "dependency-ready",
        "plugins/dependency-ready/fixtures.yaml",
        5,
    );
    eprintln!("rust, python, javascript, go, c:\n{table}");
}

#[test]
fn every_language_passes_the_conformance_suite() {
    let table = every_build_passes(
        "tests/conformance",
        "conformance",
        "tests/conformance/fixtures.yaml",
        18,
    );
    eprintln!("rust, python, javascript, go, c:\n{table}");
}

#[test]
fn every_language_declares_its_reads_with_the_cli_and_answers_the_projection_the_same() {
    let dir = std::env::temp_dir().join(format!("languages-reads-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let fixtures = workspace_root().join("plugins/dependency-ready/fixtures.yaml");
    for (language, check) in builds("plugins/dependency-ready", "dependency-ready")
        .into_iter()
        .skip(1)
    {
        let declared = dir.join(format!("{language}.wasm"));
        let (status, stdout) = preflight(&[
            "declare-reads",
            check.to_str().unwrap(),
            "--path",
            "spec.dependsOn",
            "-o",
            declared.to_str().unwrap(),
        ]);
        assert_eq!(status, 0, "{language}: {stdout}");
        assert!(
            stdout.ends_with(": reads spec.dependsOn\n"),
            "{language}: {stdout}"
        );
        let (status, table) = preflight(&[
            "test",
            "--check",
            declared.to_str().unwrap(),
            fixtures.to_str().unwrap(),
            "--timeout",
            "10s",
        ]);
        assert_eq!(status, 0, "{language}:\n{table}");
        assert!(
            table.ends_with("5 passed, 0 failed\n"),
            "{language}:\n{table}"
        );
    }
    let (status, _) = preflight(&[
        "declare-reads",
        build_check("dependency-ready").to_str().unwrap(),
        "--path",
        "spec..dependsOn",
        "-o",
        dir.join("bad.wasm").to_str().unwrap(),
    ]);
    assert_eq!(status, 2, "a malformed path is a usage error");
    assert!(!dir.join("bad.wasm").exists());
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn every_language_answers_each_object_the_same() {
    let config = std::env::temp_dir().join(format!("languages-config-{}.json", std::process::id()));
    std::fs::write(
        &config,
        r#"{"available": ["postgres-main"], "retryAfterSeconds": 600, "jitterPercent": 10}"#,
    )
    .unwrap();
    let objects = ["app-waiting.yaml", "app-ready.yaml", "app-malformed.json"];
    let mut table = Vec::new();
    for object in objects {
        let object = fixture(object);
        let answers: Vec<(String, Value)> = builds("plugins/dependency-ready", "dependency-ready")
            .into_iter()
            .map(|(language, check)| {
                let mut answer = run(&check, &object, &config, &["--now", "2026-12-05T12:00:00Z"]);
                let answer = answer.as_object_mut().unwrap();
                // An error's wording is the language's own (its JSON decoder's); kind and reason must agree.
                if let Some(error) = answer.get_mut("error").and_then(Value::as_object_mut) {
                    error.remove("message");
                    answer.remove("message");
                }
                (language.to_owned(), Value::Object(answer.clone()))
            })
            .collect();
        let (first_language, first) = &answers[0];
        for (language, answer) in &answers[1..] {
            assert_eq!(
                answer,
                first,
                "{} : {language} and {first_language} disagree",
                object.display()
            );
        }
        table.push(format!("{}: {first}", object.display()));
    }
    eprintln!("{}", table.join("\n"));
    std::fs::remove_file(&config).unwrap();
}

/// The engine in this process, for tests that evaluate thousands of times (a `preflight` process per
/// evaluation would take minutes): a runtime, an engine keeping compiled checks where the `preflight` runs of
/// these tests do, and limits generous enough for debug builds of every language.
fn in_process() -> (
    tokio::runtime::Runtime,
    preflight_engine::Engine,
    preflight_engine::Limits,
) {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let engine = preflight_engine::Engine::new(preflight_engine::EngineConfig {
        cache_dir: Some(preflight_test_support::compiled_cache_dir()),
        ..preflight_engine::EngineConfig::default()
    })
    .unwrap();
    let limits = preflight_engine::Limits {
        timeout: std::time::Duration::from_secs(10),
        ..preflight_engine::Limits::default()
    };
    (runtime, engine, limits)
}

/// Issue 21, item 7: delays computed in floating point (Python and JavaScript) must come out to the same
/// millisecond as Rust's integer ones, for every object, not a handful: the example's jittered delay for
/// thousands of object names, in every language.
#[test]
fn every_language_computes_the_same_delay_for_thousands_of_objects() {
    use preflight_engine::{Isolation, Limits, Request, Target};
    const OBJECTS: usize = 3_000;
    let (runtime, engine, limits) = in_process();
    let limits = Limits {
        isolation: Isolation::Reuse { max_uses: 100_000 },
        ..limits
    };
    let config = r#"{"available": [], "retryAfterSeconds": 600, "jitterPercent": 10}"#;
    let delays = |language: &str, check: &preflight_engine::Check| -> Vec<u128> {
        runtime.block_on(async {
            let mut delays = Vec::with_capacity(OBJECTS);
            for index in 0..OBJECTS {
                let object = serde_json::json!({"apiVersion": "apps.example.com/v1", "kind": "App",
                    "metadata": {"name": format!("shop-{index}"), "namespace": "default"},
                    "spec": {"dependsOn": ["redis"]}});
                let request = Request {
                    object: check.input(&object),
                    config: config.to_owned(),
                    target: Target::of_object(&object),
                    now: std::time::SystemTime::now(),
                };
                let verdict = engine
                    .evaluate(check, &request, &limits)
                    .await
                    .outcome
                    .unwrap_or_else(|failure| panic!("{language}, shop-{index}: {failure}"));
                delays.push(verdict.requeue_after.expect("a delay").as_millis());
            }
            delays
        })
    };
    let mut first: Option<(&str, Vec<u128>)> = None;
    for (language, path) in builds("plugins/dependency-ready", "dependency-ready") {
        let check = engine.load(&std::fs::read(&path).unwrap()).unwrap();
        let answered = delays(language, &check);
        match &first {
            None => first = Some((language, answered)),
            Some((rust, expected)) => {
                let differ: Vec<String> = expected
                    .iter()
                    .zip(&answered)
                    .enumerate()
                    .filter(|(_, (a, b))| a != b)
                    .take(5)
                    .map(|(index, (a, b))| {
                        format!("shop-{index}: {rust} {a} ms, {language} {b} ms")
                    })
                    .collect();
                assert!(differ.is_empty(), "{language} disagrees: {differ:?}");
            }
        }
    }
    let (_, expected) = first.unwrap();
    assert!(
        expected.iter().all(|ms| (600_000..660_000).contains(ms)),
        "600 s plus up to 10 %"
    );
}

/// The Go SDK turns Go's collector off and collects at the end of an evaluation once the heap has grown
/// (guest-sdk/go/preflight/collector.go, reading its figures one way on an instance's first evaluation and
/// another on later ones): one reused instance serves 10 evaluations of a 4 MiB object (the SDK decodes each
/// anew) within a 28 MiB memory limit. One evaluation needs about 23 MiB; the garbage of two needs more than
/// 32 MiB, so each evaluation, the first included, must be followed by a collection.
#[test]
fn a_reused_go_instance_collects_its_garbage_between_evaluations() {
    use preflight_engine::{Isolation, Limits, Request, Target};
    let (runtime, engine, limits) = in_process();
    let limits = Limits {
        memory_bytes: 28 << 20,
        isolation: Isolation::Reuse { max_uses: 1_000 },
        ..limits
    };
    let check = engine
        .load(&std::fs::read(go_check("plugins/dependency-ready")).unwrap())
        .unwrap();
    let notes: serde_json::Map<String, Value> = (0..8_192)
        .map(|index| (format!("example.com/note-{index}"), "x".repeat(500).into()))
        .collect();
    let object = serde_json::json!({"apiVersion": "apps.example.com/v1", "kind": "App",
        "metadata": {"name": "shop", "namespace": "default", "annotations": notes},
        "spec": {"dependsOn": ["redis"]}});
    let request = Request {
        object: object.to_string(),
        config: r#"{"available": ["redis"]}"#.to_owned(),
        target: Target::of_object(&object),
        now: std::time::SystemTime::now(),
    };
    runtime.block_on(async {
        for evaluation in 1..=10 {
            let verdict = engine
                .evaluate(&check, &request, &limits)
                .await
                .outcome
                .unwrap_or_else(|failure| panic!("evaluation {evaluation}: {failure}"));
            assert!(verdict.proceed, "evaluation {evaluation}: {verdict:?}");
        }
    });
}

/// A lookup service that knows two ConfigMaps in namespace `apps`, as the operator's watch caches would
/// answer them.
struct TwoConfigMaps;

impl preflight_engine::ClusterLookup for TwoConfigMaps {
    fn get<'a>(
        &'a self,
        target: &'a preflight_engine::Target,
        kind: preflight_engine::ObjectKind,
        namespace: Option<String>,
        name: String,
    ) -> preflight_engine::LookupFuture<'a, Option<String>> {
        Box::pin(async move {
            let namespace = namespace.or_else(|| target.namespace.clone());
            if kind.kind != "ConfigMap" || namespace.as_deref() != Some("apps") {
                return Err(format!("{kind} is not granted to this check"));
            }
            Ok(match name.as_str() {
                "complete" => Some(r#"{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"complete"},"data":{"endpoint":"db:5432"}}"#.to_owned()),
                "partial" => Some(r#"{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"partial"},"data":{"other":"x"}}"#.to_owned()),
                _ => None,
            })
        })
    }

    fn list<'a>(
        &'a self,
        _target: &'a preflight_engine::Target,
        kind: preflight_engine::ObjectKind,
        _namespace: Option<String>,
        _label_selector: String,
    ) -> preflight_engine::LookupFuture<'a, Vec<String>> {
        Box::pin(async move { Err(format!("listing {kind} is not granted to this check")) })
    }
}

/// Issue 21, item 8: the lookups example in every language (the Go and C SDKs' lookup helpers included)
/// answers each object the same under the same grant, and is refused the same without it.
#[test]
fn every_language_looks_up_the_same_way_under_the_same_grant() {
    use preflight_engine::{Grants, Request, Target};
    let (runtime, engine, limits) = in_process();
    let config = r#"{"requiredKey": "endpoint", "retryAfterSeconds": 60, "jitterPercent": 10}"#;
    let granted = Grants {
        cluster: Some(std::sync::Arc::new(TwoConfigMaps)),
        ..Grants::default()
    };
    let cases = [
        ("complete", &granted),
        ("partial", &granted),
        ("absent", &granted),
        ("", &granted),
        ("complete", &Grants::default()),
    ];
    let mut first: Option<(&str, Vec<String>)> = None;
    for (language, path) in builds("plugins/referenced-config", "referenced-config") {
        let check = engine.load(&std::fs::read(&path).unwrap()).unwrap();
        let answers: Vec<String> = cases
            .iter()
            .map(|(config_ref, grants)| {
                let object = serde_json::json!({"apiVersion": "apps.example.com/v1", "kind": "App",
                    "metadata": {"name": "web", "namespace": "apps"}, "spec": {"configRef": config_ref}});
                let request = Request {
                    object: check.input(&object),
                    config: config.to_owned(),
                    target: Target::of_object(&object),
                    now: std::time::SystemTime::now(),
                };
                let evaluation =
                    runtime.block_on(engine.evaluate_with(&check, &request, &limits, grants));
                // An error's wording is the language's own; its kind and reason must agree.
                match evaluation.outcome {
                    Ok(verdict) => format!(
                        "{} {:?} {} {}",
                        verdict.proceed, verdict.requeue_after, verdict.reason, verdict.message
                    ),
                    Err(failure) => format!("{:?} {}", failure.kind, failure.reason),
                }
            })
            .collect();
        match &first {
            None => first = Some((language, answers)),
            Some((rust, expected)) => {
                assert_eq!(&answers, expected, "{language} and {rust} disagree")
            }
        }
    }
    let (_, answers) = first.unwrap();
    eprintln!("{answers:#?}");
    assert!(
        answers[0].starts_with("true None ConfigPresent"),
        "{answers:?}"
    );
    assert!(answers[1].contains("ConfigIncomplete ConfigMap partial has no key endpoint"));
    assert!(answers[2].contains("ConfigMissing waiting for ConfigMap absent"));
    assert!(answers[3].ends_with("InvalidSpec"), "{answers:?}");
    assert!(
        answers[4].starts_with("CheckError"),
        "not granted: {answers:?}"
    );
}

/// Issue 21, item 9: a validator that throws refuses the configuration with its own message in every
/// language (in JavaScript an `Error` escaping `validate` trapped the component instead), and so does the
/// SDK's own refusal of a configuration that is not a mapping.
#[test]
fn every_language_refuses_a_configuration_with_the_validator_s_message() {
    use preflight_engine::FailureKind;
    let (runtime, engine, limits) = in_process();
    for (language, path) in [
        ("rust", build_check("external-dependency")),
        ("python", build_python_check("plugins/external-dependency")),
        ("javascript", build_js_check("plugins/external-dependency")),
        ("go", go_check("plugins/external-dependency")),
        (
            "c",
            build_c_check("plugins/external-dependency", this_binary()),
        ),
    ] {
        let check = engine.load(&std::fs::read(&path).unwrap()).unwrap();
        for (config, says) in [
            (
                r#"{"endpoint": "ftp://x/"}"#,
                "must be an http:// or https:// URL",
            ),
            ("[1, 2]", ""),
        ] {
            let refused = runtime
                .block_on(engine.validate_config(&check, config, &limits))
                .expect_err(config);
            assert_eq!(
                refused.kind,
                FailureKind::InvalidConfig,
                "{language}, {config}: {refused}"
            );
            assert!(
                refused.message.contains(says),
                "{language}, {config}: {refused}"
            );
        }
    }
}

#[test]
fn every_language_reaches_out_the_same_way_under_the_same_grant() {
    let server = preflight_test_support::LoopbackServer::start(|path| match path {
        "/dependencies/db" => preflight_test_support::Reply::new(200, r#"{"key":"K-1"}"#),
        _ => preflight_test_support::Reply::new(404, "no such dependency"),
    });
    let dir = std::env::temp_dir().join(format!("languages-http-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let config = dir.join("config.json");
    std::fs::write(
        &config,
        format!(r#"{{"endpoint": "{}/dependencies/"}}"#, server.url()),
    )
    .unwrap();
    let builds = [
        ("rust", build_check("external-dependency")),
        ("python", build_python_check("plugins/external-dependency")),
        ("javascript", build_js_check("plugins/external-dependency")),
        ("go", go_check("plugins/external-dependency")),
        (
            "c",
            build_c_check("plugins/external-dependency", this_binary()),
        ),
    ];
    for dependency in ["db", "queue"] {
        let object = dir.join(format!("{dependency}.yaml"));
        std::fs::write(
            &object,
            format!("apiVersion: example.com/v1\nkind: App\nmetadata: {{name: a, namespace: d}}\nspec: {{dependency: {dependency}}}\n"),
        )
        .unwrap();
        let answers: Vec<Value> = builds
            .iter()
            .map(|(language, check)| {
                let ungranted = run(check, &object, &config, &[]);
                assert_eq!(
                    ungranted["error"]["kind"], "check",
                    "{language}: {ungranted}"
                );
                assert!(
                    ungranted["refused"][0]
                        .as_str()
                        .unwrap()
                        .contains("not granted"),
                    "{language}: {ungranted}"
                );
                run(check, &object, &config, &["--allow-http", &server.url()])
            })
            .collect();
        for (answer, (language, _)) in answers.iter().zip(&builds).skip(1) {
            assert_eq!(
                answer, &answers[0],
                "{dependency}: {language} and rust disagree"
            );
        }
        eprintln!("{dependency}: {}", answers[0]);
    }
    assert_eq!(
        server.request_count(),
        2 * builds.len(),
        "each build sent one request per object, and none without the grant"
    );
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn the_guest_worlds_wasi_wit_is_that_of_the_hosts_wasmtime() {
    // guest-sdk/wit/deps holds the WASI 0.2 WIT Python and JavaScript checks are built against (and that
    // `preflight scaffold` writes): the files of the wasmtime-wasi-http the host links, unchanged.
    let host = preflight_test_support::wasi_wit().join("deps");
    let mut compared = 0;
    for entry in std::fs::read_dir(&host).unwrap() {
        let file = entry.unwrap().path();
        let package = file.file_stem().unwrap().to_str().unwrap();
        let vendored = workspace_root()
            .join("guest-sdk/wit/deps")
            .join(package)
            .join(file.file_name().unwrap());
        assert_eq!(
            std::fs::read_to_string(&vendored)
                .unwrap_or_else(|error| panic!("{}: {error}", vendored.display())),
            std::fs::read_to_string(&file).unwrap(),
            "{} differs from the host's {}",
            vendored.display(),
            file.display()
        );
        compared += 1;
    }
    assert!(
        compared >= 5,
        "only {compared} WIT files under {}",
        host.display()
    );
}

/// How many core modules of the component at `path` have a start function, and how many empty passive data
/// segments its modules hold.
fn starts_and_empty_segments(path: &Path) -> (usize, usize) {
    let bytes = std::fs::read(path).unwrap();
    let (mut starts, mut empty) = (0, 0);
    for payload in wasmparser::Parser::new(0).parse_all(&bytes) {
        match payload.unwrap() {
            wasmparser::Payload::StartSection { .. } => starts += 1,
            wasmparser::Payload::DataSection(reader) => {
                empty += reader
                    .into_iter()
                    .map(Result::unwrap)
                    .filter(|data| {
                        matches!(data.kind, wasmparser::DataKind::Passive) && data.data.is_empty()
                    })
                    .count();
            }
            _ => {}
        }
    }
    (starts, empty)
}

#[test]
fn preflight_snapshot_pre_initialises_a_go_build_and_refuses_a_check_it_cannot() {
    // wit-component runs a reactor's `_initialize` (Go's runtime start and package inits) from a start
    // function; a snapshot begins where it left off and must not run it again.
    let built = build_go_check("plugins/dependency-ready", this_binary());
    let snapshot = go_check("plugins/dependency-ready");
    // Wizer leaves an empty passive segment for each active one it applied, which wasmtime would set up in
    // every instance; no Go code names a segment, so none is left.
    assert_eq!(starts_and_empty_segments(&built), (1, 0), "{built:?}");
    assert_eq!(starts_and_empty_segments(&snapshot), (0, 0), "{snapshot:?}");
    // Reproducible: Go's start draws random seeds and reads the clocks, and the snapshot keeps them (the
    // conformance check also reads the wall clock into a package variable); the same build snapshotted again
    // gives the same bytes (a rebuilt check keeps its digest).
    for project in ["plugins/dependency-ready", "tests/conformance"] {
        let (built, snapshot) = (build_go_check(project, this_binary()), go_check(project));
        let again =
            std::env::temp_dir().join(format!("snapshot-again-{}.wasm", std::process::id()));
        let (status, said) = preflight(&[
            "snapshot",
            built.to_str().unwrap(),
            "-o",
            again.to_str().unwrap(),
        ]);
        assert_eq!(status, 0, "{said}");
        let same = std::fs::read(&again).unwrap() == std::fs::read(&snapshot).unwrap();
        std::fs::remove_file(&again).unwrap();
        assert!(same, "two snapshots of {built:?} differ");
    }
    // A check without the initialisation export (here the Rust build) is refused, and nothing is written.
    let output = std::env::temp_dir().join(format!("snapshot-{}.wasm", std::process::id()));
    let refused = Command::new(env!("CARGO_BIN_EXE_preflight"))
        .arg("snapshot")
        .arg(build_check("dependency-ready"))
        .arg("-o")
        .arg(&output)
        .output()
        .unwrap();
    let said = String::from_utf8_lossy(&refused.stderr);
    assert_eq!(refused.status.code(), Some(1), "{said}");
    assert!(
        said.contains("it does not export `wizer-initialize`")
            && said.contains("preflight:guest/check-snapshot"),
        "{said}"
    );
    assert!(!output.exists());
}

#[test]
fn preflight_componentize_says_why_it_cannot_make_a_check_of_a_module_and_writes_nothing() {
    // Every C and Go build in these tests is componentized by it, as build.sh does it; here what it refuses.
    let dir = std::env::temp_dir().join(format!("componentize-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let not_wasm = dir.join("notes.wasm");
    std::fs::write(&not_wasm, "not WebAssembly").unwrap();
    // The smallest core module: no component type, no exports.
    let bare = dir.join("bare.wasm");
    std::fs::write(&bare, b"\0asm\x01\0\0\0").unwrap();
    let component = build_c_check("plugins/dependency-ready", this_binary());
    let wit = workspace_root().join("guest-sdk/wit");
    let output = dir.join("out.wasm");
    for (input, world, says) in [
        (&not_wasm, None, "is not a WebAssembly core module"),
        (&component, None, "is a component already"),
        (
            &bare,
            None,
            "carries no component type: name the world it implements with --wit DIR --world",
        ),
        (
            &bare,
            Some("preflight:guest/nope"),
            "--world: World `nope` not found in package `preflight:guest`",
        ),
        (
            &bare,
            Some("preflight:guest/check"),
            "cannot make a component of it: failed to decode world from module",
        ),
    ] {
        let mut command = Command::new(this_binary());
        command
            .arg("componentize")
            .arg(input)
            .arg("-o")
            .arg(&output);
        if let Some(world) = world {
            command.arg("--wit").arg(&wit).args(["--world", world]);
        }
        let refused = command.output().unwrap();
        let said = String::from_utf8_lossy(&refused.stderr);
        assert_eq!(
            refused.status.code(),
            Some(2),
            "{input:?} {world:?}: {said}"
        );
        assert!(said.contains(says), "{input:?} {world:?}: {said}");
        assert!(!output.exists(), "{input:?} {world:?}");
    }
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn a_scaffolded_project_builds_and_passes_its_own_fixtures_in_every_language() {
    let dir = std::env::temp_dir().join(format!("scaffold-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let root = workspace_root();
    // Every language as a new user outside this repository gets it (the SDK copied into the project), and
    // Rust also against a checkout given with --sdk (a path relative to the project).
    for (language, sdk) in [
        ("rust", None),
        ("rust", Some(root.as_path())),
        ("python", None),
        ("js", None),
        ("go", None),
        ("c", None),
    ] {
        let project = dir.join(format!(
            "my-{language}{}-check",
            if sdk.is_some() { "-sdk" } else { "" }
        ));
        let mut args = vec!["scaffold", "--lang", language];
        if let Some(sdk) = sdk {
            args.extend(["--sdk", sdk.to_str().unwrap()]);
        }
        args.push(project.to_str().unwrap());
        let (status, said) = preflight(&args);
        assert_eq!(status, 0, "{language}: {said}");
        if sdk.is_some() {
            let manifest = std::fs::read_to_string(project.join("Cargo.toml")).unwrap();
            assert!(
                manifest.contains("preflight-guest = { path = \"../"),
                "a relative path: {manifest}"
            );
        }
        // As a new user runs it right after scripts/setup: build.sh must find the cached tools by itself.
        // Only where builds cache and that they stay offline is set.
        let offline = preflight_test_support::toolchain_env()
            .into_iter()
            .filter(|(name, _)| name.starts_with("GO") || name.starts_with("CARGO"));
        let build = preflight_test_support::newcomer_command("timeout", &[])
            .args(["900", "sh"])
            .arg(project.join("build.sh"))
            .envs(offline)
            // The Rust project's own target directory, kept between runs like the other test builds.
            .env(
                "CARGO_TARGET_DIR",
                preflight_test_support::wasm_target_dir().join("scaffold"),
            )
            .output()
            .unwrap();
        assert!(
            build.status.success(),
            "{language}: build.sh failed:\n{}{}",
            String::from_utf8_lossy(&build.stdout),
            String::from_utf8_lossy(&build.stderr)
        );
        if language == "go" {
            let said = String::from_utf8_lossy(&build.stdout);
            assert!(said.contains(": pre-initialised ("), "go: {said}");
        }
        let check = project.join(format!(
            "{}.wasm",
            project.file_name().unwrap().to_str().unwrap()
        ));
        let (status, table) = preflight(&[
            "test",
            "--check",
            check.to_str().unwrap(),
            project.join("fixtures.yaml").to_str().unwrap(),
            "--timeout",
            "10s",
        ]);
        assert_eq!(status, 0, "{language}:\n{table}");
        assert!(table.contains("3 passed, 0 failed"), "{language}:\n{table}");
    }

    // A project is never written over, and its name must suit every ecosystem.
    let (status, _) = preflight(&[
        "scaffold",
        "--lang",
        "c",
        dir.join("my-c-check").to_str().unwrap(),
    ]);
    assert_eq!(status, 2, "a non-empty directory is refused");
    let (status, _) = preflight(&[
        "scaffold",
        "--lang",
        "c",
        dir.join("My_Check").to_str().unwrap(),
    ]);
    assert_eq!(status, 2, "a name with capitals or `_` is refused");
    std::fs::remove_dir_all(&dir).unwrap();
}
