//! The engine: validates and compiles checks (once per digest), and runs each evaluation in a fresh
//! instance from a pooling allocator, under a time, memory and result-size budget.

use crate::bindings::same_minor;
use crate::bindings::{v0_1, v0_2};
use crate::check::{Check, Contract};
use crate::cluster::Grants;
use crate::digest::Digest;
use crate::disk_cache::DiskCache;
use crate::error::{ComponentProblem, Error};
use crate::failure::{DeadlineExceeded, classify, hostcall_budget, within};
use crate::footprint::{Footprint, SlotShare};
use crate::function_cache::FunctionCache;
use crate::guest_state::GuestState;
use crate::imports;
use crate::instance::Bound;
use crate::limits::{Isolation, Limits};
use crate::outcome::{Evaluation, Failure, FailureKind};
use crate::pre_initialize;
use crate::projection::Projection;
use crate::request::Request;
use crate::result::verdict_of;
use crate::reuse::{Warm, WarmKeyRef, WarmPool};
use crate::validate::{self, Interface};
use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, Weak};
use std::thread::JoinHandle;
use std::time::{Duration, Instant, SystemTime};
use tokio::sync::OwnedSemaphorePermit;
use wasmtime::component::{Component, Linker};
use wasmtime::{
    Config, Enabled, InstanceAllocationStrategy, PoolingAllocationConfig, Store, UpdateDeadline,
};

/// Most core module instances one check may have.
const MAX_CORE_INSTANCES_PER_CHECK: u32 = 64;
/// Tables the pool holds per evaluation slot.
const TABLES_PER_SLOT: u32 = 4;
/// The budget of the compiled functions checks share, as a part of the precompiled checks' (one over this).
const FUNCTION_CACHE_SHARE: u64 = 2;
/// How the engine is sized. The defaults fit an operator on a small node.
#[derive(Debug, Clone)]
pub struct EngineConfig {
    /// Evaluations that may run at once (pool slots); more wait for a free slot.
    pub max_concurrent_evaluations: u32,
    /// Linear memories reserved per evaluation slot (the Rust checks here have 1). A component with more
    /// memories than this cannot be instantiated; the default, 2, leaves room for a second one.
    pub memories_per_evaluation: u32,
    /// The largest memory limit any check may be given, in bytes: the size of a pool slot.
    pub max_memory_bytes: usize,
    /// How often the epoch advances: the granularity of timeouts and of yielding to other tasks.
    pub epoch_tick: Duration,
    /// Where to keep precompiled checks across restarts, and the compiled functions checks share (a new
    /// Python check compiles in a third to a half of the time when another was compiled here before);
    /// `None` keeps precompiled checks in memory only and shares nothing.
    pub cache_dir: Option<PathBuf>,
    /// The most bytes of precompiled checks `cache_dir` holds: beyond it, the least recently used go (a
    /// Python check compiles to 35 MiB, and every new version of a check adds a file). The compiled functions
    /// checks share (one file beside them) take at most half as much again.
    pub cache_max_bytes: u64,
}

impl Default for EngineConfig {
    fn default() -> Self {
        Self {
            max_concurrent_evaluations: 128,
            memories_per_evaluation: 2,
            max_memory_bytes: 256 << 20,
            epoch_tick: Duration::from_millis(10),
            cache_dir: None,
            cache_max_bytes: 1 << 30,
        }
    }
}

/// Loads and runs checks. Create one per process and share it (`Arc<Engine>`).
pub struct Engine {
    engine: wasmtime::Engine,
    linker: Linker<GuestState>,
    /// One permit per evaluation the pooling allocator has room for (idle reused instances keep theirs).
    slots: Arc<tokio::sync::Semaphore>,
    /// What the pool holds per slot, and how many slots: a check takes as many as its footprint fills.
    slot_share: SlotShare,
    pool_slots: u32,
    /// Idle instances of checks whose isolation is [`Isolation::Reuse`].
    warm: WarmPool,
    max_memory_bytes: usize,
    loaded: Mutex<HashMap<Digest, Weak<Check>>>,
    /// One lock per digest being compiled, so that concurrent loads of the same bytes compile once.
    compiling: Mutex<HashMap<Digest, Arc<Mutex<()>>>>,
    disk: Option<DiskCache>,
    _ticker: EpochTicker,
}

