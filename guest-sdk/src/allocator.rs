//! The heap of a check built for `wasm32-unknown-unknown`: talc, fed first the memory the instance already
//! has, then grown a page at a time only when that is full.
//!
//! Rust's own allocator on that target (dlmalloc) takes its first heap by growing linear memory, at least
//! 64 KiB at a time, so every fresh instance grows its memory once, and the host pays for exposing the new
//! pages and hiding them again when the pool slot is reused (two `mprotect` calls per evaluation). The
//! initial memory past the stack and static data (`__heap_base` up to the end of the initial memory) is
//! enough for a check that reads a projected object; talc claims exactly that, grows only when it is full,
//! and frees, so an instance reused for many evaluations (`isolation: reuse`) does not grow without bound.
//! Talc is the allocator the Rust WebAssembly ecosystem took up after `wee_alloc`: a drop-in global
//! allocator for single-threaded wasm, smaller and faster than dlmalloc in its measurements.
//!
//! In front of talc, blocks of up to 256 bytes come from free lists, one per size (`crate::small_blocks`):
//! an evaluation allocates and frees a few dozen of them, and talc's bins made that 13 % of a reused
//! evaluation's time. No crate offers such lists in front of another allocator (wee_alloc's are part of an
//! unmaintained allocator of its own), and they are a few lines over talc, which keeps the heap.
//!
//! A check that brings its own `#[global_allocator]` turns this one off with `default-features = false`.

use crate::small_blocks::SmallBlocks;
use core::alloc::Layout;
use core::arch::wasm32;
use core::ptr::NonNull;
use talc::base::Talc;
use talc::base::binning::Binning;
use talc::cell::TalcSyncCell;
use talc::wasm::WasmBinning;

/// A WebAssembly page.
const PAGE: usize = 64 * 1024;

unsafe extern "C" {
    /// Where the linker put the end of the stack and static data: the first byte nothing else uses.
    static __heap_base: u8;
}

/// The check's heap: small blocks from free lists (`crate::small_blocks`), carved from talc, which serves
/// everything else.
#[global_allocator]
static HEAP: SmallBlocks<TalcSyncCell<InitialMemoryThenGrow, WasmBinning>> =
    SmallBlocks::new(TalcSyncCell::new_wasm(InitialMemoryThenGrow { end: None }));

// SAFETY: this module is built only for `wasm32` without atomics, where an instance runs one thread.
unsafe impl Sync for SmallBlocks<TalcSyncCell<InitialMemoryThenGrow, WasmBinning>> {}

/// Talc's source of memory: the initial memory's free tail on the first request, then pages grown at the
/// end of linear memory, each extending the one heap (nothing else in the instance grows its memory).
#[derive(Debug)]
struct InitialMemoryThenGrow {
    /// The end of the heap, once claimed.
    end: Option<NonNull<u8>>,
}

// SAFETY: `acquire` touches only the `Talc` it is given and linear memory past the heap's end; it never
// allocates.
unsafe impl talc::source::Source for InitialMemoryThenGrow {
    fn acquire<B: Binning>(talc: &mut Talc<Self, B>, layout: Layout) -> Result<(), ()> {
        match talc.source.end {
            None => {
                let base = (&raw const __heap_base).cast_mut();
                let memory_end = wasm32::memory_size(0) * PAGE;
                // A tail too small to hold a heap's bookkeeping is skipped: the next request grows.
                let end = if memory_end > base as usize + PAGE / 16 {
                    memory_end
                } else {
                    grow(layout)?
                };
                // SAFETY: from `__heap_base` to the end of memory is free and is the allocator's alone.
                talc.source.end = unsafe { talc.claim(base, end - base as usize) };
                talc.source.end.map(|_| ()).ok_or(())
            }
            Some(heap_end) => {
                let end = grow(layout)?;
                // SAFETY: the pages just grown follow the heap's end directly (only this allocator grows
                // memory), and are the allocator's alone.
                talc.source.end = Some(unsafe { talc.extend(heap_end, end as *mut u8) });
                Ok(())
            }
        }
    }
}

/// Grows linear memory by enough whole pages for `layout` and its bookkeeping; the new end of memory.
fn grow(layout: Layout) -> Result<usize, ()> {
    let needed = layout.size() + layout.align() + PAGE / 16;
    let pages = needed.div_ceil(PAGE);
    match wasm32::memory_grow(0, pages) {
        usize::MAX => Err(()),
        previous => Ok((previous + pages) * PAGE),
    }
}
