//! `preflight run`, `inspect` and `bench` on the example and hostile checks, built from source: every outcome
//! with its exit status, text and JSON output, limits that hold, and replay with `--now`.

use preflight_test_support::{
    build_check, check_bytes, fixture, with_custom_section, workspace_root,
};
use serde_json::Value;
use std::process::Command;
use std::time::Duration;

/// Saturday 2026-12-05 12:00 UTC.
const SATURDAY_NOON: &str = "2026-12-05T12:00:00Z";

/// How long one `preflight` command may run in these tests before it is killed and the test fails.
const COMMAND_BOUND: Duration = Duration::from_secs(60);

/// Runs `preflight` and returns its exit status and standard output; kills it and fails the test if it
/// runs longer than `bound`.
fn preflight_within(bound: Duration, args: &[&str]) -> (i32, String) {
    let mut child = Command::new(env!("CARGO_BIN_EXE_preflight"))
        .args(args)
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    // Read while it runs: output larger than the pipe's buffer would otherwise block the child.
    let mut stdout = child.stdout.take().unwrap();
    let reader = std::thread::spawn(move || {
        let mut text = String::new();
        std::io::Read::read_to_string(&mut stdout, &mut text).unwrap();
        text
    });
    let started = std::time::Instant::now();
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        if started.elapsed() > bound {
            child.kill().unwrap();
            panic!("preflight {args:?} still running after {bound:?}");
        }
        std::thread::sleep(Duration::from_millis(10));
    };
    (status.code().unwrap_or(-1), reader.join().unwrap())
}

/// Runs `preflight` and returns its exit status and standard output.
fn preflight(args: &[&str]) -> (i32, String) {
    preflight_within(COMMAND_BOUND, args)
}

/// Runs `preflight` (killed after a minute) and returns its exit status and standard error.
fn preflight_with_stderr(args: &[&str]) -> (i32, String) {
    preflight_with_stderr_env(args, &[])
}

/// [`preflight_with_stderr`] with `env` added to its environment.
fn preflight_with_stderr_env(args: &[&str], env: &[(&str, &str)]) -> (i32, String) {
    let output = Command::new("timeout")
        .arg("60")
        .arg(env!("CARGO_BIN_EXE_preflight"))
        .args(args)
        .envs(env.iter().copied())
        .output()
        .unwrap();
    (
        output.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&output.stderr).into_owned(),
    )
}

fn run_json(package: &str, object: &str, config: Option<&str>) -> (i32, Value) {
    let check = build_check(package);
    let object = fixture(object);
    let mut args = vec![
        "run",
        "-o",
        "json",
        "--now",
        SATURDAY_NOON,
        "--check",
        check.to_str().unwrap(),
        "--object",
        object.to_str().unwrap(),
    ];
    let config = config.map(fixture);
    if let Some(config) = &config {
        args.extend(["--config", config.to_str().unwrap()]);
    }
    let (status, stdout) = preflight(&args);
    (
        status,
        serde_json::from_str(&stdout).unwrap_or_else(|error| panic!("{error}: {stdout}")),
    )
}

#[test]
fn cli_run_reports_every_outcome_with_its_exit_status() {
    let deps = Some("dependency-ready-config.yaml");
    let (status, json) = run_json("dependency-ready", "app-waiting.yaml", deps);
    assert_eq!(status, 3);
    assert_eq!(json["proceed"], false);
    assert_eq!(json["action"], "requeue");
    assert_eq!(json["reason"], "DependencyMissing");
    assert_eq!(json["error"], Value::Null);
    assert!(
        (600_000..660_000).contains(&json["requeueAfterMs"].as_u64().unwrap()),
        "{json}"
    );
    assert_eq!(json["sha256"].as_str().unwrap().len(), 64);
    assert!(json["durationUs"].as_u64().is_some());
    assert_eq!(json["logs"][0]["message"], "shop is waiting for redis");

    let (status, json) = run_json("dependency-ready", "app-ready.yaml", deps);
    assert_eq!(
        (status, &json["action"], &json["proceed"]),
        (0, &Value::from("proceed"), &Value::from(true))
    );

    let (status, json) = run_json("dependency-ready", "app-malformed.json", deps);
    assert_eq!((status, &json["action"]), (4, &Value::from("backoff")));
    assert_eq!(json["error"]["kind"], "check");

    let (status, json) = run_json(
        "maintenance-window",
        "app-ready.yaml",
        Some("maintenance-window-config.yaml"),
    );
    assert_eq!(
        (status, json["requeueAfterMs"].as_u64()),
        (3, Some(10 * 3600 * 1000))
    );

    let (status, json) = run_json(
        "required-metadata",
        "app-waiting.yaml",
        Some("required-metadata-config.yaml"),
    );
    assert_eq!(
        (status, &json["action"], &json["requeueAfterMs"]),
        (3, &Value::from("await-change"), &Value::Null)
    );
}

