//! The deferral endpoint's response side: Redis Streams → the client.

pub mod hub;
pub mod sse;
