// Times sluice-tokenizer inside V8 (node): module compile + instantiate,
// Tokenizer::new per encoding, and count() on the texts that
// `cargo run --release -p sluice-tokenizer --example bench -- dump DIR` wrote,
// checking the counts against tiktoken-rs's.
// Usage: node bench.mjs module.wasm DIR
import { readFileSync } from "node:fs";
import { performance } from "node:perf_hooks";

const [wasmPath, dir] = process.argv.slice(2);
const bytes = readFileSync(wasmPath);
let t = performance.now();
const module = await WebAssembly.compile(bytes);
const compileMs = performance.now() - t;
t = performance.now();
const instance = await WebAssembly.instantiate(module, {});
const instMs = performance.now() - t;
const x = instance.exports;
console.log(`module ${bytes.length} bytes; compile ${compileMs.toFixed(1)} ms, instantiate ${instMs.toFixed(1)} ms`);

const median = (v) => v.sort((a, b) => a - b)[v.length >> 1];
let ok = true;
for (const [code, name] of [[1, "o200k_base"], [0, "cl100k_base"]]) {
  const memBefore = x.memory.buffer.byteLength;
  t = performance.now();
  const tok = x.tok_new(code);
  const newMs = performance.now() - t;
  const memGrowth = (x.memory.buffer.byteLength - memBefore) / 1048576;
  const again = [];
  for (let i = 0; i < 5; i++) {
    t = performance.now();
    x.tok_new(code);
    again.push(performance.now() - t);
  }
  console.log(
    `${name}: Tokenizer::new ${newMs.toFixed(2)} ms first call, then ${median(again).toFixed(2)} ms (median of 5); ` +
      `memory grew ${memGrowth.toFixed(2)} MiB for the first`);
  for (const kind of ["mixed", "english"]) {
    const text = readFileSync(`${dir}/${name}-${kind}.txt`);
    const want = Number(readFileSync(`${dir}/${name}-${kind}.count`, "utf8"));
    const ptr = x.buf_new(text.length);
    new Uint8Array(x.memory.buffer, ptr, text.length).set(text);
    t = performance.now();
    const first = x.tok_count(tok, ptr, text.length);
    const firstMs = performance.now() - t;
    const times = [];
    for (let i = 0; i < 31; i++) {
      t = performance.now();
      x.tok_count(tok, ptr, text.length);
      times.push(performance.now() - t);
    }
    const ms = median(times);
    const fastest = Math.min(...times);
    const same = first === want;
    ok &&= same;
    console.log(
      `  ${kind.padEnd(8)} ${text.length} bytes ${first} tokens (tiktoken-rs ${want}: ${same ? "equal" : "DIFFERENT"}); ` +
        `count first ${firstMs.toFixed(2)} ms, median ${ms.toFixed(3)} ms = ${(text.length / 1e3 / ms).toFixed(1)} MB/s ` +
        `(fastest ${fastest.toFixed(3)} ms)`,
    );
  }
}
process.exit(ok ? 0 : 1);
