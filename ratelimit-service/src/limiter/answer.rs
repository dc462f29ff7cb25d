//! The second, pure half of a decision: the store's outcome and the plan in,
//! the RLS response and the metric events out.

use super::options::{
    HeaderStyle, ResponseOptions, UpstreamHeaderNames, RATELIMIT_LIMIT, RATELIMIT_POLICY,
    RATELIMIT_REMAINING, RATELIMIT_RESET, RETRY_AFTER,
};
use super::plan::{Applied, Plan, Resolved};
use crate::config::{Limit, OverLimitAction, Priority};
use crate::store::CounterOutcome;
use crate::window::Window;
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
    /// An enforced (or quota-mode) limit was over.
    OverLimit { limit: &'p Limit },
    /// A `detailed_metric` limit's per-descriptor count.
    Detailed {
        limit: &'p Limit,
        /// `key=value,...` of the descriptor.
        descriptor: String,
        code: &'static str,
    },
    /// `--global-shadow-mode` turned an OVER_LIMIT answer into OK.
    GlobalShadowMode,
    /// A limited descriptor's decision, for upstream's stats (`--upstream-metrics`).
    Upstream {
        limit: &'p Limit,
        hit: crate::metrics::UpstreamHit,
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
    applied: &'p Applied<'p>,
    remaining: u64,
    /// Over an enforced limit: the request is over.
    blocking: bool,
    /// Over a quota-mode limit: the request is over only if every
    /// quota-mode descriptor of it is.
    quota_over: bool,
}

impl Reading<'_> {
    fn is_over(&self) -> bool {
        self.blocking || self.quota_over
    }
}

/// Answers `request` from its `plan` and the store's `outcome`.
pub fn answer<'p>(
    request: &RateLimitRequest,
    plan: &'p Plan<'p>,
    outcome: &CounterOutcome,
    options: &ResponseOptions,
) -> Answer<'p> {
    let now = plan.now_millis;
    let mut response = RateLimitResponse {
        overall_code: Code::Ok as i32,
        ..Default::default()
    };
    let mut events = Vec::new();
    let mut readings: Vec<Reading<'p>> = Vec::new();
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
                let reading = read(plan, applied, outcome, descriptor, options, &mut events);
                let status = limited_status(&reading, now);
                readings.push(reading);
                status
            }
        };
        response.statuses.push(status);
    }
    let verdict = Verdict::of(&readings, options, now);
    if verdict.shadowed {
        events.push(MetricEvent::GlobalShadowMode);
    }
    if verdict.refused() {
        response.overall_code = Code::OverLimit as i32;
    }
    response.response_headers_to_add = headers(&readings, &verdict, now, &options.headers);
    let mut metadata = BTreeMap::new();
    if verdict.refused() {
        let limits: Vec<&Limit> = verdict
            .over_limits
            .iter()
            .map(|r| &*r.applied.limit)
            .collect();
        metadata.insert(
            METADATA_NAMESPACE.to_string(),
            struct_value(sluice_metadata(&limits, verdict.retry_after_secs)),
        );
    } else if outcome.applied && charged_other_windows_than_asked(plan) {
        // Which windows an allowed request was charged in, for its later
        // correction (the filter sends it back with the usage).
        metadata.insert(
            METADATA_NAMESPACE.to_string(),
            struct_value(charged_at_fields(now)),
        );
    }
    if options.dynamic_metadata {
        metadata.extend(upstream_metadata(request, &readings));
    }
    if !metadata.is_empty() {
        response.dynamic_metadata = Some(Struct {
            fields: metadata.into_iter().collect(),
        });
    }
    Answer { response, events }
}

/// The request as a whole.
struct Verdict<'r, 'p> {
    /// Over an enforced limit, or over every quota-mode limit.
    over: bool,
    /// Over, but answered OK by `--global-shadow-mode`.
    shadowed: bool,
    /// The limits that make it over.
    over_limits: Vec<&'r Reading<'p>>,
    /// Until the last of them resets.
    retry_after_secs: u64,
}

