//! The registry crate knows registries only: neither Kubernetes nor wasmtime enters its dependency tree,
//! so the CLI can push and pull without either, and the operator's Kubernetes side stays out of it.

use std::process::Command;

#[test]
fn the_oci_crate_depends_on_neither_kubernetes_nor_wasmtime() {
    let output = Command::new(std::env::var("CARGO").unwrap_or_else(|_| "cargo".into()))
        .current_dir(preflight_test_support::workspace_root())
        .args(["tree", "--locked", "-p", "preflight-oci", "-e", "normal"])
        .args(["--prefix", "none", "--format", "{p}"])
        .output()
        .expect("cargo tree runs");
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let tree = String::from_utf8(output.stdout).unwrap();
    let crates: Vec<&str> = tree
        .lines()
        .filter_map(|line| line.split_whitespace().next())
        .collect();
    assert!(crates.contains(&"oci-client"), "the tree was read: {tree}");
    let found: Vec<&str> = ["kube", "k8s-openapi", "wasmtime", "aws-lc-rs", "aws-lc-sys"]
        .into_iter()
        .filter(|name| crates.contains(name))
        .collect();
    assert!(
        found.is_empty(),
        "preflight-oci depends on {found:?}: {tree}"
    );
}
