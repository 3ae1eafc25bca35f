//! Free lists of small blocks in front of a general-purpose allocator, for a single-threaded instance.
//!
//! A check's evaluation allocates a few dozen small blocks and frees them all: the strings of the request
//! the bindings receive, what serde decodes, the messages the check formats, the result. Behind talc each
//! of those costs a search of its bins and a split on allocation and a merge on free; under `isolation:
//! reuse` that was 30 % of the guest's time per evaluation (docs/performance.md, "Small blocks from
//! free lists"). Here a block of at most [`LARGEST`] bytes (alignment at most [`GRAIN`]) is rounded up to
//! a multiple of [`GRAIN`], taken from the free list of that size when it has one, and pushed back on it
//! when freed: a few instructions each way. Blocks are carved from the allocator behind only when their
//! list is empty, and never given back to it, so what small blocks hold is at most the most that were
//! live at once for each size: an evaluation that repeats reuses the same blocks, and an instance reused
//! for many evaluations does not grow.
//!
//! Every other request (larger, or more strictly aligned) goes straight to the allocator behind.

use core::alloc::{GlobalAlloc, Layout};
use core::cell::UnsafeCell;
use core::ptr;

/// The step between block sizes, and the largest alignment a small block has.
const GRAIN: usize = 8;

/// How many block sizes have a free list: `GRAIN`, `2 × GRAIN`, … up to [`LARGEST`].
const SIZES: usize = 32;

/// The largest block served from a free list.
const LARGEST: usize = GRAIN * SIZES;

/// A free block: the first word of its memory links to the next free block of its size.
struct FreeBlock {
    next: *mut FreeBlock,
}

/// A [`GlobalAlloc`] that serves small blocks from free lists, one per size, and the rest from `A`.
///
/// Not thread-safe: the lists are plain pointers. The SDK installs it only where an instance has one
/// thread (`wasm32` without atomics), and declares it `Sync` there.
pub(crate) struct SmallBlocks<A> {
    /// The allocator blocks are carved from, and every request that is not small.
    behind: A,
    /// The head of each size's free list (null: empty).
    free: UnsafeCell<[*mut FreeBlock; SIZES]>,
}

impl<A> SmallBlocks<A> {
    /// Small blocks in front of `behind`, with every list empty.
    pub(crate) const fn new(behind: A) -> Self {
        Self {
            behind,
            free: UnsafeCell::new([ptr::null_mut(); SIZES]),
        }
    }
}

/// The free list a block of `layout` belongs to, if it is small.
#[inline]
fn size_index(layout: Layout) -> Option<usize> {
    (layout.align() <= GRAIN && layout.size() <= LARGEST)
        .then(|| layout.size().max(1).div_ceil(GRAIN) - 1)
}

/// The layout a block of list `index` has in the allocator behind.
#[inline]
fn block_layout(index: usize) -> Layout {
    // SAFETY: a non-zero multiple of `GRAIN`, at most `LARGEST`, aligned to `GRAIN` (a power of two).
    unsafe { Layout::from_size_align_unchecked((index + 1) * GRAIN, GRAIN) }
}

