//! `sluice-rocketmq`: upstream's name server and broker mains (vendor/,
//! copied) in one binary, so a release build makes one LTO link instead of
//! two. It is installed under upstream's names (`rocketmq-namesrv-rust`,
//! `rocketmq-broker-rust`, links or copies) and runs the main its name picks
//! ([`sluice_broker::role_of`]); the arguments reach that main unchanged.

// Upstream's mains build deeply nested futures; the limit is the crate's, so
// it moved here from the top of each copied file.
#![recursion_limit = "512"]

#[path = "../../vendor/rocketmq-broker-rust.rs"]
mod broker;
#[path = "../../vendor/rocketmq-namesrv-rust.rs"]
mod namesrv;

use sluice_broker::Role;

fn main() {
    let argv0 = std::env::args_os().next();
    match sluice_broker::role_of(argv0.as_deref()) {
        Some(Role::NameServer) => namesrv::main(),
        Some(Role::Broker) => broker::main(),
        None => {
            eprintln!("{}", sluice_broker::usage(argv0.as_deref()));
            std::process::exit(2);
        }
    }
}
