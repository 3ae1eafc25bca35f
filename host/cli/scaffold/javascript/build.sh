#!/bin/sh
# Builds {{name}}.wasm with componentize-js 0.23.0 (`npm install` here; set COMPONENTIZE_JS to use another
# installation), for the guest world in wit/ (the preflight contract and wasi:http).
set -eu
cd "$(dirname "$0")"
"${COMPONENTIZE_JS:-node_modules/.bin/componentize-js}" app.js --wit wit --world-name preflight:guest/check -o {{name}}.wasm
