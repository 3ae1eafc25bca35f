//! Command-line interface: argument parsing and dispatch. Each subcommand lives in its own module.

mod bench;
mod componentize;
mod declare_reads;
mod fixtures;
mod input;
mod inspect;
mod oci;
mod operator;
mod pack;
mod run;
mod scaffold;
mod snapshot;
mod what_if;

use clap::{Args, Parser, Subcommand, ValueEnum};
use std::path::PathBuf;
use std::time::Duration;

/// Exit status: the check proceeded (or the command succeeded).
pub const EXIT_PROCEED: u8 = 0;
/// Exit status: the component is not a usable check (`inspect`).
pub const EXIT_UNUSABLE: u8 = 1;
/// Exit status: a fixture case failed (`test`), as `go test` and `opa test` say it.
pub const EXIT_FAILED_TESTS: u8 = 1;
/// Exit status: bad usage or unreadable input.
pub const EXIT_USAGE: u8 = 2;
/// Exit status: some object's verdict would change (`what-if`), as `kubectl diff` says it.
pub const EXIT_DIFFERENCES: u8 = 1;
/// Exit status: the check did not proceed.
pub const EXIT_NOT_PROCEED: u8 = 3;
/// Exit status: the check returned an error or failed in a contained way (timeout, trap, invalid ...).
pub const EXIT_FAILED: u8 = 4;

/// Run, inspect and benchmark preflight checks: WebAssembly components that decide whether a Kubernetes
/// operator may reconcile an object now.
#[derive(Debug, Parser)]
#[command(name = "preflight", version, about, long_about = None)]
pub struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Evaluate a check on an object and print the outcome and the controller action it maps to.
    ///
    /// Exit status: 0 proceed, 3 not proceed, 4 check error or contained failure, 2 usage or unreadable input.
    Run(RunArgs),
    /// Show a component's contract version, imports, exports, size and sha256; fail if it is not a usable check.
    Inspect(InspectArgs),
    /// Measure fresh-instance latency (p50/p99) and checks per second with several evaluations in flight.
    Bench(BenchArgs),
    /// Gate Kubernetes objects: watch check ConfigMaps, run each gated kind's checks before it is reconciled,
    /// and record the outcome as a `Preflight` condition, Events and metrics. Runs until SIGTERM.
    Operator(OperatorArgs),
    /// Run fixtures as unit tests of a check: each case is an object, a configuration and a time with what
    /// the check must answer. Prints a table and `N passed, N failed`; exit status 1 when any case fails.
    #[command(after_long_help = FIXTURES_HELP)]
    Test(TestArgs),
    /// Print this binary's version, the wasmtime it runs checks with, and the contract versions it serves.
    Version(VersionArgs),
    /// Write the ConfigMap manifests that ship a check (for `kubectl apply -f`): the component zstd-compressed
    /// and pinned by its sha256, in one ConfigMap when it fits, else in immutable parts and the check's own
    /// ConfigMap. The component is loaded first: one this host cannot run is refused here.
    Pack(PackArgs),
    /// Create a new check project in a guest language: a check that waits while `spec.paused` is true, its
    /// fixtures, the SDK and WIT it builds against, and `build.sh` for the language's pinned toolchain.
    Scaffold(ScaffoldArgs),
    /// Declare the parts of the object a check reads, in a copy of its component, so that the operator sends
    /// only those parts: for checks in any language (the Rust SDK's `reads!` declares them at build time).
    /// `preflight test` then runs every fixture both ways and fails where the answers differ.
    DeclareReads(DeclareReadsArgs),
    /// Pre-initialise a check: run its language runtime's start (and its SDK's warm-up) once, now, and write
    /// a copy of the component that begins from the state they left, so that every fresh instance skips
    /// them. For components that export `wizer-initialize` (the Go SDK's build, which runs this). Every
    /// instance of the result starts from the same memory: the same random seeds included. Reproducible:
    /// the start reads a fixed wall clock (the Unix epoch), a monotonic clock from zero and seeded
    /// randomness, so the same build gives the same bytes.
    Snapshot(SnapshotArgs),
    /// Make a check component from the core module a C or Go check builds to (a wasip1 reactor): embed the
    /// world's component type from WIT (--wit, --world) unless the module carries it, and adapt WASI
    /// preview 1 with the reactor adapter of this binary's wasmtime. The component is loaded first: one
    /// this host cannot run is refused here. The scaffolded C and Go `build.sh` run it.
    Componentize(ComponentizeArgs),
    /// Evaluate a check against every live object of its kind, read-only, and list the objects whose
    /// verdict would differ from what their `Preflight` condition says now, with totals: the "kubectl diff"
    /// of a check rollout. The check is a local component with its settings, or a check ConfigMap in the
    /// cluster; it is evaluated as the operator would (limits, grants, selector), as if enforced.
    ///
    /// Exit status: 0 no object would change, 1 some would (or could not be evaluated), 2 usage or an error.
    WhatIf(WhatIfArgs),
    /// Write a check to an OCI registry as a Wasm artifact (the CNCF layout: config
    /// application/vnd.wasm.config.v0+json, one application/wasm layer), and print its digest and the
    /// reference pinned to it. The component is loaded first: one this host cannot run is refused here.
    /// Credentials come from the docker config (`docker login`, `oras login`).
    Push(PushArgs),
    /// Read a check from an OCI registry (manifest and component verified against their digests) and
    /// write its component to a file.
    Pull(PullArgs),
}

