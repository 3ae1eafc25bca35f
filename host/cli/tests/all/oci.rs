//! Checks through a real OCI registry (the CNCF distribution registry, TLS with a private CA made for the
//! test): `preflight push`, `pull`, and `run --check oci://…` as a user runs them; and oras, a client
//! nobody here wrote, reading what `preflight push` wrote and writing what `preflight pull` reads; a registry
//! behind a login, reached with the user's docker config; `--verify-key` holding a check to a cosign signature
//! made by the real cosign CLI.

use preflight_test_support::{CosignKeys, TestRegistry, Transport, build_check, fixture};
use std::path::Path;
use std::process::Command;

/// Runs `preflight` with a HOME of its own (an empty docker config, an empty OCI cache); returns the exit
/// status, stdout and stderr.
fn preflight(home: &Path, args: &[&str]) -> (i32, String, String) {
    let output = Command::new("timeout")
        .arg("60")
        .arg(env!("CARGO_BIN_EXE_preflight"))
        .args(args)
        .env("HOME", home)
        .env_remove("XDG_CACHE_HOME")
        .env_remove("DOCKER_CONFIG")
        .output()
        .unwrap();
    (
        output.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&output.stdout).into_owned(),
        String::from_utf8_lossy(&output.stderr).into_owned(),
    )
}

/// Runs `preflight push CHECK TAGGED --registry-ca CA`, which must succeed; returns what it printed.
fn push_through_private_ca(home: &Path, check: &Path, tagged: &str, ca: &str) -> String {
    let push = ["push", check.to_str().unwrap(), tagged, "--registry-ca", ca];
    let (status, pushed, stderr) = preflight(home, &push);
    assert_eq!(status, 0, "{stderr}");
    pushed
}

/// The value of `field` in `preflight push`/`pull`'s text output.
fn field<'a>(output: &'a str, field: &str) -> &'a str {
    output
        .lines()
        .find_map(|line| line.strip_prefix(field))
        .map(str::trim)
        .unwrap_or_else(|| panic!("no {field} in {output}"))
}

#[test]
fn a_check_pushed_pulled_and_run_through_a_registry_and_read_and_written_by_oras() {
    let registry = TestRegistry::start(Transport::PrivateCa);
    let home = tempfile::tempdir().unwrap();
    let check = build_check("dependency-ready");
    let component = std::fs::read(&check).unwrap();
    let ca = registry.ca_file();
    let ca = ca.to_str().unwrap();
    let tagged = format!("oci://{}/checks/dependency-ready:1.0", registry.host());

    let pushed = push_through_private_ca(home.path(), &check, &tagged, ca);
    let digest = field(&pushed, "digest");
    let pinned = field(&pushed, "pinned");
    assert_eq!(
        pinned,
        format!("oci://{}/checks/dependency-ready@{digest}", registry.host())
    );

    let (object, config) = (
        fixture("app-ready.yaml"),
        fixture("dependency-ready-config.yaml"),
    );
    let (object, config) = (object.to_str().unwrap(), config.to_str().unwrap());
    let run = |reference: &str| {
        let check = ["run", "--check", reference, "--registry-ca", ca];
        let input = ["--object", object, "--config", config];
        preflight(home.path(), &[&check[..], &input[..]].concat())
    };
    let pulled_file = home.path().join("pulled.wasm");
    let to = pulled_file.to_str().unwrap();
    let pull = |reference: &str, trust: &[&str]| {
        let args = ["pull", reference, "--to", to];
        preflight(home.path(), &[&args[..], trust].concat())
    };
    for reference in [tagged.as_str(), pinned] {
        let (status, out, stderr) = run(reference);
        assert_eq!(status, 0, "{reference}: {out}{stderr}");
        assert!(out.contains("proceed"), "{out}");
    }
    let (status, _, stderr) = pull(&tagged, &["--registry-ca", ca]);
    assert_eq!(status, 0, "{stderr}");
    assert_eq!(std::fs::read(&pulled_file).unwrap(), component);

    // oras reads the artifact preflight wrote: the CNCF layout, the layer under its file name.
    let bare = tagged.trim_start_matches("oci://");
    let manifest: serde_json::Value =
        serde_json::from_str(&registry.oras(home.path(), &["manifest", "fetch", bare])).unwrap();
    assert_eq!(
        manifest["config"]["mediaType"],
        "application/vnd.wasm.config.v0+json"
    );
    assert_eq!(manifest["layers"][0]["mediaType"], "application/wasm");
    let unpacked = home.path().join("unpacked");
    std::fs::create_dir(&unpacked).unwrap();
    registry.oras(&unpacked, &["pull", bare]);
    assert_eq!(
        std::fs::read(unpacked.join("check.wasm")).unwrap(),
        component
    );

    // preflight reads an artifact oras wrote in the same layout, and runs it.
    let staging = home.path().join("staging");
    std::fs::create_dir(&staging).unwrap();
    std::fs::copy(&check, staging.join("ready.wasm")).unwrap();
    std::fs::write(
        staging.join("config.json"),
        r#"{"architecture":"wasm","os":"wasip2"}"#,
    )
    .unwrap();
    let from_oras = format!("{}/checks/from-oras:1", registry.host());
    registry.oras(
        &staging,
        &[
            "push",
            &from_oras,
            "--config",
            "config.json:application/vnd.wasm.config.v0+json",
            "ready.wasm:application/wasm",
        ],
    );
    let (status, out, stderr) = run(&format!("oci://{from_oras}"));
    assert_eq!(status, 0, "{out}{stderr}");

    // What is not a check is refused with the reason, and so is a digest the registry does not hold.
    std::fs::write(staging.join("notes.txt"), "not a component").unwrap();
    let text = format!("{}/checks/notes:1", registry.host());
    registry.oras(&staging, &["push", &text, "notes.txt:text/plain"]);
    let (status, _, stderr) = pull(&text, &["--registry-ca", ca]);
    assert_eq!(status, 2, "{stderr}");
    assert!(
        stderr.contains("is not a check artifact: its layer is text/plain"),
        "{stderr}"
    );
    let wrong = format!(
        "oci://{}/checks/dependency-ready@sha256:{}",
        registry.host(),
        "0".repeat(64)
    );
    let (status, _, stderr) = pull(&wrong, &["--registry-ca", ca]);
    assert_eq!(status, 2, "{stderr}");
    assert!(stderr.contains(&wrong), "{stderr}");

    // Without the CA, the registry's certificate is refused (a reference never pulled: a tag pulled before
    // would be served from the cache, with a warning).
    let (status, _, stderr) = pull(&format!("oci://{text}"), &[]);
    assert_eq!(status, 2, "{stderr}");
    assert!(stderr.to_lowercase().contains("certificate"), "{stderr}");
}

