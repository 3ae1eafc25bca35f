//! The per-evaluation state of a store: the memory budget, the check's log lines and stderr, the WASI
//! context (a wall clock that reads the request's time), and what the check was granted (outbound HTTP,
//! lookups) with what the host refused it.

use crate::bindings::{v0_1, v0_2};
use crate::cluster::{Grants, ObjectKind};
use crate::outbound_http::OutboundHttp;
use crate::outcome::{CheckOutcome, Evaluation, LogLevel, LogLine};
use crate::request::Target;
use crate::stderr_tail::StderrTail;
use rand::{SeedableRng, rngs::StdRng};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant, SystemTime};
use wasmtime::component::ResourceTable;
use wasmtime_wasi::{HostMonotonicClock, HostWallClock, WasiCtx, WasiCtxView, WasiView};
use wasmtime_wasi_http::{WasiHttpCtx, WasiHttpCtxView, WasiHttpView};

/// How many bytes of log lines one evaluation may keep; further lines are counted and dropped.
pub(crate) const LOG_BYTES_CAP: usize = 16 << 10;
/// Largest table a check may grow (elements).
const TABLE_ELEMENTS_CAP: usize = 100_000;

/// The check asked for more memory than its budget. Raised from the limiter, so it traps the guest.
#[derive(Debug, thiserror::Error)]
#[error("the check asked for {desired} bytes of linear memory; its limit is {limit} bytes")]
pub(crate) struct MemoryLimitExceeded {
    pub desired: usize,
    pub limit: usize,
}

/// The check asked for a table larger than the host allows.
#[derive(Debug, thiserror::Error)]
#[error("the check asked for a table of {desired} elements; the limit is {TABLE_ELEMENTS_CAP}")]
pub(crate) struct TableLimitExceeded {
    pub desired: usize,
}

/// Data of one store: created for one evaluation and dropped with it, or, for a reused instance, begun
/// anew for each evaluation it serves ([`GuestState::begin`]).
pub(crate) struct GuestState {
    memory_limit: usize,
    /// The request's time: what `wasi:clocks/wall-clock` reads, so that an evaluation replays exactly.
    now: SystemTime,
    /// Built on first use: most Rust checks never touch WASI, and building it costs more than an instance.
    /// With it, the cell its wall clock reads, which [`GuestState::begin`] moves to each request's time (the
    /// context outlives one evaluation of a reused instance).
    wasi: Option<(WasiCtx, Arc<Mutex<SystemTime>>)>,
    /// Whether WASI's randomness and monotonic clock are replaced by deterministic ones (see
    /// [`GuestState::make_reproducible`]).
    reproducible: bool,
    table: ResourceTable,
    pub logs: Vec<LogLine>,
    pub logs_dropped: usize,
    log_bytes: usize,
    pub stderr: StderrTail,
    http: WasiHttpCtx,
    outbound_http: OutboundHttp,
    lookups: Lookups,
    /// Requests and lookups refused or failed, each naming its destination (shared with HTTP tasks).
    refusals: Arc<Mutex<Vec<String>>>,
}

/// The lookups granted to one evaluation (the service and the gated object they are made for; `None`
/// when not granted) and its budget.
struct Lookups {
    granted: Option<(Arc<dyn crate::ClusterLookup>, Target)>,
    budget: u32,
    left: u32,
}

impl Lookups {
    fn new(grants: &Grants, target: &Target) -> Self {
        let budget = grants.lookups_per_evaluation;
        Self {
            // The target is copied only for a check that may look up: the evaluation path of the others
            // allocates nothing for lookups.
            granted: grants
                .cluster
                .as_ref()
                .map(|cluster| (Arc::clone(cluster), target.clone())),
            budget,
            left: budget,
        }
    }
}

impl GuestState {
    pub fn new(memory_limit: usize, now: SystemTime, grants: &Grants, target: &Target) -> Self {
        let refusals = Arc::new(Mutex::new(Vec::new()));
        Self {
            memory_limit,
            now,
            wasi: None,
            reproducible: false,
            table: ResourceTable::new(),
            logs: Vec::new(),
            logs_dropped: 0,
            log_bytes: 0,
            stderr: StderrTail::default(),
            http: WasiHttpCtx::new(),
            outbound_http: OutboundHttp::new(grants.http.clone(), Arc::clone(&refusals)),
            lookups: Lookups::new(grants, target),
            refusals,
        }
    }

    /// Makes what this store's instance reads from WASI the same on every run: randomness from a generator
    /// with a fixed seed and a monotonic clock that starts at zero and advances one nanosecond per reading
    /// (the wall clock is already the request's `now`). For pre-initialisation, whose snapshot keeps what the
    /// start read (Go's runtime draws its seeds and reads the clock): the same build then gives the same
    /// bytes, and the times a snapshot holds are earlier than any an instance of it reads later.
    /// Call before the instance first uses WASI.
    pub fn make_reproducible(&mut self) {
        self.reproducible = true;
    }