/// How to reach a registry: shared by `push`, `pull` and the commands whose `--check` takes `oci://`.
#[derive(Debug, Args)]
struct RegistryArgs {
    /// Reach the registry over plain HTTP (a registry on loopback or inside a test network).
    #[arg(long)]
    plain_http: bool,
    /// A PEM CA certificate to trust besides the system's, for a registry with a private CA; repeatable.
    #[arg(long, value_name = "FILE")]
    registry_ca: Vec<PathBuf>,
    /// A cosign public key (`cosign.pub`): an `oci://` check runs only with a cosign signature by this key
    /// (or by another one given) for its manifest digest, stored beside it in the registry; repeatable.
    #[arg(long, value_name = "FILE")]
    verify_key: Vec<PathBuf>,
}

#[derive(Debug, Args)]
struct PushArgs {
    /// The check component (.wasm).
    #[arg(value_name = "FILE.wasm")]
    check: PathBuf,
    /// Where to write it: `[oci://]REGISTRY/REPOSITORY:TAG`.
    #[arg(value_name = "REFERENCE")]
    reference: String,
    #[command(flatten)]
    registry: RegistryArgs,
    /// Output format.
    #[arg(short = 'o', long, value_enum, default_value_t = Format::Text)]
    output: Format,
}

#[derive(Debug, Args)]
struct PullArgs {
    /// The check: `[oci://]REGISTRY/REPOSITORY[:TAG][@sha256:DIGEST]`.
    #[arg(value_name = "REFERENCE")]
    reference: String,
    /// Where to write the component.
    #[arg(long = "to", value_name = "FILE.wasm")]
    output_file: PathBuf,
    #[command(flatten)]
    registry: RegistryArgs,
    /// Output format.
    #[arg(short = 'o', long, value_enum, default_value_t = Format::Text)]
    output: Format,
}

#[derive(Debug, Args)]
struct WhatIfArgs {
    /// A local check component (.wasm), with --gates and the settings its ConfigMap would carry.
    #[arg(
        value_name = "FILE.wasm",
        required_unless_present = "configmap",
        conflicts_with = "configmap",
        requires = "gates"
    )]
    check: Option<PathBuf>,
    /// A check ConfigMap in the cluster instead (with its parts): NAMESPACE/NAME.
    #[arg(long, value_name = "NAMESPACE/NAME")]
    configmap: Option<String>,
    /// With --configmap: how a check named by `source: oci://…` is pulled and verified, as the operator
    /// does it.
    #[command(flatten)]
    registries: ClusterRegistryArgs,
    /// The kind a local check gates: `Kind.group`, or `Kind` for the core group.
    #[arg(long, value_name = "KIND.GROUP")]
    gates: Option<String>,
    /// The namespace a local check would be shipped to: its credentials' Secrets are read there.
    #[arg(long, default_value = "preflight-system")]
    check_namespace: String,
    /// A local check's configuration, as YAML or JSON (data key `config`).
    #[arg(long, value_name = "FILE")]
    config: Option<PathBuf>,
    /// Another data key of a local check's ConfigMap, as for `preflight pack` (`selector=@stage.yaml`,
    /// `http=@http.yaml`, `timeout=500ms`); repeatable.
    #[arg(long = "set", value_name = "KEY=VALUE")]
    settings: Vec<String>,
    /// Only objects in this namespace (default: every namespace).
    #[arg(short = 'n', long)]
    namespace: Option<String>,
    /// Evaluations in flight at once.
    #[arg(long, default_value_t = 64, value_parser = clap::value_parser!(u32).range(1..=4096))]
    concurrency: u32,
    /// Output format.
    #[arg(short = 'o', long, value_enum, default_value = "text")]
    output: Format,
}

