//! Limits configuration: loading, validation and descriptor matching.

mod model;

pub use model::{OverLimitAction, Priority, SluiceExtension};

use crate::window::Unit;
use model::{DescriptorNode, DomainFile};
use std::collections::HashMap;
use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// A config problem, always naming the file it was found in.
#[derive(Debug, thiserror::Error)]
#[error("{}: {message}", file.display())]
pub struct ConfigError {
    pub file: PathBuf,
    pub message: String,
}

impl ConfigError {
    fn new(file: &Path, message: impl Into<String>) -> Self {
        ConfigError {
            file: file.to_path_buf(),
            message: message.into(),
        }
    }
}

/// A configured limit, ready to be applied.
#[derive(Debug)]
pub struct Limit {
    /// The `name` from the file, or the descriptor path when none was given.
    pub name: String,
    pub unit: Unit,
    pub requests_per_unit: u32,
    pub shadow_mode: bool,
    pub detailed_metric: bool,
    /// Names of limits this one replaces when both match one request.
    pub replaces: Vec<String>,
    pub sluice: SluiceExtension,
    /// Metric handles of this limit, resolved on first use so the decision
    /// path does not look labels up (or allocate them) on every call.
    pub metrics: std::sync::OnceLock<crate::metrics::LimitCounters>,
}

impl Limit {
    pub fn new(name: String, unit: Unit, requests_per_unit: u32) -> Self {
        Limit {
            name,
            unit,
            requests_per_unit,
            shadow_mode: false,
            detailed_metric: false,
            replaces: Vec::new(),
            sluice: SluiceExtension::default(),
            metrics: std::sync::OnceLock::new(),
        }
    }
}

/// What a descriptor matched.
#[derive(Clone, Debug)]
pub enum Matched {
    Limited(Arc<Limit>),
    /// `unlimited: true`: always OK, never counted.
    Unlimited {
        name: String,
    },
}

impl Matched {
    pub fn name(&self) -> &str {
        match self {
            Matched::Limited(limit) => &limit.name,
            Matched::Unlimited { name } => name,
        }
    }
}

#[derive(Debug, Default)]
struct Children {
    /// key → value → node
    exact: HashMap<String, HashMap<String, Node>>,
    /// (key, value prefix, node), longest prefix first.
    wildcard: Vec<(String, String, Node)>,
    /// key → node matching any value of that key.
    any_value: HashMap<String, Node>,
}

#[derive(Debug, Default)]
struct Node {
    limit: Option<Matched>,
    children: Children,
}

impl Children {
    /// Most specific first: exact value, then the longest wildcard prefix, then
    /// the key-only default.
    fn find(&self, key: &str, value: &str) -> Option<&Node> {
        if let Some(node) = self.exact.get(key).and_then(|values| values.get(value)) {
            return Some(node);
        }
        if let Some((_, _, node)) = self
            .wildcard
            .iter()
            .find(|(k, prefix, _)| k == key && value.starts_with(prefix.as_str()))
        {
            return Some(node);
        }
        self.any_value.get(key)
    }

    fn is_empty(&self) -> bool {
        self.exact.is_empty() && self.wildcard.is_empty() && self.any_value.is_empty()
    }
}

/// All domains, as loaded from one file or a directory of files.
#[derive(Debug, Default)]
pub struct LimitsConfig {
    domains: HashMap<String, Children>,
    /// Whether any limit uses `replaces` (the decision skips that step if not).
    has_replaces: bool,
    files: Vec<PathBuf>,
    limit_count: usize,
}

impl LimitsConfig {
    /// The limit for one descriptor (its entries in order), following
    /// envoyproxy/ratelimit: the node matched by the last entry decides.
    pub fn lookup<'a, I>(&self, domain: &str, entries: I) -> Option<&Matched>
    where
        I: IntoIterator<Item = (&'a str, &'a str)>,
        I::IntoIter: ExactSizeIterator,
    {
        let mut level = self.domains.get(domain)?;
        let entries = entries.into_iter();
        let last = entries.len().checked_sub(1)?;
        for (index, (key, value)) in entries.enumerate() {
            let node = level.find(key, value)?;
            if index == last {
                return node.limit.as_ref();
            }
            if node.children.is_empty() {
                return None;
            }
            level = &node.children;
        }
        None
    }

    pub fn has_replaces(&self) -> bool {
        self.has_replaces
    }

    pub fn has_domain(&self, domain: &str) -> bool {
        self.domains.contains_key(domain)
    }

