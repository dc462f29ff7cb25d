//! Prost-only mirror of the Envoy RLS v3 messages.
//!
//! Upstream: `envoy/service/ratelimit/v3/rls.proto` and
//! `envoy/extensions/common/ratelimit/v3/ratelimit.proto` (Envoy v1.36+, the
//! revision `envoy-types` 0.7.7 was generated from). Only the fields Sluice reads
//! or writes are declared; unknown fields are skipped by prost when decoding, so a
//! newer server stays compatible. Field numbers must never change.

use prost::Message;

/// `google.protobuf.Duration`
#[derive(Clone, Copy, PartialEq, Eq, Message)]
pub struct Duration {
    #[prost(int64, tag = "1")]
    pub seconds: i64,
    #[prost(int32, tag = "2")]
    pub nanos: i32,
}

/// `google.protobuf.UInt64Value`
#[derive(Clone, Copy, PartialEq, Eq, Message)]
pub struct UInt64Value {
    #[prost(uint64, tag = "1")]
    pub value: u64,
}

/// `envoy.extensions.common.ratelimit.v3.RateLimitDescriptor.Entry`
#[derive(Clone, PartialEq, Eq, Message)]
pub struct Entry {
    #[prost(string, tag = "1")]
    pub key: String,
    #[prost(string, tag = "2")]
    pub value: String,
}

/// `envoy.extensions.common.ratelimit.v3.RateLimitDescriptor`
#[derive(Clone, PartialEq, Message)]
pub struct RateLimitDescriptor {
    #[prost(message, repeated, tag = "1")]
    pub entries: Vec<Entry>,
    /// Per-descriptor hits; overrides the request-level `hits_addend` when present.
    #[prost(message, optional, tag = "3")]
    pub hits_addend: Option<UInt64Value>,
    /// Treat `hits_addend` as a refund.
    #[prost(bool, tag = "4")]
    pub is_negative_hits: bool,
}

/// `envoy.service.ratelimit.v3.RateLimitRequest`
#[derive(Clone, PartialEq, Message)]
pub struct RateLimitRequest {
    #[prost(string, tag = "1")]
    pub domain: String,
    #[prost(message, repeated, tag = "2")]
    pub descriptors: Vec<RateLimitDescriptor>,
    #[prost(uint32, tag = "3")]
    pub hits_addend: u32,
}

/// `envoy.service.ratelimit.v3.RateLimitResponse.Code`
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, prost::Enumeration)]
#[repr(i32)]
pub enum Code {
    Unknown = 0,
    Ok = 1,
    OverLimit = 2,
}

/// `envoy.service.ratelimit.v3.RateLimitResponse.RateLimit`
#[derive(Clone, PartialEq, Eq, Message)]
pub struct RateLimit {
    #[prost(string, tag = "3")]
    pub name: String,
    #[prost(uint32, tag = "1")]
    pub requests_per_unit: u32,
    #[prost(int32, tag = "2")]
    pub unit: i32,
}

/// `envoy.service.ratelimit.v3.RateLimitResponse.DescriptorStatus`
#[derive(Clone, PartialEq, Eq, Message)]
pub struct DescriptorStatus {
    #[prost(enumeration = "Code", tag = "1")]
    pub code: i32,
    #[prost(message, optional, tag = "2")]
    pub current_limit: Option<RateLimit>,
    #[prost(uint32, tag = "3")]
    pub limit_remaining: u32,
    #[prost(message, optional, tag = "4")]
    pub duration_until_reset: Option<Duration>,
}

/// `envoy.config.core.v3.HeaderValue`
#[derive(Clone, PartialEq, Eq, Message)]
pub struct HeaderValue {
    #[prost(string, tag = "1")]
    pub key: String,
    #[prost(string, tag = "2")]
    pub value: String,
}

/// `google.protobuf.Struct`, decoded far enough to read Sluice's metadata.
#[derive(Clone, PartialEq, Message)]
pub struct Struct {
    #[prost(btree_map = "string, message", tag = "1")]
    pub fields: std::collections::BTreeMap<String, Value>,
}

/// `google.protobuf.ListValue`
#[derive(Clone, PartialEq, Message)]
pub struct ListValue {
    #[prost(message, repeated, tag = "1")]
    pub values: Vec<Value>,
}

/// `google.protobuf.Value`
#[derive(Clone, PartialEq, Message)]
pub struct Value {
    #[prost(oneof = "value::Kind", tags = "1, 2, 3, 4, 5, 6")]
    pub kind: Option<value::Kind>,
}

pub mod value {
    /// `google.protobuf.Value.kind`
    #[derive(Clone, PartialEq, prost::Oneof)]
    pub enum Kind {
        #[prost(int32, tag = "1")]
        NullValue(i32),
        #[prost(double, tag = "2")]
        NumberValue(f64),
        #[prost(string, tag = "3")]
        StringValue(String),
        #[prost(bool, tag = "4")]
        BoolValue(bool),
        #[prost(message, tag = "5")]
        StructValue(super::Struct),
        #[prost(message, tag = "6")]
        ListValue(super::ListValue),
    }
}

