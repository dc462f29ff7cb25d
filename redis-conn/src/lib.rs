//! One way for every Sluice component to reach Redis: a single server,
//! Redis Cluster or a Sentinel-managed master, with ACL credentials and TLS,
//! named by one URL (see [`address`]) plus a password file and timeouts
//! ([`RedisOptions`]).
//!
//! Cluster and Sentinel support are redis-rs's own (slot routing, MOVED/ASK,
//! master discovery); this crate only picks the right client for the URL and
//! follows a Sentinel failover, which redis-rs leaves to its users.

pub mod address;
mod conn;
pub mod retry;
mod sentinel;

pub use address::{AddressError, Topology};
pub use conn::{cross_slot_errors, OptionsError, RedisClient, RedisConn, RedisOptions};