// SAFETY: small blocks are carved from `behind` with a layout at least as large and as aligned as any
// request their list serves, and a block is on a list only while no one holds it (Rust passes `dealloc` the
// layout the block was allocated with, so it returns to the list it came from). Everything else is
// `behind`'s, with the caller's layout unchanged.
unsafe impl<A: GlobalAlloc> GlobalAlloc for SmallBlocks<A> {
    #[inline]
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        let Some(index) = size_index(layout) else {
            // SAFETY: the caller's contract, passed on.
            return unsafe { self.behind.alloc(layout) };
        };
        // SAFETY: one thread (see the type's documentation), and no reference to the lists outlives a call.
        let free = unsafe { &mut *self.free.get() };
        let head = free[index];
        if head.is_null() {
            // SAFETY: a valid, non-zero-sized layout.
            return unsafe { self.behind.alloc(block_layout(index)) };
        }
        // SAFETY: `head` is a free block of this size, whose first word links to the next.
        free[index] = unsafe { (*head).next };
        head.cast()
    }

    #[inline]
    unsafe fn dealloc(&self, block: *mut u8, layout: Layout) {
        let Some(index) = size_index(layout) else {
            // SAFETY: the caller's contract, passed on.
            return unsafe { self.behind.dealloc(block, layout) };
        };
        // SAFETY: one thread, as in `alloc`.
        let free = unsafe { &mut *self.free.get() };
        let block = block.cast::<FreeBlock>();
        // SAFETY: the block is at least `GRAIN` bytes, aligned to `GRAIN`, and no longer the caller's.
        unsafe { block.write(FreeBlock { next: free[index] }) };
        free[index] = block;
    }

    #[inline]
    unsafe fn realloc(&self, block: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        // SAFETY: the caller guarantees `new_size`, rounded up to `layout.align()`, does not overflow.
        let new_layout = unsafe { Layout::from_size_align_unchecked(new_size, layout.align()) };
        match (size_index(layout), size_index(new_layout)) {
            // The block already has room for the new size.
            (Some(old), Some(new)) if old == new => block,
            // SAFETY: the caller's contract, passed on.
            (None, None) => unsafe { self.behind.realloc(block, layout, new_size) },
            _ => {
                // SAFETY: `new_layout` is valid (above); the old block holds `layout.size()` bytes.
                unsafe {
                    let moved = self.alloc(new_layout);
                    if !moved.is_null() {
                        ptr::copy_nonoverlapping(block, moved, layout.size().min(new_size));
                        self.dealloc(block, layout);
                    }
                    moved
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::alloc::System;
    use std::cell::Cell;

    /// The system allocator, counting the blocks it hands out and takes back.
    #[derive(Default)]
    struct Counting {
        allocated: Cell<usize>,
        freed: Cell<usize>,
    }

    unsafe impl GlobalAlloc for Counting {
        unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
            self.allocated.set(self.allocated.get() + 1);
            unsafe { System.alloc(layout) }
        }

        unsafe fn dealloc(&self, block: *mut u8, layout: Layout) {
            self.freed.set(self.freed.get() + 1);
            unsafe { System.dealloc(block, layout) }
        }
    }

    fn layout(size: usize, align: usize) -> Layout {
        Layout::from_size_align(size, align).unwrap()
    }

    #[test]
    fn a_freed_small_block_serves_the_next_request_of_its_size_only() {
        let heap = SmallBlocks::new(Counting::default());
        unsafe {
            let first = heap.alloc(layout(20, 4));
            heap.dealloc(first, layout(20, 4));
            // 17 to 24 bytes share a list: the same block comes back, and nothing new is carved.
            assert_eq!(heap.alloc(layout(24, 8)), first);
            assert_eq!(heap.behind.allocated.get(), 1);
            // Another size, and a request for the same size while the block is taken, are carved anew.
            let other_size = heap.alloc(layout(16, 8));
            let same_size = heap.alloc(layout(18, 2));
            assert!(other_size != first && same_size != first);
            assert_eq!(heap.behind.allocated.get(), 3);
            // Small blocks are never given back to the allocator behind.
            heap.dealloc(first, layout(24, 8));
            heap.dealloc(other_size, layout(16, 8));
            heap.dealloc(same_size, layout(18, 2));
            assert_eq!(heap.behind.freed.get(), 0);
        }
    }

    #[test]
    fn large_and_strictly_aligned_blocks_go_to_the_allocator_behind() {
        let heap = SmallBlocks::new(Counting::default());
        unsafe {
            for request in [layout(LARGEST + 1, 8), layout(32, 16)] {
                let block = heap.alloc(request);
                assert_eq!(block as usize % request.align(), 0);
                heap.dealloc(block, request);
            }
            assert_eq!(heap.behind.allocated.get(), 2);
            assert_eq!(heap.behind.freed.get(), 2);
        }
    }

    #[test]
    fn every_list_hands_out_distinct_blocks_that_hold_their_contents() {
        let heap = SmallBlocks::new(Counting::default());
        unsafe {
            for round in 0..3u8 {
                let blocks: Vec<(*mut u8, usize)> = (1..=LARGEST)
                    .map(|size| (heap.alloc(layout(size, 1)), size))
                    .collect();
                for (at, &(block, size)) in blocks.iter().enumerate() {
                    ptr::write_bytes(block, round.wrapping_add(at as u8), size);
                }
                for (at, &(block, size)) in blocks.iter().enumerate() {
                    let written = std::slice::from_raw_parts(block, size);
                    assert!(
                        written
                            .iter()
                            .all(|&byte| byte == round.wrapping_add(at as u8))
                    );
                }
                for (block, size) in blocks {
                    heap.dealloc(block, layout(size, 1));
                }
            }
            // The second and third rounds were served from the lists.
            assert_eq!(heap.behind.allocated.get(), LARGEST);
        }
    }

    #[test]
    fn reallocation_keeps_the_contents_and_the_block_while_the_size_fits() {
        let heap = SmallBlocks::new(Counting::default());
        unsafe {
            let block = heap.alloc(layout(9, 1));
            ptr::copy_nonoverlapping(b"preflight".as_ptr(), block, 9);
            // 9 to 16 bytes: the same block.
            assert_eq!(heap.realloc(block, layout(9, 1), 16), block);
            // A larger small size, then past the lists, then back: moved each time, contents kept.
            let mut current = (block, 16);
            for new_size in [100, LARGEST * 4, 12] {
                let moved = heap.realloc(current.0, layout(current.1, 1), new_size);
                assert_ne!(moved, current.0, "{} to {new_size} bytes", current.1);
                assert_eq!(std::slice::from_raw_parts(moved, 9), b"preflight");
                current = (moved, new_size);
            }
            heap.dealloc(current.0, layout(current.1, 1));
            // The large block went back to the allocator behind; the small ones stay on their lists.
            assert_eq!(heap.behind.freed.get(), 1);
        }
    }
}
