//! `sluice`: sluice-rls, sluice-consumer and sluice-allinone in one binary,
//! and the RocketMQ name server and broker (sluice-broker's copies of
//! upstream's mains), run by the name it is called by (see
//! [`sluice_bins::program_of`]). Set-up's release build links this one
//! instead of the five (one LTO link, not two or five: each link
//! re-optimises every crate in it, and these share most of theirs) and
//! names it `sluice-rls`, `sluice-consumer`, `sluice-allinone` and
//! `sluice-rocketmq`; each program reads its arguments as its own binary
//! does.

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
