//! Test helpers shared by the host's tests and benchmarks.
//!
//! [`build_check`] builds a check crate of this workspace with the real toolchain (for
//! `wasm32-unknown-unknown`, which the repository's `.cargo/config.toml` links with wasm-component-ld; the
//! hostile checks that use WASI for `wasm32-wasip2`), once per test process, and returns the component's
//! path. The build uses its own target directory (beside the
//! workspace's) so that it never waits on the lock of the `cargo test` that runs it. [`LoopbackServer`]
//! stands in for an external HTTP system on a loopback port; [`LoopbackProxy`] is a connection a test can
//! cut; [`TestRegistry`] is a real OCI registry.

mod loopback_http;
mod loopback_proxy;
mod registry;

pub use loopback_http::{LoopbackServer, ReceivedRequest, Reply};
pub use loopback_proxy::LoopbackProxy;
pub use registry::{CosignKeys, RegistryTools, TestRegistry, Transport, oras, registry_tools};

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
/// Where the test helpers put what they build: `wasm-checks` in cargo's target directory.
pub fn wasm_target_dir() -> PathBuf {
    let base = std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| workspace_root().join("target"));
    base.join("wasm-checks")
}

/// Where the tests' engines and `preflight` commands keep compiled checks (`PREFLIGHT_CACHE_DIR`): one
/// directory for all, so that a check compiled by one test is loaded by the next, and the compiled functions
/// checks share are shared by all of them.
pub fn compiled_cache_dir() -> PathBuf {
    wasm_target_dir().join("compiled")
}

/// The checks that reach for WASI on purpose (files, sockets, clocks, exit: what a hostile check tries):
/// built for `wasm32-wasip2`, whose std calls WASI. Every other check builds as the SDK recommends.
const WASI_CHECKS: [&str; 2] = ["ambient-authority", "misbehave"];

/// Builds `package` (a crate of this workspace) as a component and returns the path of the `.wasm`: for
/// `wasm32-unknown-unknown`, or `wasm32-wasip2` for the checks that use WASI.
///
/// Panics with cargo's output when the build fails: a test cannot go on without its check.
pub fn build_check(package: &str) -> PathBuf {
    if WASI_CHECKS.contains(&package) {
        build_wasip2_check(package)
    } else {
        build_for(package, "wasm32-unknown-unknown")
    }
}

/// Builds `package` for `wasm32-wasip2`, the target whose std calls WASI: what a check that uses WASI
/// builds for, and the shape every Rust check had before the SDK moved to `wasm32-unknown-unknown`.
pub fn build_wasip2_check(package: &str) -> PathBuf {
    build_for(package, "wasm32-wasip2")
}

