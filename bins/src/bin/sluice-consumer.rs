//! `sluice-consumer`: see [`sluice_bins::consumer`].

// glibc's malloc serialises on arena locks under many small, short-lived
// allocations (h2 frames, protobuf messages); mimalloc does not.
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> std::process::ExitCode {
    sluice_bins::Program::Consumer.run_main()
}
