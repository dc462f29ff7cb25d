//! The consumer's admin HTTP API: `/metrics`, `/healthz`, run-time rate
//! changes ([`crate::admin::rates`]), the controllers' overrides and the
//! fair-share weights ([`crate::admin::adaptive`]), writes behind
//! [`crate::admin::auth`].

use crate::admin::adaptive;
use crate::admin::auth::{self, WritePolicy};
use crate::admin::rates::{self, AdminState};
use crate::metrics::Metrics;
use crate::pacing::pacer::Pacer;
use axum::extract::State;
use axum::routing::{get, put};
use axum::Router;
use std::sync::Arc;

/// The admin routes over `metrics` and `pacer`, writes behind `writes`
/// (refusals counted in `metrics`).
pub fn router(metrics: Arc<Metrics>, pacer: Arc<Pacer>, writes: WritePolicy) -> Router {
    let refused = metrics.admin_refused.clone();
    let routes = Router::new()
        .route(
            "/metrics",
            get(|State(s): State<AdminState>| async move { s.metrics.encode() }),
        )
        .route("/healthz", get(|| async { "ok\n" }))
        .route("/rates", get(rates::list_rates))
        .route("/rates/{model}", put(rates::set_column))
        .route("/rates/{model}/{tenant}", put(rates::set_bucket))
        .route("/factor/{model}", put(rates::set_factor))
        .route(
            "/controller/{model}",
            get(adaptive::show_controller).put(adaptive::set_override),
        )
        .route("/weights", get(adaptive::list_weights))
        .route("/weights/{tenant}", put(adaptive::set_weight))
        .with_state(AdminState { metrics, pacer });
    auth::protect(routes, writes, refused)
}
