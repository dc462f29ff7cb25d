//! The consumer's admin HTTP API: `/metrics`, `/healthz`, and run-time
//! rate changes (`GET /rates`, `PUT /rates/<model>[/<tenant>]`,
//! `PUT /factor/<model>`; the controllers' overrides and the fair-share
//! weights: see [`crate::admin_adaptive`]), served by `sluice-consumer` and by `sluice-rls`
//! in in-process mode.

use crate::admin_auth::{self, WritePolicy};
use crate::keys::Dimension;
use crate::pacing::{RateSetting, Scope};
use crate::{Metrics, Pacer};
use axum::extract::{Path, Query, State};
use axum::http::StatusCode;
use axum::response::IntoResponse;
use axum::routing::{get, put};
use axum::Router;
use std::collections::HashMap;
use std::sync::Arc;

#[derive(Clone)]
pub(crate) struct AdminState {
    pub(crate) metrics: Arc<Metrics>,
    pub(crate) pacer: Arc<Pacer>,
}

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
        .route("/rates", get(list_rates))
        .route("/rates/{model}", put(set_column))
        .route("/rates/{model}/{tenant}", put(set_bucket))
        .route("/factor/{model}", put(set_factor))
        .route(
            "/controller/{model}",
            get(crate::admin_adaptive::show_controller).put(crate::admin_adaptive::set_override),
        )
        .route("/weights", get(crate::admin_adaptive::list_weights))
        .route("/weights/{tenant}", put(crate::admin_adaptive::set_weight))
        .with_state(AdminState { metrics, pacer });
    admin_auth::protect(routes, writes, refused)
}

/// A rate as an operator writes it: a non-negative number or `unlimited`
/// (`None` = unlimited).
pub fn parse_rate(value: &str) -> Result<Option<f64>, String> {
    keyword_or(
        value,
        "unlimited",
        |r: &f64| r.is_finite() && *r >= 0.0,
        "must be a non-negative number or 'unlimited'",
    )
}

/// An operator's setting: `keyword` (`None`: back to the default) or a `T`
/// that `valid` accepts; anything else is `error`.
pub(crate) fn keyword_or<T: std::str::FromStr>(
    value: &str,
    keyword: &str,
    valid: impl Fn(&T) -> bool,
    error: &str,
) -> Result<Option<T>, String> {
    if value == keyword {
        return Ok(None);
    }
    value
        .parse::<T>()
        .ok()
        .filter(valid)
        .map(Some)
        .ok_or_else(|| error.to_string())
}

/// A rate from a query parameter (see [`parse_rate`]).
fn setting(query: &HashMap<String, String>, key: &str) -> Result<Option<RateSetting>, String> {
    query
        .get(key)
        .map(|v| match parse_rate(v) {
            Ok(None) => Ok(RateSetting::Unlimited),
            Ok(Some(r)) => Ok(RateSetting::PerSecond(r)),
            Err(e) => Err(format!("{key} {e}")),
        })
        .transpose()
}

async fn apply(
    pacer: &Pacer,
    scope: Scope<'_>,
    query: &HashMap<String, String>,
) -> (StatusCode, String) {
    let (rps, tps) = match (
        setting(query, "requests_per_second"),
        setting(query, "tokens_per_second"),
    ) {
        (Ok(r), Ok(t)) => (r, t),
        (Err(e), _) | (_, Err(e)) => return (StatusCode::BAD_REQUEST, format!("{e}\n")),
    };
    if rps.is_none() && tps.is_none() {
        return (
            StatusCode::BAD_REQUEST,
            "set requests_per_second and/or tokens_per_second\n".into(),
        );
    }
    for (dimension, value) in [(Dimension::Requests, rps), (Dimension::Tokens, tps)] {
        let Some(value) = value else { continue };
        let rate = match value {
            RateSetting::Unlimited => None,
            RateSetting::PerSecond(r) => Some(r),
        };
        if let Err(e) = pacer.set_rate(scope, dimension, rate).await {
            return (StatusCode::BAD_REQUEST, format!("{e}\n"));
        }
    }
    (StatusCode::OK, "applied\n".into())
}

/// `GET /rates`: every model column's overrides, as JSON.
async fn list_rates(State(s): State<AdminState>) -> impl IntoResponse {
    let listing = async {
        let mut out = serde_json::Map::new();
        for model in s.pacer.models_with_overrides().await? {
            let overrides = s.pacer.column_overrides(&model).await?;
            out.insert(model, serde_json::to_value(overrides).unwrap_or_default());
        }
        Ok::<_, crate::pacing::PacingError>(serde_json::Value::Object(out))
    };
    match listing.await {
        Ok(json) => (
            StatusCode::OK,
            [("content-type", "application/json")],
            format!("{json}\n"),
        ),
        Err(e) => (
            StatusCode::SERVICE_UNAVAILABLE,
            [("content-type", "text/plain")],
            format!("{e}\n"),
        ),
    }
}

/// `PUT /rates/<model>?requests_per_second=2&tokens_per_second=unlimited`
async fn set_column(
    State(s): State<AdminState>,
    Path(model): Path<String>,
    Query(q): Query<HashMap<String, String>>,
) -> impl IntoResponse {
    apply(&s.pacer, Scope::Column { model: &model }, &q).await
}

/// `PUT /rates/<model>/<tenant>?requests_per_second=0.5`
async fn set_bucket(
    State(s): State<AdminState>,
    Path((model, tenant)): Path<(String, String)>,
    Query(q): Query<HashMap<String, String>>,
) -> impl IntoResponse {
    apply(
        &s.pacer,
        Scope::Bucket {
            tenant: &tenant,
            model: &model,
        },
        &q,
    )
    .await
}

/// `PUT /factor/<model>?factor=0.5`: tightens (or loosens) every bucket of the model.
async fn set_factor(
    State(s): State<AdminState>,
    Path(model): Path<String>,
    Query(q): Query<HashMap<String, String>>,
) -> impl IntoResponse {
    let Some(factor) = q.get("factor").and_then(|f| f.parse::<f64>().ok()) else {
        return (
            StatusCode::BAD_REQUEST,
            "factor=<number> required\n".to_string(),
        );
    };
    match s.pacer.set_model_factor(&model, factor).await {
        Ok(()) => (StatusCode::OK, "applied\n".into()),
        Err(e) => (StatusCode::BAD_REQUEST, format!("{e}\n")),
    }
}