#[derive(Debug, Args)]
struct DeclareReadsArgs {
    /// The check component (.wasm).
    #[arg(value_name = "FILE.wasm")]
    check: PathBuf,
    /// A part of the object the check reads: keys separated by dots, a key holding a dot in brackets
    /// (`spec.dependsOn`, `metadata.annotations[example.com/tier]`); repeatable.
    #[arg(long = "path", value_name = "PATH", required = true)]
    paths: Vec<String>,
    /// Where to write the component with its declaration.
    #[arg(short = 'o', long, value_name = "OUT.wasm")]
    output: PathBuf,
}

#[derive(Debug, Args)]
struct SnapshotArgs {
    /// The check component (.wasm).
    #[arg(value_name = "FILE.wasm")]
    check: PathBuf,
    /// Where to write the pre-initialised component (may be the input).
    #[arg(short = 'o', long, value_name = "OUT.wasm")]
    output: PathBuf,
    /// Time limit of the initialisation, e.g. 10s (at most 1m: longer is capped).
    #[arg(long, value_name = "DURATION", default_value = "10s", value_parser = humantime::parse_duration)]
    timeout: Duration,
    /// Memory limit of the initialisation, e.g. 256MiB.
    #[arg(long, value_name = "SIZE", default_value = "256MiB", value_parser = preflight_engine::parse_size)]
    memory_limit: usize,
}

#[derive(Debug, Args)]
struct ComponentizeArgs {
    /// The core module (.wasm), built for wasip1 as a reactor.
    #[arg(value_name = "MODULE.wasm")]
    module: PathBuf,
    /// A WIT package (a directory with a `deps/` folder, or a file) naming the world the module implements,
    /// for a module that does not carry its component type (Go's build).
    #[arg(long, value_name = "DIR", requires = "world")]
    wit: Option<PathBuf>,
    /// The world in --wit: `preflight:guest/check`.
    #[arg(long, value_name = "PACKAGE/WORLD", requires = "wit")]
    world: Option<String>,
    /// Where to write the component (may be the input).
    #[arg(short = 'o', long, value_name = "OUT.wasm")]
    output: PathBuf,
}

#[derive(Debug, Args)]
struct ScaffoldArgs {
    /// The check's language.
    #[arg(long, value_enum)]
    lang: scaffold::Language,
    /// For Rust: take `preflight-guest` from this checkout of the project instead of its repository.
    #[arg(long, value_name = "CHECKOUT")]
    sdk: Option<PathBuf>,
    /// The project's directory (created; must not hold anything). Its name is the check's.
    #[arg(value_name = "NAME")]
    directory: PathBuf,
}

#[derive(Debug, Args)]
struct PackArgs {
    /// The check component (.wasm).
    #[arg(value_name = "FILE.wasm")]
    check: PathBuf,
    /// The check ConfigMap's name.
    #[arg(long)]
    name: String,
    /// The kind it gates: `Kind.group` (`App.apps.example.com`), or `Kind` for the core group.
    #[arg(long, value_name = "KIND.GROUP")]
    gates: String,
    /// The operator's namespace.
    #[arg(long, default_value = "preflight-system")]
    namespace: String,
    /// The check's configuration, as YAML or JSON (data key `config`).
    #[arg(long, value_name = "FILE")]
    config: Option<PathBuf>,
    /// Another data key of the check ConfigMap, e.g. `timeout=500ms` or `http=@http.yaml` (`@` reads a
    /// file); repeatable. See the README's ConfigMap reference.
    #[arg(long = "set", value_name = "KEY=VALUE")]
    settings: Vec<String>,
    /// Largest part, e.g. 900KiB. The default fits `kubectl apply -f -` (client-side apply copies each
    /// object into an annotation capped at 256 KiB); with `kubectl apply --server-side` or `kubectl
    /// create`, parts may be up to about 900KiB (a ConfigMap holds at most 1 MiB).
    #[arg(long, value_name = "SIZE", default_value = "180KiB", value_parser = preflight_engine::parse_size)]
    max_part_size: usize,
}

