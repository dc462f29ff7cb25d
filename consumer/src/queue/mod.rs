//! The pop loop: LiteTopics in, each message gated (in-flight cap, pace,
//! fair turn) before its call, then acked or run again later.

pub(crate) mod gate;
pub(crate) mod runner;
