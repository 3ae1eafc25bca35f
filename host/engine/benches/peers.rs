//! preflight against what a user would otherwise write the same rule in, in one run: the dependency-ready
//! rule ("proceed when every name in `spec.dependsOn` is available") on realistic custom resources of 1, 4
//! and 64 KiB, written idiomatically for each:
//!
//! - **native, typed object**: the check's crate called on the object already decoded into its types, as a
//!   kube-rs operator's reflector holds it (no JSON at all): what a compiled-in hook really costs;
//! - **native, parses the object**: the same crate decoding the object's JSON first (the engine benchmark's
//!   baseline);
//! - **preflight** (the Rust check, `plugins/dependency-ready`): a fresh instance fed the projection of what
//!   the check declares it reads (made per evaluation from the parsed object, as the operator does), the
//!   same with `isolation: reuse`, and a fresh instance fed the whole object;
//! - **Kubewarden**: its `policy-evaluator` (the library inside policy-server, built from a checkout beside
//!   this repository by `bench/kubewarden/build`) running a waPC Rust policy with the rule, a fresh instance
//!   per admission request as policy-server runs them;
//! - **OPA**: Rego with a prepared query, in process (`bench/peers`, Go): the decoded object given as input
//!   (converted to OPA's values each time), and converted once;
//! - **CEL**: a compiled cel-go program, in process (`bench/peers`), what ValidatingAdmissionPolicy users
//!   write: on the object decoded once (as the API server holds it), and decoding the JSON each time.
//!
//! Every contender times its own evaluations (the Go and Kubewarden ones in their processes, so that no pipe
//! is inside a timing), in blocks that take turns (50 rounds), and ratios are medians over rounds of one
//! contender's p50 divided by another's in the same round: this VM drifts 1.7x between phases
//! (docs/performance.md). Throughput: the engine with 64 evaluations in flight on a 2-worker runtime, the
//! others on two threads (Go: GOMAXPROCS goroutines).
//!
//! Then, because timing drifts and instruction counts do not, each contender's instructions per evaluation
//! at 4 KiB under `valgrind --tool=callgrind`: two runs of 200 and 5,200 evaluations, the difference divided
//! by 5,000 (start-up cancels out). The engine runs there with 4 pool slots instead of 128 (valgrind cannot
//! reserve the full pool's address space; the code per evaluation is the same), and Go with GOMAXPROCS=1
//! and asynchronous preemption off (under valgrind, which runs one thread at a time, idle Go threads spin
//! and their counts varied 80-fold from run to run; with these, within 1 %). Skipped when valgrind is
//! missing, or with `BENCH_INSTRUCTIONS=0`.
//!
//! Run: `cargo bench -p preflight-engine --bench peers` (`BENCH_SAMPLES` changes the sample count).

mod fixtures;

use dependency_ready::{Config, Spec};
use fixtures::*;
use hdrhistogram::Histogram;
use preflight_engine::{Check, Engine, EngineConfig, Isolation};
use preflight_guest::Object;
use preflight_test_support::check_bytes;
use serde_json::Value;
use std::hint::black_box;
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, SystemTime};

/// Blocks per row: the contenders take turns this many times.
const ROUNDS: u32 = 50;
/// The fixture objects' sizes.
const SIZES_KIB: [usize; 3] = [1, 4, 64];
/// Where the goals are set, as an index into [`SIZES_KIB`].
const GOAL_SIZE: usize = 1;
/// The instruction counts' two runs.
const COUNT_RUNS: [u32; 2] = [200, 5_200];

/// A way of evaluating the rule, measured in blocks on one of the fixture objects (an index into
/// [`SIZES_KIB`]).
trait Contender {
    /// `count` latencies in nanoseconds, after a tenth as many unrecorded evaluations.
    fn time(&mut self, object: usize, count: u32) -> Histogram<u64>;
    /// The wall time of `total` evaluations with the contender's parallelism.
    fn rate(&mut self, object: usize, total: u32) -> Duration;
    /// `total` evaluations, one after the other, untimed (for instruction counts).
    fn count(&mut self, object: usize, total: u32);
}

/// Every contender: key (the name `--count` and the harnesses take), label, contender.
struct Lineup {
    contenders: Vec<(&'static str, &'static str, Box<dyn Contender>)>,
    /// The CEL and OPA harness.
    peers: PathBuf,
    /// Kubewarden's harness and policy, or why they are not in the lineup.
    kubewarden: Result<Vec<PathBuf>, String>,
}

