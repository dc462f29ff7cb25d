//! Admin routes of run-time rate changes (`GET /rates`,
//! `PUT /rates/<model>[/<tenant>]`, `PUT /factor/<model>`), and what every
//! admin route shares: its state and how an operator's setting is parsed.

use crate::keys::Dimension;
use crate::pacing::pacer::{RateSetting, Scope};
use crate::{Metrics, Pacer};
use axum::extract::{Path, Query, State};
use axum::http::StatusCode;
use axum::response::IntoResponse;
use std::collections::HashMap;
use std::sync::Arc;

#[derive(Clone)]
pub(crate) struct AdminState {
    pub(crate) metrics: Arc<Metrics>,
    pub(crate) pacer: Arc<Pacer>,
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
pub(crate) async fn list_rates(State(s): State<AdminState>) -> impl IntoResponse {
    let listing = async {
        let mut out = serde_json::Map::new();
        for model in s.pacer.models_with_overrides().await? {
            let overrides = s.pacer.column_overrides(&model).await?;
            out.insert(model, serde_json::to_value(overrides).unwrap_or_default());
        }
        Ok::<_, crate::pacing::pacer::PacingError>(serde_json::Value::Object(out))
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
pub(crate) async fn set_column(
    State(s): State<AdminState>,
    Path(model): Path<String>,
    Query(q): Query<HashMap<String, String>>,
) -> impl IntoResponse {
    apply(&s.pacer, Scope::Column { model: &model }, &q).await
}

/// `PUT /rates/<model>/<tenant>?requests_per_second=0.5`
pub(crate) async fn set_bucket(
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
pub(crate) async fn set_factor(
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