/// `envoy.service.ratelimit.v3.RateLimitResponse`
#[derive(Clone, PartialEq, Message)]
pub struct RateLimitResponse {
    #[prost(enumeration = "Code", tag = "1")]
    pub overall_code: i32,
    #[prost(message, repeated, tag = "2")]
    pub statuses: Vec<DescriptorStatus>,
    #[prost(message, repeated, tag = "3")]
    pub response_headers_to_add: Vec<HeaderValue>,
    #[prost(message, repeated, tag = "4")]
    pub request_headers_to_add: Vec<HeaderValue>,
    #[prost(message, optional, tag = "6")]
    pub dynamic_metadata: Option<Struct>,
}

impl Value {
    /// The string inside, if this is a string value.
    pub fn as_str(&self) -> Option<&str> {
        match &self.kind {
            Some(value::Kind::StringValue(s)) => Some(s),
            _ => None,
        }
    }
}

#[cfg(all(test, feature = "server"))]
mod tests {
    //! The mirror must stay byte-compatible with the full generated types.
    use super::*;
    use crate::pb::envoy::extensions::common::ratelimit::v3 as full_common;
    use crate::pb::envoy::service::ratelimit::v3 as full;

    #[test]
    fn request_encodes_like_envoy_types() {
        let mirror = RateLimitRequest {
            domain: "sluice".into(),
            descriptors: vec![RateLimitDescriptor {
                entries: vec![Entry {
                    key: "tenant".into(),
                    value: "acme".into(),
                }],
                hits_addend: Some(UInt64Value { value: 1234 }),
                is_negative_hits: true,
            }],
            hits_addend: 7,
        };
        let bytes = mirror.encode_to_vec();
        let decoded = full::RateLimitRequest::decode(bytes.as_slice()).unwrap();
        assert_eq!(decoded.domain, "sluice");
        assert_eq!(decoded.hits_addend, 7);
        let descriptor: &full_common::RateLimitDescriptor = &decoded.descriptors[0];
        assert_eq!(descriptor.entries[0].key, "tenant");
        assert_eq!(descriptor.entries[0].value, "acme");
        assert_eq!(descriptor.hits_addend.as_ref().map(|h| h.value), Some(1234));
        assert!(descriptor.is_negative_hits);
        assert_eq!(decoded.encode_to_vec(), bytes);
    }

    #[test]
    fn response_decodes_from_envoy_types() {
        use crate::pb::google::protobuf as pbf;
        let inner = pbf::Struct {
            fields: [(
                "action".to_string(),
                pbf::Value {
                    kind: Some(pbf::value::Kind::StringValue("defer".into())),
                },
            )]
            .into_iter()
            .collect(),
        };
        let full_response = full::RateLimitResponse {
            overall_code: full::rate_limit_response::Code::OverLimit as i32,
            statuses: vec![full::rate_limit_response::DescriptorStatus {
                code: 2,
                current_limit: Some(full::rate_limit_response::RateLimit {
                    name: "tpm".into(),
                    requests_per_unit: 1000,
                    unit: 2,
                }),
                limit_remaining: 5,
                duration_until_reset: Some(pbf::Duration {
                    seconds: 3,
                    nanos: 500,
                }),
                quota: None,
            }],
            response_headers_to_add: vec![crate::pb::envoy::config::core::v3::HeaderValue {
                key: "Retry-After".into(),
                value: "3".into(),
                raw_value: vec![],
            }],
            dynamic_metadata: Some(pbf::Struct {
                fields: [(
                    "sluice".to_string(),
                    pbf::Value {
                        kind: Some(pbf::value::Kind::StructValue(inner)),
                    },
                )]
                .into_iter()
                .collect(),
            }),
            ..Default::default()
        };
        let mirror = RateLimitResponse::decode(full_response.encode_to_vec().as_slice()).unwrap();
        assert_eq!(mirror.overall_code, Code::OverLimit as i32);
        let status = &mirror.statuses[0];
        assert_eq!(status.limit_remaining, 5);
        assert_eq!(
            status.current_limit.as_ref().map(|l| l.name.as_str()),
            Some("tpm")
        );
        assert_eq!(
            status.duration_until_reset,
            Some(Duration {
                seconds: 3,
                nanos: 500
            })
        );
        assert_eq!(mirror.response_headers_to_add[0].key, "Retry-After");
        let sluice = mirror
            .dynamic_metadata
            .as_ref()
            .and_then(|m| m.fields.get("sluice"));
        let action = match sluice.and_then(|v| v.kind.as_ref()) {
            Some(value::Kind::StructValue(s)) => s.fields.get("action").and_then(Value::as_str),
            _ => None,
        };
        assert_eq!(action, Some("defer"));
    }
}