fn main() {
    let arguments: Vec<String> = std::env::args().collect();
    if let Some(at) = arguments.iter().position(|argument| argument == "--count") {
        return count_in_this_process(&arguments[at + 1..]);
    }
    let samples: u32 = std::env::var("BENCH_SAMPLES")
        .ok()
        .and_then(|value| value.parse().ok())
        .unwrap_or(5_000);
    let fixtures = Fixtures::write();
    let runtime = Arc::new(runtime());
    let engine = Arc::new(Engine::new(EngineConfig::default()).unwrap());
    let mut lineup = Lineup::new(&runtime, &engine, &fixtures);
    println!(
        "rule: dependency-ready; {samples} samples per contender and object in {ROUNDS} interleaved blocks; \
         objects {}",
        fixtures
            .texts
            .iter()
            .map(|text| format!("{} B", text.len()))
            .collect::<Vec<_>>()
            .join(", ")
    );
    if let Err(missing) = &lineup.kubewarden {
        println!("Kubewarden: not measured: {missing}");
    }
    println!(
        "| object | contender | p50 | p99 | p50 ÷ CEL (decoded) p50, paired | checks/s (engine: 64 in flight; others: 2 threads) |"
    );
    println!("| --- | --- | --- | --- | --- | --- |");
    let mut goal_row = Vec::new();
    for (object, kib) in SIZES_KIB.iter().enumerate() {
        let rows = if *kib == 64 { samples / 4 } else { samples };
        let measured = measure(&mut lineup, object, rows);
        let cel = &measured[lineup.index("cel")].1;
        for ((_, label, _), (latency, p50s, rate)) in lineup.contenders.iter().zip(&measured) {
            println!(
                "| {kib} KiB | {label} | {:.2?} | {:.2?} | {:.2}x | {rate:.0} |",
                p(latency, 0.5),
                p(latency, 0.99),
                paired(p50s, cel)
            );
        }
        if object == GOAL_SIZE {
            goal_row = measured.into_iter().map(|(_, p50s, _)| p50s).collect();
        }
    }
    let instructions = instruction_counts(&lineup, &fixtures);
    println!();
    println!(
        "| goal ({} KiB, same run) | p50 ratio | instructions ratio | goal |",
        SIZES_KIB[GOAL_SIZE]
    );
    println!("| --- | --- | --- | --- |");
    for (figure, contender, baseline, goal) in [
        (
            "preflight fresh, projected ÷ CEL on a decoded object",
            "fresh-projected",
            "cel",
            "≤ 1.0",
        ),
        (
            "preflight reuse, projected ÷ CEL on a decoded object",
            "reuse-projected",
            "cel",
            "≤ 0.5",
        ),
        (
            "preflight fresh, projected ÷ Kubewarden's evaluator",
            "fresh-projected",
            "kubewarden",
            "≤ 0.5",
        ),
        (
            "preflight fresh, projected ÷ OPA (prepared query, EvalInput)",
            "fresh-projected",
            "opa",
            "(a row, no goal)",
        ),
        (
            "preflight fresh, projected ÷ native, typed object",
            "fresh-projected",
            "native-typed",
            "(a row, no goal)",
        ),
    ] {
        let (Some(a), Some(b)) = (lineup.position(contender), lineup.position(baseline)) else {
            println!("| {figure} | not measured | | {goal} |");
            continue;
        };
        let counted = match (&instructions, a, b) {
            (Some(counts), a, b) => format!("{:.2}", counts[a] / counts[b]),
            (None, _, _) => "not counted".to_owned(),
        };
        println!(
            "| {figure} | {:.2} | {counted} | {goal} |",
            paired(&goal_row[a], &goal_row[b])
        );
    }
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap()
}

/// Per contender: latencies, p50 per round, checks per second.
fn measure(
    lineup: &mut Lineup,
    object: usize,
    samples: u32,
) -> Vec<(Histogram<u64>, Vec<f64>, f64)> {
    let block = (samples / ROUNDS).max(1);
    let mut rows: Vec<_> = lineup
        .contenders
        .iter()
        .map(|_| (histogram(), Vec::new(), Duration::ZERO))
        .collect();
    // Latency first, then throughput, each in alternating blocks.
    for _ in 0..ROUNDS {
        for ((_, _, contender), (latency, p50s, _)) in lineup.contenders.iter_mut().zip(&mut rows) {
            let timed = contender.time(object, block);
            p50s.push(p(&timed, 0.5).as_secs_f64());
            latency.add(&timed).unwrap();
        }
    }
    let total = block * 4;
    for _ in 0..ROUNDS {
        for ((_, _, contender), (_, _, time)) in lineup.contenders.iter_mut().zip(&mut rows) {
            *time += contender.rate(object, total);
        }
    }
    rows.into_iter()
        .map(|(latency, p50s, time)| {
            let rate = f64::from(total * ROUNDS) / time.as_secs_f64();
            (latency, p50s, rate)
        })
        .collect()
}

