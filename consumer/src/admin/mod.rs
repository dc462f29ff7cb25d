//! The consumer's admin HTTP API and who may write through it: metrics,
//! health, run-time rates, the controllers' overrides and fair-share
//! weights, served by `sluice-consumer` and by `sluice-rls` in in-process mode.

pub(crate) mod adaptive;
pub(crate) mod auth;
pub(crate) mod listener;
pub(crate) mod rates;
pub(crate) mod router;
