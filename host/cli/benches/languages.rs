//! The example check in every guest language, Rust's former shape (built for `wasm32-wasip2`, with std's
//! WASI imports and wasi-libc's allocator) beside the SDK's `wasm32-unknown-unknown` build, and Go's build
//! without the snapshot its build.sh takes (`preflight snapshot`) beside the one with it, in one run:
//! component size raw and zstd-compressed, the ConfigMaps `preflight pack` writes for it, and `preflight
//! bench` p50 and checks/s with 64 in flight, with a fresh instance per evaluation and with instances reused
//! 100 times (`isolation: reuse`), each as a ratio to the Rust build's fresh instances measured in the same
//! round, with the goal beside the heavy languages' fresh rows. Two rounds, the languages alternating within
//! each, so that drift between phases shows and does not bias one language.
//!
//! Run: `cargo bench -p preflight --bench languages` (`BENCH_ROUNDS`, `BENCH_ITERATIONS` for the compiled
//! languages; the interpreted ones get a tenth, at least 200).

use preflight_test_support::{
    build_c_check, build_check, build_go_check, build_js_check, build_python_check,
    build_wasip2_check, fixture, pre_initialize_go_check,
};
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::Command;

/// A language's build of the example and how many evaluations a round gives it.
struct Build {
    language: &'static str,
    component: PathBuf,
    iterations: u32,
}

fn main() {
    let rounds: usize = setting("BENCH_ROUNDS", 2);
    let iterations: u32 = setting("BENCH_ITERATIONS", 2_000);
    let interpreted = (iterations / 10).max(200);
    let project = "plugins/dependency-ready";
    // C and Go builds are componentized (and Go's pre-initialised) by the CLI, as their build.sh does it.
    let preflight = Path::new(env!("CARGO_BIN_EXE_preflight"));
    let builds = [
        ("rust", build_check("dependency-ready"), iterations),
        (
            "rust (wasm32-wasip2)",
            build_wasip2_check("dependency-ready"),
            iterations,
        ),
        ("c", build_c_check(project, preflight), iterations),
        (
            "go",
            pre_initialize_go_check(project, preflight),
            interpreted,
        ),
        (
            "go (not pre-initialised)",
            build_go_check(project, preflight),
            interpreted,
        ),
        ("javascript", build_js_check(project), interpreted),
        ("python", build_python_check(project), interpreted),
    ]
    .map(|(language, component, iterations)| Build {
        language,
        component,
        iterations,
    });
    let config = std::env::temp_dir().join(format!("languages-bench-{}.json", std::process::id()));
    std::fs::write(
        &config,
        r#"{"available": ["postgres-main"], "retryAfterSeconds": 600, "jitterPercent": 10}"#,
    )
    .expect("the configuration can be written");

    println!("| language | raw | zstd -19 | ConfigMaps |");
    println!("| --- | --- | --- | --- |");
    for build in &builds {
        let bytes = std::fs::read(&build.component).expect("the component is readable");
        let compressed = zstd::encode_all(&bytes[..], 19).expect("zstd compresses");
        println!(
            "| {} | {} | {} | {} |",
            build.language,
            megabytes(bytes.len()),
            megabytes(compressed.len()),
            config_maps(&build.component)
        );
    }
    for round in 1..=rounds {
        println!("\nround {round}");
        println!(
            "| language | instances | p50 | checks/s, 64 in flight | p50 ÷ Rust fresh | checks/s ÷ Rust fresh | goal: p50 ÷ Rust fresh |"
        );
        println!("| --- | --- | --- | --- | --- | --- | --- |");
        let mut rust: Option<(f64, f64)> = None;
        for build in &builds {
            for reuse in [None, Some(REUSES)] {
                let figures = bench(build, &config, reuse);
                let p50 = figures["p50Us"].as_f64().expect("p50Us");
                let per_second = figures["concurrentPerSecond"]
                    .as_f64()
                    .expect("concurrentPerSecond");
                let (rust_p50, rust_per_second) = *rust.get_or_insert((p50, per_second));
                let ratio = p50 / rust_p50;
                let goal = match (reuse, fresh_goal(build.language)) {
                    (None, Some(goal)) => format!(
                        "≤ {goal}x: {}",
                        if ratio <= goal { "met" } else { "missed" }
                    ),
                    _ => String::new(),
                };
                println!(
                    "| {} | {} | {p50:.1} µs | {per_second:.0} | {ratio:.2}x | {:.3}x | {goal} |",
                    build.language,
                    reuse.map_or_else(|| "fresh".to_owned(), |uses| format!("reused {uses}x")),
                    per_second / rust_per_second
                );
            }
        }
    }
    std::fs::remove_file(&config).expect("the configuration can be removed");
}

/// The goal for a language's fresh evaluation, as its p50 divided by the Rust build's: the heavy runtimes
/// (a CPython or JavaScript engine in the component) within 20x, Go's within 10x.
fn fresh_goal(language: &str) -> Option<f64> {
    match language {
        "python" | "javascript" => Some(20.0),
        "go" | "go (not pre-initialised)" => Some(10.0),
        _ => None,
    }
}

/// Evaluations per instance in the reuse rows.
const REUSES: u32 = 100;

/// `preflight bench -o json` of one build on the waiting App, reusing instances `reuse` times if given.
fn bench(build: &Build, config: &Path, reuse: Option<u32>) -> Value {
    let output = Command::new("timeout")
        .arg("900")
        .arg(env!("CARGO_BIN_EXE_preflight"))
        .args([
            "bench",
            "-o",
            "json",
            "--timeout",
            "10s",
            "--concurrency",
            "64",
        ])
        .arg("--iterations")
        .arg(build.iterations.to_string())
        .arg("--check")
        .arg(&build.component)
        .arg("--object")
        .arg(fixture("app-waiting.yaml"))
        .arg("--config")
        .arg(config)
        .args(reuse.map(|uses| format!("--reuse={uses}")))
        .env(
            "PREFLIGHT_CACHE_DIR",
            preflight_test_support::compiled_cache_dir(),
        )
        .output()
        .expect("preflight bench runs");
    assert!(
        output.status.success(),
        "{}: {}",
        build.language,
        String::from_utf8_lossy(&output.stderr)
    );
    serde_json::from_slice(&output.stdout).expect("preflight bench prints JSON")
}

/// How many ConfigMaps `preflight pack` writes for the component (900 KiB parts).
fn config_maps(component: &Path) -> usize {
    let output = Command::new("timeout")
        .arg("600")
        .arg(env!("CARGO_BIN_EXE_preflight"))
        .args([
            "pack",
            "--name",
            "dependency-ready",
            "--gates",
            "App.apps.example.com",
            "--max-part-size",
            "900KiB",
        ])
        .arg(component)
        .output()
        .expect("preflight pack runs");
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8_lossy(&output.stdout)
        .lines()
        .filter(|line| *line == "kind: ConfigMap")
        .count()
}

fn megabytes(bytes: usize) -> String {
    if bytes >= 1_000_000 {
        format!("{:.1} MB", bytes as f64 / 1e6)
    } else {
        format!("{} KB", bytes / 1000)
    }
}

fn setting<T: std::str::FromStr>(name: &str, default: T) -> T {
    std::env::var(name)
        .ok()
        .and_then(|value| value.parse().ok())
        .unwrap_or(default)
}
