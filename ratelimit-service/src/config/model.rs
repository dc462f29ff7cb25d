//! The limits file format: envoyproxy/ratelimit's YAML plus Sluice's extension keys.
//!
//! ```yaml
//! domain: sluice
//! descriptors:
//!   - key: tenant
//!     descriptors:
//!       - key: model
//!         rate_limit:
//!           unit: minute
//!           requests_per_unit: 600
//!           name: tenant-model-rpm
//!           sluice: { over_limit: defer, priority: normal }   # Sluice extension
//! ```

use crate::window::Unit;
use serde::de::Error as _;
use serde::{Deserialize, Deserializer};
use sluice_admission::descriptors::sluice_metadata;
use sluice_proto::pb::google::protobuf::{value::Kind, ListValue, Struct, Value};
use std::collections::BTreeMap;

/// One limits file (or one `RateLimitConfig` resource received over xDS).
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DomainFile {
    #[serde(deserialize_with = "scalar_string")]
    pub domain: String,
    #[serde(default, deserialize_with = "list_or_null")]
    pub descriptors: Vec<DescriptorNode>,
}

/// A node of the descriptor tree. The keys are envoyproxy/ratelimit's
/// (`src/config/config_impl.go`, `YamlDescriptor`), every one of them.
#[derive(Debug, Default, Deserialize)]
// Every key may be absent: absent is the field's default.
#[serde(default, deny_unknown_fields)]
pub struct DescriptorNode {
    #[serde(deserialize_with = "scalar_string")]
    pub key: String,
    /// Exact value, a pattern with `*` wildcards (each matches any run of
    /// characters, the empty one included), or absent/empty to match any value.
    #[serde(deserialize_with = "optional_value")]
    pub value: Option<String>,
    pub rate_limit: Option<RateLimitSpec>,
    #[serde(deserialize_with = "list_or_null")]
    pub descriptors: Vec<DescriptorNode>,
    /// Count and report, but never answer OVER_LIMIT because of this limit.
    pub shadow_mode: bool,
    /// Over this limit, the request is still allowed unless every quota-mode
    /// descriptor of the request is over (envoyproxy/ratelimit's quota mode).
    pub quota_mode: bool,
    /// Per-value metrics for this node (label `descriptor` carries the full key).
    pub detailed_metric: bool,
    /// Runtime values in metrics (Sluice: the `descriptor` label, as detailed_metric).
    pub value_to_metric: bool,
    /// All values matching this node's wildcard share one counter.
    pub share_threshold: bool,
    /// Returned, merged, in the response's dynamic metadata when the
    /// descriptor passes (with `--response-dynamic-metadata`).
    #[serde(deserialize_with = "metadata_struct")]
    pub metadata: Option<Struct>,
}