impl Lineup {
    fn new(
        runtime: &Arc<tokio::runtime::Runtime>,
        engine: &Arc<Engine>,
        fixtures: &Fixtures,
    ) -> Self {
        let check = engine.load(&check_bytes("dependency-ready")).unwrap();
        let mut lineup = Self {
            contenders: Vec::new(),
            peers: build("bench/peers/build")
                .expect("bench/peers builds")
                .remove(0),
            kubewarden: build("bench/kubewarden/build"),
        };
        for (key, label) in IN_PROCESS {
            let contender = in_process(key, runtime, engine, &check, fixtures);
            lineup.contenders.push((key, label, contender));
        }
        let external = GO_PEERS.into_iter().chain(
            lineup
                .kubewarden
                .is_ok()
                .then_some(("kubewarden", KUBEWARDEN_LABEL)),
        );
        for (key, label) in external.collect::<Vec<_>>() {
            let command = lineup.external(key, fixtures, None);
            lineup
                .contenders
                .push((key, label, Box::new(External::start(key, command))));
        }
        lineup
    }

    /// The command that starts the harness of the external contender `key`, run by `runner` when given
    /// (valgrind).
    fn external(&self, key: &str, fixtures: &Fixtures, runner: Option<Command>) -> Command {
        let argv: Vec<&std::ffi::OsStr> = match (key, &self.kubewarden) {
            ("kubewarden", Ok(built)) => {
                vec![built[0].as_os_str(), built[1].as_os_str(), CONFIG.as_ref()]
            }
            _ => vec![self.peers.as_os_str(), "-config".as_ref(), CONFIG.as_ref()],
        };
        let mut command = match runner {
            Some(mut runner) => {
                runner.arg(argv[0]);
                runner
            }
            None => Command::new(argv[0]),
        };
        command.args(&argv[1..]).args(&fixtures.paths);
        command
    }

    fn position(&self, key: &str) -> Option<usize> {
        self.contenders.iter().position(|(name, _, _)| *name == key)
    }

    fn index(&self, key: &str) -> usize {
        self.position(key).expect("the contender is in the lineup")
    }
}

/// The contenders in this process: key and label.
const IN_PROCESS: [(&str, &str); 5] = [
    (
        "native-typed",
        "native, typed object (compiled-in hook, reflector cache)",
    ),
    ("native", "native, parses the object's JSON"),
    ("fresh-projected", "preflight, fresh instance, projected"),
    ("reuse-projected", "preflight, projected + reuse"),
    ("fresh-whole", "preflight, fresh instance, whole object"),
];

/// The contenders of `bench/peers`: key (the harness's name) and label.
const GO_PEERS: [(&str, &str); 4] = [
    ("cel", "CEL, compiled program, decoded object"),
    ("cel-decoding", "CEL, decoding the JSON each time"),
    ("opa", "OPA, prepared query, EvalInput"),
    (
        "opa-parsed-input",
        "OPA, prepared query, input converted once",
    ),
];

const KUBEWARDEN_LABEL: &str = "Kubewarden policy-evaluator, fresh instance (waPC Rust policy)";

/// The contender `key` of [`IN_PROCESS`].
fn in_process(
    key: &str,
    runtime: &Arc<tokio::runtime::Runtime>,
    engine: &Arc<Engine>,
    check: &Arc<Check>,
    fixtures: &Fixtures,
) -> Box<dyn Contender> {
    let engine_contender = |projected, isolation| -> Box<dyn Contender> {
        Box::new(Task {
            runtime: Arc::clone(runtime),
            evaluations: fixtures
                .objects
                .iter()
                .map(|object| engine_contender(engine, check, object, projected, isolation))
                .collect(),
        })
    };
    match key {
        "native-typed" => Box::new(Thread(
            fixtures.texts.iter().map(|text| typed_hook(text)).collect(),
        )),
        "native" => Box::new(Thread(
            fixtures
                .texts
                .iter()
                .map(|text| native_hook(text))
                .collect(),
        )),
        "fresh-projected" => engine_contender(true, Isolation::Fresh),
        "reuse-projected" => engine_contender(true, reuse()),
        "fresh-whole" => engine_contender(false, Isolation::Fresh),
        _ => panic!("no contender {key}"),
    }
}

