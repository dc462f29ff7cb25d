//! The second, pure half of a decision: the store's outcome and the plan in,
//! the RLS response and the metric events out.

use super::plan::{Applied, Plan, Resolved};
use crate::config::{Limit, OverLimitAction, Priority};
use crate::store::CounterOutcome;
use sluice_admission::descriptors::sluice_metadata;
use sluice_proto::pb::envoy::config::core::v3::HeaderValue;
use sluice_proto::pb::envoy::extensions::common::ratelimit::v3::RateLimitDescriptor;
use sluice_proto::pb::envoy::service::ratelimit::v3::rate_limit_response::{
    Code, DescriptorStatus, RateLimit,
};
use sluice_proto::pb::envoy::service::ratelimit::v3::{RateLimitRequest, RateLimitResponse};
use sluice_proto::pb::google::protobuf::{value::Kind, ListValue, Struct, Value};
use std::collections::BTreeMap;

/// Key of Sluice's block inside `RateLimitResponse.dynamic_metadata`.
pub const METADATA_NAMESPACE: &str = sluice_metadata::NAMESPACE;

/// A metric update the decision calls for; the limiter records it.
#[derive(Debug)]
pub enum MetricEvent<'p> {
    /// The limit's counter moved up by `hits`.
    Hits { limit: &'p Limit, hits: u64 },
    /// A shadow-mode limit was over (and let the request pass).
    ShadowModeHit { limit: &'p Limit },
    /// An enforced limit was over.
    OverLimit { limit: &'p Limit },
    /// A `detailed_metric` limit's per-descriptor count.
    Detailed {
        limit: &'p Limit,
        /// `key=value,...` of the descriptor.
        descriptor: String,
        code: &'static str,
    },
}

/// The decision: what goes back to Envoy and what the metrics record.
#[derive(Debug)]
pub struct Answer<'p> {
    pub response: RateLimitResponse,
    pub events: Vec<MetricEvent<'p>>,
}

/// One limited descriptor's reading of the store's outcome.
struct Reading<'p> {
    applied: &'p Applied,
    remaining: u64,
    /// Over an enforced limit.
    blocking: bool,
}

/// Answers `request` from its `plan` and the store's `outcome`.
pub fn answer<'p>(
    request: &RateLimitRequest,
    plan: &'p Plan,
    outcome: &CounterOutcome,
) -> Answer<'p> {
    let now = plan.now_millis;
    let mut response = RateLimitResponse {
        overall_code: Code::Ok as i32,
        ..Default::default()
    };
    let mut events = Vec::new();
    let mut tightest: Option<Reading<'p>> = None;
    let mut over_limits: Vec<&Limit> = Vec::new();
    let mut retry_after_secs = 0u64;
    for (descriptor, entry) in request.descriptors.iter().zip(&plan.resolved) {
        let status = match entry {
            Resolved::None => DescriptorStatus {
                code: Code::Ok as i32,
                ..Default::default()
            },
            Resolved::Unlimited => DescriptorStatus {
                code: Code::Ok as i32,
                limit_remaining: u32::MAX,
                ..Default::default()
            },
            Resolved::Limited(applied) => {
                let reading = read(plan, applied, outcome, descriptor, &mut events);
                if reading.blocking {
                    retry_after_secs =
                        retry_after_secs.max(applied.window.seconds_until_reset(now));
                    over_limits.push(&applied.limit);
                    response.overall_code = Code::OverLimit as i32;
                }
                let status = limited_status(&reading, now);
                if is_tighter(&reading, tightest.as_ref()) && !applied.limit.shadow_mode {
                    tightest = Some(reading);
                }
                status
            }
        };
        response.statuses.push(status);
    }
    if let Some(reading) = &tightest {
        response
            .response_headers_to_add
            .extend(rate_limit_headers(reading, now));
    }
    if response.overall_code == Code::OverLimit as i32 {
        response
            .response_headers_to_add
            .push(header("Retry-After", retry_after_secs.max(1).to_string()));
    }
    if !over_limits.is_empty() {
        response.dynamic_metadata = Some(sluice_metadata(&over_limits, retry_after_secs));
    } else if outcome.applied && plan.ops.iter().any(|op| op.hits > 0) {
        response.dynamic_metadata = Some(charged_at_metadata(now));
    }
    Answer { response, events }
}

/// Reads one limited descriptor's counter from the outcome, noting the
/// metric events it calls for.
fn read<'p>(
    plan: &'p Plan,
    applied: &'p Applied,
    outcome: &CounterOutcome,
    descriptor: &RateLimitDescriptor,
    events: &mut Vec<MetricEvent<'p>>,
) -> Reading<'p> {
    let op = &plan.ops[applied.op_index];
    let before = outcome.before.get(applied.op_index).copied().unwrap_or(0);
    let over = op.is_over(before);
    let used = if outcome.applied {
        op.apply_to(before)
    } else {
        before
    };
    let limit = &*applied.limit;
    let blocking = over && !limit.shadow_mode;
    if outcome.applied && op.hits > 0 {
        events.push(MetricEvent::Hits {
            limit,
            hits: op.hits as u64,
        });
    }
    if over && limit.shadow_mode {
        events.push(MetricEvent::ShadowModeHit { limit });
    }
    if blocking {
        events.push(MetricEvent::OverLimit { limit });
    }
    if limit.detailed_metric {
        events.push(MetricEvent::Detailed {
            limit,
            descriptor: descriptor_label(descriptor),
            code: if blocking { "over_limit" } else { "ok" },
        });
    }
    Reading {
        applied,
        remaining: op.limit.saturating_sub(used),
        blocking,
    }
}

