//! Sluice demo: the whole stack on loopback ports and a scripted scenario
//! ([`chart`] is reusable by benches).

pub mod adaptive;
pub mod stats;
