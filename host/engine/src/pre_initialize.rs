//! Pre-initialisation: a check's start-up run once, when it is built, and the component rewritten to begin
//! from the state that start-up left (the Bytecode Alliance's Wizer, component snapshot). A fresh instance
//! of the result skips what the language's runtime does before its first call: for Go, the runtime's start
//! and every package's `init` (about 30 % of a fresh evaluation, docs/performance.md).
//!
//! A component opts in by exporting [`INIT_EXPORT`] (`func()`): the Go SDK does, built for the guest world
//! `preflight:guest/check-snapshot`. The export runs after the component's own start (a reactor's
//! `_initialize`); what it leaves in memories and globals becomes the snapshot's initial state, and the
//! start is not run again. Everything the check reaches while initialising is what an evaluation gets
//! with nothing granted: no network, no lookups, an empty environment, under the given limits. The data
//! segments Wizer leaves empty are then removed where no code names a segment, since wasmtime would set
//! each of them up in every instance.
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
    let snapshot = match state.failure {
        Some(error) => Err(reading(error)),
        None => snapshot.map_err(reading),
    }?;
    without_empty_passive_segments(&snapshot).map_err(|error| {
        Error::invalid_because(
            ComponentProblem::Initialization,
            "its snapshot cannot be rewritten",
            error,
        )
    })
}

/// `component` with the empty passive data segments of its core modules removed, where no code refers to
/// a data segment by index. Wizer turns each active segment it has applied into an empty passive one, so
/// that indices stay valid, and wasmtime sets up every passive segment in every new instance: a Go build
/// has 38,050 of them, a third of a fresh evaluation (docs/performance.md). Only `memory.init` and
/// `data.drop` name a segment by index, so a module without either keeps only its non-empty segments.
fn without_empty_passive_segments(component: &[u8]) -> wasmtime::Result<Vec<u8>> {
    use wasm_encoder::RawSection;
    use wasmparser::{Chunk, Parser, Payload};
    let mut rewritten = wasm_encoder::Component::new();
    let mut parser = Parser::new(0);
    let mut offset = 0;
    loop {
        let Chunk::Parsed { consumed, payload } = parser.parse(&component[offset..], true)? else {
            // With `eof` set the parser reports a truncated input as an error instead.
            wasmtime::bail!("the snapshot ends in the middle of a section");
        };
        offset += consumed;
        if let Payload::End(_) = payload {
            break;
        }
        let Some((id, range)) = payload.as_section() else {
            continue;
        };
        let original = &component[range.clone()];
        let pruned = match payload {
            Payload::ModuleSection { .. } => module_without_empty_passive_segments(original)?,
            _ => None,
        };
        rewritten.section(&RawSection {
            id,
            data: pruned.as_deref().unwrap_or(original),
        });
        if let Payload::ModuleSection { .. } | Payload::ComponentSection { .. } = payload {
            // The parser has moved past the nested bytes; the caller skips them.
            offset += range.len();
        }
    }
    Ok(rewritten.finish())
}