/// Whether the pooling allocator may reset memory with Linux's `PAGEMAP_SCAN`, given the text of
/// `/proc/swaps` (`None`: unreadable). wasmtime 48.0.8's scan only resets dirty pages that are present: a
/// dirty page the kernel swapped out is neither reset nor decommitted, so the next instance in that slot
/// could read the previous one's data (wasmtime PR #14357, open). It is used only when no swap area is
/// active; the choice is logged.
fn pagemap_scan_for(swaps: Option<&str>) -> Enabled {
    let swap_areas = swaps.map(|text| {
        text.lines()
            .skip(1)
            .filter(|line| !line.trim().is_empty())
            .count()
    });
    match swap_areas {
        Some(0) => {
            tracing::info!("no swap area: instance memory is reset with PAGEMAP_SCAN");
            Enabled::Auto
        }
        Some(areas) => {
            tracing::info!(
                areas,
                "swap is enabled: PAGEMAP_SCAN is not used (a swapped-out page would escape the reset)"
            );
            Enabled::No
        }
        None => {
            tracing::info!("/proc/swaps is unreadable: PAGEMAP_SCAN is not used");
            Enabled::No
        }
    }
}

/// Arms `store` for one call under `limits`, started at `started`: the host-call budget, and an epoch
/// deadline that yields to other tasks every tick and traps at the deadline it returns.
fn arm(store: &mut Store<GuestState>, limits: &Limits, started: Instant) -> Instant {
    store.set_hostcall_fuel(hostcall_budget(limits));
    let timeout = limits.effective_timeout();
    let deadline = started + timeout;
    store.data_mut().answer_requests_by(deadline - timeout / 10);
    store.set_epoch_deadline(1);
    store.epoch_deadline_callback(move |_| {
        if Instant::now() >= deadline {
            Err(wasmtime::Error::new(DeadlineExceeded(timeout)))
        } else {
            // tokio runs a task woken by a plain `Yield` next, on the same worker; `yield_now` puts it
            // behind the other ready tasks and the I/O driver.
            Ok(UpdateDeadline::YieldCustom(
                1,
                Box::pin(tokio::task::yield_now()),
            ))
        }
    });
    deadline
}

impl Engine {
    /// Configures wasmtime (component model, pooling allocator, epoch interruption) and starts the epoch ticker.
    pub fn new(config: EngineConfig) -> Result<Self, Error> {
        let slots = config.max_concurrent_evaluations.max(1);
        // A Rust check has 5 core instances (18 built for wasm32-wasip2); componentize-py's output has 38
        // (CPython, its libc, the WASI stubs and the adapters between them), so a pool sized for one
        // evaluation still runs one. A check that needs more than a slot's share takes several slots
        // (`Footprint`).
        let core_instances = (slots * 8).max(MAX_CORE_INSTANCES_PER_CHECK);
        let slot_share = SlotShare {
            core_instances: core_instances / slots,
            memories: config.memories_per_evaluation.max(1),
            tables: TABLES_PER_SLOT,
        };
        let mut pool = PoolingAllocationConfig::default();
        pool.total_component_instances(slots)
            .total_core_instances(core_instances)
            .max_core_instances_per_component(MAX_CORE_INSTANCES_PER_CHECK)
            .total_memories(slots * slot_share.memories)
            .total_tables(slots * TABLES_PER_SLOT)
            .total_stacks(slots)
            .max_memory_size(config.max_memory_bytes)
            // Reuse of pool slots dominates the cost of a fresh instance under load: keep a little memory
            // resident instead of returning it to the kernel, and batch the rest (see docs/performance.md).
            // A slot waiting in a batch cannot be allocated, so a batch holds at most an eighth of the pool:
            // batches of 16 in a pool of 2 slots failed one evaluation in a hundred for want of a memory.
            .linear_memory_keep_resident(4 << 20)
            .table_keep_resident(64 << 10)
            .async_stack_keep_resident(256 << 10)
            .decommit_batch_size((slots as usize / 8).clamp(1, 16))
            .pagemap_scan(pagemap_scan_for(
                std::fs::read_to_string("/proc/swaps").ok().as_deref(),
            ));
        let mut wasm = Config::new();
        wasm.wasm_component_model(true)
            .concurrency_support(false)
            .epoch_interruption(true)
            // No `.eh_frame` for the system's unwinder: wasmtime walks wasm frames itself (traps, backtraces)
            // and catches a host function's panic before it reaches them. musl's unwinder (the image's binary)
            // registers each function's entry apart and removes each with a scan of all of them: `preflight
            // run` of a kept Python check took 0.3-0.5 s of CPU with the tables, 0.03 s without
            // (docs/performance.md, "No native unwind tables").
            .native_unwind_info(false)
            .allocation_strategy(InstanceAllocationStrategy::Pooling(pool));
        if let Some(dir) = &config.cache_dir {
            let functions = FunctionCache::new(dir, config.cache_max_bytes / FUNCTION_CACHE_SHARE);
            wasm.enable_incremental_compilation(Arc::new(functions))
                .map_err(|error| Error::engine("its compiled-function cache", error))?;
        }
        let engine = wasmtime::Engine::new(&wasm)
            .map_err(|error| Error::engine("its configuration", error))?;
        let mut linker = Linker::new(&engine);
        imports::link(&mut linker).map_err(|error| Error::engine("linking the imports", error))?;
        let disk = config
            .cache_dir
            .as_deref()
            .map(|dir| DiskCache::open(dir, &engine, config.cache_max_bytes))
            .transpose()?;
        Ok(Self {
            _ticker: EpochTicker::start(engine.clone(), config.epoch_tick),
            engine,
            linker,
            slots: Arc::new(tokio::sync::Semaphore::new(slots as usize)),
            slot_share,
            pool_slots: slots,
            warm: WarmPool::new((slots as usize / 2).max(1)),
            max_memory_bytes: config.max_memory_bytes,
            loaded: Mutex::new(HashMap::new()),
            compiling: Mutex::new(HashMap::new()),
            disk,
        })
    }

