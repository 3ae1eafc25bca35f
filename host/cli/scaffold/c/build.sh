#!/bin/sh
# Builds {{name}}.wasm with clang 19 and wasi-libc (Debian: clang-19 lld-19 wasi-libc
# libclang-rt-19-dev-wasm32; or set CLANG and WASI_SYSROOT), wit-bindgen 0.61.1 and wasm-tools 1.254.2 (set
# WIT_BINDGEN and WASM_TOOLS to use given installations).
set -eu
cd "$(dirname "$0")"
{{find_tool}}
wit_bindgen=${WIT_BINDGEN:-$(find_tool wit-bindgen \
  "run the preflight repository's scripts/setup, or: cargo install --locked wit-bindgen-cli@0.61.1" \
  "$cache/tools/bin/wit-bindgen")}
wasm_tools=${WASM_TOOLS:-$(find_tool wasm-tools \
  "run the preflight repository's scripts/setup, or: cargo install --locked wasm-tools@1.254.2" \
  "$cache/tools/bin/wasm-tools")}
"$wit_bindgen" c wit --world preflight:guest/check --out-dir bindings >/dev/null
"${CLANG:-clang-19}" --target=wasm32-wasi --sysroot="${WASI_SYSROOT:-/usr}" -mexec-model=reactor -Os -Wall -Wextra \
  -Wl,--strip-debug -I preflight-sdk -I bindings app.c preflight-sdk/*.c bindings/*.c bindings/*_component_type.o \
  -o {{name}}.core.wasm
"$wasm_tools" component new {{name}}.core.wasm \
  --adapt wasi_snapshot_preview1=wasi_snapshot_preview1.reactor.wasm -o {{name}}.wasm
rm {{name}}.core.wasm
