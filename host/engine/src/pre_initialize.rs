//! Pre-initialisation: a check's start-up run once, when it is built, and the component rewritten to begin
//! from the state that start-up left (the Bytecode Alliance's Wizer, component snapshot). A fresh instance
//! of the result skips what the language's runtime does before its first call: for Go, the runtime's start
//! and every package's `init` (about 30 % of a fresh evaluation, docs/performance.md).
//!
//! A component opts in by exporting [`INIT_EXPORT`] (`func()`): the Go SDK does, built for the guest world
//! `preflight:guest/check-snapshot`. The export runs after the component's own start (a reactor's
//! `_initialize`); what it leaves in memories and globals becomes the snapshot's initial state, and the
//! start is not run again. Everything the check reaches while initialising is what an evaluation gets
//! with nothing granted: no network, no lookups, an empty environment, under the given limits.
//!
//! The state is read through the instrumented component's accessor exports (wasmtime-wizer's
//! `ComponentInstanceState`). wasmtime-wizer's own implementation of it would need its `wasmtime` feature,
//! which turns on GC and threads in the host's wasmtime too; this one is the same few calls, and keeps the
//! first error instead of panicking, so that nothing a check does can bring the host down.

use crate::error::{ComponentProblem, Error};
use crate::guest_state::GuestState;
use wasmtime::Store;
use wasmtime::component::{Instance, Lift, WasmList};
use wasmtime_wizer::{ComponentContext, ComponentInstanceState, Wizer};

/// The export a component runs to initialise itself before its snapshot is taken (Wizer's default name).
pub const INIT_EXPORT: &str = "wizer-initialize";

/// A Wizer set up for checks: [`INIT_EXPORT`] as the initialisation, which stays exported (wasmtime-wizer
/// 48 removes the core export of that name and leaves the component's lift of it dangling otherwise).
pub(crate) fn wizer() -> Wizer {
    let mut wizer = Wizer::new();
    wizer.init_func(INIT_EXPORT).keep_init_func(true);
    wizer
}

/// Instruments `bytes` (a component) for a snapshot: the accessor exports that read every core instance's
/// memories and globals.
pub(crate) fn instrument(bytes: &[u8]) -> Result<(ComponentContext<'_>, Vec<u8>), Error> {
    wizer().instrument_component(bytes).map_err(|error| {
        Error::invalid_because(
            ComponentProblem::Initialization,
            "it cannot be pre-initialised",
            error,
        )
    })
}

/// The pre-initialised component: `instance` (of the instrumented component, initialised) read through
/// its accessors, and `context`'s original sections rewritten with that state.
pub(crate) async fn snapshot(
    context: &ComponentContext<'_>,
    store: &mut Store<GuestState>,
    instance: Instance,
) -> Result<Vec<u8>, Error> {
    let mut state = InitializedState {
        store,
        instance,
        failure: None,
    };
    let snapshot = wizer().snapshot_component(context, &mut state).await;
    let reading = |error: wasmtime::Error| {
        Error::invalid_because(
            ComponentProblem::Initialization,
            "its initialised state cannot be read",
            error,
        )
    };
    match state.failure {
        Some(error) => Err(reading(error)),
        None => snapshot.map_err(reading),
    }
}

/// An initialised instance whose state Wizer reads; the first call that fails is kept in `failure` (later
/// calls are skipped and read as zero or empty) and reported once the snapshot returns.
struct InitializedState<'a> {
    store: &'a mut Store<GuestState>,
    instance: Instance,
    failure: Option<wasmtime::Error>,
}

impl InitializedState<'_> {
    /// Calls `func` of the exported instance `instance`, which returns one `R`, and hands it to `read`
    /// with the store; `None` after a failure.
    async fn call<R, T>(
        &mut self,
        instance: &str,
        func: &str,
        read: impl FnOnce(&Store<GuestState>, R) -> T,
    ) -> Option<T>
    where
        R: Lift + Send + Sync + 'static,
    {
        if self.failure.is_some() {
            return None;
        }
        match self.try_call::<R>(instance, func).await {
            Ok(value) => Some(read(self.store, value)),
            Err(error) => {
                self.failure = Some(error);
                None
            }
        }
    }

    async fn try_call<R>(&mut self, instance: &str, func: &str) -> wasmtime::Result<R>
    where
        R: Lift + Send + Sync + 'static,
    {
        let missing =
            || wasmtime::format_err!("the instrumented component has no {instance}#{func}");
        let (_, exported) = self
            .instance
            .get_export(&mut *self.store, None, instance)
            .ok_or_else(missing)?;
        let (_, index) = self
            .instance
            .get_export(&mut *self.store, Some(&exported), func)
            .ok_or_else(missing)?;
        let typed = self
            .instance
            .get_typed_func::<(), (R,)>(&mut *self.store, index)?;
        let (value,) = typed.call_async(&mut *self.store, ()).await?;
        Ok(value)
    }
}

impl ComponentInstanceState for InitializedState<'_> {
    async fn call_func_ret_list_u8(
        &mut self,
        instance: &str,
        func: &str,
        contents: impl FnOnce(&[u8]) + Send,
    ) {
        let mut contents = Some(contents);
        self.call(instance, func, |store, list: WasmList<u8>| {
            if let Some(contents) = contents.take() {
                contents(list.as_le_slice(store));
            }
        })
        .await;
        // After a failure Wizer still expects every memory's contents: empty ones, in a snapshot that is
        // then refused.
        if let Some(contents) = contents {
            contents(&[]);
        }
    }

    async fn call_func_ret_s32(&mut self, instance: &str, func: &str) -> i32 {
        self.call(instance, func, |_, value: i32| value)
            .await
            .unwrap_or_default()
    }

    async fn call_func_ret_s64(&mut self, instance: &str, func: &str) -> i64 {
        self.call(instance, func, |_, value: i64| value)
            .await
            .unwrap_or_default()
    }

    async fn call_func_ret_f32(&mut self, instance: &str, func: &str) -> u32 {
        self.call(instance, func, |_, value: f32| value.to_bits())
            .await
            .unwrap_or_default()
    }

    async fn call_func_ret_f64(&mut self, instance: &str, func: &str) -> u64 {
        self.call(instance, func, |_, value: f64| value.to_bits())
            .await
            .unwrap_or_default()
    }
}
