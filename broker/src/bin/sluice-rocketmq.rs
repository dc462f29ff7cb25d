//! `sluice-rocketmq`: upstream's name server and broker mains (vendor/,
//! copied, in this crate's library) in one binary, for a build of the broker
//! alone; set-up's release build makes `sluice-rocketmq` a link to the
//! `sluice` multi-call binary instead, which runs the same mains by the same
//! names. It is installed under upstream's names (`rocketmq-namesrv-rust`,
//! `rocketmq-broker-rust`, links or copies) and runs the main its name picks
//! ([`sluice_broker::role_of`]); the arguments reach that main unchanged.

fn main() {
    let argv0 = std::env::args_os().next();
    match sluice_broker::role_of(argv0.as_deref()) {
        Some(role) => sluice_broker::run(role),
        None => {
            eprintln!("{}", sluice_broker::usage(argv0.as_deref()));
            std::process::exit(2);
        }
    }
}