/// The fixture format, for `preflight test --help`.
const FIXTURES_HELP: &str = "\
Fixtures file (YAML or JSON):
  config: {...}              default configuration of every case (optional)
  now: 2026-12-05T12:00:00Z  default time the check sees (optional; else the current time)
  cases:
    - name: waits for redis
      object: {...}          the object, or objectFile: PATH (relative to the fixtures file)
      config: {...}          this case's configuration (optional)
      now: TIME              this case's time (optional)
      timeout: 300ms         this case's budget (optional; else --timeout)
      expect:                only the keys given are compared
        proceed: false
        reason: DependencyMissing
        messageContains: redis
        error: check         check, timeout, memory, trap, invalid-component, invalid-result or none
        action: requeue      proceed, requeue, await-change, backoff or stop
        requeueAfter: 10m    exact, or {min: 10m, max: 11m}
        outputs: {key: value}   every output, exactly ({}: none)
A configuration the check refuses when it is loaded (validate-config) is the case's answer, as in the
operator, which rejects such a ConfigMap and never evaluates the check with it:
  expect: {error: invalid-config, reason: InvalidCheckConfig, action: stop}";

#[derive(Debug, Args)]
struct TestArgs {
    /// The check component: a .wasm file, or `oci://REGISTRY/REPOSITORY[:TAG][@sha256:DIGEST]`.
    #[arg(long, value_name = "FILE.wasm|oci://REF")]
    check: String,
    #[command(flatten)]
    registry: RegistryArgs,
    /// Fixtures files (YAML or JSON), each with a list of `cases`.
    #[arg(value_name = "FIXTURES.yaml", required = true)]
    fixtures: Vec<PathBuf>,
    /// Time limit per evaluation, e.g. 500ms, 2s (at most 1m: longer is capped).
    #[arg(long, value_name = "DURATION", default_value = "1s", value_parser = humantime::parse_duration)]
    timeout: Duration,
    /// Memory limit per evaluation, e.g. 64MiB.
    #[arg(long, value_name = "SIZE", default_value = "64MiB", value_parser = preflight_engine::parse_size)]
    memory_limit: usize,
    #[command(flatten)]
    grant: GrantArgs,
}

/// What a check may reach over HTTP from the laptop: the operator's `http` key in a file, or allow-list
/// patterns on the command line. Lookups are never granted (there is no cluster).
#[derive(Debug, Args)]
struct GrantArgs {
    /// Let the check send HTTP requests to destinations matching this URL pattern
    /// (`scheme://host[:port|:*][/path-prefix]`, host may be `*.domain`); repeatable. Nothing is allowed
    /// without it (or --http-grant), as in the operator without an `http` key.
    #[arg(long, value_name = "URL-PATTERN", value_parser = preflight_engine::UrlPattern::parse)]
    allow_http: Vec<preflight_engine::UrlPattern>,
    /// Time limit of one outbound HTTP request under --allow-http, e.g. 2s.
    #[arg(long, value_name = "DURATION", default_value = "2s", value_parser = humantime::parse_duration)]
    http_timeout: Duration,
    /// Grant outbound HTTP exactly as the check ConfigMap's `http` key would: a file holding that key's
    /// YAML (allow-list, private networks, timeout, response and request caps, credentials and the
    /// origins they go to). Replaces --allow-http.
    #[arg(long, value_name = "FILE", conflicts_with = "allow_http")]
    http_grant: Option<PathBuf>,
    /// The Secret the grant's credentials are read from, as a manifest file (`kubectl create secret
    /// generic NAME --from-literal=KEY=VALUE --dry-run=client -o yaml`).
    #[arg(long, value_name = "FILE", requires = "http_grant")]
    secret: Option<PathBuf>,
}

#[derive(Debug, Args)]
struct VersionArgs {
    /// Output format.
    #[arg(short = 'o', long, value_enum, default_value_t = Format::Text)]
    output: Format,
}

