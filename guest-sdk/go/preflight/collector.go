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
)

func init() { debug.SetGCPercent(-1) }

// collectIfGrown collects garbage when the heap has grown by its live size (at least 4 MiB) since the last
// collection. Called at the end of every export.
func collectIfGrown() {
	metrics.Read(heap)
	allocated, live := heap[0].Value.Uint64(), heap[1].Value.Uint64()
	if allocated-allocatedAtLastCollection < max(live, minimumGrowth) {
		return
	}
	runtime.GC()
	metrics.Read(heap[:1])
	allocatedAtLastCollection = heap[0].Value.Uint64()
}