/// `preflight run` of required-metadata on `object` in text form, with `extra` arguments.
fn run_required_metadata(object: &str, extra: &[&str]) -> (i32, String) {
    let check = build_check("required-metadata");
    let (object, config) = (fixture(object), fixture("required-metadata-config.yaml"));
    let mut args = vec!["run", "--check", check.to_str().unwrap()];
    args.extend(["--object", object.to_str().unwrap()]);
    args.extend(["--config", config.to_str().unwrap()]);
    args.extend(extra);
    preflight(&args)
}

#[test]
fn cli_run_text_output_names_the_action() {
    let (status, stdout) = run_required_metadata("app-waiting.yaml", &[]);
    assert_eq!(status, 3);
    assert!(stdout.contains("proceed   no"), "{stdout}");
    assert!(stdout.contains("action    await-change"), "{stdout}");
}

#[test]
fn cli_run_caps_an_absurd_timeout_instead_of_crashing() {
    let (status, stdout) =
        run_required_metadata("app-ready.yaml", &["--timeout", "18446744073709551615s"]);
    assert_eq!(status, 0, "{stdout}");
    assert!(stdout.contains("action    proceed"), "{stdout}");
}

#[test]
fn cli_output_into_a_closed_pipe_ends_the_command_without_a_panic() {
    // As `preflight inspect check.wasm | head -1` when head has already gone: the reading end is closed
    // before the command starts, so its first write meets a closed pipe.
    use std::os::unix::process::ExitStatusExt;
    let check = build_check("maintenance-window");
    let (reader, writer) = std::io::pipe().unwrap();
    drop(reader);
    let output = Command::new(env!("CARGO_BIN_EXE_preflight"))
        .args(["inspect", check.to_str().unwrap()])
        .stdout(writer)
        .stderr(std::process::Stdio::piped())
        .output()
        .unwrap();
    let said = String::from_utf8_lossy(&output.stderr);
    assert!(!said.contains("panicked"), "{said}");
    assert_eq!(output.status.signal(), Some(libc::SIGPIPE), "{said}");
}

#[test]
fn cli_inspect_describes_a_check_and_rejects_what_is_not_one() {
    let check = build_check("maintenance-window");
    let (status, stdout) = preflight(&["inspect", "-o", "json", check.to_str().unwrap()]);
    assert_eq!(status, 0);
    let json: Value = serde_json::from_str(&stdout).unwrap();
    assert_eq!(json["world"], "preflight:check/preflight-check@0.2.0");
    assert_eq!(
        json["exports"],
        serde_json::json!([
            "preflight:check/configure@0.2.0",
            "preflight:check/evaluate@0.2.0"
        ])
    );
    assert!(
        json["imports"]
            .as_array()
            .unwrap()
            .contains(&Value::from("preflight:check/log@0.2.0"))
    );
    assert_eq!(
        json["size"].as_u64().unwrap(),
        std::fs::metadata(&check).unwrap().len()
    );

    let other = build_check("other-world");
    let output = Command::new(env!("CARGO_BIN_EXE_preflight"))
        .args(["inspect", other.to_str().unwrap()])
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(1));
    assert!(
        String::from_utf8_lossy(&output.stderr)
            .contains("does not export preflight:check/evaluate@0.2.0")
    );
}

