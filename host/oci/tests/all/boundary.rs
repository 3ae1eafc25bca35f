//! The registry crate knows registries only: neither Kubernetes nor wasmtime enters its dependency tree,
//! so the CLI can push and pull without either, and the operator's Kubernetes side stays out of it.

#[test]
fn the_oci_crate_depends_on_neither_kubernetes_nor_wasmtime() {
    let crates = preflight_test_support::normal_dependencies("preflight-oci");
    assert!(
        crates.iter().any(|name| name == "oci-client"),
        "the tree was read: {crates:?}"
    );
    let found: Vec<&str> = ["kube", "k8s-openapi", "wasmtime", "aws-lc-rs", "aws-lc-sys"]
        .into_iter()
        .filter(|name| crates.iter().any(|crate_name| crate_name == name))
        .collect();
    assert!(found.is_empty(), "preflight-oci depends on {found:?}");
}