    /// Outbound requests of this evaluation must be answered by `answer_by`.
    pub fn answer_requests_by(&mut self, answer_by: Instant) {
        self.outbound_http.answer_by(answer_by);
    }

    /// Starts another evaluation in a reused instance: the evaluation's memory limit (for growth from now
    /// on), the request's time and grants, and empty logs, stderr tail and refusals. What the instance itself
    /// holds (its memory, WASI and resource state) stays.
    pub fn begin(
        &mut self,
        memory_limit: usize,
        now: SystemTime,
        grants: &Grants,
        target: &Target,
    ) {
        self.memory_limit = memory_limit;
        self.now = now;
        if let Some((_, clock)) = &self.wasi {
            *clock.lock().unwrap_or_else(PoisonError::into_inner) = now;
        }
        self.logs.clear();
        self.logs_dropped = 0;
        self.log_bytes = 0;
        self.stderr.clear();
        self.refusals = Arc::new(Mutex::new(Vec::new()));
        self.outbound_http = OutboundHttp::new(grants.http.clone(), Arc::clone(&self.refusals));
        self.lookups = Lookups::new(grants, target);
    }

    /// The evaluation that ended with `outcome` after `duration`, with the lines the check logged and what
    /// the host refused it (both taken: a reused instance begins its next evaluation without them).
    pub fn evaluation(&mut self, outcome: CheckOutcome, duration: Duration) -> Evaluation {
        Evaluation {
            outcome,
            duration,
            refusals: self.take_refusals(),
            logs: std::mem::take(&mut self.logs),
            logs_dropped: self.logs_dropped,
        }
    }

    /// What the host refused the check or could not complete for it, in order.
    fn take_refusals(&self) -> Vec<String> {
        std::mem::take(&mut *self.refusals.lock().unwrap_or_else(PoisonError::into_inner))
    }

    fn refuse(&self, refusal: String) -> String {
        self.refusals
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .push(refusal.clone());
        refusal
    }

    /// The lookup service and the gated object, after taking one call from the budget; an error naming
    /// the refusal otherwise.
    fn lookup_turn(
        &mut self,
        what: &str,
    ) -> Result<(Arc<dyn crate::ClusterLookup>, Target), String> {
        let Some(granted) = self.lookups.granted.clone() else {
            return Err(self.refuse(format!(
                "lookup {what}: lookups are not granted to this check (its ConfigMap has no `lookups` key)"
            )));
        };
        if self.lookups.left == 0 {
            return Err(self.refuse(format!(
                "lookup {what}: more than {} lookups in one evaluation",
                self.lookups.budget
            )));
        }
        self.lookups.left -= 1;
        Ok(granted)
    }

    fn record_lookup_error<T>(&self, what: &str, answer: Result<T, String>) -> Result<T, String> {
        answer.map_err(|error| self.refuse(format!("lookup {what}: {error}")))
    }

    /// The last line logged at error level: usually why a check trapped (the Rust SDK logs panics there).
    pub fn last_error_line(&self) -> Option<&str> {
        self.logs
            .iter()
            .rev()
            .find(|line| line.level == LogLevel::Error)
            .map(|line| line.message.as_str())
    }
}

impl wasmtime::ResourceLimiter for GuestState {
    fn memory_growing(
        &mut self,
        _current: usize,
        desired: usize,
        _maximum: Option<usize>,
    ) -> wasmtime::Result<bool> {
        if desired > self.memory_limit {
            return Err(wasmtime::Error::new(MemoryLimitExceeded {
                desired,
                limit: self.memory_limit,
            }));
        }
        Ok(true)
    }

    fn table_growing(
        &mut self,
        _current: usize,
        desired: usize,
        _maximum: Option<usize>,
    ) -> wasmtime::Result<bool> {
        if desired > TABLE_ELEMENTS_CAP {
            return Err(wasmtime::Error::new(TableLimitExceeded { desired }));
        }
        Ok(true)
    }
}

impl GuestState {
    fn log(&mut self, level: LogLevel, message: String) {
        if self.log_bytes + message.len() > LOG_BYTES_CAP {
            self.logs_dropped += 1;
            return;
        }
        self.log_bytes += message.len();
        self.logs.push(LogLine { level, message });
    }
}

