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