    pub fn domains(&self) -> impl Iterator<Item = &str> {
        self.domains.keys().map(String::as_str)
    }

    pub fn files(&self) -> &[PathBuf] {
        &self.files
    }

    /// Number of limits (including unlimited ones) across all domains.
    pub fn limit_count(&self) -> usize {
        self.limit_count
    }

    /// Load a file, or every `*.yaml`/`*.yml` file of a directory (hidden files
    /// skipped, symlinks followed: a Kubernetes ConfigMap mount works as is).
    pub fn load(path: &Path) -> Result<LimitsConfig, ConfigError> {
        let sources = read_sources(path)?;
        Self::from_sources(&sources)
    }

    /// Build from (file name, contents) pairs.
    pub fn from_sources(sources: &[(PathBuf, String)]) -> Result<LimitsConfig, ConfigError> {
        let mut config = LimitsConfig::default();
        let mut domain_files: HashMap<String, PathBuf> = HashMap::new();
        for (file, text) in sources {
            if text.trim().is_empty() {
                return Err(ConfigError::new(file, "file is empty"));
            }
            let parsed: DomainFile = serde_yaml::from_str(text)
                .map_err(|e| ConfigError::new(file, format!("invalid YAML: {e}")))?;
            validate_domain_name(&parsed.domain).map_err(|m| ConfigError::new(file, m))?;
            if let Some(other) = domain_files.get(&parsed.domain) {
                return Err(ConfigError::new(
                    file,
                    format!(
                        "domain '{}' is already defined in {}",
                        parsed.domain,
                        other.display()
                    ),
                ));
            }
            let mut builder = Builder {
                limit_count: 0,
                names: HashMap::new(),
            };
            let root = builder
                .children(&parsed.descriptors, &mut Vec::new())
                .map_err(|m| ConfigError::new(file, format!("domain '{}': {m}", parsed.domain)))?;
            builder
                .check_replaces()
                .map_err(|m| ConfigError::new(file, format!("domain '{}': {m}", parsed.domain)))?;
            config.limit_count += builder.limit_count;
            config.has_replaces |= builder.names.values().any(|(_, r)| !r.is_empty());
            domain_files.insert(parsed.domain.clone(), file.clone());
            config.domains.insert(parsed.domain, root);
            config.files.push(file.clone());
        }
        Ok(config)
    }
}

fn validate_domain_name(domain: &str) -> Result<(), String> {
    if domain.is_empty() {
        return Err("'domain' must not be empty".into());
    }
    // Braces would break the Redis Cluster hash tag the domain sits in.
    if domain.contains(['{', '}']) || domain.chars().any(char::is_control) {
        return Err(format!(
            "domain '{domain}' must not contain braces or control characters"
        ));
    }
    Ok(())
}

/// Reads the config sources behind `path`, in a stable order.
pub fn read_sources(path: &Path) -> Result<Vec<(PathBuf, String)>, ConfigError> {
    let meta = std::fs::metadata(path).map_err(|e| ConfigError::new(path, e.to_string()))?;
    let files = if meta.is_dir() {
        let mut files = Vec::new();
        let entries = std::fs::read_dir(path).map_err(|e| ConfigError::new(path, e.to_string()))?;
        for entry in entries {
            let entry = entry.map_err(|e| ConfigError::new(path, e.to_string()))?;
            let name = entry.file_name();
            let name = name.to_string_lossy();
            let is_yaml = name.ends_with(".yaml") || name.ends_with(".yml");
            let file = entry.path();
            if name.starts_with('.') || !is_yaml || !file.is_file() {
                continue;
            }
            files.push(file);
        }
        files.sort();
        if files.is_empty() {
            return Err(ConfigError::new(
                path,
                "directory has no .yaml or .yml files",
            ));
        }
        files
    } else {
        vec![path.to_path_buf()]
    };
    files
        .into_iter()
        .map(|file| {
            let text = std::fs::read(&file).map_err(|e| ConfigError::new(&file, e.to_string()))?;
            let text = String::from_utf8(text)
                .map_err(|_| ConfigError::new(&file, "file is not valid UTF-8"))?;
            Ok((file, text))
        })
        .collect()
}

struct Builder {
    limit_count: usize,
    /// limit name → descriptor path, for duplicate and `replaces` checks.
    names: HashMap<String, (String, Vec<String>)>,
}

struct PathDisplay<'a>(&'a [String]);

