//! The engine knows nothing of Kubernetes, HTTP serving, CLI parsing or metrics: an operator author who
//! embeds the gate, or a host of another kind, gets wasmtime and the engine only. This fails the build when
//! one of those crates enters the engine's normal dependency tree. (hyper is allowed since contract 0.2: it
//! is the HTTP client of checks' outbound `wasi:http`, as in wasmtime-wasi-http; serving stays out.)

use std::process::Command;

/// Crates the engine must never depend on, directly or not.
const FORBIDDEN: [&str; 6] = [
    "kube",
    "k8s-openapi",
    "axum",
    "tower-http",
    "clap",
    "prometheus-client",
];

#[test]
fn the_engine_depends_on_no_kubernetes_server_cli_or_metrics_crate() {
    let output = Command::new(std::env::var("CARGO").unwrap_or_else(|_| "cargo".into()))
        .current_dir(preflight_test_support::workspace_root())
        .args(["tree", "--locked", "-p", "preflight-engine", "-e", "normal"])
        .args(["--prefix", "none", "--format", "{p}"])
        .output()
        .expect("cargo tree runs");
    assert!(
        output.status.success(),
        "cargo tree failed: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    let tree = String::from_utf8(output.stdout).unwrap();
    let crates: Vec<&str> = tree
        .lines()
        .filter_map(|line| line.split_whitespace().next())
        .collect();
    assert!(crates.contains(&"wasmtime"), "the tree was read: {tree}");
    let found: Vec<&&str> = FORBIDDEN
        .iter()
        .filter(|name| crates.contains(name))
        .collect();
    assert!(
        found.is_empty(),
        "preflight-engine depends on {found:?}: {tree}"
    );
}