    /// The largest memory limit an evaluation gets ([`EngineConfig::max_memory_bytes`]): a larger
    /// `limits.memory_bytes` is lowered to it.
    pub fn max_memory_bytes(&self) -> usize {
        self.max_memory_bytes
    }

    /// Validates, compiles and pre-instantiates a component. CPU-heavy on a cache miss (milliseconds to
    /// seconds): call it from a blocking thread, never on the evaluation path. The same bytes loaded twice
    /// while the first [`Check`] is alive yield the same `Arc`, and the same bytes loaded by several threads
    /// at once are compiled once (the others wait for it).
    pub fn load(&self, bytes: &[u8]) -> Result<Arc<Check>, Error> {
        let digest = Digest::of(bytes);
        if let Some(check) = self.loaded().get(&digest).and_then(Weak::upgrade) {
            return Ok(check);
        }
        let turn = self.compiling().entry(digest).or_default().clone();
        let _turn = turn
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if let Some(check) = self.loaded().get(&digest).and_then(Weak::upgrade) {
            return Ok(check);
        }
        let loaded = self.load_uncached(bytes, digest);
        self.compiling().remove(&digest);
        loaded
    }

    fn load_uncached(&self, bytes: &[u8], digest: Digest) -> Result<Arc<Check>, Error> {
        validate::check_header(bytes)?;
        let component = self.compile(bytes, digest)?;
        let interface = Interface::of(&component, &self.engine);
        let contract_version = interface.check_contract(&component, &self.engine)?;
        // After compiling: bytes that are not a component at all are told so, not that a section is unreadable.
        let projection = Projection::declared_in(bytes)?;
        let slots = Footprint::of(bytes, &component).slots(self.slot_share, self.pool_slots);
        let instance_pre = self.linker.instantiate_pre(&component).map_err(|error| {
            Error::invalid_because(
                ComponentProblem::Imports,
                "its imports do not match the host's",
                error,
            )
        })?;
        let mismatch = |error: wasmtime::Error| {
            Error::invalid_because(
                ComponentProblem::Contract,
                &format!("its exports do not match preflight:check@{contract_version}"),
                error,
            )
        };
        let contract = if same_minor(&contract_version, v0_1::CONTRACT_VERSION) {
            Contract::V0_1(v0_1::PreflightCheckPre::new(instance_pre).map_err(mismatch)?)
        } else {
            let configure = component.get_export_index(None, v0_2::CONFIGURE_EXPORT);
            let validate_config = configure.and_then(|configure| {
                component.get_export_index(Some(&configure), v0_2::VALIDATE_CONFIG_FUNCTION)
            });
            if configure.is_some() && validate_config.is_none() {
                return Err(Error::invalid(
                    ComponentProblem::Contract,
                    format!(
                        "its {} export has no `{}` function",
                        v0_2::CONFIGURE_EXPORT,
                        v0_2::VALIDATE_CONFIG_FUNCTION
                    ),
                ));
            }
            Contract::V0_2 {
                pre: v0_2::PreflightCheckPre::new(instance_pre).map_err(mismatch)?,
                validate_config,
            }
        };
        let check = Arc::new(
            Check::new(
                contract,
                digest,
                bytes.len(),
                &contract_version,
                interface.imports,
                interface.exports,
                projection,
            )
            .taking_slots(slots),
        );
        let mut loaded = self.loaded();
        loaded.retain(|_, check| check.strong_count() > 0);
        loaded.insert(digest, Arc::downgrade(&check));
        Ok(check)
    }

