//! The same example check written in every guest language this project supports, built from source with
//! each language's pinned toolchain, must answer identically: the shared fixtures pass for each build
//! (`preflight test`), and `preflight run` prints the same outcome, delay, reason, message and action for
//! each object, error cases included.

use preflight_test_support::{build_check, build_python_check, fixture, workspace_root};
use serde_json::Value;
use std::process::Command;

/// Every build of plugins/dependency-ready: language and component.
fn builds() -> Vec<(&'static str, std::path::PathBuf)> {
    vec![
        ("rust", build_check("dependency-ready")),
        ("python", build_python_check("dependency-ready")),
    ]
}

fn preflight(args: &[&str]) -> (i32, String) {
    let output = Command::new(env!("CARGO_BIN_EXE_preflight"))
        .args(args)
        .output()
        .expect("preflight runs");
    (
        output.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&output.stdout).into_owned(),
    )
}

#[test]
fn every_language_passes_the_examples_fixtures() {
    let fixtures = workspace_root().join("plugins/dependency-ready/fixtures.yaml");
    for (language, check) in builds() {
        let (status, table) = preflight(&[
            "test",
            "--check",
            check.to_str().unwrap(),
            fixtures.to_str().unwrap(),
            "--timeout",
            "10s",
        ]);
        assert_eq!(status, 0, "{language}:\n{table}");
        assert!(table.contains("5 passed, 0 failed"), "{language}:\n{table}");
    }
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
        let answers: Vec<(String, Value)> = builds()
            .into_iter()
            .map(|(language, check)| {
                let (_, json) = preflight(&[
                    "run",
                    "-o",
                    "json",
                    "--timeout",
                    "10s",
                    "--now",
                    "2026-12-05T12:00:00Z",
                    "--check",
                    check.to_str().unwrap(),
                    "--object",
                    object.to_str().unwrap(),
                    "--config",
                    config.to_str().unwrap(),
                ]);
                let mut answer: Value = serde_json::from_str(&json).unwrap();
                let answer = answer.as_object_mut().unwrap();
                for varying in ["durationUs", "sha256", "logs", "logsDropped"] {
                    answer.remove(varying);
                }
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
