#!/bin/sh
# Builds {{name}}.wasm with Go's wasip1 port (Go 1.26 or newer) as a reactor, then `preflight componentize`
# makes the component: the component type of the guest world (wit/: the contract and wasi:http, and the
# initialisation a snapshot runs) and the wasip1 reactor adapter of the host's wasmtime; then `preflight
# snapshot` runs Go's runtime start and the package inits once, now, so that a fresh instance starts where
# they left off. Set PREFLIGHT to use a given installation.
set -eu
cd "$(dirname "$0")"
{{find_tool}}
preflight=${PREFLIGHT:-$(find_tool preflight \
  "install the preflight CLI (it makes the component and pre-initialises it)" \
  {{preflight}})}
GOOS=wasip1 GOARCH=wasm go build -buildmode=c-shared -ldflags=-checklinkname=0 -o {{name}}.core.wasm .
"$preflight" componentize {{name}}.core.wasm --wit wit --world preflight:guest/check-snapshot -o {{name}}.wasm
rm {{name}}.core.wasm
"$preflight" snapshot {{name}}.wasm -o {{name}}.wasm
