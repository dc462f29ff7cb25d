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
// One piece of CJK without spaces (the class tekken merged slowest).
const cjkChars = [..."人工智能正在改变世界我们需要新的规则日本語のテキストも正しく数えられますか"];
let seed = 7;
const cjk = Buffer.from(
  Array.from({ length: 20000 }, () => {
    seed = (seed * 1103515245 + 12345) % 2147483648;
    return cjkChars[seed % cjkChars.length];
  }).join(""),
);
/** Median of 11 timed counts, the pair cache emptied before each. */
function median(count, tok, p, len) {
  const times = [];
  let n = 0;
  for (let i = 0; i < 11; i++) {
    x.hf_clear(tok);
    const t = performance.now();
    n = count(tok, p, len);
    times.push(performance.now() - t);
  }
  times.sort((a, b) => a - b);
  return [times[5], n];
}
for (const model of ["llama3", "qwen3", "deepseek_v3", "gptoss", "mistral_tekken"]) {
  const file = model === "mistral_tekken" ? "tekken.json" : "tokenizer.json";
  const path = `${dir}/${model}/${file}`;
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
  for (const [name, body] of [["mixed", text], ["CJK, one piece", cjk]]) {
    const tp = x.buf_new(body.length);
    new Uint8Array(x.memory.buffer, tp, body.length).set(body);
    const [ms, n] = median((...a) => x.hf_count(...a, 0), tok, tp, body.length);
    const [heapMs, heapN] = median((...a) => x.hf_count(...a, 1), tok, tp, body.length);
    console.log(
      `${model} ${name}: ${file} ${(json.length / 1048576).toFixed(1)} MiB; load ${loadMs.toFixed(0)} ms, ` +
        `memory grew ${grew.toFixed(1)} MiB; count ${body.length} bytes -> ${n} tokens` +
        `${n === heapN ? "" : ` (HEAP MERGE COUNTS ${heapN})`}, median ${ms.toFixed(2)} ms = ` +
        `${(body.length / 1e3 / ms).toFixed(1)} MB/s; heap merge ${heapMs.toFixed(2)} ms = ` +
        `${(body.length / 1e3 / heapMs).toFixed(1)} MB/s (${(heapMs / ms).toFixed(2)}x)`,
    );
  }
}
