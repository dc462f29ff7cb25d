//! `RateLimitConfig` resources into the limits file model, as
//! envoyproxy/ratelimit's `ConfigXdsProtoToYaml` does, so that a resource
//! is validated exactly as a file is.

use crate::config::{DescriptorNode, DomainFile, RateLimitSpec, Replaces, SluiceExtension};
use crate::window::Unit;
use prost::Message;
use serde::de::IntoDeserializer;
use sluice_proto::pb::google::protobuf::Any;
use sluice_proto::rls_config::{
    RateLimitConfig, RateLimitDescriptor, RateLimitPolicy, RATE_LIMIT_CONFIG_TYPE_URL,
};
use std::path::PathBuf;

/// A resource that is not a usable `RateLimitConfig`.
#[derive(Debug, thiserror::Error)]
pub enum ResourceError {
    #[error("resource of type '{0}', expected {RATE_LIMIT_CONFIG_TYPE_URL}")]
    WrongType(String),
    #[error("resource cannot be decoded: {0}")]
    Decode(#[from] prost::DecodeError),
    #[error("resource '{resource}': descriptor '{key}': {message}")]
    Sluice {
        resource: String,
        key: String,
        message: String,
    },
    #[error("resource '{resource}': descriptor '{key}' has unknown rate limit unit {unit}")]
    UnknownUnit {
        resource: String,
        key: String,
        unit: i32,
    },
}

/// Decodes one resource into (its name as a source, its domain).
pub fn decode(resource: &Any) -> Result<(PathBuf, DomainFile), ResourceError> {
    if resource.type_url != RATE_LIMIT_CONFIG_TYPE_URL {
        return Err(ResourceError::WrongType(resource.type_url.clone()));
    }
    let config = RateLimitConfig::decode(resource.value.as_slice())?;
    let descriptors = descriptors(&config.name, &config.descriptors)?;
    Ok((
        source_name(&config.name),
        DomainFile {
            domain: config.domain,
            descriptors,
        },
    ))
}

/// How a resource is named in errors and `--validate`-style listings.
pub fn source_name(resource: &str) -> PathBuf {
    PathBuf::from(format!("xds:{resource}"))
}

fn descriptors(
    resource: &str,
    nodes: &[RateLimitDescriptor],
) -> Result<Vec<DescriptorNode>, ResourceError> {
    nodes
        .iter()
        .map(|node| {
            Ok(DescriptorNode {
                key: node.key.clone(),
                // An empty value is no value, as in a file.
                value: Some(node.value.clone()).filter(|v| !v.is_empty()),
                rate_limit: node
                    .rate_limit
                    .as_ref()
                    .map(|policy| rate_limit(resource, &node.key, policy))
                    .transpose()?,
                descriptors: descriptors(resource, &node.descriptors)?,
                shadow_mode: node.shadow_mode,
                quota_mode: node.quota_mode,
                detailed_metric: node.detailed_metric,
                metadata: node.metadata.clone(),
                ..DescriptorNode::default()
            })
        })
        .collect()
}

fn rate_limit(
    resource: &str,
    key: &str,
    policy: &RateLimitPolicy,
) -> Result<RateLimitSpec, ResourceError> {
    let unit = match policy.unit {
        0 => None,
        value => Some(
            Unit::from_proto(value).ok_or_else(|| ResourceError::UnknownUnit {
                resource: resource.to_string(),
                key: key.to_string(),
                unit: value,
            })?,
        ),
    };
    Ok(RateLimitSpec {
        unit,
        requests_per_unit: Some(policy.requests_per_unit),
        name: Some(policy.name.clone()).filter(|n| !n.is_empty()),
        unlimited: policy.unlimited,
        replaces: policy
            .replaces
            .iter()
            .map(|r| Replaces {
                name: r.name.clone(),
            })
            .collect(),
        sluice: policy
            .sluice
            .as_ref()
            .map(sluice_extension)
            .transpose()
            .map_err(|message| ResourceError::Sluice {
                resource: resource.to_string(),
                key: key.to_string(),
                message,
            })?,
    })
}

/// The extension's strings read as the YAML block's are.
fn sluice_extension(
    extension: &sluice_proto::rls_config::SluiceExtension,
) -> Result<SluiceExtension, String> {
    fn parse<T: for<'de> serde::Deserialize<'de> + Default>(text: &str) -> Result<T, String> {
        if text.is_empty() {
            return Ok(T::default());
        }
        T::deserialize(text.into_deserializer()).map_err(|e: serde::de::value::Error| e.to_string())
    }
    Ok(SluiceExtension {
        over_limit: parse(&extension.over_limit)?,
        priority: parse(&extension.priority)?,
    })
}

/// Encodes a resource (for management servers and tests).
pub fn encode(config: &RateLimitConfig) -> Any {
    Any {
        type_url: RATE_LIMIT_CONFIG_TYPE_URL.to_string(),
        value: config.encode_to_vec(),
    }
}

/// A parsed limits file as a `RateLimitConfig` resource named `name` (for
/// management servers written in Rust, and tests).
pub fn to_resource(name: &str, file: &DomainFile) -> RateLimitConfig {
    RateLimitConfig {
        name: name.to_string(),
        domain: file.domain.clone(),
        descriptors: file.descriptors.iter().map(descriptor_resource).collect(),
    }
}

fn descriptor_resource(node: &DescriptorNode) -> RateLimitDescriptor {
    RateLimitDescriptor {
        key: node.key.clone(),
        value: node.value.clone().unwrap_or_default(),
        rate_limit: node.rate_limit.as_ref().map(|spec| RateLimitPolicy {
            unit: spec.unit.map_or(0, Unit::proto_value),
            requests_per_unit: spec.requests_per_unit.unwrap_or(0),
            unlimited: spec.unlimited,
            name: spec.name.clone().unwrap_or_default(),
            replaces: spec
                .replaces
                .iter()
                .map(|r| sluice_proto::rls_config::RateLimitReplace {
                    name: r.name.clone(),
                })
                .collect(),
            sluice: spec
                .sluice
                .map(|extension| sluice_proto::rls_config::SluiceExtension {
                    over_limit: extension.over_limit.as_str().to_string(),
                    priority: extension.priority.as_str().to_string(),
                }),
        }),
        descriptors: node.descriptors.iter().map(descriptor_resource).collect(),
        shadow_mode: node.shadow_mode,
        detailed_metric: node.detailed_metric,
        quota_mode: node.quota_mode,
        metadata: node.metadata.clone(),
    }
}