fn descriptor_label(descriptor: &RateLimitDescriptor) -> String {
    descriptor
        .entries
        .iter()
        .map(|e| format!("{}={}", e.key, e.value))
        .collect::<Vec<_>>()
        .join(",")
}

fn limited_status(reading: &Reading<'_>, now: u64) -> DescriptorStatus {
    let limit = &reading.applied.limit;
    let code = if reading.blocking {
        Code::OverLimit
    } else {
        Code::Ok
    };
    let reset_millis = reading.applied.window.millis_until_reset(now);
    DescriptorStatus {
        code: code as i32,
        current_limit: Some(RateLimit {
            name: limit.name.clone(),
            requests_per_unit: limit.requests_per_unit,
            unit: limit.unit.proto_value(),
        }),
        limit_remaining: reading.remaining.min(u64::from(u32::MAX)) as u32,
        duration_until_reset: Some(sluice_proto::pb::google::protobuf::Duration {
            seconds: (reset_millis / 1000) as i64,
            nanos: ((reset_millis % 1000) * 1_000_000) as i32,
        }),
        quota: None,
    }
}

/// The headers describe the limit that blocks, if any; else the one with the
/// least left; the first such descriptor on a tie.
fn is_tighter(reading: &Reading<'_>, than: Option<&Reading<'_>>) -> bool {
    match than {
        None => true,
        Some(other) => {
            (reading.blocking, std::cmp::Reverse(reading.remaining))
                > (other.blocking, std::cmp::Reverse(other.remaining))
        }
    }
}

fn rate_limit_headers(reading: &Reading<'_>, now: u64) -> [HeaderValue; 4] {
    let limit = &reading.applied.limit;
    let window = reading.applied.window;
    [
        header("RateLimit-Limit", limit.requests_per_unit.to_string()),
        header("RateLimit-Remaining", reading.remaining.to_string()),
        header(
            "RateLimit-Reset",
            (window.seconds_until_reset(now) as u32).to_string(),
        ),
        header(
            "RateLimit-Policy",
            format!("{};w={}", limit.requests_per_unit, window.length),
        ),
    ]
}

fn header(key: &str, value: String) -> HeaderValue {
    HeaderValue {
        key: key.to_string(),
        value,
        raw_value: Vec::new(),
    }
}

/// `{"sluice": {"charged_at_ms": "<now>"}}`: which windows an allowed
/// request was charged in, for its later correction.
fn charged_at_metadata(now_millis: u64) -> Struct {
    let mut fields = BTreeMap::new();
    fields.insert(
        sluice_metadata::CHARGED_AT_MS.to_string(),
        Value {
            kind: Some(Kind::StringValue(now_millis.to_string())),
        },
    );
    in_namespace(fields)
}

fn in_namespace(fields: BTreeMap<String, Value>) -> Struct {
    let mut outer = BTreeMap::new();
    outer.insert(
        METADATA_NAMESPACE.to_string(),
        Value {
            kind: Some(Kind::StructValue(Struct {
                fields: fields.into_iter().collect(),
            })),
        },
    );
    Struct {
        fields: outer.into_iter().collect(),
    }
}

/// Sluice's instructions to the filter, under `dynamic_metadata.sluice`, sent
/// with OVER_LIMIT answers (an allowed request needs no instructions, only
/// [`charged_at_metadata`]):
/// * `action`: `defer` if every limit that is over says defer, else `reject`;
/// * `priority`: the lowest class among the limits that are over: the most
///   cautious reading;
/// * `over_limits`: names of the limits that are over;
/// * `retry_after_seconds`: when over, until the last of them resets.
fn sluice_metadata(over: &[&Limit], retry_after_secs: u64) -> Struct {
    let string = |s: &str| Value {
        kind: Some(Kind::StringValue(s.to_string())),
    };
    let action = if over
        .iter()
        .all(|l| l.sluice.over_limit == OverLimitAction::Defer)
    {
        OverLimitAction::Defer
    } else {
        OverLimitAction::Reject
    };
    let priority = over
        .iter()
        .map(|l| l.sluice.priority)
        .min()
        .unwrap_or(Priority::Normal);
    let mut fields = BTreeMap::new();
    fields.insert(sluice_metadata::ACTION.to_string(), string(action.as_str()));
    fields.insert(
        sluice_metadata::PRIORITY.to_string(),
        string(priority.as_str()),
    );
    fields.insert(
        sluice_metadata::OVER_LIMITS.to_string(),
        Value {
            kind: Some(Kind::ListValue(ListValue {
                values: over.iter().map(|l| string(&l.name)).collect(),
            })),
        },
    );
    fields.insert(
        sluice_metadata::RETRY_AFTER_SECONDS.to_string(),
        Value {
            kind: Some(Kind::NumberValue(retry_after_secs as f64)),
        },
    );
    in_namespace(fields)
}
