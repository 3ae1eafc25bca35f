#!/bin/sh
# Builds {{name}}.wasm with Go's wasip1 port (Go 1.26 or newer) as a reactor, then wasm-tools 1.254.2: the
# component type of the guest world (wit/: the contract and wasi:http, and the initialisation a snapshot
# runs) and the wasip1 reactor adapter of the host's wasmtime (wasi_snapshot_preview1.reactor.wasm); then
# `preflight snapshot` runs Go's runtime start and the package inits once, now, so that a fresh instance
# starts where they left off. Set WASM_TOOLS and PREFLIGHT to use given installations.
set -eu
cd "$(dirname "$0")"
{{find_tool}}
wasm_tools=${WASM_TOOLS:-$(find_tool wasm-tools \
  "run the preflight repository's scripts/setup, or: cargo install --locked wasm-tools@1.254.2" \
  "$cache/tools/bin/wasm-tools")}
preflight=${PREFLIGHT:-$(find_tool preflight \
  "install the preflight CLI (it pre-initialises the build)" \
  {{preflight}})}
GOOS=wasip1 GOARCH=wasm go build -buildmode=c-shared -ldflags=-checklinkname=0 -o {{name}}.core.wasm .
"$wasm_tools" component embed wit --world preflight:guest/check-snapshot \
  {{name}}.core.wasm -o {{name}}.core.wasm
"$wasm_tools" component new {{name}}.core.wasm \
  --adapt wasi_snapshot_preview1=wasi_snapshot_preview1.reactor.wasm -o {{name}}.wasm
rm {{name}}.core.wasm
"$preflight" snapshot {{name}}.wasm -o {{name}}.wasm
