//! Load time, memory and counting speed of a Hugging Face tokenizer.json:
//! `cargo run --release -p sluice-tokenizer --features hf --example hf_load -- PATH/tokenizer.json`
use std::time::Instant;

fn main() {
    let Some(path) = std::env::args().nth(1) else {
        eprintln!("usage: hf_load PATH/tokenizer.json");
        std::process::exit(2);
    };
    let bytes = match std::fs::read(&path) {
        Ok(b) => b,
        Err(e) => {
            eprintln!("{path}: {e}");
            std::process::exit(1);
        }
    };
    for _ in 0..3 {
        let t0 = Instant::now();
        match sluice_tokenizer::HfTokenizer::from_json(&bytes) {
            Ok(tok) => {
                let load = t0.elapsed();
                let text = "The quick brown fox jumps over the lazy dog. 人工智能正在改变世界。 fn main() { let x = 42; }\n".repeat(2000);
                let t1 = Instant::now();
                let n = tok.count(&text);
                let dt = t1.elapsed();
                println!(
                    "{path}: load {:.0} ms, tables {:.1} MiB; count {} bytes -> {n} tokens in {:.2} ms ({:.0} MB/s)",
                    load.as_secs_f64() * 1e3,
                    tok.memory_bytes() as f64 / (1 << 20) as f64,
                    text.len(),
                    dt.as_secs_f64() * 1e3,
                    text.len() as f64 / dt.as_secs_f64() / 1e6
                );
            }
            Err(e) => println!("{path}: {e}"),
        }
    }
    // Pathological inputs: 1 MiB of one character repeated.
    if let Ok(tok) = sluice_tokenizer::HfTokenizer::from_json(&bytes) {
        for (name, unit) in [
            ("<", "<"),
            ("<｜", "<｜"),
            ("a", "a"),
            (" ", " "),
            ("1", "1"),
            ("é", "e\u{301}"),
        ] {
            let text = unit.repeat((1 << 20) / unit.len());
            let t = Instant::now();
            let n = tok.count(&text);
            println!(
                "  1 MiB of {name:?}: {n} tokens in {:.0} ms",
                t.elapsed().as_secs_f64() * 1e3
            );
        }
    }
}