/// [`without_empty_passive_segments`] for one core module: `None` when it keeps every segment (some code
/// refers to segments by index, or none is an empty passive one).
fn module_without_empty_passive_segments(module: &[u8]) -> wasmtime::Result<Option<Vec<u8>>> {
    use wasm_encoder::reencode::{Reencode, RoundtripReencoder};
    use wasmparser::{DataKind, Operator, Parser, Payload};
    let is_empty_passive = |data: &wasmparser::Data<'_>| {
        matches!(data.kind, DataKind::Passive) && data.data.is_empty()
    };
    let mut removable = 0;
    for payload in Parser::new(0).parse_all(module) {
        match payload? {
            Payload::DataSection(reader) => {
                for data in reader {
                    removable += u32::from(is_empty_passive(&data?));
                }
            }
            Payload::CodeSectionEntry(body) => {
                for operator in body.get_operators_reader()? {
                    if matches!(
                        operator?,
                        Operator::MemoryInit { .. } | Operator::DataDrop { .. }
                    ) {
                        return Ok(None);
                    }
                }
            }
            _ => {}
        }
    }
    if removable == 0 {
        return Ok(None);
    }
    let mut rewritten = wasm_encoder::Module::new();
    for payload in Parser::new(0).parse_all(module) {
        match payload? {
            Payload::DataCountSection { count, .. } => {
                rewritten.section(&wasm_encoder::DataCountSection {
                    count: count.saturating_sub(removable),
                });
            }
            Payload::DataSection(reader) => {
                let mut section = wasm_encoder::DataSection::new();
                for data in reader {
                    let data = data?;
                    if !is_empty_passive(&data) {
                        RoundtripReencoder
                            .parse_data(&mut section, data)
                            .map_err(|error| wasmtime::format_err!("{error}"))?;
                    }
                }
                rewritten.section(&section);
            }
            other => {
                if let Some((id, range)) = other.as_section() {
                    rewritten.section(&wasm_encoder::RawSection {
                        id,
                        data: &module[range],
                    });
                }
            }
        }
    }
    Ok(Some(rewritten.finish()))
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

#[cfg(test)]
mod tests {
    use super::module_without_empty_passive_segments;
    use wasm_encoder::{
        CodeSection, ConstExpr, DataCountSection, DataSection, Function, FunctionSection,
        Instruction, MemorySection, MemoryType, Module, TypeSection,
    };

    /// A module with a memory, two empty passive segments around an active one (what Wizer leaves), and
    /// one function whose body is `body`.
    fn module(body: &[Instruction<'_>]) -> Vec<u8> {
        let mut module = Module::new();
        let mut types = TypeSection::new();
        types.ty().function([], []);
        module.section(&types);
        let mut functions = FunctionSection::new();
        functions.function(0);
        module.section(&functions);
        let mut memories = MemorySection::new();
        memories.memory(MemoryType {
            minimum: 1,
            maximum: None,
            memory64: false,
            shared: false,
            page_size_log2: None,
        });
        module.section(&memories);
        module.section(&DataCountSection { count: 3 });
        let mut code = CodeSection::new();
        let mut function = Function::new([]);
        for instruction in body {
            function.instruction(instruction);
        }
        function.instruction(&Instruction::End);
        code.function(&function);
        module.section(&code);
        let mut data = DataSection::new();
        data.passive([]);
        data.active(0, &ConstExpr::i32_const(16), *b"kept");
        data.passive([]);
        module.section(&data);
        module.finish()
    }

    fn segments(module: &[u8]) -> (u32, Vec<Vec<u8>>) {
        let mut count = 0;
        let mut segments = Vec::new();
        for payload in wasmparser::Parser::new(0).parse_all(module) {
            match payload.unwrap() {
                wasmparser::Payload::DataCountSection {
                    count: declared, ..
                } => count = declared,
                wasmparser::Payload::DataSection(reader) => {
                    segments.extend(reader.into_iter().map(|data| data.unwrap().data.to_vec()));
                }
                _ => {}
            }
        }
        (count, segments)
    }

    #[test]
    fn empty_passive_segments_go_only_when_no_code_names_a_segment() {
        let unreferenced = module(&[Instruction::Nop]);
        let pruned = module_without_empty_passive_segments(&unreferenced)
            .unwrap()
            .expect("the empty segments are removed");
        wasmparser::Validator::new().validate_all(&pruned).unwrap();
        assert_eq!(segments(&pruned), (1, vec![b"kept".to_vec()]));
        // `data.drop 2` names the third segment: removing the first would make it name another one.
        let referenced = module(&[Instruction::DataDrop(2)]);
        assert_eq!(
            module_without_empty_passive_segments(&referenced).unwrap(),
            None
        );
        let initializing = module(&[
            Instruction::I32Const(0),
            Instruction::I32Const(0),
            Instruction::I32Const(0),
            Instruction::MemoryInit {
                mem: 0,
                data_index: 0,
            },
        ]);
        assert_eq!(
            module_without_empty_passive_segments(&initializing).unwrap(),
            None
        );
    }
}
