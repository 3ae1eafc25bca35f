#!/bin/sh
# Builds {{name}}.wasm with componentize-js 0.23.0 for the guest world in wit/ (the preflight contract and
# wasi:http). Set COMPONENTIZE_JS to use a given installation.
set -eu
cd "$(dirname "$0")"
{{find_tool}}
componentize_js=${COMPONENTIZE_JS:-$(find_tool componentize-js \
  "run npm install here, or the preflight repository's scripts/setup" \
  node_modules/.bin/componentize-js "$cache/js/node_modules/.bin/componentize-js")}
"$componentize_js" app.js --wit wit --world-name preflight:guest/check -o {{name}}.wasm