    /// Runs `check` on `request` in a fresh instance with nothing granted: every outbound request and
    /// lookup is refused. See [`Engine::evaluate_with`].
    pub async fn evaluate(&self, check: &Check, request: &Request, limits: &Limits) -> Evaluation {
        self.evaluate_with(check, request, limits, &Grants::default())
            .await
    }

    /// Runs `check` on `request` in a fresh instance, with `grants` (outbound HTTP, lookups). Never fails
    /// and never panics on anything the check does: every failure is classified in the returned
    /// [`Evaluation`], and what the host refused the check is listed in it. `limits.memory_bytes` is
    /// capped at the engine's [`EngineConfig::max_memory_bytes`].
    ///
    /// `limits.timeout` is wall-clock time for the whole evaluation, from instantiation to the result, host
    /// calls included: a check blocked in a host call (a sleep, and any future I/O import) is cut off at
    /// its deadline like one that computes. While it computes, the check yields to other tasks every epoch
    /// tick through `tokio::task::yield_now`, so that checks spinning on every worker thread cannot starve
    /// the rest of the process. Waiting for a free pool slot does not count against the limit.
    pub async fn evaluate_with(
        &self,
        check: &Check,
        request: &Request,
        limits: &Limits,
        grants: &Grants,
    ) -> Evaluation {
        if let Isolation::Reuse { max_uses } = limits.isolation {
            return self
                .evaluate_reusing(check, request, limits, grants, max_uses)
                .await;
        }
        let _slot = self.slots(check.slots).await;
        let started = Instant::now();
        let mut store = self.new_store(request, limits, grants);
        let deadline = arm(&mut store, limits, started);
        let run = async {
            let bound = Bound::instantiate(&check.contract, &mut store).await?;
            bound.call(&mut store, request).await
        };
        let result = within(deadline, limits, run).await;
        let duration = started.elapsed();
        let outcome = match result {
            Ok(result) => verdict_of(result, limits),
            Err(error) => Err(classify(&error, store.data(), limits)),
        };
        store.data_mut().evaluation(outcome, duration)
    }

    /// [`Engine::evaluate_with`] for [`Isolation::Reuse`]: an idle instance of the same check, configuration,
    /// namespace, kind and grant holder when there is one (else a new one), kept afterwards for at most `max_uses` evaluations
    /// unless the evaluation failed in any way but the check's own error.
    async fn evaluate_reusing(
        &self,
        check: &Check,
        request: &Request,
        limits: &Limits,
        grants: &Grants,
        max_uses: u32,
    ) -> Evaluation {
        let wanted = WarmKeyRef::of(check.digest(), request, &grants.holder);
        let (key, mut store, bound, uses, slot) = match self.warm.take(&wanted) {
            Some((key, mut warm)) => {
                warm.store.data_mut().begin(
                    limits.memory_bytes.min(self.max_memory_bytes),
                    request.now,
                    grants,
                    &request.target,
                );
                (key, warm.store, Some(warm.bound), warm.uses, warm.slot)
            }
            None => {
                let slot = self.slots(check.slots).await;
                let store = self.new_store(request, limits, grants);
                (wanted.to_owned_key(), store, None, 0, slot)
            }
        };
        let started = Instant::now();
        let deadline = arm(&mut store, limits, started);
        let run = async {
            let bound = match bound {
                Some(bound) => bound,
                None => Bound::instantiate(&check.contract, &mut store).await?,
            };
            let result = bound.call(&mut store, request).await?;
            wasmtime::Result::Ok((bound, result))
        };
        let result = within(deadline, limits, run).await;
        let duration = started.elapsed();
        let (outcome, healthy) = match result {
            Ok((bound, result)) => {
                let outcome = verdict_of(result, limits);
                let healthy = match &outcome {
                    Ok(_) => true,
                    Err(failure) => failure.kind == FailureKind::CheckError,
                };
                (outcome, healthy.then_some(bound))
            }
            Err(error) => (Err(classify(&error, store.data(), limits)), None),
        };
        let evaluation = store.data_mut().evaluation(outcome, duration);
        if let Some(bound) = healthy
            && uses + 1 < max_uses
        {
            let uses = uses + 1;
            self.warm.put(
                key,
                Warm {
                    store,
                    bound,
                    uses,
                    slot,
                },
            );
        }
        evaluation
    }