fn build_for(package: &str, target: &str) -> PathBuf {
    once(&format!("package/{package}/{target}"), || {
        let target_dir = wasm_target_dir();
        let output = Command::new(std::env::var("CARGO").unwrap_or_else(|_| "cargo".into()))
            .current_dir(workspace_root())
            .args([
                "build",
                "--quiet",
                "--target",
                target,
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
            "building {package} for {target} failed:\n{}",
            String::from_utf8_lossy(&output.stderr)
        );
        let path = target_dir
            .join(target)
            .join("wasm")
            .join(format!("{}.wasm", package.replace('-', "_")));
        assert!(
            path.exists(),
            "cargo built {package} but {} is missing",
            path.display()
        );
        path
    })
}

/// Builds the Python check `<project>/python/app.py` (`project`: a directory of this repository, such as
/// `plugins/dependency-ready`) with the Python SDK (guest-sdk/python) and the componentize-py that
/// `scripts/setup` installs (`$PREFLIGHT_CACHE/python/venv`), for the world of `guest-sdk/wit` (the contract
/// plus `wasi:http`), once per test process; returns the component's path. Panics with componentize-py's
/// output when the build fails.
pub fn build_python_check(project: &str) -> PathBuf {
    once(&format!("python/{project}"), || {
        let example = name_of(project);
        let root = workspace_root();
        let componentize_py = cache_dir().join("python/venv/bin/componentize-py");
        let output_dir = wasm_target_dir().join("python");
        // A scratch copy of the sources, so that Python's bytecode caches never land in the repository.
        let scratch = output_dir.join(format!("{example}-src-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&scratch);
        copy_tree(&root.join(project).join("python"), &scratch.join("app"));
        copy_tree(&root.join("guest-sdk/python"), &scratch.join("sdk"));
        copy_tree(&root.join("guest-sdk/wit"), &scratch.join("wit"));
        let path = component_path(&output_dir, example, &[&scratch], &[&componentize_py]);
        if !path.exists() {
            run(step(&componentize_py)
                .arg("-d")
                .arg(scratch.join("wit"))
                .args(["-w", "preflight:guest/check", "componentize"])
                .arg("-p")
                .arg(scratch.join("app"))
                .arg("-p")
                .arg(scratch.join("sdk"))
                .arg("app")
                .arg("-o")
                .arg(&path));
        }
        let _ = std::fs::remove_dir_all(&scratch);
        path
    })
}

/// Builds the JavaScript check `<project>/javascript/app.js` with the JavaScript SDK
/// (guest-sdk/javascript/preflight.js) and the componentize-js that `scripts/setup` installs
/// (`$PREFLIGHT_CACHE/js`), for the world of `guest-sdk/wit`, once per test process; returns the component's
/// path. Panics with componentize-js's output when the build fails.
pub fn build_js_check(project: &str) -> PathBuf {
    once(&format!("javascript/{project}"), || {
        let example = name_of(project);
        let root = workspace_root();
        let componentize_js = cache_dir().join("js/node_modules/.bin/componentize-js");
        let output_dir = wasm_target_dir().join("javascript");
        let scratch = output_dir.join(format!("{example}-src-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&scratch);
        copy_tree(&root.join(project).join("javascript"), &scratch);
        std::fs::copy(
            root.join("guest-sdk/javascript/preflight.js"),
            scratch.join("preflight.js"),
        )
        .expect("the SDK can be copied");
        copy_tree(&root.join("guest-sdk/wit"), &scratch.join("wit"));
        let path = component_path(&output_dir, example, &[&scratch], &[&componentize_js]);
        if !path.exists() {
            run(step(&componentize_js)
                .arg(scratch.join("app.js"))
                .arg("--wit")
                .arg(scratch.join("wit"))
                .args(["--world-name", "preflight:guest/check", "-o"])
                .arg(&path));
            assert!(path.exists(), "componentize-js wrote no {}", path.display());
        }
        let _ = std::fs::remove_dir_all(&scratch);
        path
    })
}

/// The world Go checks are built for: the contract and `wasi:http` (`guest-sdk/wit`, whose WASI is the
/// host's; a check that sends no request imports no `wasi:http`), and the initialisation `preflight
/// snapshot` runs. (C checks link the component type of `preflight:guest/check` from their bindings.)
const GO_GUEST_WORLD: &str = "preflight:guest/check-snapshot";

/// Builds the C check `<project>/c/*.c` as a scaffolded project's build.sh does: the C SDK (guest-sdk/c) with
/// its committed bindings of the guest world, Debian's clang-19 and wasi-libc (a wasip1 reactor), then
/// `preflight componentize` by the CLI at `preflight` (the test's own binary); once per test process.
/// Returns the component's path; panics with the failing tool's output.
pub fn build_c_check(project: &str, preflight: &Path) -> PathBuf {
    once(&format!("c/{project}"), || {
        let example = name_of(project);
        let root = workspace_root();
        let output_dir = wasm_target_dir().join("c");
        let sources = root.join(project).join("c");
        let sdk = root.join("guest-sdk/c");
        let bindings = sdk.join("bindings");
        let clang = on_path("clang-19");
        let path = component_path(
            &output_dir,
            example,
            &[&sources, &sdk],
            &[&clang, preflight],
        );
        if path.exists() {
            return path;
        }
        let scratch = output_dir.join(format!("{example}-build-{}", std::process::id()));
        std::fs::create_dir_all(&scratch).expect("the scratch directory can be created");
        let core = scratch.join("core.wasm");
        run(step(&clang)
            .args([
                "--target=wasm32-wasi",
                "--sysroot=/usr",
                "-mexec-model=reactor",
            ])
            .args(["-Os", "-Wall", "-Wextra", "-Werror", "-Wl,--strip-debug"])
            .arg("-I")
            .arg(&sdk)
            .arg("-I")
            .arg(&bindings)
            .args(files_ending(&sources, ".c"))
            .args(files_ending(&sdk, ".c"))
            .args(files_ending(&bindings, ".c"))
            .args(files_ending(&bindings, "_component_type.o"))
            .arg("-o")
            .arg(&core));
        componentize(preflight, &core, None, &path);
        let _ = std::fs::remove_dir_all(&scratch);
        path
    })
}

/// Builds the Go check `<project>/go` (a module using guest-sdk/go through a `replace`) with Go's
/// wasip1 port as a reactor (`-buildmode=c-shared`), then `preflight componentize` by the CLI at `preflight`
/// (the guest world with the snapshot's initialisation, and the reactor adapter); once per test process.
/// Go's caches are those `scripts/setup` fills, so nothing is downloaded. Not pre-initialised: build.sh's
/// last step is [`pre_initialize_go_check`]. Returns the component's path; panics with the failing tool's
/// output.
pub fn build_go_check(project: &str, preflight: &Path) -> PathBuf {
    once(&format!("go/{project}"), || {
        let example = name_of(project);
        let root = workspace_root();
        let output_dir = wasm_target_dir().join("go");
        let sources = root.join(project).join("go");
        let go = on_path("go");
        let path = component_path(
            &output_dir,
            example,
            &[
                &sources,
                &root.join("guest-sdk/go"),
                &root.join("guest-sdk/wit"),
                &root.join("wit/v0.2"),
            ],
            &[&go, preflight],
        );
        if path.exists() {
            return path;
        }
        let scratch = output_dir.join(format!("{example}-build-{}", std::process::id()));
        std::fs::create_dir_all(&scratch).expect("the scratch directory can be created");
        let core = scratch.join("core.wasm");
        run(step(&go)
            .current_dir(&sources)
            .envs(toolchain_env())
            .env("GOOS", "wasip1")
            .env("GOARCH", "wasm")
            // The bindings' runtime reaches into Go's runtime (runtime.sbrk) by linkname.
            .args([
                "build",
                "-buildmode=c-shared",
                "-ldflags=-checklinkname=0",
                "-o",
            ])
            .arg(&core)
            .arg("."));
        componentize(
            preflight,
            &core,
            Some((&root.join("guest-sdk/wit"), GO_GUEST_WORLD)),
            &path,
        );
        let _ = std::fs::remove_dir_all(&scratch);
        path
    })
}

/// The Go check `<project>/go` as a scaffolded project's build.sh makes it: [`build_go_check`], then
/// `preflight snapshot` by the CLI at `preflight` (the test's own binary); once per test process, and kept
/// while the sources, the toolchain and that binary are unchanged. Returns the component's path; panics
/// with the CLI's output.
pub fn pre_initialize_go_check(project: &str, preflight: &Path) -> PathBuf {
    let built = build_go_check(project, preflight);
    once(&format!("go-snapshot/{project}"), || {
        let output_dir = wasm_target_dir().join("go");
        let path = component_path(
            &output_dir,
            &format!("{}-snapshot", name_of(project)),
            &[],
            &[&built, preflight],
        );
        if !path.exists() {
            let scratch = path.with_extension(format!("{}.wasm", std::process::id()));
            run(preflight_step(preflight)
                .arg("snapshot")
                .arg(&built)
                .arg("-o")
                .arg(&scratch));
            std::fs::rename(&scratch, &path).expect("the snapshot can be moved into place");
        }
        path
    })
}

/// `preflight componentize` of a wasip1 reactor `core` module into `component`, with the world `wit` names
/// embedded when the module does not carry its component type.
fn componentize(preflight: &Path, core: &Path, wit: Option<(&Path, &str)>, component: &Path) {
    let mut command = preflight_step(preflight);
    command
        .arg("componentize")
        .arg(core)
        .arg("-o")
        .arg(component);
    if let Some((dir, world)) = wit {
        command.arg("--wit").arg(dir).args(["--world", world]);
    }
    run(&mut command);
}

/// A build step running `program` with a ten-minute limit (`timeout`), for [`run`].
fn step(program: impl AsRef<std::ffi::OsStr>) -> Command {
    let mut command = Command::new("timeout");
    command.arg("600").arg(program);
    command
}

/// A build step running the CLI at `preflight`, which keeps what it compiles (it loads what it writes) where
/// the tests' engines and commands look first ([`compiled_cache_dir`]).
fn preflight_step(preflight: &Path) -> Command {
    let mut command = step(preflight);
    command.env("PREFLIGHT_CACHE_DIR", compiled_cache_dir());
    command
}

/// Runs a build step; panics with its output when it fails.
fn run(command: &mut Command) {
    let output = command
        .output()
        .unwrap_or_else(|error| panic!("cannot run {command:?}: {error}"));
    assert!(
        output.status.success(),
        "{command:?} failed:\n{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
}

/// `program` as a newcomer runs it right after `scripts/setup`: a clean environment whose PATH has the
/// toolchains a shell has (cargo, go, node, python), none of the tools setup keeps in its cache, and
/// `installed` (what the user installed: the `preflight` binary, kubectl); HOME, `PREFLIGHT_CACHE`,
/// `RUSTUP_HOME` and `CARGO_HOME` as they are.
pub fn newcomer_command(program: &str, installed: &[PathBuf]) -> Command {
    let path = std::env::split_paths(&std::env::var_os("PATH").unwrap_or_default())
        .filter(|dir| !dir.starts_with(cache_dir()))
        .chain(installed.iter().cloned())
        .collect::<Vec<_>>();
    let mut command = Command::new(program);
    command
        .env_clear()
        .env("PATH", std::env::join_paths(path).unwrap())
        .env("HOME", std::env::var_os("HOME").unwrap_or_default())
        .envs(
            ["PREFLIGHT_CACHE", "RUSTUP_HOME", "CARGO_HOME"]
                .into_iter()
                .filter_map(|name| Some((name, std::env::var_os(name)?))),
        );
    command
}

/// The environment under which the guest toolchains `scripts/setup` installs are found by the build scripts
/// of `preflight scaffold` projects (`COMPONENTIZE_PY`, `COMPONENTIZE_JS`), and Go builds use its caches
/// without the network; Rust builds stay offline too.
pub fn toolchain_env() -> Vec<(&'static str, std::ffi::OsString)> {
    let cache = cache_dir();
    vec![
        (
            "COMPONENTIZE_PY",
            cache.join("python/venv/bin/componentize-py").into(),
        ),
        (
            "COMPONENTIZE_JS",
            cache.join("js/node_modules/.bin/componentize-js").into(),
        ),
        ("GOMODCACHE", cache.join("go/modules").into()),
        ("GOCACHE", cache.join("go/cache").into()),
        ("GOFLAGS", "-modcacherw -mod=readonly".into()),
        ("GOPROXY", "off".into()),
        ("GOTOOLCHAIN", "local".into()),
        ("CARGO_NET_OFFLINE", "true".into()),
    ]
}

/// Where `name` is on `PATH` (for the build digest); panics when it is not installed.
fn on_path(name: &str) -> PathBuf {
    std::env::var_os("PATH")
        .into_iter()
        .flat_map(|path| std::env::split_paths(&path).collect::<Vec<_>>())
        .map(|dir| dir.join(name))
        .find(|candidate| candidate.is_file())
        .unwrap_or_else(|| panic!("{name} is not installed (scripts/setup installs it)"))
}

/// The files in `dir` whose names end with `suffix`, sorted.
fn files_ending(dir: &Path, suffix: &str) -> Vec<PathBuf> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
        .expect("the source directory is readable")
        .map(|entry| entry.expect("a directory entry").path())
        .filter(|path| path.to_string_lossy().ends_with(suffix))
        .collect();
    files.sort();
    files
}

/// Where the component built from the files under `sources` with the `toolchain` files goes: named by a
/// digest of all of them, so that the next test process reuses it while none changes.
fn component_path(
    output_dir: &Path,
    example: &str,
    sources: &[&Path],
    toolchain: &[&Path],
) -> PathBuf {
    use std::hash::{Hash, Hasher};
    let mut hasher = std::collections::hash_map::DefaultHasher::new();
    for source in sources {
        hash_tree(source, source, &mut hasher);
    }
    for tool in toolchain {
        let installed = std::fs::metadata(tool).and_then(|metadata| metadata.modified());
        format!("{}{installed:?}", tool.display()).hash(&mut hasher);
    }
    output_dir.join(format!(
        "{}-{:016x}.wasm",
        example.replace('-', "_"),
        hasher.finish()
    ))
}

/// Feeds every file under `dir` (relative path and bytes, in name order) into `hasher`.
fn hash_tree(root: &Path, dir: &Path, hasher: &mut impl std::hash::Hasher) {
    use std::hash::Hash;
    let mut entries: Vec<_> = std::fs::read_dir(dir)
        .expect("the scratch directory is readable")
        .map(|entry| entry.expect("a directory entry").path())
        .collect();
    entries.sort();
    for path in entries {
        if path.is_dir() {
            hash_tree(root, &path, hasher);
        } else {
            path.strip_prefix(root).unwrap_or(&path).hash(hasher);
            std::fs::read(&path)
                .expect("the file is readable")
                .hash(hasher);
        }
    }
}

/// The last component of a project's directory, which names what is built from it.
fn name_of(project: &str) -> &str {
    project.rsplit('/').next().unwrap_or(project)
}

/// The result of `build` for `key`, built once per test process (later callers wait for the first).
fn once(key: &str, build: impl FnOnce() -> PathBuf) -> PathBuf {
    static BUILT: OnceLock<Mutex<HashMap<String, PathBuf>>> = OnceLock::new();
    let mut built = BUILT
        .get_or_init(Default::default)
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    built.entry(key.to_owned()).or_insert_with(build).clone()
}

/// `$PREFLIGHT_CACHE`, else `~/.cache/preflight`: where `scripts/setup` installs the guest toolchains.
pub fn cache_dir() -> PathBuf {
    std::env::var_os("PREFLIGHT_CACHE")
        .map(PathBuf::from)
        .or_else(|| {
            std::env::var_os("HOME").map(|home| PathBuf::from(home).join(".cache/preflight"))
        })
        .expect("PREFLIGHT_CACHE or HOME is set")
}

/// The WASI 0.2 WIT (`wasi:http` and what it uses) of the wasmtime-wasi-http crate the host is built with,
/// found through `cargo metadata` in cargo's registry: what guest-sdk/wit/deps must equal.
pub fn wasi_wit() -> PathBuf {
    let output = Command::new(std::env::var("CARGO").unwrap_or_else(|_| "cargo".into()))
        .current_dir(workspace_root())
        .args(["metadata", "--format-version", "1", "--locked"])
        .output()
        .expect("cargo metadata runs");
    assert!(output.status.success(), "cargo metadata failed");
    let metadata: serde_json::Value =
        serde_json::from_slice(&output.stdout).expect("cargo metadata prints JSON");
    let manifest = metadata["packages"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|package| package["name"] == "wasmtime-wasi-http")
        .and_then(|package| package["manifest_path"].as_str())
        .expect("the host depends on wasmtime-wasi-http");
    Path::new(manifest)
        .parent()
        .expect("a manifest has a directory")
        .join("wit")
}

fn copy_tree(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).expect("the scratch directory can be created");
    for entry in std::fs::read_dir(from).expect("the source directory is readable") {
        let entry = entry.expect("a directory entry");
        let target = to.join(entry.file_name());
        // `metadata` follows symbolic links: guest-sdk/wit/deps/preflight is one, to wit/v0.2.
        if std::fs::metadata(entry.path())
            .expect("a file type")
            .is_dir()
        {
            if entry.file_name() != "__pycache__" {
                copy_tree(&entry.path(), &target);
            }
        } else {
            std::fs::copy(entry.path(), &target).expect("the file can be copied");
        }
    }
}

/// The bytes of [`build_check`]'s component.
pub fn check_bytes(package: &str) -> Vec<u8> {
    std::fs::read(build_check(package)).expect("the built component is readable")
}

/// The crates in `package`'s normal dependency tree (`cargo tree -e normal`), by name: what the boundary
/// tests hold each host crate to.
pub fn normal_dependencies(package: &str) -> Vec<String> {
    let output = Command::new(std::env::var("CARGO").unwrap_or_else(|_| "cargo".into()))
        .current_dir(workspace_root())
        .args(["tree", "--locked", "-p", package, "-e", "normal"])
        .args(["--prefix", "none", "--format", "{p}"])
        .output()
        .expect("cargo tree runs");
    assert!(
        output.status.success(),
        "cargo tree failed: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8(output.stdout)
        .expect("cargo tree prints UTF-8")
        .lines()
        .filter_map(|line| line.split_whitespace().next())
        .map(str::to_owned)
        .collect()
}

/// The path of a file under `tests/fixtures/`.
pub fn fixture(name: &str) -> PathBuf {
    workspace_root().join("tests/fixtures").join(name)
}

/// `component` with a custom section `name` holding `data` appended at its top level: a built check with a
/// declaration (such as `preflight-reads`) it was not built with.
pub fn with_custom_section(component: &[u8], name: &str, data: &[u8]) -> Vec<u8> {
    use wasm_encoder::ComponentSection;
    let mut bytes = component.to_vec();
    wasm_encoder::CustomSection {
        name: name.into(),
        data: data.into(),
    }
    .append_to_component(&mut bytes);
    bytes
}