impl<'r, 'p> Verdict<'r, 'p> {
    fn of(readings: &'r [Reading<'p>], options: &ResponseOptions, now: u64) -> Self {
        let quota_total = readings
            .iter()
            .filter(|r| r.applied.limit.quota_mode || options.global_quota_mode)
            .count();
        let quota_over = readings.iter().filter(|r| r.quota_over).count();
        // Quota-mode limits refuse a request only together: when every one is over.
        let quota_exhausted = quota_total > 0 && quota_total == quota_over;
        let over_limits: Vec<&Reading<'p>> = readings
            .iter()
            .filter(|r| r.blocking || (quota_exhausted && r.quota_over))
            .collect();
        let retry_after_secs = over_limits
            .iter()
            .map(|r| r.applied.window.seconds_until_reset(now))
            .max()
            .unwrap_or(0);
        let over = !over_limits.is_empty();
        Verdict {
            over,
            shadowed: over && options.global_shadow_mode,
            over_limits,
            retry_after_secs,
        }
    }

    /// Answered OVER_LIMIT.
    fn refused(&self) -> bool {
        self.over && !self.shadowed
    }
}

/// The rate-limit headers `style` asks for.
fn headers(
    readings: &[Reading<'_>],
    verdict: &Verdict<'_, '_>,
    now: u64,
    style: &HeaderStyle,
) -> Vec<HeaderValue> {
    let mut headers = Vec::new();
    match style {
        HeaderStyle::Sluice => {
            let tightest = readings
                .iter()
                .filter(|r| !r.applied.limit.shadow_mode)
                .fold(
                    None,
                    |best, r| if is_tighter(r, best) { Some(r) } else { best },
                );
            if let Some(reading) = tightest {
                headers.extend(rate_limit_headers(reading, now));
            }
            if verdict.refused() {
                headers.push(header(
                    RETRY_AFTER,
                    verdict.retry_after_secs.max(1).to_string(),
                ));
            }
        }
        HeaderStyle::Upstream(names) => {
            if let Some(reading) = upstream_header_reading(readings) {
                headers.extend(upstream_headers(reading, now, names));
            }
        }
        HeaderStyle::Off => {}
    }
    headers
}

/// Reads one limited descriptor's counter from the outcome, noting the
/// metric events it calls for.
fn read<'p>(
    plan: &'p Plan<'p>,
    applied: &'p Applied<'p>,
    outcome: &CounterOutcome,
    descriptor: &RateLimitDescriptor,
    options: &ResponseOptions,
    events: &mut Vec<MetricEvent<'p>>,
) -> Reading<'p> {
    let op = &plan.ops[applied.op_index];
    let before = outcome.before.get(applied.op_index).copied().unwrap_or(0);
    let over = op.is_over(before, plan.mode);
    let used = if outcome.applied {
        op.apply_to(before)
    } else {
        before
    };
    let limit = &*applied.limit;
    let counted_over = over && !limit.shadow_mode;
    let quota = limit.quota_mode || options.global_quota_mode;
    if outcome.applied && op.hits > 0 {
        events.push(MetricEvent::Hits {
            limit,
            hits: op.hits as u64,
        });
    }
    if over && limit.shadow_mode {
        events.push(MetricEvent::ShadowModeHit { limit });
    }
    if counted_over {
        events.push(MetricEvent::OverLimit { limit });
    }
    if op.hits >= 0 {
        events.push(MetricEvent::Upstream {
            limit,
            hit: crate::metrics::UpstreamHit {
                hits: op.hits as u64,
                before,
                limit: op.limit,
                shadow_mode: limit.shadow_mode,
            },
        });
    }
    if limit.detailed_metric {
        events.push(MetricEvent::Detailed {
            limit,
            descriptor: descriptor_label(descriptor),
            code: if counted_over { "over_limit" } else { "ok" },
        });
    }
    Reading {
        applied,
        remaining: op.limit.saturating_sub(used),
        blocking: counted_over && !quota,
        quota_over: counted_over && quota,
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
    // A quota-mode descriptor over its limit says so, as upstream's does,
    // even when the request as a whole is allowed.
    let code = if reading.is_over() {
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
        header(RATELIMIT_LIMIT, decimal(limit.requests_per_unit)),
        header(RATELIMIT_REMAINING, decimal(reading.remaining)),
        header(
            RATELIMIT_RESET,
            decimal(window.seconds_until_reset(now) as u32),
        ),
        header(
            RATELIMIT_POLICY,
            policy(limit.requests_per_unit, window.length),
        ),
    ]
}

/// upstream's choice (`shouldRateLimitWorker`): the limited descriptor with
/// the least left, first on a tie; a descriptor over an enforced limit
/// takes it over (the last such one).
fn upstream_header_reading<'r, 'p>(readings: &'r [Reading<'p>]) -> Option<&'r Reading<'p>> {
    let mut chosen: Option<&Reading<'p>> = None;
    let mut least = u64::from(u32::MAX);
    for reading in readings {
        if reading.blocking {
            chosen = Some(reading);
            least = 0;
        } else if reading.remaining < least {
            chosen = Some(reading);
            least = reading.remaining;
        }
    }
    chosen
}

