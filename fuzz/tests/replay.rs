//! Every fuzz target, run on its seed corpus (`fuzz/corpus/<target>`) and on
//! every crash input kept from fuzzing (`fuzz/regressions/<target>`), through
//! the same entry points libFuzzer calls: a panic fails the test.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // tests fail loudly

use std::fs;
use std::path::Path;

use sluice_fuzz::{fuzz_dir, Target, TARGETS};

/// The files of one folder, sorted; none when it does not exist.
fn inputs(dir: &Path) -> Vec<(String, Vec<u8>)> {
    let Ok(entries) = fs::read_dir(dir) else {
        return Vec::new();
    };
    let mut files: Vec<(String, Vec<u8>)> = entries
        .filter_map(Result::ok)
        .filter(|entry| entry.path().is_file())
        .map(|entry| {
            let path = entry.path();
            let bytes = fs::read(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
            (path.display().to_string(), bytes)
        })
        .collect();
    files.sort();
    files
}

fn replay(target: &Target) -> usize {
    let mut count = 0;
    for folder in ["corpus", "regressions"] {
        for (name, bytes) in inputs(&fuzz_dir().join(folder).join(target.name)) {
            let outcome = std::panic::catch_unwind(|| (target.run)(&bytes));
            assert!(outcome.is_ok(), "{}: panicked on {name}", target.name);
            count += 1;
        }
    }
    count
}

#[test]
fn every_target_has_seeds_and_survives_them() {
    for target in TARGETS {
        let seeds = inputs(&fuzz_dir().join("corpus").join(target.name)).len();
        assert!(seeds >= 3, "{}: only {seeds} seed files", target.name);
        let replayed = replay(target);
        println!("{}: {replayed} inputs replayed", target.name);
    }
}

#[test]
fn every_target_has_a_libfuzzer_binary() {
    for target in TARGETS {
        let source = fuzz_dir()
            .join("libfuzzer/fuzz_targets")
            .join(format!("{}.rs", target.name));
        let text =
            fs::read_to_string(&source).unwrap_or_else(|e| panic!("{}: {e}", source.display()));
        assert!(
            text.contains(&format!("sluice_fuzz::{}", target.name)),
            "{} does not call sluice_fuzz::{}",
            source.display(),
            target.name
        );
    }
}
