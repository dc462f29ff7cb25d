// Times HfTokenizer in V8 (node): tokenizer.json load and count().
// Usage: node hf-bench.mjs module.wasm DIR (DIR: SLUICE_HF_TOKENIZERS_DIR)
import { readFileSync, existsSync } from "node:fs";
import { performance } from "node:perf_hooks";

const [wasmPath, dir] = process.argv.slice(2);
const bytes = readFileSync(wasmPath);
const { instance } = await WebAssembly.instantiate(bytes, {});
const x = instance.exports;
console.log(`module ${bytes.length} bytes`);
const text = Buffer.from(
  "The quick brown fox jumps over the lazy dog. 人工智能正在改变世界。 fn main() { let x = 42; }\n".repeat(2000),
);
for (const model of ["llama3", "qwen3", "deepseek_v3", "gptoss"]) {
  const path = `${dir}/${model}/tokenizer.json`;
  if (!existsSync(path)) continue;
  const json = readFileSync(path);
  const jp = x.buf_new(json.length);
  new Uint8Array(x.memory.buffer, jp, json.length).set(json);
  const before = x.memory.buffer.byteLength;
  let t = performance.now();
  const tok = x.hf_new(jp, json.length);
  const loadMs = performance.now() - t;
  const grew = (x.memory.buffer.byteLength - before) / 1048576;
  if (tok === 0) {
    console.log(`${model}: REFUSED`);
    continue;
  }
  const tp = x.buf_new(text.length);
  new Uint8Array(x.memory.buffer, tp, text.length).set(text);
  const times = [];
  let n = 0;
  for (let i = 0; i < 11; i++) {
    t = performance.now();
    n = x.hf_count(tok, tp, text.length);
    times.push(performance.now() - t);
  }
  times.sort((a, b) => a - b);
  const ms = times[5];
  console.log(
    `${model}: tokenizer.json ${(json.length / 1048576).toFixed(1)} MiB; load ${loadMs.toFixed(0)} ms, ` +
      `memory grew ${grew.toFixed(1)} MiB (peak, parse tree included); count ${text.length} bytes -> ${n} tokens, ` +
      `median ${ms.toFixed(2)} ms = ${(text.length / 1e3 / ms).toFixed(1)} MB/s`,
  );
}