    /// `count` pool slots, for one instance of a check (one, or more for a check whose instance needs more
    /// than a slot's share of the pool: `Check::slots`). When they are not free, idle reused instances are
    /// retired, one at a time, to make room before waiting: idle instances never keep an evaluation waiting.
    /// (The semaphore is never closed, so acquiring only waits.)
    async fn slots(&self, count: u32) -> Option<OwnedSemaphorePermit> {
        loop {
            if let Ok(slot) = Arc::clone(&self.slots).try_acquire_many_owned(count) {
                return Some(slot);
            }
            if !self.warm.evict_one() {
                break;
            }
        }
        Arc::clone(&self.slots).acquire_many_owned(count).await.ok()
    }

    /// Calls the check's `configure.validate-config` on `config` (JSON), in a fresh instance under `limits`
    /// with nothing granted. `Ok` when the check accepts it or has no such export (a 0.1 check, or a 0.2
    /// check without it); otherwise the rejection, of kind [`FailureKind::InvalidConfig`] with the check's
    /// message, or how the call failed (a trap, a timeout).
    pub async fn validate_config(
        &self,
        check: &Check,
        config: &str,
        limits: &Limits,
    ) -> Result<(), Failure> {
        let Contract::V0_2 {
            pre,
            validate_config: Some(function),
        } = &check.contract
        else {
            return Ok(());
        };
        let _slot = self.slots(check.slots).await;
        let started = Instant::now();
        let request = Request {
            object: String::new(),
            config: config.to_owned(),
            target: crate::Target::default(),
            now: SystemTime::now(),
        };
        let mut store = self.new_store(&request, limits, &Grants::default());
        let deadline = arm(&mut store, limits, started);
        let run = async {
            let instance = pre.instance_pre().instantiate_async(&mut store).await?;
            let validate =
                instance.get_typed_func::<(&str,), (Result<(), String>,)>(&mut store, function)?;
            let (verdict,) = validate.call_async(&mut store, (config,)).await?;
            wasmtime::Result::Ok(verdict)
        };
        let result = within(deadline, limits, run).await;
        match result {
            Ok(Ok(())) => Ok(()),
            Ok(Err(rejection)) => {
                let shown: String = rejection.chars().take(limits.max_result_bytes).collect();
                Err(Failure::new(FailureKind::InvalidConfig, shown))
            }
            Err(error) => Err(classify(&error, store.data(), limits)),
        }
    }

