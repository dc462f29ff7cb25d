// Times sluice-tokenizer inside V8 (node): module compile + instantiate,
// Tokenizer::new per encoding, and count() on the texts that
// `cargo run --release -p sluice-tokenizer --example bench -- dump DIR` wrote,
// checking the counts against tiktoken-rs's.
// Usage: node bench.mjs module.wasm DIR
import { readdirSync, readFileSync } from "node:fs";
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
// Per class (the texts `bench dump` wrote as NAME-class-CLASS.txt): old
// engine vs new, interleaved, fastest of 3 each.
for (const [code, name] of [[1, "o200k_base"], [0, "cl100k_base"]]) {
  const tok = x.tok_new(code);
  console.log(`\n${name} per class (MB/s, fastest of 3 interleaved runs; new = count, old = count_with_tiktoken_merge)`);
  console.log("| class | bytes | old MB/s | new MB/s | new/old | new ms per 4 MiB |");
  console.log("|---|---:|---:|---:|---:|---:|");
  for (const f of readdirSync(dir).filter((f) => f.startsWith(`${name}-class-`) && f.endsWith(".txt")).sort()) {
    const kind = f.slice(`${name}-class-`.length, -4);
    const text = readFileSync(`${dir}/${f}`);
    const want = Number(readFileSync(`${dir}/${f.slice(0, -4)}.count`, "utf8"));
    const ptr = x.buf_new(text.length);
    new Uint8Array(x.memory.buffer, ptr, text.length).set(text);
    let oldMs = Infinity, newMs = Infinity;
    for (let i = 0; i < 3; i++) {
      t = performance.now();
      const a = x.tok_count_old(tok, ptr, text.length);
      oldMs = Math.min(oldMs, performance.now() - t);
      t = performance.now();
      const b = x.tok_count(tok, ptr, text.length);
      newMs = Math.min(newMs, performance.now() - t);
      if (a !== want || b !== want) {
        ok = false;
        console.log(`  ${kind}: counts old ${a} new ${b}, expected ${want}: DIFFERENT`);
      }
    }
    const mbs = (ms) => text.length / 1e3 / ms;
    console.log(`| ${kind.replaceAll("_", " ")} | ${text.length} | ${mbs(oldMs).toFixed(1)} | ${mbs(newMs).toFixed(1)} | ${(oldMs / newMs).toFixed(1)}x | ${(newMs * 4194304 / text.length).toFixed(0)} |`);
  }
}
process.exit(ok ? 0 : 1);
