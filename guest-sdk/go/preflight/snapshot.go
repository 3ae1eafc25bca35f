package preflight

import "encoding/json"

// warmUps are the values WarmUp was given, whose types the snapshot's initialisation prepares.
var warmUps []any

// WarmUp names the types the check decodes, as pointers to zero values (WarmUp(&object{}, &config{})), from an
// init function. A pre-initialised build (build.sh's last step, `preflight snapshot`) builds encoding/json's
// caches for them, and for every type they hold, once, into the snapshot, instead of on the first decode in
// every fresh instance: about 110 µs of the example's fresh evaluation on the project's benchmark machine
// (docs/performance.md, "Go checks pre-initialised"). In a build without the snapshot it does nothing.
func WarmUp(values ...any) { warmUps = append(warmUps, values...) }

// wizerInitialize is the export `preflight snapshot` runs before it snapshots a build of the check (guest world
// preflight:guest/check-snapshot, as build.sh builds it). By then the component's start has run: Go's
// runtime start and every package's init, the check's own (its calls to Handle and WarmUp) included; all of
// that is what the snapshot keeps, so that a fresh instance starts from it. Left to do: encoding/json's caches
// for the types WarmUp named (encoding a value builds them for its whole type, whatever the value holds; the
// decoder shares them), and the collector's table of runtime metrics (prepareHeapReads). Not done: a collection here, which made every later evaluation slower, and growing
// the goroutine stack, which gained nothing.
//
//go:wasmexport wizer-initialize
func wizerInitialize() {
	for _, value := range warmUps {
		_, _ = json.Marshal(value)
	}
	warmUps = nil
	prepareHeapReads()
}