/// Implements contract module `$version`'s `log` interface (each version's bindings have their own level type).
macro_rules! log_host {
    ($version:ident) => {
        impl $version::preflight::check::log::Host for GuestState {
            fn log(&mut self, level: $version::Level, message: String) {
                use $version::Level;
                let level = match level {
                    Level::Trace => LogLevel::Trace,
                    Level::Debug => LogLevel::Debug,
                    Level::Info => LogLevel::Info,
                    Level::Warn => LogLevel::Warn,
                    Level::Error => LogLevel::Error,
                };
                GuestState::log(self, level, message);
            }
        }

        impl $version::preflight::check::types::Host for GuestState {}
    };
}

log_host!(v0_1);
log_host!(v0_2);

impl v0_2::preflight::check::cluster::Host for GuestState {
    async fn get(
        &mut self,
        kind: v0_2::ObjectKind,
        namespace: Option<String>,
        name: String,
    ) -> Result<Option<String>, String> {
        let kind = object_kind(kind);
        let what = format!("get {kind} {}{name}", shown_namespace(namespace.as_deref()));
        let (cluster, target) = self.lookup_turn(&what)?;
        let answer = cluster.get(&target, kind, namespace, name).await;
        self.record_lookup_error(&what, answer)
    }

    async fn list(
        &mut self,
        kind: v0_2::ObjectKind,
        namespace: Option<String>,
        label_selector: String,
    ) -> Result<Vec<String>, String> {
        let kind = object_kind(kind);
        let what = format!(
            "list {kind} {}selector {label_selector:?}",
            shown_namespace(namespace.as_deref())
        );
        let (cluster, target) = self.lookup_turn(&what)?;
        let answer = cluster.list(&target, kind, namespace, label_selector).await;
        self.record_lookup_error(&what, answer)
    }
}

fn object_kind(kind: v0_2::ObjectKind) -> ObjectKind {
    ObjectKind {
        group: kind.group,
        version: kind.version,
        kind: kind.kind,
    }
}

fn shown_namespace(namespace: Option<&str>) -> String {
    namespace
        .map(|namespace| format!("{namespace}/"))
        .unwrap_or_default()
}

impl WasiHttpView for GuestState {
    fn http(&mut self) -> WasiHttpCtxView<'_> {
        WasiHttpCtxView {
            ctx: &mut self.http,
            table: &mut self.table,
            hooks: &mut self.outbound_http,
        }
    }
}

impl WasiView for GuestState {
    /// The context is locked down: no preopened directory, no environment, no arguments, closed stdin,
    /// discarded stdout, stderr kept only in a small tail (quoted when the check traps), no TCP, UDP or
    /// name lookup and every socket address denied, and a wall clock stopped at the request's time.
    fn ctx(&mut self) -> WasiCtxView<'_> {
        let (now, stderr, reproducible) = (self.now, &self.stderr, self.reproducible);
        let (ctx, _) = self.wasi.get_or_insert_with(|| {
            let clock = Arc::new(Mutex::new(now));
            let mut builder = WasiCtx::builder();
            builder
                .wall_clock(StoppedWallClock(Arc::clone(&clock)))
                .stderr(stderr.clone())
                .allow_tcp(false)
                .allow_udp(false)
                .allow_ip_name_lookup(false);
            if reproducible {
                builder
                    .secure_random(StdRng::seed_from_u64(REPRODUCIBLE_SEED))
                    .insecure_random(StdRng::seed_from_u64(REPRODUCIBLE_SEED))
                    .insecure_random_seed(u128::from(REPRODUCIBLE_SEED))
                    .monotonic_clock(SteppingMonotonicClock::default());
            }
            (builder.build(), clock)
        });
        WasiCtxView {
            ctx,
            table: &mut self.table,
        }
    }
}

/// The seed of a reproducible context's generators: any fixed value.
const REPRODUCIBLE_SEED: u64 = 0x7072_6566_6c69_6768; // "prefligh" in ASCII

/// A monotonic clock for a reproducible context: zero, then one nanosecond more at each reading, so that
/// a runtime waiting for time to pass still sees it pass.
#[derive(Default)]
struct SteppingMonotonicClock(AtomicU64);

impl HostMonotonicClock for SteppingMonotonicClock {
    fn resolution(&self) -> u64 {
        1
    }

    fn now(&self) -> u64 {
        self.0.fetch_add(1, Ordering::Relaxed)
    }
}

/// A wall clock that always reads one instant: the request's `now`. A check that asks the clock for the
/// date (as most languages' date libraries do) sees the same time as the request carries, so an
/// evaluation replayed with `--now` is exact. Durations are measured with the monotonic clock, which is real.
struct StoppedWallClock(Arc<Mutex<SystemTime>>);

impl HostWallClock for StoppedWallClock {
    fn resolution(&self) -> Duration {
        Duration::from_nanos(1)
    }

    fn now(&self) -> Duration {
        self.0
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .duration_since(SystemTime::UNIX_EPOCH)
            .unwrap_or_default()
    }
}
