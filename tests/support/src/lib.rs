//! Test helpers shared by the host's tests and benchmarks.
//!
//! [`build_check`] builds a check crate of this workspace for `wasm32-wasip2` with the real toolchain, once
//! per test process, and returns the component's path. The build uses its own target directory (beside the
//! workspace's) so that it never waits on the lock of the `cargo test` that runs it. [`LoopbackServer`]
//! stands in for an external HTTP system on a loopback port.

mod loopback_http;

pub use loopback_http::{LoopbackServer, ReceivedRequest, Reply};

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::{Mutex, OnceLock};

/// The repository root: the nearest directory above the running test's package (cargo sets
/// `CARGO_MANIFEST_DIR` for test processes) whose `Cargo.toml` declares the workspace. Found at run time, not
/// compile time, because a shared target directory may hold this crate compiled from another clone.
pub fn workspace_root() -> PathBuf {
    let start = std::env::var_os("CARGO_MANIFEST_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")));
    start
        .ancestors()
        .find(|dir| {
            std::fs::read_to_string(dir.join("Cargo.toml"))
                .is_ok_and(|manifest| manifest.contains("[workspace]"))
        })
        .map(Path::to_path_buf)
        .unwrap_or_else(|| panic!("no workspace Cargo.toml above {}", start.display()))
}

/// The target directory for components built by tests.
fn wasm_target_dir() -> PathBuf {
    let base = std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| workspace_root().join("target"));
    base.join("wasm-checks")
}

/// Builds `package` (a crate of this workspace) as a component and returns the path of the `.wasm`.
///
/// Panics with cargo's output when the build fails: a test cannot go on without its check.
pub fn build_check(package: &str) -> PathBuf {
    static BUILT: OnceLock<Mutex<HashMap<String, PathBuf>>> = OnceLock::new();
    let built = BUILT.get_or_init(Default::default);
    let mut built = built
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    if let Some(path) = built.get(package) {
        return path.clone();
    }
    let target_dir = wasm_target_dir();
    let output = Command::new(std::env::var("CARGO").unwrap_or_else(|_| "cargo".into()))
        .current_dir(workspace_root())
        .args([
            "build",
            "--quiet",
            "--target",
            "wasm32-wasip2",
            "--profile",
            "wasm",
            "--package",
            package,
        ])
        .arg("--target-dir")
        .arg(&target_dir)
        .output()
        .expect("cargo runs");
    assert!(
        output.status.success(),
        "building {package} for wasm32-wasip2 failed:\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let path = target_dir
        .join("wasm32-wasip2/wasm")
        .join(format!("{}.wasm", package.replace('-', "_")));
    assert!(
        path.exists(),
        "cargo built {package} but {} is missing",
        path.display()
    );
    built.insert(package.to_owned(), path.clone());
    path
}

/// The bytes of [`build_check`]'s component.
pub fn check_bytes(package: &str) -> Vec<u8> {
    std::fs::read(build_check(package)).expect("the built component is readable")
}

/// The path of a file under `tests/fixtures/`.
pub fn fixture(name: &str) -> PathBuf {
    workspace_root().join("tests/fixtures").join(name)
}
