package preflight

import (
	"runtime"
	"runtime/debug"
	"runtime/metrics"
)

// The Go runtime may start a garbage collection on any allocation, and a collection reads the clock
// through a WASI import. The component model forbids a component to call out while the host is lowering
// arguments into it (the host calls the component's allocator then), so a collection that starts there
// traps the evaluation with "cannot leave component instance": about once in tens of thousands of
// evaluations of a reused instance. The collector therefore runs only where calling out is allowed: it is
// off, and the SDK collects at the end of an evaluation, inside the export, once the heap has grown as much
// as Go's default pacing (GOGC=100, at least 4 MiB) would let it grow.

// minimumGrowth is Go's own smallest heap goal.
const minimumGrowth = 4 << 20

var (
	heap = []metrics.Sample{
		{Name: "/gc/heap/allocs:bytes"},
		{Name: "/gc/heap/live:bytes"},
	}
	allocatedAtLastCollection uint64
	// heapReadBefore tells whether this instance has read its heap figures: the first read uses
	// runtime.ReadMemStats, because the first runtime/metrics read of an instance builds the runtime's table of
	// every metric (about a tenth of a fresh instance's evaluation); later reads use runtime/metrics, cheaper
	// than ReadMemStats once that table exists (a reused instance reads once per evaluation). A pre-initialised
	// build has read it already (prepareHeapReads).
	heapReadBefore bool
	// firstStats is that first read's destination, at package level because the struct is large (its
	// per-size-class table) and would grow the goroutine's stack.
	firstStats runtime.MemStats
)

func init() { debug.SetGCPercent(-1) }

// prepareHeapReads builds runtime/metrics' table with a first read and marks the heap as read, so that every
// later read, the first of each evaluation included, is a cheap runtime/metrics read. Run once by the snapshot's
// initialisation: a pre-initialised build starts every fresh instance with the table built (the first read
// of a fresh instance was a tenth of its evaluation).
func prepareHeapReads() {
	metrics.Read(heap)
	heapReadBefore = true
}

// readHeap returns the bytes allocated on the heap since the instance started and the bytes found live by
// the last collection (none before the first: the collector is off until collectIfGrown runs it).
func readHeap() (allocated, live uint64) {
	if !heapReadBefore {
		heapReadBefore = true
		runtime.ReadMemStats(&firstStats)
		return firstStats.TotalAlloc, 0
	}
	metrics.Read(heap)
	return heap[0].Value.Uint64(), heap[1].Value.Uint64()
}

// collectIfGrown collects garbage when the heap has grown by its live size (at least 4 MiB) since the last
// collection. Called at the end of every export.
func collectIfGrown() {
	allocated, live := readHeap()
	if allocated-allocatedAtLastCollection < max(live, minimumGrowth) {
		return
	}
	runtime.GC()
	allocatedAtLastCollection, _ = readHeap()
}
