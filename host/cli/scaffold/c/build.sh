#!/bin/sh
# Builds {{name}}.wasm with clang 19 and wasi-libc (Debian: clang-19 lld-19 wasi-libc
# libclang-rt-19-dev-wasm32; or set CLANG and WASI_SYSROOT), wit-bindgen 0.61.1 and wasm-tools 1.254.2
# (`cargo install --locked wit-bindgen-cli@0.61.1 wasm-tools@1.254.2`; or set WIT_BINDGEN and WASM_TOOLS).
set -eu
cd "$(dirname "$0")"
wasm_tools=${WASM_TOOLS:-wasm-tools}
"${WIT_BINDGEN:-wit-bindgen}" c wit --world preflight:check/preflight-check-with-config@0.2.0 --out-dir bindings >/dev/null
"${CLANG:-clang-19}" --target=wasm32-wasi --sysroot="${WASI_SYSROOT:-/usr}" -mexec-model=reactor -Os -Wall -Wextra \
  -Wl,--strip-debug -I preflight-sdk -I bindings app.c preflight-sdk/*.c bindings/*.c bindings/*_component_type.o \
  -o {{name}}.core.wasm
"$wasm_tools" component new {{name}}.core.wasm \
  --adapt wasi_snapshot_preview1=wasi_snapshot_preview1.reactor.wasm -o {{name}}.wasm
rm {{name}}.core.wasm
