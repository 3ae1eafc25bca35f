#!/bin/sh
# Builds {{name}}.wasm with componentize-py 0.25.1 (`pip install componentize-py==0.25.1`; set COMPONENTIZE_PY
# to use another installation), for the guest world in wit/ (the preflight contract and wasi:http).
set -eu
cd "$(dirname "$0")"
"${COMPONENTIZE_PY:-componentize-py}" -d wit -w preflight:guest/check componentize -p . app -o {{name}}.wasm
