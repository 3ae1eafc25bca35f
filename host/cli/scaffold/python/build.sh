#!/bin/sh
# Builds {{name}}.wasm with componentize-py 0.25.1 for the guest world in wit/ (the preflight contract and
# wasi:http). Set COMPONENTIZE_PY to use a given installation.
set -eu
cd "$(dirname "$0")"
{{find_tool}}
componentize_py=${COMPONENTIZE_PY:-$(find_tool componentize-py \
  "run the preflight repository's scripts/setup, or: pip install componentize-py==0.25.1" \
  "$cache/python/venv/bin/componentize-py")}
"$componentize_py" -d wit -w preflight:guest/check componentize -p . app -o {{name}}.wasm