/// The check, the object, and the limits: shared by `run` and `bench`.
#[derive(Debug, Args)]
struct Evaluate {
    /// The check component: a .wasm file, or `oci://REGISTRY/REPOSITORY[:TAG][@sha256:DIGEST]`.
    #[arg(long, value_name = "FILE.wasm|oci://REF")]
    check: String,
    #[command(flatten)]
    registry: RegistryArgs,
    /// The object to check, as YAML or JSON.
    #[arg(long, value_name = "FILE")]
    object: PathBuf,
    /// The check's configuration, as YAML or JSON.
    #[arg(long, value_name = "FILE")]
    config: Option<PathBuf>,
    /// Time limit per evaluation, e.g. 500ms, 2s (at most 1m: longer is capped).
    #[arg(long, value_name = "DURATION", default_value = "1s", value_parser = humantime::parse_duration)]
    timeout: Duration,
    /// Memory limit per evaluation, e.g. 64MiB.
    #[arg(long, value_name = "SIZE", default_value = "64MiB", value_parser = preflight_engine::parse_size)]
    memory_limit: usize,
    /// Cap on the size of the result's reason + message + error, e.g. 64KiB.
    #[arg(long, value_name = "SIZE", default_value = "64KiB", value_parser = preflight_engine::parse_size)]
    max_result: usize,
    /// The time the check sees as "now", RFC 3339 (default: the current time).
    #[arg(long, value_name = "TIME", value_parser = humantime::parse_rfc3339_weak)]
    now: Option<std::time::SystemTime>,
    #[command(flatten)]
    grant: GrantArgs,
    /// Send the whole object even to a check that declares the parts it reads (by default it gets only
    /// those, as from the operator): to see what the declaration saves, or what it leaves out.
    #[arg(long)]
    whole_object: bool,
}

#[derive(Debug, Args)]
struct RunArgs {
    #[command(flatten)]
    evaluate: Evaluate,
    /// Output format.
    #[arg(short = 'o', long, value_enum, default_value_t = Format::Text)]
    output: Format,
}

#[derive(Debug, Args)]
struct InspectArgs {
    /// The component (.wasm).
    #[arg(value_name = "FILE.wasm")]
    check: PathBuf,
    /// Output format.
    #[arg(short = 'o', long, value_enum, default_value_t = Format::Text)]
    output: Format,
}

#[derive(Debug, Args)]
struct BenchArgs {
    #[command(flatten)]
    evaluate: Evaluate,
    /// Evaluations per phase (one at a time, then concurrently).
    #[arg(long, default_value_t = 10_000, value_parser = clap::value_parser!(u32).range(1..))]
    iterations: u32,
    /// Evaluations in flight in the concurrent phase.
    #[arg(long, default_value_t = 64, value_parser = clap::value_parser!(u32).range(1..=4096))]
    concurrency: u32,
    /// Reuse instances, each for this many evaluations (`isolation: reuse` in a check ConfigMap), instead of
    /// a fresh instance per evaluation.
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..))]
    reuse: Option<u32>,
    /// Output format.
    #[arg(short = 'o', long, value_enum, default_value_t = Format::Text)]
    output: Format,
}