#[test]
fn a_registry_behind_a_login_takes_the_credentials_of_the_docker_config() {
    let registry = TestRegistry::start_with_login(Transport::PrivateCa, "author", "s3cret-pass");
    let home = tempfile::tempdir().unwrap();
    let check = build_check("dependency-ready");
    let ca = registry.ca_file();
    let reference = format!("oci://{}/checks/dependency-ready:1.0", registry.host());
    let push = [
        "push",
        check.to_str().unwrap(),
        &reference,
        "--registry-ca",
        ca.to_str().unwrap(),
    ];
    let to = home.path().join("pulled.wasm");
    let pull = [
        "pull",
        &reference,
        "--to",
        to.to_str().unwrap(),
        "--registry-ca",
        ca.to_str().unwrap(),
    ];

    // Without a login the registry refuses, and the error says it was the registry's answer.
    let (status, _, stderr) = preflight(home.path(), &push);
    assert_eq!(status, 2, "{stderr}");
    assert!(stderr.contains(&reference), "{stderr}");
    assert!(
        stderr.to_lowercase().contains("unauthorized") || stderr.contains("401"),
        "{stderr}"
    );

    // With the login in ~/.docker/config.json (as `docker login` or `oras login` leaves it), both work.
    std::fs::create_dir_all(home.path().join(".docker")).unwrap();
    std::fs::write(
        home.path().join(".docker/config.json"),
        registry.docker_config_json(),
    )
    .unwrap();
    let (status, _, stderr) = preflight(home.path(), &push);
    assert_eq!(status, 0, "{stderr}");
    let (status, _, stderr) = preflight(home.path(), &pull);
    assert_eq!(status, 0, "{stderr}");
    assert_eq!(std::fs::read(&to).unwrap(), std::fs::read(&check).unwrap());
}

#[test]
fn pull_and_run_with_a_verify_key_take_only_a_check_cosign_signed_for_its_digest() {
    let registry = TestRegistry::start(Transport::PrivateCa);
    let home = tempfile::tempdir().unwrap();
    let check = build_check("dependency-ready");
    let ca = registry.ca_file();
    let ca = ca.to_str().unwrap();
    let (ours, theirs) = (CosignKeys::generate(), CosignKeys::generate());
    let (our_key, their_key) = (ours.public_key_file(), theirs.public_key_file());
    let (our_key, their_key) = (our_key.to_str().unwrap(), their_key.to_str().unwrap());
    let tagged = format!("oci://{}/checks/signed:1.0", registry.host());
    let pushed = push_through_private_ca(home.path(), &check, &tagged, ca);
    let pinned = field(&pushed, "pinned").to_owned();
    let to = home.path().join("pulled.wasm");
    let pull = |reference: &str, key: &str| {
        let args = ["pull", reference, "--to", to.to_str().unwrap()];
        let trust = ["--registry-ca", ca, "--verify-key", key];
        preflight(home.path(), &[&args[..], &trust[..]].concat())
    };

    let (status, _, stderr) = pull(&tagged, our_key);
    assert_eq!(status, 2, "an unsigned check is refused");
    assert!(stderr.contains("carries no cosign signature"), "{stderr}");
    assert!(stderr.contains(&format!("key {our_key}")), "{stderr}");

    registry.cosign_sign(&ours, pinned.trim_start_matches("oci://"));
    let (status, pulled, stderr) = pull(&tagged, our_key);
    assert_eq!(status, 0, "{stderr}");
    assert_eq!(
        field(&pulled, "verified"),
        format!("cosign signature by key {our_key}")
    );
    let (status, _, stderr) = pull(&pinned, their_key);
    assert_eq!(status, 2, "another key's check is refused");
    assert!(
        stderr.contains("none of the 1 signature(s)")
            && stderr.contains(&format!("key {their_key}")),
        "{stderr}"
    );

    let (object, config) = (
        fixture("app-ready.yaml"),
        fixture("dependency-ready-config.yaml"),
    );
    let run = |key: &str| {
        let check = [
            "run",
            "--check",
            &pinned,
            "--registry-ca",
            ca,
            "--verify-key",
            key,
        ];
        let input = [
            "--object",
            object.to_str().unwrap(),
            "--config",
            config.to_str().unwrap(),
        ];
        preflight(home.path(), &[&check[..], &input[..]].concat())
    };
    let (status, _, stderr) = run(our_key);
    assert_eq!(status, 0, "{stderr}");
    let (status, _, stderr) = run(their_key);
    assert_eq!(status, 2, "{stderr}");
    assert!(stderr.contains("is refused before it runs"), "{stderr}");
}
