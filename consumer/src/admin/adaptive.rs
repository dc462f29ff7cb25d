//! Admin routes of the adaptive controllers and fair sharing:
//!
//! * `GET /controller/<model>`: the shared limit and the override, as JSON;
//! * `PUT /controller/<model>?limit=<n>|auto`: an operator's limit, which
//!   wins over the controller on every instance until set back to `auto`;
//! * `GET /weights`: the run-time weights, as JSON;
//! * `PUT /weights/<tenant>?weight=<w>|default`: a tenant's fair-share
//!   weight on every instance (`default`: back to the configured one).

use crate::admin::rates::{keyword_or, AdminState};
use crate::metrics::ChangeLabels;
use crate::sharing::control_loop;
use crate::sharing::controller::Reason;
use crate::sharing::fair::valid_weight;
use axum::extract::{Path, Query, State};
use axum::http::StatusCode;
use axum::response::IntoResponse;
use redis::AsyncCommands;
use sluice_contract::keys;
use std::collections::HashMap;

type Answer = (StatusCode, [(&'static str, &'static str); 1], String);

fn text(status: StatusCode, body: String) -> Answer {
    (status, [("content-type", "text/plain")], body)
}

fn json(value: serde_json::Value) -> Answer {
    (
        StatusCode::OK,
        [("content-type", "application/json")],
        format!("{value}\n"),
    )
}

fn unavailable(error: redis::RedisError) -> Answer {
    text(StatusCode::SERVICE_UNAVAILABLE, format!("{error}\n"))
}

/// The answer of `GET /controller/<model>`.
#[derive(Clone, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct ControllerView {
    pub model: String,
    /// The limit in force on calls in flight to the model, all instances
    /// together; `None` before the controller's first step.
    pub limit: Option<f64>,
    /// An operator's limit, which wins over the controller.
    #[serde(rename = "override")]
    pub manual: Option<f64>,
}

/// An override as an operator writes it: a whole number ≥ 1, or `auto`.
pub fn parse_override(value: &str) -> Result<Option<u32>, String> {
    keyword_or(
        value,
        "auto",
        |n: &u32| *n >= 1,
        "limit must be a whole number ≥ 1 or 'auto'",
    )
}

/// A weight as an operator writes it: a positive number, or `default`.
pub fn parse_weight(value: &str) -> Result<Option<f64>, String> {
    keyword_or(
        value,
        "default",
        |w: &f64| valid_weight(*w),
        "weight must be a positive number or 'default'",
    )
}

/// Query parameter `key`, parsed; a 400 saying `usage` when it is missing,
/// or why it does not parse.
fn required_setting<T>(
    query: &HashMap<String, String>,
    key: &str,
    usage: &str,
    parse: fn(&str) -> Result<T, String>,
) -> Result<T, Answer> {
    let Some(value) = query.get(key) else {
        return Err(text(StatusCode::BAD_REQUEST, format!("{usage} required\n")));
    };
    parse(value).map_err(|e| text(StatusCode::BAD_REQUEST, format!("{e}\n")))
}

pub(crate) async fn show_controller(
    State(s): State<AdminState>,
    Path(model): Path<String>,
) -> impl IntoResponse {
    let mut redis = s.pacer.redis();
    match control_loop::shared_state(&mut redis, &model).await {
        Ok((limit, manual)) => json(serde_json::json!(ControllerView {
            model,
            limit,
            manual,
        })),
        Err(error) => unavailable(error),
    }
}

pub(crate) async fn set_override(
    State(s): State<AdminState>,
    Path(model): Path<String>,
    Query(q): Query<HashMap<String, String>>,
) -> Result<Answer, Answer> {
    let limit = required_setting(&q, "limit", "limit=<n>|auto", parse_override)?;
    let mut redis = s.pacer.redis();
    control_loop::set_override(&mut redis, &model, limit)
        .await
        .map_err(unavailable)?;
    s.metrics
        .control
        .changes
        .get_or_create(&ChangeLabels {
            model: s.metrics.model_label(&model).model,
            reason: Reason::Override.as_str(),
        })
        .inc();
    tracing::info!(%model, limit = ?limit, "controller: operator override set (none = back to the controller)");
    Ok(text(StatusCode::OK, "applied\n".into()))
}

pub(crate) async fn list_weights(State(s): State<AdminState>) -> impl IntoResponse {
    let mut redis = s.pacer.redis();
    match redis
        .hgetall::<_, HashMap<String, String>>(keys::FAIR_WEIGHTS)
        .await
    {
        Ok(map) => json(serde_json::json!(map
            .into_iter()
            .filter_map(|(t, w)| Some((t, w.parse::<f64>().ok()?)))
            .collect::<HashMap<String, f64>>())),
        Err(error) => unavailable(error),
    }
}

pub(crate) async fn set_weight(
    State(s): State<AdminState>,
    Path(tenant): Path<String>,
    Query(q): Query<HashMap<String, String>>,
) -> Result<Answer, Answer> {
    let weight = required_setting(&q, "weight", "weight=<w>|default", parse_weight)?;
    control_loop::set_weight(&mut s.pacer.redis(), &tenant, weight)
        .await
        .map_err(unavailable)?;
    tracing::info!(%tenant, weight = ?weight, "fair-share weight set (none = configured)");
    Ok(text(StatusCode::OK, "applied\n".into()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn overrides_parse() {
        assert_eq!(parse_override("auto"), Ok(None));
        assert_eq!(parse_override("12"), Ok(Some(12)));
        assert!(parse_override("0").is_err());
        assert!(parse_override("-1").is_err());
        assert!(parse_override("1.5").is_err());
        assert_eq!(parse_weight("default"), Ok(None));
        assert_eq!(parse_weight("2.5"), Ok(Some(2.5)));
        assert!(parse_weight("0").is_err());
        assert!(parse_weight("NaN").is_err());
    }
}