#[derive(Debug, Args)]
struct OperatorArgs {
    /// Namespace of the check ConfigMaps and of the leader-election Lease.
    #[arg(long, env = "POD_NAMESPACE", default_value = "preflight-system")]
    namespace: String,
    /// Look for check ConfigMaps in every namespace (needs cluster-wide read access to ConfigMaps).
    #[arg(long, env = "PREFLIGHT_ALL_NAMESPACES")]
    all_namespaces: bool,
    /// Label selector of check ConfigMaps.
    #[arg(long, env = "PREFLIGHT_CHECK_SELECTOR", default_value = preflight_operator::GATES_LABEL,
          value_parser = clap::builder::NonEmptyStringValueParser::new())]
    check_selector: String,
    /// Address of /healthz, /readyz and /metrics.
    #[arg(long, env = "PREFLIGHT_LISTEN", default_value = "0.0.0.0:8080")]
    listen: std::net::SocketAddr,
    /// Hold a Lease so that only one replica writes (`--leader-election=false` for a single local replica).
    #[arg(long, env = "PREFLIGHT_LEADER_ELECTION", default_value_t = true, action = clap::ArgAction::Set)]
    leader_election: bool,
    /// Share the gated objects with the other replicas that name the same ring, instead of electing one
    /// leader: each replica holds a Lease of its own (labelled `preflight.dev/ring=NAME`) and gates the
    /// objects that rendezvous hashing of their UID over the live replicas gives it. A replica whose
    /// Lease lapses (`--lease-duration`) has its objects taken over by the others.
    #[arg(long, env = "PREFLIGHT_SHARD_RING", value_name = "NAME",
          value_parser = clap::builder::NonEmptyStringValueParser::new())]
    shard_ring: Option<String>,
    /// Gate only the objects this label selector matches, filtered by the API server (static sharding:
    /// run one Deployment per shard, each with its own selector and `--lease-name`, e.g.
    /// `preflight.dev/shard=a`; together the selectors must cover every object).
    #[arg(long, env = "PREFLIGHT_WATCH_SELECTOR", value_name = "LABEL-SELECTOR")]
    watch_selector: Option<String>,
    /// Name of the Lease.
    #[arg(
        long,
        env = "PREFLIGHT_LEASE_NAME",
        default_value = "preflight-operator"
    )]
    lease_name: String,
    /// How long the Lease is valid without renewal: the longest takeover when a leader dies.
    #[arg(long, env = "PREFLIGHT_LEASE_DURATION", default_value = "15s", value_parser = humantime::parse_duration)]
    lease_duration: Duration,
    /// This replica's name, for the Lease and Events.
    #[arg(long, env = "POD_NAME", default_value = "preflight")]
    pod_name: String,
    /// Directory for compiled checks, kept across restarts (an emptyDir in the Deployment).
    #[arg(long, env = "PREFLIGHT_CACHE_DIR")]
    cache_dir: Option<PathBuf>,
    /// The most compiled checks the cache directory keeps, in bytes: beyond it, the least recently used
    /// go. The compiled functions checks share take at most half as much again (keep one and a half times
    /// it below the emptyDir's sizeLimit, which evicts the pod).
    #[arg(long, env = "PREFLIGHT_CACHE_MAX_SIZE", default_value = "256MiB", value_parser = preflight_engine::parse_size)]
    cache_max_size: usize,
    /// Evaluations that may run at once.
    #[arg(long, env = "PREFLIGHT_MAX_CONCURRENT_EVALUATIONS", default_value_t = 128, value_parser = clap::value_parser!(u32).range(1..=4096))]
    max_concurrent_evaluations: u32,
    /// The largest memory limit a check may be given.
    #[arg(long, env = "PREFLIGHT_MAX_MEMORY", default_value = "256MiB", value_parser = preflight_engine::parse_size)]
    max_memory: usize,
    /// Time limit of a check whose ConfigMap sets none (at most 1m: longer is capped).
    #[arg(long, env = "PREFLIGHT_DEFAULT_TIMEOUT", default_value = "1s", value_parser = humantime::parse_duration)]
    default_timeout: Duration,
    /// Memory limit of a check whose ConfigMap sets none.
    #[arg(long, env = "PREFLIGHT_DEFAULT_MEMORY_LIMIT", default_value = "64MiB", value_parser = preflight_engine::parse_size)]
    default_memory_limit: usize,
    /// How often a gated kind the API server does not serve yet is looked up again.
    #[arg(long, env = "PREFLIGHT_KIND_RETRY", default_value = "10s", value_parser = humantime::parse_duration)]
    kind_retry: Duration,
    /// On SIGTERM, how long running reconciles may take to finish before the operator exits anyway
    /// (keep it below the pod's terminationGracePeriodSeconds).
    #[arg(long, env = "PREFLIGHT_SHUTDOWN_GRACE", default_value = "10s", value_parser = humantime::parse_duration)]
    shutdown_grace: Duration,
    /// For every gated kind with a pause switch, install a MutatingAdmissionPolicy that sets the switch in
    /// the request creating an object (or changing its data), so that its controller never sees it unpaused
    /// before the checks proceed. Needs RBAC on mutatingadmissionpolicies and their bindings.
    #[arg(long, env = "PREFLIGHT_HOLD_AT_ADMISSION")]
    hold_at_admission: bool,
    #[command(flatten)]
    registries: ClusterRegistryArgs,
    /// Log format.
    #[arg(long, env = "PREFLIGHT_LOG_FORMAT", value_enum, default_value_t = Format::Json)]
    log_format: Format,
}

