//! The same example check written in every guest language this project supports (Rust, Python, JavaScript,
//! Go, C), built from source with each language's pinned toolchain, must answer identically: the shared
//! fixtures pass for each build (`preflight test`), and `preflight run` prints the same outcome, delay,
//! reason, message and action for each object, error cases included.

use preflight_test_support::{
    build_c_check, build_check, build_go_check, build_js_check, build_python_check, fixture,
    workspace_root,
};
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::Command;

/// Every language's build of `project` (a directory with `python/`, `javascript/`, `go/` and `c/` builds of
/// the check whose Rust build is the crate `package`): language and component.
fn builds(project: &str, package: &str) -> Vec<(&'static str, PathBuf)> {
    vec![
        ("rust", build_check(package)),
        ("python", build_python_check(project)),
        ("javascript", build_js_check(project)),
        ("go", build_go_check(project)),
        ("c", build_c_check(project)),
    ]
}

fn preflight(args: &[&str]) -> (i32, String) {
    // Compiled once for every run of this test binary (and the next), as `PREFLIGHT_CACHE_DIR` promises.
    let compiled = preflight_test_support::wasm_target_dir().join("compiled-checks");
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
        11,
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

#[test]
fn a_scaffolded_project_builds_and_passes_its_own_fixtures_in_every_language() {
    let dir = std::env::temp_dir().join(format!("scaffold-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let root = workspace_root();
    for language in ["rust", "python", "js", "go", "c"] {
        let project = dir.join(format!("my-{language}-check"));
        let (status, said) = preflight(&[
            "scaffold",
            "--lang",
            language,
            "--sdk",
            root.to_str().unwrap(),
            project.to_str().unwrap(),
        ]);
        assert_eq!(status, 0, "{language}: {said}");
        let build = Command::new("timeout")
            .args(["900", "sh"])
            .arg(project.join("build.sh"))
            .envs(preflight_test_support::toolchain_env())
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
        let check = project.join(format!("my-{language}-check.wasm"));
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