fn upstream_headers(
    reading: &Reading<'_>,
    now: u64,
    names: &UpstreamHeaderNames,
) -> [HeaderValue; 3] {
    let limit = &reading.applied.limit;
    [
        header(&names.limit, decimal(limit.requests_per_unit)),
        header(
            &names.remaining,
            decimal(reading.remaining.min(u64::from(u32::MAX))),
        ),
        header(
            &names.reset,
            decimal(reading.applied.window.seconds_until_reset(now)),
        ),
    ]
}

/// A number in decimal (`itoa`: every decision writes a few of these, and
/// `format!` costs several times as much).
fn decimal(number: impl itoa::Integer) -> String {
    itoa::Buffer::new().format(number).to_owned()
}

/// `RateLimit-Policy`'s value: `<limit>;w=<window seconds>`.
fn policy(requests_per_unit: u32, window_seconds: u64) -> String {
    let mut buffer = itoa::Buffer::new();
    let mut text = String::with_capacity(24);
    text.push_str(buffer.format(requests_per_unit));
    text.push_str(";w=");
    text.push_str(buffer.format(window_seconds));
    text
}

fn header(key: &str, value: String) -> HeaderValue {
    HeaderValue {
        key: key.to_string(),
        value,
        raw_value: Vec::new(),
    }
}

/// Whether some window that took hits does not contain the instant the
/// caller asked at: its call crossed a window boundary, or its clock and
/// ours disagree near one. Only then does it need to be told when we charged
/// (a caller that did not say when it asked is not told: it does not correct).
fn charged_other_windows_than_asked(plan: &Plan<'_>) -> bool {
    let Some(asked_at) = plan.asked_at_millis else {
        return false;
    };
    plan.resolved.iter().any(|resolved| match resolved {
        Resolved::Limited(applied) => {
            plan.ops[applied.op_index].hits > 0
                && Window::containing(applied.limit.unit, asked_at) != applied.window
        }
        _ => false,
    })
}

/// `{"charged_at_ms": "<now>"}` (in the `sluice` namespace): which windows
/// an allowed request was charged in, for its later correction.
fn charged_at_fields(now_millis: u64) -> BTreeMap<String, Value> {
    let mut fields = BTreeMap::new();
    fields.insert(
        sluice_metadata::CHARGED_AT_MS.to_string(),
        string_value(&now_millis.to_string()),
    );
    fields
}

fn string_value(text: &str) -> Value {
    Value {
        kind: Some(Kind::StringValue(text.to_string())),
    }
}

fn number_value(number: f64) -> Value {
    Value {
        kind: Some(Kind::NumberValue(number)),
    }
}

fn list_value(values: Vec<Value>) -> Value {
    Value {
        kind: Some(Kind::ListValue(ListValue { values })),
    }
}

fn struct_value(fields: BTreeMap<String, Value>) -> Value {
    Value {
        kind: Some(Kind::StructValue(Struct {
            fields: fields.into_iter().collect(),
        })),
    }
}