#[test]
fn cli_usage_and_unreadable_input_exit_2_and_an_unusable_check_exits_4() {
    let check = build_check("required-metadata");
    let (status, _) = preflight(&[
        "run",
        "--check",
        check.to_str().unwrap(),
        "--object",
        "/nonexistent.yaml",
    ]);
    assert_eq!(status, 2);
    let (status, _) = preflight(&["run", "--check", check.to_str().unwrap()]);
    assert_eq!(status, 2);
    // Told before any cluster is asked (none is configured here).
    let (status, stderr) = preflight_with_stderr(&["what-if", "--configmap", "nope"]);
    assert_eq!(status, 2);
    assert!(stderr.contains("write NAMESPACE/NAME"), "{stderr}");
    let (status, stderr) = preflight_with_stderr_env(
        &["operator", "--default-memory-limit", "512MiB"],
        &[("KUBECONFIG", "/nonexistent")],
    );
    assert_eq!(status, 2);
    assert!(
        stderr.contains("--default-memory-limit 512.0 MiB is above --max-memory 256.0 MiB"),
        "{stderr}"
    );
    let (status, _) = preflight(&[
        "run",
        "--check",
        check.to_str().unwrap(),
        "--object",
        fixture("app-ready.yaml").to_str().unwrap(),
        "--timeout",
        "soon",
    ]);
    assert_eq!(status, 2);

    let other = build_check("other-world");
    let (status, stdout) = preflight(&[
        "run",
        "-o",
        "json",
        "--check",
        other.to_str().unwrap(),
        "--object",
        fixture("app-ready.yaml").to_str().unwrap(),
    ]);
    assert_eq!(status, 4);
    let json: Value = serde_json::from_str(&stdout).unwrap();
    assert_eq!(
        (&json["error"]["kind"], &json["action"]),
        (&Value::from("invalid-component"), &Value::from("stop"))
    );
}

#[test]
fn cli_bench_prints_latency_and_throughput() {
    let check = build_check("dependency-ready");
    let (status, stdout) = preflight(&[
        "bench",
        "-o",
        "json",
        "--iterations",
        "200",
        "--concurrency",
        "8",
        "--check",
        check.to_str().unwrap(),
        "--object",
        fixture("app-ready.yaml").to_str().unwrap(),
        "--config",
        fixture("dependency-ready-config.yaml").to_str().unwrap(),
    ]);
    assert_eq!(status, 0, "{stdout}");
    let json: Value = serde_json::from_str(&stdout).unwrap();
    assert_eq!(json["outcome"], "proceed");
    let (p50, p99) = (
        json["p50Us"].as_f64().unwrap(),
        json["p99Us"].as_f64().unwrap(),
    );
    assert!(p50 > 0.0 && p50 <= p99, "{json}");
    assert!(json["concurrentPerSecond"].as_f64().unwrap() > 0.0);
}

