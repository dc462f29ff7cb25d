//! Building RLS requests and reading RLS answers, for the tests of
//! sluice-rls and of what stands in front of it.

use sluice_proto::pb::envoy::extensions::common::ratelimit::v3::{
    rate_limit_descriptor::Entry, RateLimitDescriptor,
};
use sluice_proto::pb::envoy::service::ratelimit::v3::{RateLimitRequest, RateLimitResponse};
use sluice_proto::pb::google::protobuf::{value::Kind, UInt64Value};

/// A descriptor of `entries` (key, value), default hits.
pub fn descriptor(entries: &[(&str, &str)]) -> RateLimitDescriptor {
    RateLimitDescriptor {
        entries: entries
            .iter()
            .map(|(k, v)| Entry {
                key: k.to_string(),
                value: v.to_string(),
            })
            .collect(),
        ..Default::default()
    }
}

/// A `sluice`-domain request that charges nothing to `tenant` × `model`'s
/// `budget` token window (`total`, `input` or `output`): reading it
/// tells what is left there.
pub fn tokens_probe(tenant: &str, model: &str, budget: &str) -> RateLimitRequest {
    RateLimitRequest {
        domain: "sluice".into(),
        descriptors: vec![with_hits(
            descriptor(&[("tenant", tenant), ("model", model), ("tokens", budget)]),
            0,
        )],
        hits_addend: 0,
    }
}

/// `d` charging `hits`.
pub fn with_hits(mut d: RateLimitDescriptor, hits: u64) -> RateLimitDescriptor {
    d.hits_addend = Some(UInt64Value { value: hits });
    d
}

/// A request in `domain` for `descriptors`.
pub fn request(domain: &str, descriptors: Vec<RateLimitDescriptor>) -> RateLimitRequest {
    RateLimitRequest {
        domain: domain.into(),
        descriptors,
        hits_addend: 0,
    }
}

/// The value of the response header `name` the answer asks Envoy to add.
pub fn header<'a>(response: &'a RateLimitResponse, name: &str) -> Option<&'a str> {
    response
        .response_headers_to_add
        .iter()
        .find(|h| h.key == name)
        .map(|h| h.value.as_str())
}

/// The `sluice` dynamic-metadata field `field` as text (lists joined by `,`).
pub fn sluice_field(response: &RateLimitResponse, field: &str) -> Option<String> {
    let outer = response.dynamic_metadata.as_ref()?.fields.get("sluice")?;
    let Some(Kind::StructValue(inner)) = &outer.kind else {
        return None;
    };
    match &inner.fields.get(field)?.kind {
        Some(Kind::StringValue(s)) => Some(s.clone()),
        Some(Kind::NumberValue(n)) => Some(n.to_string()),
        Some(Kind::ListValue(l)) => Some(
            l.values
                .iter()
                .filter_map(|v| match &v.kind {
                    Some(Kind::StringValue(s)) => Some(s.as_str()),
                    _ => None,
                })
                .collect::<Vec<_>>()
                .join(","),
        ),
        _ => None,
    }
}