/// How the checks named by `source: oci://…` in check ConfigMaps are reached and verified: shared by the
/// operator and `what-if --configmap`, which reads a check as the operator does.
#[derive(Debug, Args)]
struct ClusterRegistryArgs {
    /// A registry (`host:port`) that checks named by `source: oci://…` are pulled from over plain HTTP
    /// instead of HTTPS (an in-cluster registry); repeatable, or comma-separated in the variable.
    #[arg(
        long,
        env = "PREFLIGHT_REGISTRY_PLAIN_HTTP",
        value_delimiter = ',',
        value_name = "HOST:PORT"
    )]
    registry_plain_http: Vec<String>,
    /// A PEM CA certificate trusted besides the system's for registries with a private CA; repeatable,
    /// or comma-separated in the variable.
    #[arg(
        long,
        env = "PREFLIGHT_REGISTRY_CA",
        value_delimiter = ',',
        value_name = "FILE"
    )]
    registry_ca: Vec<PathBuf>,
    /// A cosign public key (`cosign.pub`) every check must be signed with before it is compiled: a check
    /// from a registry by a cosign signature stored beside it, a check in ConfigMaps by a `cosign
    /// sign-blob` signature in its `signature` key. Repeatable (a signature by any one of them will do), or
    /// comma-separated in the variable.
    #[arg(
        long,
        env = "PREFLIGHT_VERIFY_KEY",
        value_delimiter = ',',
        value_name = "FILE"
    )]
    verify_key: Vec<PathBuf>,
}

impl Cli {
    /// Whether this command runs until it is stopped (the operator), rather than printing and exiting.
    pub fn is_long_running(&self) -> bool {
        matches!(self.command, Command::Operator(_))
    }

    /// How to log: JSON at info level for the operator (unless told otherwise), warnings as text otherwise.
    pub fn logging(&self) -> (bool, &'static str) {
        match &self.command {
            Command::Operator(args) => (args.log_format == Format::Json, "info"),
            _ => (false, "warn"),
        }
    }
}

/// How results are printed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
enum Format {
    /// Aligned text for people.
    Text,
    /// One JSON document for scripts.
    Json,
}

/// Runs the parsed command and returns the process exit status.
pub async fn execute(cli: Cli) -> u8 {
    let result = match cli.command {
        Command::Run(args) => run::run(args).await,
        Command::Inspect(args) => inspect::inspect(args),
        Command::Bench(args) => bench::bench(args).await,
        Command::Operator(args) => operator::operator(args).await,
        Command::Version(args) => Ok(version(&args)),
        Command::Test(args) => fixtures::test(args).await,
        Command::Pack(args) => pack::pack(args).await,
        Command::Scaffold(args) => scaffold::scaffold(args).map(|()| EXIT_PROCEED),
        Command::DeclareReads(args) => declare_reads::declare_reads(&args),
        Command::Componentize(args) => componentize::componentize(&args),
        Command::Snapshot(args) => snapshot::snapshot(args).await,
        Command::WhatIf(args) => what_if::what_if(args).await,
        Command::Push(args) => oci::push(args).await,
        Command::Pull(args) => oci::pull(args).await,
    };
    result.unwrap_or_else(|problem| {
        eprintln!("error: {problem}");
        problem.exit_status()
    })
}

/// `preflight version`: what a bug report or an image check needs to know about this binary.
fn version(args: &VersionArgs) -> u8 {
    let preflight = env!("CARGO_PKG_VERSION");
    let wasmtime = preflight_engine::WASMTIME_VERSION;
    let contracts = preflight_engine::contract_versions();
    match args.output {
        Format::Json => println!(
            "{:#}",
            serde_json::json!({"preflight": preflight, "wasmtime": wasmtime, "contracts": contracts})
        ),
        Format::Text => println!(
            "preflight {preflight}\nwasmtime  {wasmtime}\ncontracts preflight:check@{}",
            contracts.join(", preflight:check@")
        ),
    }
    EXIT_PROCEED
}

/// A command that could not do its job, with the exit status that says why.
#[derive(Debug, thiserror::Error)]
enum Problem {
    /// Input could not be read or parsed.
    #[error("{0}")]
    Input(String),
    /// The engine could not start.
    #[error(transparent)]
    Engine(preflight_engine::Error),
    /// The operator could not start.
    #[error(transparent)]
    Operator(preflight_operator::Error),
    /// The component is not a usable check.
    #[error(transparent)]
    Unusable(preflight_engine::Error),
    /// The check failed during a benchmark.
    #[error("{0}")]
    CheckFailed(String),
}

impl Problem {
    fn exit_status(&self) -> u8 {
        match self {
            Self::Input(_) | Self::Engine(_) | Self::Operator(_) => EXIT_USAGE,
            Self::Unusable(_) => EXIT_UNUSABLE,
            Self::CheckFailed(_) => EXIT_FAILED,
        }
    }
}