/// The check's crate on the object and configuration decoded once into its types; per evaluation, a copy
/// of each (a hook borrows the cached object and builds its request).
fn typed_hook(text: &str) -> Native {
    let object: Object<Spec> = serde_json::from_str(text).unwrap();
    let config: Config = serde_json::from_str(CONFIG).unwrap();
    let target = fixture_target();
    Arc::new(move || {
        let outcome = preflight_guest::testing::call(
            dependency_ready::check,
            black_box(&object).clone(),
            config.clone(),
            target.clone(),
            SystemTime::now(),
        );
        assert!(
            outcome.is_proceed(),
            "the typed hook proceeds on the fixture"
        );
    })
}

/// A native contender: timed on this thread, throughput on two.
struct Thread(Vec<Native>);

impl Contender for Thread {
    fn time(&mut self, object: usize, count: u32) -> Histogram<u64> {
        time_native(&self.0[object], count)
    }

    fn rate(&mut self, object: usize, total: u32) -> Duration {
        on_two_threads(&self.0[object], total)
    }

    fn count(&mut self, object: usize, total: u32) {
        (0..total).for_each(|_| self.0[object]());
    }
}

/// An engine contender: timed inside a task, throughput with 64 in flight.
struct Task {
    runtime: Arc<tokio::runtime::Runtime>,
    evaluations: Vec<Once>,
}

impl Contender for Task {
    fn time(&mut self, object: usize, count: u32) -> Histogram<u64> {
        time_task(&self.runtime, &self.evaluations[object], count)
    }

    fn rate(&mut self, object: usize, total: u32) -> Duration {
        self.runtime
            .block_on(in_flight(&self.evaluations[object], total))
    }

    fn count(&mut self, object: usize, total: u32) {
        let once = Arc::clone(&self.evaluations[object]);
        self.runtime.block_on(async move {
            for _ in 0..total {
                once().await;
            }
        });
    }
}

/// A contender in another process, speaking the line protocol of `bench/peers` and `bench/kubewarden`.
struct External {
    name: &'static str,
    child: Child,
    input: ChildStdin,
    output: BufReader<ChildStdout>,
}

impl External {
    /// Starts `command` and waits for its `ready` (it has checked that the rule proceeds on every object
    /// and refuses when nothing is available).
    fn start(name: &'static str, mut command: Command) -> Self {
        let mut child = command
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .unwrap_or_else(|error| panic!("starting {command:?}: {error}"));
        let mut external = Self {
            name,
            input: child.stdin.take().unwrap(),
            output: BufReader::new(child.stdout.take().unwrap()),
            child,
        };
        assert_eq!(external.line(), "ready", "{name} starts");
        external
    }

    fn ask(&mut self, request: &str, object: usize, count: u32) -> String {
        writeln!(self.input, "{request} {} {object} {count}", self.name).unwrap();
        self.input.flush().unwrap();
        self.line()
    }

    /// Closes the harness's input, waits for it to exit, and returns what it wrote on stderr (when piped).
    fn finish(self) -> String {
        drop(self.input);
        let output = self.child.wait_with_output().unwrap();
        let stderr = String::from_utf8_lossy(&output.stderr).into_owned();
        assert!(output.status.success(), "{} failed:\n{stderr}", self.name);
        stderr
    }

    fn line(&mut self) -> String {
        let mut line = String::new();
        self.output.read_line(&mut line).unwrap();
        assert!(
            !line.is_empty(),
            "{} exited (its error is above)",
            self.name
        );
        line.trim_end().to_owned()
    }
}

impl Contender for External {
    fn time(&mut self, object: usize, count: u32) -> Histogram<u64> {
        let mut timed = histogram();
        for nanoseconds in self.ask("time", object, count).split(' ') {
            timed.record(nanoseconds.parse().unwrap()).unwrap();
        }
        timed
    }

    fn rate(&mut self, object: usize, total: u32) -> Duration {
        Duration::from_nanos(self.ask("rate", object, total).parse().unwrap())
    }

    fn count(&mut self, object: usize, total: u32) {
        assert_eq!(self.ask("count", object, total), "done");
    }
}

/// The fixture objects, parsed and as files for the other processes.
struct Fixtures {
    texts: Vec<String>,
    objects: Vec<Value>,
    paths: Vec<PathBuf>,
}

