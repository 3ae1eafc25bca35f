#!/bin/sh
# Builds {{name}}.wasm with Rust's wasm32-unknown-unknown target (`rustup target add wasm32-unknown-unknown`);
# .cargo/config.toml names rustc's wasm-component-ld as its linker, which makes the component.
set -eu
cd "$(dirname "$0")"
cargo build --quiet --release --target wasm32-unknown-unknown
cp "${CARGO_TARGET_DIR:-target}/wasm32-unknown-unknown/release/{{crate}}.wasm" {{name}}.wasm
echo "built {{name}}.wasm"