/// envoyproxy/ratelimit's `ratelimitToMetadata`: `domain`, `descriptors`
/// (`entries` as `key=value`, `limit`, `hitsAddend`), the request's
/// `hitsAddend`, and `metadata`: the `metadata` of every limit whose
/// descriptor was not over, merged (the first one wins on a clash).
fn upstream_metadata(
    request: &RateLimitRequest,
    readings: &[Reading<'_>],
) -> BTreeMap<String, Value> {
    let mut fields = BTreeMap::new();
    fields.insert(
        upstream_keys::DOMAIN.to_string(),
        string_value(&request.domain),
    );
    let descriptors = request.descriptors.iter().map(descriptor_struct).collect();
    fields.insert(
        upstream_keys::DESCRIPTORS.to_string(),
        list_value(descriptors),
    );
    if request.hits_addend != 0 {
        fields.insert(
            upstream_keys::HITS_ADDEND.to_string(),
            number_value(f64::from(request.hits_addend)),
        );
    }
    let mut passed = Struct::default();
    for reading in readings.iter().filter(|r| !r.is_over()) {
        if let Some(metadata) = &reading.applied.limit.metadata {
            merge_metadata(&mut passed, metadata);
        }
    }
    if !passed.fields.is_empty() {
        fields.insert(
            upstream_keys::METADATA.to_string(),
            Value {
                kind: Some(Kind::StructValue(passed)),
            },
        );
    }
    fields
}

/// Field names of upstream's response dynamic metadata.
mod upstream_keys {
    pub const DOMAIN: &str = "domain";
    pub const DESCRIPTORS: &str = "descriptors";
    pub const ENTRIES: &str = "entries";
    pub const LIMIT: &str = "limit";
    pub const HITS_ADDEND: &str = "hitsAddend";
    pub const METADATA: &str = "metadata";
}

fn descriptor_struct(descriptor: &RateLimitDescriptor) -> Value {
    let mut fields = BTreeMap::new();
    let entries = descriptor
        .entries
        .iter()
        .map(|e| string_value(&format!("{}={}", e.key, e.value)))
        .collect();
    fields.insert(upstream_keys::ENTRIES.to_string(), list_value(entries));
    if let Some(limit) = &descriptor.limit {
        let unit = crate::window::Unit::from_proto(limit.unit)
            .map_or_else(|| limit.unit.to_string(), |u| u.as_str().to_uppercase());
        fields.insert(
            upstream_keys::LIMIT.to_string(),
            string_value(&format!(
                "requests_per_unit:{} unit:{unit}",
                limit.requests_per_unit
            )),
        );
    }
    if let Some(hits) = &descriptor.hits_addend {
        fields.insert(
            upstream_keys::HITS_ADDEND.to_string(),
            number_value(hits.value as f64),
        );
    }
    struct_value(fields)
}

/// upstream's `mergeMetadata`: maps merge key by key, anything else keeps
/// what is already there.
fn merge_metadata(into: &mut Struct, from: &Struct) {
    for (key, value) in &from.fields {
        match into.fields.get_mut(key) {
            None => {
                into.fields.insert(key.clone(), value.clone());
            }
            Some(Value {
                kind: Some(Kind::StructValue(existing)),
            }) => {
                if let Some(Kind::StructValue(incoming)) = &value.kind {
                    merge_metadata(existing, incoming);
                }
            }
            Some(_) => {}
        }
    }
}

/// Sluice's instructions to the filter, under `dynamic_metadata.sluice`, sent
/// with OVER_LIMIT answers (an allowed request needs no instructions, only
/// [`charged_at_fields`], and that only sometimes):
/// * `action`: `defer` if every limit that is over says defer, else `reject`;
/// * `priority`: the lowest class among the limits that are over: the most
///   cautious reading;
/// * `over_limits`: names of the limits that are over;
/// * `retry_after_seconds`: when over, until the last of them resets.
fn sluice_metadata(over: &[&Limit], retry_after_secs: u64) -> BTreeMap<String, Value> {
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
    let priority = lowest_priority(over);
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
    fields
}

/// The lowest class among `limits`: the most cautious reading.
fn lowest_priority(limits: &[&Limit]) -> Priority {
    limits
        .iter()
        .map(|l| l.sluice.priority)
        .min()
        .unwrap_or(Priority::Normal)
}

/// Whether an allowed request may be routed into the token-fair queue
/// (saturation-aware admission), and at which priority: only when a limit
/// it is under says `over_limit: defer` (its tenant takes deferral on
/// this model; a tenant none of whose limits defers is never queued), at
/// the lowest class among those limits.
pub fn queue_priority(plan: &Plan<'_>) -> Option<Priority> {
    let deferring: Vec<&Limit> = plan
        .resolved
        .iter()
        .filter_map(|resolved| match resolved {
            Resolved::Limited(applied) => Some(&*applied.limit),
            _ => None,
        })
        .filter(|l| l.sluice.over_limit == OverLimitAction::Defer)
        .collect();
    (!deferring.is_empty()).then(|| lowest_priority(&deferring))
}

/// Marks an OK answer: the in-quota request goes into the token-fair queue
/// at `priority` (`{"sluice": {"route": "queue", "priority"}}`, beside any
/// field already there).
pub fn mark_queued(response: &mut RateLimitResponse, priority: Priority) {
    let metadata = response
        .dynamic_metadata
        .get_or_insert_with(Struct::default);
    let sluice = metadata
        .fields
        .entry(METADATA_NAMESPACE.to_string())
        .or_insert_with(|| struct_value(BTreeMap::new()));
    if !matches!(sluice.kind, Some(Kind::StructValue(_))) {
        *sluice = struct_value(BTreeMap::new());
    }
    if let Some(Kind::StructValue(fields)) = &mut sluice.kind {
        fields.fields.insert(
            sluice_metadata::ROUTE.to_string(),
            string_value(sluice_metadata::ROUTE_QUEUE),
        );
        fields.fields.insert(
            sluice_metadata::PRIORITY.to_string(),
            string_value(priority.as_str()),
        );
    }
}