#[derive(Debug, Default, Deserialize)]
// Every key may be absent: absent is the field's default.
#[serde(default, deny_unknown_fields)]
pub struct RateLimitSpec {
    #[serde(deserialize_with = "optional_unit")]
    pub unit: Option<Unit>,
    /// Absent means 0, as in envoyproxy/ratelimit (every request is over).
    pub requests_per_unit: Option<u32>,
    #[serde(deserialize_with = "optional_scalar_string")]
    pub name: Option<String>,
    pub unlimited: bool,
    #[serde(deserialize_with = "list_or_null")]
    pub replaces: Vec<Replaces>,
    /// Sluice extension: what the filter should do with a request over this limit.
    pub sluice: Option<SluiceExtension>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Replaces {
    #[serde(default, deserialize_with = "scalar_string")]
    pub name: String,
}

/// YAML scalars as text: envoyproxy/ratelimit (yaml.v2) reads `value: 200`
/// as the string "200", so Sluice does too; `~` is the empty string.
fn scalar_string<'de, D: Deserializer<'de>>(deserializer: D) -> Result<String, D::Error> {
    Ok(optional_scalar_string(deserializer)?.unwrap_or_default())
}

fn optional_scalar_string<'de, D: Deserializer<'de>>(
    deserializer: D,
) -> Result<Option<String>, D::Error> {
    match serde_yaml::Value::deserialize(deserializer)? {
        serde_yaml::Value::Null => Ok(None),
        serde_yaml::Value::String(text) => Ok(Some(text)),
        serde_yaml::Value::Number(number) => Ok(Some(number.to_string())),
        serde_yaml::Value::Bool(flag) => Ok(Some(flag.to_string())),
        other => Err(D::Error::custom(format!(
            "expected a string, found {}",
            yaml_kind(&other)
        ))),
    }
}

/// An empty `value` is no value, as upstream reads it.
fn optional_value<'de, D: Deserializer<'de>>(deserializer: D) -> Result<Option<String>, D::Error> {
    Ok(optional_scalar_string(deserializer)?.filter(|value| !value.is_empty()))
}

/// `descriptors:` with nothing after it is an empty list, as upstream reads it.
fn list_or_null<'de, D, T>(deserializer: D) -> Result<Vec<T>, D::Error>
where
    D: Deserializer<'de>,
    T: Deserialize<'de>,
{
    Ok(Option::<Vec<T>>::deserialize(deserializer)?.unwrap_or_default())
}

/// Units in any case (`minute`, `MINUTE`), as upstream accepts them.
fn optional_unit<'de, D: Deserializer<'de>>(deserializer: D) -> Result<Option<Unit>, D::Error> {
    let Some(text) = optional_scalar_string(deserializer)? else {
        return Ok(None);
    };
    Unit::parse(&text).map(Some).ok_or_else(|| {
        D::Error::custom(format!(
            "invalid rate limit unit '{text}' (second, minute, hour, day, week, month, year)"
        ))
    })
}

fn metadata_struct<'de, D: Deserializer<'de>>(deserializer: D) -> Result<Option<Struct>, D::Error> {
    match serde_yaml::Value::deserialize(deserializer)? {
        serde_yaml::Value::Null => Ok(None),
        serde_yaml::Value::Mapping(map) => {
            mapping_to_struct(map).map(Some).map_err(D::Error::custom)
        }
        other => Err(D::Error::custom(format!(
            "metadata must be a map, found {}",
            yaml_kind(&other)
        ))),
    }
}

fn mapping_to_struct(map: serde_yaml::Mapping) -> Result<Struct, String> {
    let mut fields = BTreeMap::new();
    for (key, value) in map {
        let key = match key {
            serde_yaml::Value::String(text) => text,
            serde_yaml::Value::Number(number) => number.to_string(),
            serde_yaml::Value::Bool(flag) => flag.to_string(),
            other => {
                return Err(format!(
                    "metadata key must be a scalar, found {}",
                    yaml_kind(&other)
                ))
            }
        };
        fields.insert(key, yaml_to_value(value)?);
    }
    Ok(Struct {
        fields: fields.into_iter().collect(),
    })
}

fn yaml_to_value(value: serde_yaml::Value) -> Result<Value, String> {
    let kind = match value {
        serde_yaml::Value::Null => Kind::NullValue(0),
        serde_yaml::Value::Bool(flag) => Kind::BoolValue(flag),
        serde_yaml::Value::Number(number) => Kind::NumberValue(number.as_f64().unwrap_or_default()),
        serde_yaml::Value::String(text) => Kind::StringValue(text),
        serde_yaml::Value::Sequence(items) => Kind::ListValue(ListValue {
            values: items
                .into_iter()
                .map(yaml_to_value)
                .collect::<Result<_, _>>()?,
        }),
        serde_yaml::Value::Mapping(map) => Kind::StructValue(mapping_to_struct(map)?),
        serde_yaml::Value::Tagged(tagged) => return yaml_to_value(tagged.value),
    };
    Ok(Value { kind: Some(kind) })
}

fn yaml_kind(value: &serde_yaml::Value) -> &'static str {
    match value {
        serde_yaml::Value::Null => "null",
        serde_yaml::Value::Bool(_) => "a boolean",
        serde_yaml::Value::Number(_) => "a number",
        serde_yaml::Value::String(_) => "a string",
        serde_yaml::Value::Sequence(_) => "a list",
        serde_yaml::Value::Mapping(_) => "a map",
        serde_yaml::Value::Tagged(_) => "a tagged value",
    }
}

/// Sluice's extension keys of a limit, handed to callers in `dynamic_metadata`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SluiceExtension {
    #[serde(default)]
    pub over_limit: OverLimitAction,
    #[serde(default)]
    pub priority: Priority,
}

/// What to do with a request that is over this limit.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum OverLimitAction {
    /// Answer 429 (what any RLS client does with OVER_LIMIT).
    #[default]
    Reject,
    /// Park the request in its tenant × model queue and answer it later.
    Defer,
}

impl OverLimitAction {
    pub const fn as_str(self) -> &'static str {
        match self {
            OverLimitAction::Reject => sluice_metadata::ACTION_REJECT,
            OverLimitAction::Defer => sluice_metadata::ACTION_DEFER,
        }
    }
}

/// Priority class of traffic matching a limit: the deferral contract's one
/// definition (high waits longest when deferred, low fails fast).
pub use sluice_contract::Priority;
