//! Admin HTTP endpoints: `/metrics`, `/healthz`, `/readyz` (also as
//! `/healthcheck`, envoyproxy/ratelimit's path, for probes written for it).

use crate::limiter::Limiter;
use axum::extract::State;
use axum::http::{header, StatusCode};
use axum::response::IntoResponse;
use axum::routing::get;
use axum::Router;
use std::sync::Arc;

pub fn router(limiter: Arc<Limiter>) -> Router {
    Router::new()
        .route("/metrics", get(metrics))
        .route("/healthz", get(|| async { "ok\n" }))
        .route("/readyz", get(ready))
        .route("/healthcheck", get(ready))
        .with_state(limiter)
}

async fn metrics(State(limiter): State<Arc<Limiter>>) -> impl IntoResponse {
    (
        [(
            header::CONTENT_TYPE,
            "application/openmetrics-text; version=1.0.0; charset=utf-8",
        )],
        limiter.metrics().encode(),
    )
}

/// Ready when the counter store answers: a limiter without its store can only
/// answer UNAVAILABLE.
async fn ready(State(limiter): State<Arc<Limiter>>) -> impl IntoResponse {
    match limiter.store().ping().await {
        Ok(()) => (StatusCode::OK, "ready\n".to_string()),
        Err(error) => (
            StatusCode::SERVICE_UNAVAILABLE,
            format!("not ready: {error}\n"),
        ),
    }
}
