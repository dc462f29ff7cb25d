#!/bin/sh
# Measures sluice-tokenizer in V8: builds this module for wasm32 with
# Debian's Rust (build-std, as the filter is built), dumps the bench texts,
# runs bench.mjs in node. From the repository root: tokenizer/wasm-bench/run.sh
set -eu
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
out=${OUT_DIR:-/tmp/sluice-tokenizer-wasm-bench}
mkdir -p "$out"
(cd "$here" && PATH=/usr/bin:$PATH RUSTC_BOOTSTRAP=1 CARGO_TARGET_DIR="$out/target" \
  /usr/bin/cargo build --release --target wasm32-unknown-unknown -Zbuild-std=std,panic_abort)
(cd "$root" && CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-/work/target-tokenizer} \
  cargo run --release -q -p sluice-tokenizer --example bench -- dump "$out/texts")
node "$here/bench.mjs" "$out/target/wasm32-unknown-unknown/release/sluice_tokenizer_wasm_bench.wasm" "$out/texts"