impl Fixtures {
    fn write() -> Self {
        let dir = std::env::temp_dir().join(format!("preflight-peers-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let texts: Vec<String> = SIZES_KIB
            .iter()
            .map(|kib| realistic_object(kib << 10))
            .collect();
        let paths = SIZES_KIB
            .iter()
            .zip(&texts)
            .map(|(kib, text)| {
                let path = dir.join(format!("object-{kib}k.json"));
                std::fs::write(&path, text).unwrap();
                path
            })
            .collect();
        let objects = texts
            .iter()
            .map(|text| serde_json::from_str(text).unwrap())
            .collect();
        Self {
            texts,
            objects,
            paths,
        }
    }
}

impl Drop for Fixtures {
    fn drop(&mut self) {
        if let Some(dir) = self.paths.first().and_then(|path| path.parent()) {
            let _ = std::fs::remove_dir_all(dir);
        }
    }
}

/// Runs a build script of `bench/` (from the repository root) and returns the paths it prints, or why not.
fn build(script: &str) -> Result<Vec<PathBuf>, String> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let output = Command::new(root.join(script))
        .stderr(Stdio::inherit())
        .output()
        .map_err(|error| format!("{script}: {error}"))?;
    match output.status.code() {
        Some(0) => Ok(String::from_utf8_lossy(&output.stdout)
            .lines()
            .map(PathBuf::from)
            .collect()),
        Some(3) => Err(format!("{script} found no checkout (its message is above)")),
        _ => panic!("{script} failed: {}", output.status),
    }
}

/// Instructions per evaluation of every contender at the goals' size, or `None` when not counted.
fn instruction_counts(lineup: &Lineup, fixtures: &Fixtures) -> Option<Vec<f64>> {
    if std::env::var("BENCH_INSTRUCTIONS").is_ok_and(|value| value == "0") {
        println!("\ninstructions: not counted (BENCH_INSTRUCTIONS=0)");
        return None;
    }
    if Command::new("valgrind").arg("--version").output().is_err() {
        println!(
            "\ninstructions: not counted: valgrind is not installed (apt-get install valgrind)"
        );
        return None;
    }
    println!(
        "\n| contender ({} KiB) | instructions per evaluation (callgrind) | ÷ CEL (decoded) |",
        SIZES_KIB[GOAL_SIZE]
    );
    println!("| --- | --- | --- |");
    let counts: Vec<f64> = lineup
        .contenders
        .iter()
        .map(|(key, _, _)| {
            let [few, many] = COUNT_RUNS.map(|runs| {
                if IN_PROCESS.iter().any(|(name, _)| name == key) {
                    let mut command = callgrind();
                    command.arg(std::env::current_exe().unwrap()).args([
                        "--count",
                        key,
                        &runs.to_string(),
                    ]);
                    let output = command.output().expect("valgrind starts");
                    assert!(output.status.success(), "{command:?} failed");
                    collected(&String::from_utf8_lossy(&output.stderr))
                } else {
                    let mut command = lineup.external(key, fixtures, Some(callgrind()));
                    command
                        .env("GOMAXPROCS", "1")
                        .env("GODEBUG", "asyncpreemptoff=1")
                        .stderr(Stdio::piped());
                    let mut external = External::start(key, command);
                    external.count(GOAL_SIZE, runs);
                    collected(&external.finish())
                }
            });
            (many - few) as f64 / f64::from(COUNT_RUNS[1] - COUNT_RUNS[0])
        })
        .collect();
    let cel = counts[lineup.index("cel")];
    for ((_, label, _), count) in lineup.contenders.iter().zip(&counts) {
        println!("| {label} | {count:.0} | {:.2}x |", count / cel);
    }
    Some(counts)
}

fn callgrind() -> Command {
    let mut command = Command::new("valgrind");
    command.args(["--tool=callgrind", "--callgrind-out-file=/dev/null"]);
    command
}

/// The instructions callgrind says it collected, from its report on stderr.
fn collected(stderr: &str) -> u64 {
    stderr
        .lines()
        .find_map(|line| line.split("Collected : ").nth(1))
        .and_then(|count| count.trim().parse().ok())
        .unwrap_or_else(|| panic!("no count from callgrind in:\n{stderr}"))
}

/// `--count KEY RUNS`: `RUNS` evaluations of one in-process contender on the goals' object, for callgrind.
/// The engine has 4 pool slots here: valgrind cannot reserve the address space of the default 128.
fn count_in_this_process(arguments: &[String]) {
    let [key, runs] = arguments else {
        panic!("--count KEY RUNS")
    };
    let runs: u32 = runs.parse().unwrap();
    let fixtures = Fixtures::write();
    let runtime = Arc::new(runtime());
    let engine = Arc::new(
        Engine::new(EngineConfig {
            max_concurrent_evaluations: 4,
            ..EngineConfig::default()
        })
        .unwrap(),
    );
    let check = engine.load(&check_bytes("dependency-ready")).unwrap();
    in_process(key, &runtime, &engine, &check, &fixtures).count(GOAL_SIZE, runs);
}
