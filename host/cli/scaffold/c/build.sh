#!/bin/sh
# Builds {{name}}.wasm with clang 19 and wasi-libc (Debian: clang-19 lld-19 wasi-libc
# libclang-rt-19-dev-wasm32; or set CLANG and WASI_SYSROOT) as a wasip1 reactor, with the SDK's bindings of
# the guest world (preflight-sdk/bindings, which carry its component type), then `preflight componentize`
# makes the component (set PREFLIGHT to use a given installation).
set -eu
cd "$(dirname "$0")"
{{find_tool}}
preflight=${PREFLIGHT:-$(find_tool preflight \
  "install the preflight CLI (it makes the component)" \
  {{preflight}})}
"${CLANG:-clang-19}" --target=wasm32-wasi --sysroot="${WASI_SYSROOT:-/usr}" -mexec-model=reactor -Os -Wall -Wextra \
  -Wl,--strip-debug -I preflight-sdk -I preflight-sdk/bindings app.c preflight-sdk/*.c preflight-sdk/bindings/*.c \
  preflight-sdk/bindings/*_component_type.o -o {{name}}.core.wasm
"$preflight" componentize {{name}}.core.wasm -o {{name}}.wasm
rm {{name}}.core.wasm
