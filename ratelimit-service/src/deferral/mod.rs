//! The deferral endpoint's response side: Redis Streams → the client.

pub mod body;
pub mod caps;
pub mod endpoint;
pub mod hub;
pub mod publisher;
pub mod secrets;
pub mod sse;
