//! What compiling a heavy check costs the first time and when others of its language were compiled before:
//! `preflight run` on three Python and three JavaScript checks (the examples in plugins/), each in a process
//! of its own as an author runs them, without a cache (`PREFLIGHT_CACHE_DIR=`, every compile from nothing)
//! and with a fresh cache directory (the first check of a language compiles from nothing, the next ones
//! reuse the compiled functions they share with it). The two alternate within each round; each row prints
//! wall time and CPU time, and the cached one its ratio to the uncached compile of the same check in the
//! same round. Then the same check once more with the cache: no compile, its kept copy loaded (what a
//! restarted operator does), wall and CPU time.
//!
//! Run: `cargo bench -p preflight --bench compile` (`BENCH_ROUNDS`, default 2; `BENCH_PREFLIGHT=BINARY`
//! measures that `preflight`, the image's static one, say).

mod bench_binary;

use preflight_test_support::{build_js_check, build_python_check, fixture};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

/// The projects whose Python and JavaScript builds are compiled, in this order.
const PROJECTS: [&str; 3] = [
    "plugins/dependency-ready",
    "plugins/referenced-config",
    "plugins/external-dependency",
];

/// What one `preflight run` took.
struct Cost {
    wall: Duration,
    cpu: Duration,
}

fn main() {
    let rounds: usize = std::env::var("BENCH_ROUNDS")
        .ok()
        .and_then(|value| value.parse().ok())
        .unwrap_or(2);
    let checks: Vec<(String, PathBuf)> = PROJECTS
        .iter()
        .map(|project| (format!("python {project}"), build_python_check(project)))
        .chain(
            PROJECTS
                .iter()
                .map(|project| (format!("javascript {project}"), build_js_check(project))),
        )
        .collect();
    let cache = std::env::temp_dir().join(format!("compile-bench-{}", std::process::id()));
    println!(
        "{:<44} {:>9} {:>9} {:>10} {:>9} {:>9} {:>10} {:>9} {:>9}",
        "check (in this order)",
        "none:wall",
        "none:cpu",
        "cached:wall",
        "ratio",
        "cached:cpu",
        "ratio",
        "kept:wall",
        "kept:cpu"
    );
    for round in 1..=rounds {
        println!("round {round}");
        let _ = std::fs::remove_dir_all(&cache);
        for (name, check) in &checks {
            let uncached = run(check, Path::new(""));
            let cached = run(check, &cache);
            let kept = run(check, &cache);
            println!(
                "{name:<44} {:>8.2}s {:>8.2}s {:>10.2}s {:>8.2}x {:>9.2}s {:>9.2}x {:>8.2}s {:>8.2}s",
                uncached.wall.as_secs_f64(),
                uncached.cpu.as_secs_f64(),
                cached.wall.as_secs_f64(),
                cached.wall.as_secs_f64() / uncached.wall.as_secs_f64(),
                cached.cpu.as_secs_f64(),
                cached.cpu.as_secs_f64() / uncached.cpu.as_secs_f64(),
                kept.wall.as_secs_f64(),
                kept.cpu.as_secs_f64(),
            );
        }
        let pack = std::fs::metadata(cache.join("functions.pack")).map_or(0, |file| file.len());
        println!("compiled functions kept: {} MiB", pack >> 20);
    }
    let _ = std::fs::remove_dir_all(&cache);
}

/// Runs `preflight run` on `check` with `PREFLIGHT_CACHE_DIR=cache` (empty: no cache); panics unless it
/// ran the check.
fn run(check: &Path, cache: &Path) -> Cost {
    let before = children_cpu();
    let started = Instant::now();
    let output = Command::new("timeout")
        .arg("300")
        .arg(bench_binary::preflight())
        .arg("run")
        .arg("--check")
        .arg(check)
        .arg("--object")
        .arg(fixture("app-waiting.yaml"))
        .arg("--config")
        .arg(fixture("dependency-ready-config.yaml"))
        .env("PREFLIGHT_CACHE_DIR", cache)
        .output()
        .expect("preflight runs");
    let wall = started.elapsed();
    // (exit 3: the check did not proceed; 4: it rejected a config written for another example)
    assert!(
        matches!(output.status.code(), Some(0 | 3 | 4)),
        "{}: {}",
        check.display(),
        String::from_utf8_lossy(&output.stderr)
    );
    Cost {
        wall,
        cpu: children_cpu() - before,
    }
}

/// User and system CPU time of the children waited for so far.
fn children_cpu() -> Duration {
    // SAFETY: getrusage writes one rusage into the zeroed struct it is given.
    let usage = unsafe {
        let mut usage: libc::rusage = std::mem::zeroed();
        libc::getrusage(libc::RUSAGE_CHILDREN, &mut usage);
        usage
    };
    let seconds = |time: libc::timeval| {
        Duration::from_secs(time.tv_sec as u64) + Duration::from_micros(time.tv_usec as u64)
    };
    seconds(usage.ru_utime) + seconds(usage.ru_stime)
}