/// `preflight run` of the misbehave check in `mode`, in text form, with `extra` arguments.
fn run_misbehave(mode: &str, extra: &[&str], bound: Duration) -> (i32, String) {
    let check = build_check("misbehave");
    let object = fixture("app-ready.yaml");
    let config = std::env::temp_dir().join(format!("preflight-misbehave-{mode}.json"));
    std::fs::write(&config, format!(r#"{{"mode":"{mode}"}}"#)).unwrap();
    let mut args = vec!["run", "--check", check.to_str().unwrap()];
    args.extend(["--object", object.to_str().unwrap()]);
    args.extend(["--config", config.to_str().unwrap()]);
    args.extend(extra);
    preflight_within(bound, &args)
}

#[test]
fn cli_run_timeout_holds_while_the_check_sleeps() {
    let (status, stdout) = run_misbehave("sleep", &["--timeout", "200ms"], Duration::from_secs(10));
    assert_eq!(status, 4, "{stdout}");
    assert!(stdout.contains("error     timeout:"), "{stdout}");
}

#[test]
fn cli_run_now_is_the_time_the_guest_clock_reads() {
    let (status, stdout) = run_misbehave("clock", &["--now", SATURDAY_NOON], COMMAND_BOUND);
    assert_eq!(status, 0, "{stdout}");
    assert!(stdout.contains("message   1796472000\n"), "{stdout}");
}

#[test]
fn cli_run_text_names_the_default_reason_and_a_failure_once() {
    let (status, stdout) = run_misbehave("no-reason", &[], COMMAND_BOUND);
    assert_eq!(status, 3, "{stdout}");
    assert!(stdout.contains("reason    NotReady\n"), "{stdout}");

    let (status, stdout) = run_misbehave("panic", &[], COMMAND_BOUND);
    assert_eq!(status, 4, "{stdout}");
    assert_eq!(stdout.matches("the check trapped").count(), 1, "{stdout}");
    assert!(stdout.contains("reason    CheckTrapped\n"), "{stdout}");
}

#[test]
fn cli_version_names_the_binary_wasmtime_and_the_contracts() {
    let (status, stdout) = preflight(&["version", "-o", "json"]);
    assert_eq!(status, 0, "{stdout}");
    let version: Value = serde_json::from_str(&stdout).unwrap();
    assert_eq!(version["preflight"], env!("CARGO_PKG_VERSION"));
    assert_eq!(version["wasmtime"], "48.0.8");
    assert_eq!(version["contracts"], serde_json::json!(["0.1.x", "0.2.x"]));
}

#[test]
fn every_rust_example_declares_its_reads_and_answers_its_fixtures_the_same_both_ways() {
    for (package, reads, cases) in [
        ("dependency-ready", "spec.dependsOn", 5),
        (
            "required-metadata",
            "metadata.annotations, metadata.labels",
            4,
        ),
        (
            "maintenance-window",
            "metadata.annotations[preflight.dev/maintenance-window]",
            5,
        ),
        ("external-dependency", "spec.dependency", 3),
    ] {
        let check = build_check(package);
        let (status, stdout) = preflight(&["inspect", check.to_str().unwrap()]);
        assert_eq!(status, 0, "{stdout}");
        assert!(
            stdout.contains(&format!("\nreads     {reads}\n")),
            "{stdout}"
        );
        let fixtures = workspace_root().join(format!("plugins/{package}/fixtures.yaml"));
        let (status, stdout) = preflight(&[
            "test",
            "--check",
            check.to_str().unwrap(),
            fixtures.to_str().unwrap(),
        ]);
        assert_eq!(status, 0, "{package}: {stdout}");
        assert!(
            stdout.ends_with(&format!("{cases} passed, 0 failed\n")),
            "{package}: {stdout}"
        );
    }
}

#[test]
fn cli_test_fails_a_check_whose_declared_reads_leave_out_what_it_decides_on() {
    // The conformance check decides on spec.behave; declare that it reads only the labels.
    let narrow = with_custom_section(
        &check_bytes("conformance"),
        "preflight-reads",
        b"metadata.labels\n",
    );
    let check = std::env::temp_dir().join(format!("preflight-narrow-{}.wasm", std::process::id()));
    std::fs::write(&check, narrow).unwrap();
    let fixtures = workspace_root().join("tests/conformance/fixtures.yaml");
    let (status, stdout) = preflight(&[
        "test",
        "--check",
        check.to_str().unwrap(),
        fixtures.to_str().unwrap(),
    ]);
    // `run` sends what the operator would (the labels: the check cannot tell what to do), or the whole
    // object when asked.
    let object = std::env::temp_dir().join(format!("preflight-narrow-{}.yaml", std::process::id()));
    std::fs::write(
        &object,
        "apiVersion: conformance.example.com/v1\nkind: Probe\nmetadata: {name: p, namespace: a}\nspec: {behave: requeue, seconds: 90}\n",
    )
    .unwrap();
    let run = |extra: &[&str]| {
        let mut args = vec!["run", "-o", "json", "--check", check.to_str().unwrap()];
        args.extend(["--object", object.to_str().unwrap()]);
        args.extend(extra);
        let (_, json) = preflight(&args);
        serde_json::from_str::<Value>(&json).unwrap()
    };
    assert_eq!(
        run(&[])["reason"],
        "InvalidObject",
        "spec.behave was not sent"
    );
    let whole = run(&["--whole-object"]);
    assert_eq!(whole["requeueAfterMs"], 90_000, "{whole}");
    std::fs::remove_file(&object).unwrap();
    std::fs::remove_file(&check).unwrap();
    assert_eq!(status, 1, "{stdout}");
    let requeue = stdout
        .lines()
        .skip_while(|line| !line.contains("requeue"))
        .find(|line| line.contains("the declared reads"))
        .unwrap_or_else(|| panic!("{stdout}"));
    assert!(
        requeue.contains(
            "the declared reads (metadata.labels) change the answer: whole object: not proceed"
        ),
        "{requeue}"
    );
}

#[test]
fn cli_test_runs_fixtures_as_unit_tests_of_a_check() {
    let check = build_check("dependency-ready");
    let fixtures =
        preflight_test_support::workspace_root().join("plugins/dependency-ready/fixtures.yaml");
    let (status, stdout) = preflight(&[
        "test",
        "--check",
        check.to_str().unwrap(),
        fixtures.to_str().unwrap(),
    ]);
    assert_eq!(status, 0, "{stdout}");
    assert!(stdout.ends_with("5 passed, 0 failed\n"), "{stdout}");
    let row = stdout
        .lines()
        .find(|line| line.starts_with("ok    waits for a missing dependency"))
        .unwrap_or_else(|| panic!("{stdout}"));
    assert!(
        row.ends_with("not proceed DependencyMissing (requeue)"),
        "{row}"
    );

    // A wrong expectation fails, says what differs, and exits 1.
    let wrong =
        std::env::temp_dir().join(format!("preflight-fixtures-{}.yaml", std::process::id()));
    let waiting = fixture("app-waiting.yaml");
    std::fs::write(
        &wrong,
        format!(
            "config: {{available: [postgres-main]}}\ncases:\n  - name: claims it proceeds\n    objectFile: {}\n    expect: {{proceed: true, requeueAfter: 1m}}\n",
            waiting.display()
        ),
    )
    .unwrap();
    let (status, stdout) = preflight(&[
        "test",
        "--check",
        check.to_str().unwrap(),
        wrong.to_str().unwrap(),
    ]);
    assert_eq!(status, 1, "{stdout}");
    assert!(stdout.contains("FAIL  claims it proceeds"), "{stdout}");
    assert!(
        stdout.contains("proceed: expected true, got false"),
        "{stdout}"
    );
    assert!(
        stdout.contains("requeueAfter: expected 1m, got 10m"),
        "{stdout}"
    );
    assert!(stdout.ends_with("0 passed, 1 failed\n"), "{stdout}");

    // A typo in a fixtures file is an input error, not a silent pass.
    std::fs::write(
        &wrong,
        "cases:\n  - name: typo\n    object: {}\n    expect: {procede: true}\n",
    )
    .unwrap();
    let (status, _) = preflight(&[
        "test",
        "--check",
        check.to_str().unwrap(),
        wrong.to_str().unwrap(),
    ]);
    assert_eq!(status, 2);
    std::fs::remove_file(&wrong).unwrap();
}

#[test]
fn run_grants_outbound_http_only_with_allow_http_and_prints_outputs_and_refusals() {
    let server = preflight_test_support::LoopbackServer::start(|_| {
        preflight_test_support::Reply::new(200, r#"{"key":"K-3"}"#)
    });
    let dir = std::env::temp_dir().join(format!("preflight-cli-http-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let object = dir.join("object.yaml");
    std::fs::write(
        &object,
        "apiVersion: example.com/v1\nkind: App\nmetadata: {name: a, namespace: d}\nspec: {dependency: db}\n",
    )
    .unwrap();
    let config = dir.join("config.yaml");
    std::fs::write(
        &config,
        format!("endpoint: {}/dependencies/\n", server.url()),
    )
    .unwrap();
    let check = build_check("external-dependency");
    let base = [
        "run",
        "--check",
        check.to_str().unwrap(),
        "--object",
        object.to_str().unwrap(),
        "--config",
        config.to_str().unwrap(),
    ];
    let (status, text) = preflight(&base);
    assert_eq!(
        status, 4,
        "without --allow-http the request is refused: {text}"
    );
    assert!(text.contains("refused   HTTP GET"), "{text}");
    assert!(text.contains("not granted"), "{text}");
    assert_eq!(server.request_count(), 0);

    let url = server.url();
    let mut granted = base.to_vec();
    granted.extend(["--allow-http", &url]);
    let (status, text) = preflight(&granted);
    assert_eq!(status, 0, "{text}");
    assert!(text.contains("output    dependencyKey=K-3"), "{text}");
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn pack_writes_one_config_map_or_parts_and_refuses_what_the_operator_would_reject() {
    let check = build_check("dependency-ready");
    let check = check.to_str().unwrap();
    let documents = |text: &str| -> Vec<Value> {
        serde_norway::Deserializer::from_str(text)
            .map(|document| serde::Deserialize::deserialize(document).unwrap())
            .collect()
    };
    let base = [
        "pack",
        check,
        "--name",
        "deps",
        "--gates",
        "App.apps.example.com",
    ];
    let (status, one) = preflight(&[&base[..], &["--set", "timeout=500ms"]].concat());
    assert_eq!(status, 0, "{one}");
    let one = documents(&one);
    assert_eq!(one.len(), 1);
    assert_eq!(
        one[0]["metadata"]["labels"]["preflight.dev/gates"],
        "App.apps.example.com"
    );
    assert_eq!(one[0]["data"]["timeout"], "500ms");
    assert_eq!(one[0]["data"]["sha256"].as_str().unwrap().len(), 64);
    assert!(one[0]["binaryData"]["check.wasm"].is_string());

    let (status, parts) = preflight(&[&base[..], &["--max-part-size", "24KiB"]].concat());
    assert_eq!(status, 0, "{parts}");
    let parts = documents(&parts);
    assert!(parts.len() >= 3, "{}", parts.len());
    let (check_map, part_maps) = parts.split_last().unwrap();
    assert_eq!(check_map["data"]["parts"], part_maps.len().to_string());
    assert!(part_maps.iter().all(|part| part["immutable"] == true));

    let (status, refused) =
        preflight_with_stderr(&[&base[..], &["--max-part-size", "256B"]].concat());
    assert_eq!(status, 2, "too large even in parts: {refused}");
    assert!(
        refused.contains("more than 64 parts of 256 bytes"),
        "{refused}"
    );

    // What the operator would reject is refused here, naming the problem, and nothing is written.
    let rejected = [
        (
            "timeout=2m",
            "timeout `2m` is not a duration between 1ms and 1m",
        ),
        ("timout=2s", "unknown data key `timout`"),
        (
            "memoryLimit=1GiB",
            "memoryLimit 1.0 GiB is above the largest",
        ),
        (
            "mode=monitr",
            "mode `monitr` is neither enforce nor monitor",
        ),
        (
            "selector=matchLabels: {a: [}",
            "selector is not YAML or JSON",
        ),
    ];
    for (setting, problem) in rejected {
        let args = [&base[..], &["--set", setting]].concat();
        let (status, refused) = preflight_with_stderr(&args);
        assert_eq!(status, 2, "--set {setting}: {refused}");
        assert!(
            refused.contains("the operator would reject this ConfigMap, so nothing is written")
                && refused.contains(problem),
            "--set {setting}: {refused}"
        );
        assert_eq!(preflight(&args), (2, String::new()), "--set {setting}");
    }

    // A name kubectl would refuse is refused here, before anything is written.
    let badly_named = [
        "pack",
        check,
        "--name",
        "Deps_v2",
        "--gates",
        "App.apps.example.com",
    ];
    let (status, refused) = preflight_with_stderr(&badly_named);
    assert_eq!(status, 2, "{refused}");
    assert!(
        refused.contains("--name `Deps_v2` is not a valid Kubernetes name"),
        "{refused}"
    );
    assert_eq!(preflight(&badly_named), (2, String::new()));

    let not_a_check = std::env::temp_dir().join(format!("not-a-check-{}.wasm", std::process::id()));
    std::fs::write(&not_a_check, b"hello").unwrap();
    let (status, _) = preflight(&[
        "pack",
        not_a_check.to_str().unwrap(),
        "--name",
        "x",
        "--gates",
        "A.b",
    ]);
    assert_eq!(status, 1);
    std::fs::remove_file(&not_a_check).unwrap();
}

#[test]
fn a_mistake_in_a_fixtures_file_is_reported_at_its_place() {
    let check = build_check("dependency-ready");
    let dir = std::env::temp_dir().join(format!("preflight-cli-fixtures-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let mistakes = [
        (
            "cases:\n- name: a\n  object: {}\n  expect: {proceed: true}\n- name: b\n  object: {}\n  expect: {proceed: yes please}\n",
            "cases[1].expect.proceed: invalid type: string \"yes please\", expected a boolean",
        ),
        (
            "cases:\n- name: a\n  object: {}\n",
            "cases[0]: missing field `expect`",
        ),
        ("confg: {}\ncases: []\n", "confg: unknown field `confg`"),
        ("config: {}\n", "fixtures.yaml: missing field `cases`"),
        ("- 1\n- 2\n", "must hold a mapping with `cases`"),
    ];
    for (text, said) in mistakes {
        let file = dir.join("fixtures.yaml");
        std::fs::write(&file, text).unwrap();
        let (status, stderr) = preflight_with_stderr(&[
            "test",
            "--check",
            check.to_str().unwrap(),
            file.to_str().unwrap(),
        ]);
        assert_eq!(status, 2, "{text}: {stderr}");
        assert!(stderr.contains(said), "{text}: {stderr}");
    }
    std::fs::remove_dir_all(&dir).unwrap();
}

/// Issue 21, items 6d, 11–13: what the operator would do, an author sees on a laptop. The `http` key's
/// grant file with its Secret (credentials to their origin only), validate-config in `run`, `pack` and
/// `test`, `test --help` naming the fixture keys, `declare-reads` refusing to widen a declaration, and a
/// one-line YAML flow mapping read as YAML.
#[test]
fn the_author_s_tools_hold_a_check_to_what_the_operator_would_do() {
    let server = preflight_test_support::LoopbackServer::start(|_| {
        preflight_test_support::Reply::new(200, r#"{"key":"K-9"}"#)
    });
    let dir = std::env::temp_dir().join(format!("preflight-cli-author-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let write = |name: &str, text: &str| {
        let path = dir.join(name);
        std::fs::write(&path, text).unwrap();
        path.to_str().unwrap().to_owned()
    };
    // A one-line flow mapping is YAML, not JSON.
    let object = write(
        "object.yaml",
        "{apiVersion: example.com/v1, kind: App, metadata: {name: a, namespace: d}, spec: {dependency: db}}\n",
    );
    let config = write(
        "config.yaml",
        &format!("endpoint: {}/dependencies/\n", server.url()),
    );
    let grant = write(
        "http.yaml",
        &format!(
            "allow: [\"{url}\", \"http://127.0.0.2:1\"]\nmaxRequests: 1\n\
             credentials: {{secret: deps-token, key: token, prefix: \"Bearer \", for: [\"{url}\"]}}\n",
            url = server.url()
        ),
    );
    let secret = write(
        "secret.yaml",
        "apiVersion: v1\nkind: Secret\nmetadata: {name: deps-token}\nstringData: {token: s3cret}\n",
    );
    let check = build_check("external-dependency");
    let check = check.to_str().unwrap();
    let (status, json) = preflight(&[
        "run",
        "-o",
        "json",
        "--check",
        check,
        "--object",
        &object,
        "--config",
        &config,
        "--http-grant",
        &grant,
        "--secret",
        &secret,
    ]);
    assert_eq!(status, 0, "{json}");
    let answer: Value = serde_json::from_str(&json).unwrap();
    assert_eq!(answer["outputs"]["dependencyKey"], "K-9", "{answer}");
    assert_eq!(answer["configRefused"], Value::Null);
    assert_eq!(
        server.requests()[0].headers["authorization"],
        "Bearer s3cret",
        "the grant file's credentials, from the Secret manifest"
    );
    let (status, said) = preflight(&[
        "run",
        "--check",
        check,
        "--object",
        &object,
        "--config",
        &config,
        "--http-grant",
        &grant,
    ]);
    assert_eq!(status, 2, "credentials without their Secret: {said}");

    // validate-config, as the operator asks it at load.
    let refused = write("refused.yaml", "endpoint: ftp://deps.example.com/\n");
    let (_, json) = preflight(&[
        "run", "-o", "json", "--check", check, "--object", &object, "--config", &refused,
    ]);
    let answer: Value = serde_json::from_str(&json).unwrap();
    assert!(
        answer["configRefused"]
            .as_str()
            .is_some_and(|why| why.contains("must be an http:// or https:// URL")),
        "{answer}"
    );
    let (status, manifests) = preflight(&[
        "pack",
        check,
        "--name",
        "deps",
        "--gates",
        "App.example.com",
        "--config",
        &refused,
    ]);
    assert_eq!((status, manifests.as_str()), (2, ""), "nothing is packed");
    let (_, refusal) = preflight_with_stderr(&[
        "pack",
        check,
        "--name",
        "deps",
        "--gates",
        "App.example.com",
        "--config",
        &refused,
    ]);
    assert!(
        refusal.contains("must be an http:// or https:// URL"),
        "the check's own reason: {refusal}"
    );
    let accepted = write(
        "accepted.yaml",
        "endpoint: https://deps.example.com/\nretryAfterSeconds: 60\n",
    );
    let (status, manifests) = preflight(&[
        "pack",
        check,
        "--name",
        "deps",
        "--gates",
        "App.example.com",
        "--config",
        &accepted,
    ]);
    assert_eq!(
        status, 0,
        "an accepted configuration is packed: {manifests}"
    );
    assert!(
        manifests.contains("deps.example.com"),
        "with its configuration: {manifests}"
    );
    let fixtures = write(
        "fixtures.yaml",
        "config: {endpoint: \"ftp://deps.example.com/\"}\ncases:\n\
         - name: expects an answer\n  object: {apiVersion: example.com/v1, kind: App, metadata: {name: a}, spec: {dependency: db}}\n  expect: {error: check}\n\
         - name: expects the refusal\n  object: {apiVersion: example.com/v1, kind: App, metadata: {name: a}, spec: {dependency: db}}\n  expect: {error: invalid-config, reason: InvalidCheckConfig, action: stop}\n",
    );
    let (status, table) = preflight(&["test", "--check", check, &fixtures]);
    assert_eq!(status, 1, "{table}");
    assert!(table.contains("1 passed, 1 failed"), "{table}");
    assert!(
        table.contains("expected check, got invalid-config"),
        "{table}"
    );
    let (_, help) = preflight(&["test", "--help"]);
    for key in ["objectFile", "messageContains", "requeueAfter", "outputs"] {
        assert!(help.contains(key), "test --help names {key}");
    }

    // declare-reads never widens an existing declaration.
    let declared = build_check("dependency-ready");
    let output = dir.join("wider.wasm");
    let (status, _) = preflight(&[
        "declare-reads",
        declared.to_str().unwrap(),
        "--path",
        "spec.other",
        "-o",
        output.to_str().unwrap(),
    ]);
    assert_eq!(status, 2);
    assert!(!output.exists());
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn cli_commands_keep_compiled_checks_in_the_user_s_cache_unless_told_otherwise() {
    let check = build_check("required-metadata");
    let (object, config) = (
        fixture("app-ready.yaml"),
        fixture("required-metadata-config.yaml"),
    );
    let home = std::env::temp_dir().join(format!("preflight-home-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&home);
    let run = |variables: &[(&str, &std::path::Path)]| {
        let mut command = Command::new(env!("CARGO_BIN_EXE_preflight"));
        command
            .args(["run", "--check", check.to_str().unwrap()])
            .args(["--object", object.to_str().unwrap()])
            .args(["--config", config.to_str().unwrap()])
            .env("HOME", &home)
            .env_remove("XDG_CACHE_HOME")
            .env_remove("PREFLIGHT_CACHE_DIR");
        for (name, value) in variables {
            command.env(name, value);
        }
        let output = command.output().unwrap();
        assert_eq!(
            output.status.code(),
            Some(0),
            "{}",
            String::from_utf8_lossy(&output.stderr)
        );
    };
    let kept = |dir: &std::path::Path| -> Vec<String> {
        let mut names: Vec<_> = std::fs::read_dir(dir)
            .map(|entries| {
                entries
                    .map(|entry| {
                        let name = entry.unwrap().file_name().to_string_lossy().into_owned();
                        if name.ends_with(".cwasm") {
                            "check.cwasm".into()
                        } else {
                            name
                        }
                    })
                    .collect()
            })
            .unwrap_or_default();
        names.sort();
        names
    };
    let both = ["check.cwasm", "functions.pack"];

    run(&[("PREFLIGHT_CACHE_DIR", std::path::Path::new(""))]);
    assert!(!home.exists(), "an empty PREFLIGHT_CACHE_DIR keeps nothing");
    run(&[]);
    assert_eq!(kept(&home.join(".cache/preflight/compiled")), both);
    let xdg = home.join("xdg");
    run(&[("XDG_CACHE_HOME", &xdg)]);
    assert_eq!(kept(&xdg.join("preflight/compiled")), both);
    let chosen = home.join("chosen");
    run(&[("PREFLIGHT_CACHE_DIR", &chosen)]);
    assert_eq!(kept(&chosen), both);
    std::fs::remove_dir_all(&home).unwrap();
}

#[test]
fn text_logs_to_a_file_or_pipe_carry_no_colour_codes() {
    let check = build_check("dependency-ready");
    let object = fixture("app-waiting.yaml");
    let (_, logs) = preflight_with_stderr_env(
        &[
            "run",
            "--check",
            check.to_str().unwrap(),
            "--object",
            object.to_str().unwrap(),
        ],
        &[("RUST_LOG", "preflight_engine=info")],
    );
    assert!(
        logs.lines().any(|line| line.contains("INFO")),
        "an INFO line from the engine: {logs}"
    );
    assert!(
        !logs.contains('\u{1b}'),
        "escape codes in a piped log: {logs:?}"
    );
}
