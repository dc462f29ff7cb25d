//! How a model's capacity is found and shared: the adaptive controllers
//! (how much, from the model server's signals), fair sharing (which tenant
//! gets the next slot) and the consumer group's membership (which instance
//! owns which bucket, and its share of the limit).

pub mod charge;
pub mod control_loop;
pub mod controller;
pub mod fair;
pub(crate) mod membership;
pub mod signals;