impl fmt::Display for PathDisplay<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0.join(" > "))
    }
}

impl Builder {
    fn children(
        &mut self,
        nodes: &[DescriptorNode],
        path: &mut Vec<String>,
    ) -> Result<Children, String> {
        let mut children = Children::default();
        for spec in nodes {
            let label = match &spec.value {
                Some(value) => format!("{}={}", spec.key, value),
                None => spec.key.clone(),
            };
            path.push(label);
            let node = self.node(spec, path)?;
            let at = PathDisplay(path).to_string();
            path.pop();
            let duplicate = match &spec.value {
                None => children.any_value.insert(spec.key.clone(), node).is_some(),
                Some(value) if value.ends_with('*') => {
                    let prefix = value.trim_end_matches('*').to_string();
                    let exists = children
                        .wildcard
                        .iter()
                        .any(|(k, p, _)| *k == spec.key && *p == prefix);
                    children.wildcard.push((spec.key.clone(), prefix, node));
                    exists
                }
                Some(value) => children
                    .exact
                    .entry(spec.key.clone())
                    .or_default()
                    .insert(value.clone(), node)
                    .is_some(),
            };
            if duplicate {
                return Err(format!("descriptor '{at}' is defined twice"));
            }
        }
        children
            .wildcard
            .sort_by_key(|(_, prefix, _)| std::cmp::Reverse(prefix.len()));
        Ok(children)
    }

    fn node(&mut self, spec: &DescriptorNode, path: &mut Vec<String>) -> Result<Node, String> {
        let at = PathDisplay(path).to_string();
        if spec.key.is_empty() {
            return Err(format!("descriptor '{at}' has an empty 'key'"));
        }
        if let Some(value) = &spec.value {
            if value.trim_end_matches('*').contains('*') {
                return Err(format!(
                    "descriptor '{at}': '*' is only allowed at the end of a value"
                ));
            }
        }
        let limit = match &spec.rate_limit {
            None => {
                if spec.shadow_mode {
                    return Err(format!(
                        "descriptor '{at}' sets shadow_mode but has no rate_limit"
                    ));
                }
                None
            }
            Some(rate) => {
                let name = rate.name.clone().unwrap_or_else(|| path.join("."));
                if name.is_empty() {
                    return Err(format!("descriptor '{at}': rate_limit name is empty"));
                }
                if rate.replaces.iter().any(|r| r.name.is_empty()) {
                    return Err(format!(
                        "descriptor '{at}': every 'replaces' entry needs a non-empty name"
                    ));
                }
                let replaces: Vec<String> = rate.replaces.iter().map(|r| r.name.clone()).collect();
                if let Some(explicit) = &rate.name {
                    if let Some((other, _)) = self.names.get(explicit) {
                        return Err(format!(
                            "descriptor '{at}': limit name '{explicit}' is already used by '{other}'"
                        ));
                    }
                }
                self.names
                    .insert(name.clone(), (at.clone(), replaces.clone()));
                self.limit_count += 1;
                if rate.unlimited {
                    if rate.unit.is_some() || rate.requests_per_unit.is_some() {
                        return Err(format!(
                            "descriptor '{at}': an unlimited rate_limit must not set unit or requests_per_unit"
                        ));
                    }
                    Some(Matched::Unlimited { name })
                } else {
                    let unit = rate
                        .unit
                        .ok_or_else(|| format!("descriptor '{at}': rate_limit has no 'unit'"))?;
                    let requests_per_unit = rate.requests_per_unit.ok_or_else(|| {
                        format!("descriptor '{at}': rate_limit has no 'requests_per_unit'")
                    })?;
                    Some(Matched::Limited(Arc::new(Limit {
                        shadow_mode: spec.shadow_mode,
                        detailed_metric: spec.detailed_metric,
                        replaces,
                        sluice: rate.sluice.unwrap_or_default(),
                        ..Limit::new(name, unit, requests_per_unit)
                    })))
                }
            }
        };
        let children = self.children(&spec.descriptors, path)?;
        Ok(Node { limit, children })
    }

    fn check_replaces(&self) -> Result<(), String> {
        for (name, (at, replaces)) in &self.names {
            for target in replaces {
                if target == name {
                    return Err(format!("descriptor '{at}': limit '{name}' replaces itself"));
                }
                if !self.names.contains_key(target) {
                    return Err(format!(
                        "descriptor '{at}': limit '{name}' replaces '{target}', which no descriptor of this domain defines"
                    ));
                }
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests;