    /// Runs a component's initialisation ([`INIT_EXPORT`](crate::INIT_EXPORT), after its own start) once,
    /// in an instance under `limits` with nothing granted, and returns the component rewritten to start
    /// from the state it left: what `preflight snapshot` writes. Fresh instances of the result skip the
    /// language runtime's start (see the `pre_initialize` module). The bytes need not be a check this host
    /// serves; load the result to find out. Errors: a component without the export, or whose start or
    /// initialisation traps, runs out of time or memory ([`ComponentProblem::Initialization`]).
    pub async fn pre_initialize(&self, bytes: &[u8], limits: &Limits) -> Result<Vec<u8>, Error> {
        validate::check_header(bytes)?;
        let (context, instrumented) = pre_initialize::instrument(bytes)?;
        let component = Component::new(&self.engine, &instrumented).map_err(|error| {
            Error::invalid_because(ComponentProblem::Compile, "it does not compile", error)
        })?;
        let init = component
            .get_export_index(None, pre_initialize::INIT_EXPORT)
            .ok_or_else(|| {
                Error::invalid(
                    ComponentProblem::Initialization,
                    format!(
                        "it does not export `{}`, the initialisation a snapshot starts from: build it \
                         for the guest world preflight:guest/check-snapshot (the Go SDK's build.sh does)",
                        pre_initialize::INIT_EXPORT
                    ),
                )
            })?;
        let slots =
            Footprint::of(&instrumented, &component).slots(self.slot_share, self.pool_slots);
        let _slot = self.slots(slots).await;
        let request = Request {
            object: String::new(),
            config: String::new(),
            target: crate::Target::default(),
            // What a start reads from the wall clock lands in the snapshot: a fixed instant, so that the same
            // build gives the same bytes.
            now: SystemTime::UNIX_EPOCH,
        };
        let mut store = self.new_store(&request, limits, &Grants::default());
        store.data_mut().make_reproducible();
        let deadline = arm(&mut store, limits, Instant::now());
        let run = async {
            let instance = self
                .linker
                .instantiate_async(&mut store, &component)
                .await?;
            let initialize = instance.get_typed_func::<(), ()>(&mut store, init)?;
            initialize.call_async(&mut store, ()).await?;
            wasmtime::Result::Ok(instance)
        };
        let instance = within(deadline, limits, run).await.map_err(|error| {
            let failure = classify(&error, store.data(), limits);
            Error::InvalidComponent {
                problem: ComponentProblem::Initialization,
                message: format!(
                    "its start or `{}` failed: {failure}",
                    pre_initialize::INIT_EXPORT
                ),
                source: Some(error.into()),
            }
        })?;
        // Reading the state is the host's work, not the check's: a deadline of its own, and whole memories
        // copied out past the budget that caps what a check passes to the host.
        arm(&mut store, limits, Instant::now());
        store.set_hostcall_fuel(usize::MAX);
        pre_initialize::snapshot(&context, &mut store, instance).await
    }

    /// A store for a check's instance under `limits`' memory cap, begun for `request`.
    fn new_store(&self, request: &Request, limits: &Limits, grants: &Grants) -> Store<GuestState> {
        let mut store = Store::new(
            &self.engine,
            GuestState::new(
                limits.memory_bytes.min(self.max_memory_bytes),
                request.now,
                grants,
                &request.target,
            ),
        );
        store.limiter(|state| state);
        store
    }

    fn compile(&self, bytes: &[u8], digest: Digest) -> Result<Component, Error> {
        if let Some(component) = self
            .disk
            .as_ref()
            .and_then(|disk| disk.load(&self.engine, digest))
        {
            return Ok(component);
        }
        let component = Component::new(&self.engine, bytes).map_err(|error| {
            Error::invalid_because(ComponentProblem::Compile, "it does not compile", error)
        })?;
        if let Some(disk) = &self.disk {
            disk.store(digest, &component);
        }
        Ok(component)
    }

    fn compiling(&self) -> std::sync::MutexGuard<'_, HashMap<Digest, Arc<Mutex<()>>>> {
        // Holds only locks, no invariant a panicking thread could break.
        self.compiling
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    fn loaded(&self) -> std::sync::MutexGuard<'_, HashMap<Digest, Weak<Check>>> {
        // The map holds no invariant a panicking thread could break, so a poisoned lock is still usable.
        self.loaded
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

/// Advances the engine's epoch on a dedicated thread, so that timeouts fire even when every async worker
/// is busy. Stops when dropped.
struct EpochTicker {
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl EpochTicker {
    fn start(engine: wasmtime::Engine, tick: Duration) -> Self {
        let stop = Arc::new(AtomicBool::new(false));
        let stopped = Arc::clone(&stop);
        let thread = std::thread::Builder::new()
            .name("preflight-epoch".into())
            .spawn(move || {
                while !stopped.load(Ordering::Relaxed) {
                    std::thread::sleep(tick);
                    engine.increment_epoch();
                }
            })
            .ok();
        Self { stop, thread }
    }
}

impl Drop for EpochTicker {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pagemap_scan_is_used_only_without_swap() {
        let header = "Filename\t\t\t\tType\t\tSize\t\tUsed\t\tPriority\n";
        let one_area = format!("{header}/swapfile  file  4194300  0  -2\n");
        for (swaps, expected) in [
            (Some(header), Enabled::Auto),
            (Some(one_area.as_str()), Enabled::No),
            (None, Enabled::No),
        ] {
            assert_eq!(
                format!("{:?}", pagemap_scan_for(swaps)),
                format!("{expected:?}"),
                "{swaps:?}"
            );
        }
    }
}
