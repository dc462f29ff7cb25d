//! `sluice`: sluice-rls, sluice-consumer and sluice-allinone in one binary,
//! run by the name it is called by (see [`sluice_bins::program_of`]). Set-up's
//! release build links this one instead of the three (one LTO link, not
//! three) and names it three times; each program reads its arguments as its
//! own binary does.

// glibc's malloc serialises on arena locks under many small, short-lived
// allocations (h2 frames, protobuf messages); mimalloc does not.
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> std::process::ExitCode {
    let argv0 = std::env::args_os().next();
    match sluice_bins::program_of(argv0.as_deref()) {
        Some(program) => program.run_main(),
        None => {
            eprintln!("{}", sluice_bins::usage(argv0.as_deref()));
            std::process::ExitCode::from(2)
        }
    }
}
