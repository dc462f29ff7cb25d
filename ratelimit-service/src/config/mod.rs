//! Limits configuration: loading, validation and descriptor matching.

mod model;

pub use model::{
    DescriptorNode, DomainFile, OverLimitAction, Priority, RateLimitSpec, Replaces, SluiceExtension,
};

use crate::window::Unit;
use sluice_proto::pb::google::protobuf::Struct;
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
    /// Whether `name` was written in the config: only such limits can be
    /// replaced (as in envoyproxy/ratelimit, where an unnamed limit has no name).
    pub named: bool,
    pub unit: Unit,
    pub requests_per_unit: u32,
    pub shadow_mode: bool,
    /// envoyproxy/ratelimit's quota mode: over this limit the request is
    /// allowed unless every quota-mode descriptor of the request is over.
    pub quota_mode: bool,
    /// `detailed_metric` or `value_to_metric`: per-descriptor metric series.
    pub detailed_metric: bool,
    /// Names of limits this one replaces when both match one request.
    pub replaces: Vec<String>,
    /// The descriptor's `metadata`, returned when it passes.
    pub metadata: Option<Struct>,
    pub sluice: SluiceExtension,
    /// Metric handles of this limit, resolved on first use so the decision
    /// path does not look labels up (or allocate them) on every call.
    pub metrics: std::sync::OnceLock<crate::metrics::LimitCounters>,
    /// envoyproxy/ratelimit's stats key of the limit: the domain, then each
    /// level's `key` or `key_value`, joined by `.` (`loadDescriptors`'s
    /// `newParentKey`); its metric names are made from it.
    pub stats_key: String,
    /// The handles of its upstream-named metrics (`--upstream-metrics`).
    pub upstream_metrics: std::sync::OnceLock<crate::metrics::UpstreamCounters>,
}

impl Limit {
    pub fn new(name: String, unit: Unit, requests_per_unit: u32) -> Self {
        Limit {
            name,
            named: false,
            unit,
            requests_per_unit,
            shadow_mode: false,
            quota_mode: false,
            detailed_metric: false,
            replaces: Vec::new(),
            metadata: None,
            sluice: SluiceExtension::default(),
            metrics: std::sync::OnceLock::new(),
            stats_key: String::new(),
            upstream_metrics: std::sync::OnceLock::new(),
        }
    }
}

/// What a descriptor matched.
#[derive(Clone, Debug)]
pub enum Matched {
    Limited(Arc<Limit>),
    /// `unlimited: true`: always OK, never counted (its `replaces` still apply).
    Unlimited {
        name: String,
        replaces: Vec<String>,
    },
}

impl Matched {
    pub fn name(&self) -> &str {
        match self {
            Matched::Limited(limit) => &limit.name,
            Matched::Unlimited { name, .. } => name,
        }
    }

    /// The explicit name other limits' `replaces` can point at.
    pub fn replaceable_name(&self) -> Option<&str> {
        match self {
            Matched::Limited(limit) if limit.named => Some(&limit.name),
            _ => None,
        }
    }

    pub fn replaces(&self) -> &[String] {
        match self {
            Matched::Limited(limit) => &limit.replaces,
            Matched::Unlimited { replaces, .. } => replaces,
        }
    }
}

/// The result of a lookup: the limit, and the entries whose counter value is
/// a shared wildcard pattern (`share_threshold`) rather than the request's value.
#[derive(Debug)]
pub struct Found<'a> {
    pub matched: &'a Matched,
    /// (entry index, pattern) for entries matched by a `share_threshold` wildcard.
    pub shared: Vec<(usize, &'a str)>,
}

/// A value pattern with `*` wildcards, split once at load time.
#[derive(Debug)]
struct Wildcard {
    key: String,
    pattern: String,
    /// `pattern` split on `*`: first part is the prefix, last the suffix.
    parts: Vec<String>,
    share_threshold: bool,
    node: Node,
}

impl Wildcard {
    /// envoyproxy/ratelimit's `wildcardMatch`: each `*` matches any run of
    /// characters (the empty one too), the literal parts in order.
    fn matches(&self, value: &str) -> bool {
        wildcard_match(&self.parts, value)
    }
}

fn wildcard_match(parts: &[String], value: &str) -> bool {
    let (Some(first), Some(last)) = (parts.first(), parts.last()) else {
        return false;
    };
    if parts.len() == 1 {
        return first == value;
    }
    let fixed: usize = parts.iter().map(String::len).sum();
    if value.len() < fixed || !value.starts_with(first.as_str()) || !value.ends_with(last.as_str())
    {
        return false;
    }
    // Both bounds are char boundaries: a prefix and a suffix that matched.
    let mut remaining = &value[first.len()..value.len() - last.len()];
    for part in &parts[1..parts.len() - 1] {
        match remaining.find(part.as_str()) {
            Some(at) => remaining = &remaining[at + part.len()..],
            None => return false,
        }
    }
    true
}

#[derive(Debug, Default)]
struct Children {
    /// key → value → node
    exact: HashMap<String, HashMap<String, Node>>,
    /// Value patterns with `*`, in config order: the first that matches wins.
    wildcard: Vec<Wildcard>,
    /// key → node matching any value of that key.
    any_value: HashMap<String, Node>,
}

#[derive(Debug, Default)]
struct Node {
    limit: Option<Matched>,
    children: Children,
}

impl Children {
    /// envoyproxy/ratelimit's order: the exact value, then the first
    /// wildcard (in config order) that matches, then the key-only default.
    /// Also returns the pattern when a `share_threshold` wildcard matched.
    fn find(&self, key: &str, value: &str) -> Option<(&Node, Option<&str>)> {
        if let Some(node) = self.exact.get(key).and_then(|values| values.get(value)) {
            return Some((node, None));
        }
        if let Some(wildcard) = self
            .wildcard
            .iter()
            .find(|w| w.key == key && w.matches(value))
        {
            let shared = wildcard
                .share_threshold
                .then_some(wildcard.pattern.as_str());
            return Some((&wildcard.node, shared));
        }
        self.any_value.get(key).map(|node| (node, None))
    }

    fn is_empty(&self) -> bool {
        self.exact.is_empty() && self.wildcard.is_empty() && self.any_value.is_empty()
    }

    /// Adds `node` for `spec`; false if this level already has that key/value.
    fn insert(&mut self, spec: &DescriptorNode, node: Node) -> bool {
        match spec.value.as_deref() {
            None => match self.any_value.entry(spec.key.clone()) {
                std::collections::hash_map::Entry::Occupied(_) => false,
                std::collections::hash_map::Entry::Vacant(slot) => {
                    slot.insert(node);
                    true
                }
            },
            Some(pattern) if pattern.contains('*') => {
                if self
                    .wildcard
                    .iter()
                    .any(|w| w.key == spec.key && w.pattern == pattern)
                {
                    return false;
                }
                self.wildcard.push(Wildcard {
                    key: spec.key.clone(),
                    pattern: pattern.to_string(),
                    parts: pattern.split('*').map(str::to_string).collect(),
                    share_threshold: spec.share_threshold,
                    node,
                });
                true
            }
            Some(value) => match self
                .exact
                .entry(spec.key.clone())
                .or_default()
                .entry(value.to_string())
            {
                std::collections::hash_map::Entry::Occupied(_) => false,
                std::collections::hash_map::Entry::Vacant(slot) => {
                    slot.insert(node);
                    true
                }
            },
        }
    }
}

/// How files are combined.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct LoadOptions {
    /// Several files (or xDS resources) may describe one domain; their
    /// descriptors are merged (envoyproxy/ratelimit's `MERGE_DOMAIN_CONFIG`).
    /// Off: the same domain twice is an error.
    pub merge_domains: bool,
}

/// All domains, as loaded from one file or a directory of files.
#[derive(Debug, Default)]
pub struct LimitsConfig {
    domains: HashMap<String, Children>,
    /// Whether any limit uses `replaces` (the decision skips that step if not).
    has_replaces: bool,
    limit_count: usize,
    /// What it was built from: files, and resources received over xDS (named
    /// `xds:<resource>`); a file reload keeps the xDS part and vice versa.
    file_domains: Arc<Vec<(PathBuf, DomainFile)>>,
    xds_domains: Arc<Vec<(PathBuf, DomainFile)>>,
    /// Things upstream accepts silently that are probably mistakes.
    warnings: Vec<String>,
    /// How it was loaded (a reload loads the same way).
    options: LoadOptions,
}

impl LimitsConfig {
    /// The limit for one descriptor (its entries in order), following
    /// envoyproxy/ratelimit: the node matched by the last entry decides.
    pub fn lookup<'a, 'e, I>(&'a self, domain: &str, entries: I) -> Option<Found<'a>>
    where
        I: IntoIterator<Item = (&'e str, &'e str)>,
        I::IntoIter: ExactSizeIterator,
    {
        let mut level = self.domains.get(domain)?;
        let entries = entries.into_iter();
        let last = entries.len().checked_sub(1)?;
        let mut shared = Vec::new();
        for (index, (key, value)) in entries.enumerate() {
            let (node, pattern) = level.find(key, value)?;
            if let Some(pattern) = pattern {
                shared.push((index, pattern));
            }
            if index == last {
                return node.limit.as_ref().map(|matched| Found { matched, shared });
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

    /// The sources of the config, files first.
    pub fn files(&self) -> Vec<&Path> {
        self.file_domains
            .iter()
            .chain(self.xds_domains.iter())
            .map(|(file, _)| file.as_path())
            .collect()
    }

    /// Number of limits (including unlimited ones) across all domains.
    pub fn limit_count(&self) -> usize {
        self.limit_count
    }

    pub fn load_options(&self) -> LoadOptions {
        self.options
    }

    /// Accepted but suspicious: `file: problem` each.
    pub fn warnings(&self) -> &[String] {
        &self.warnings
    }

    /// Logs what the config accepts but is probably a mistake.
    pub fn log_warnings(&self) {
        for warning in &self.warnings {
            tracing::warn!("{warning}");
        }
    }

    /// Load a file, or every `*.yaml`/`*.yml` file of a directory (hidden files
    /// skipped, symlinks followed: a Kubernetes ConfigMap mount works as is).
    pub fn load(path: &Path) -> Result<LimitsConfig, ConfigError> {
        Self::load_with(path, LoadOptions::default())
    }

    pub fn load_with(path: &Path, options: LoadOptions) -> Result<LimitsConfig, ConfigError> {
        let sources = read_sources(path)?;
        Self::from_sources_with(&sources, options)
    }

    /// Build from (file name, contents) pairs.
    pub fn from_sources(sources: &[(PathBuf, String)]) -> Result<LimitsConfig, ConfigError> {
        Self::from_sources_with(sources, LoadOptions::default())
    }

    pub fn from_sources_with(
        sources: &[(PathBuf, String)],
        options: LoadOptions,
    ) -> Result<LimitsConfig, ConfigError> {
        let parsed = sources
            .iter()
            .map(|(file, text)| parse_file(file, text).map(|domain| (file.clone(), domain)))
            .collect::<Result<Vec<_>, _>>()?;
        Self::from_domains(parsed, options)
    }

    /// Build from parsed files.
    pub fn from_domains(
        domains: Vec<(PathBuf, DomainFile)>,
        options: LoadOptions,
    ) -> Result<LimitsConfig, ConfigError> {
        Self::build(Arc::new(domains), Arc::default(), options)
    }

    /// This config with its files replaced (a reload), xDS part kept.
    pub fn with_files(
        &self,
        files: Vec<(PathBuf, DomainFile)>,
    ) -> Result<LimitsConfig, ConfigError> {
        Self::build(Arc::new(files), self.xds_domains.clone(), self.options)
    }

    /// This config with its xDS part replaced, files kept.
    pub fn with_xds(&self, xds: Vec<(PathBuf, DomainFile)>) -> Result<LimitsConfig, ConfigError> {
        Self::build(self.file_domains.clone(), Arc::new(xds), self.options)
    }

    fn build(
        file_domains: Arc<Vec<(PathBuf, DomainFile)>>,
        xds_domains: Arc<Vec<(PathBuf, DomainFile)>>,
        options: LoadOptions,
    ) -> Result<LimitsConfig, ConfigError> {
        let mut config = LimitsConfig {
            options,
            ..LimitsConfig::default()
        };
        let mut builders: HashMap<String, (PathBuf, Builder)> = HashMap::new();
        for (file, parsed) in file_domains.iter().chain(xds_domains.iter()) {
            validate_domain_name(&parsed.domain).map_err(|m| ConfigError::new(file, m))?;
            let in_domain =
                |m: String| ConfigError::new(file, format!("domain '{}': {m}", parsed.domain));
            let (first_file, builder) = builders
                .entry(parsed.domain.clone())
                .or_insert_with(|| (file.clone(), Builder::default()));
            if first_file != file && !options.merge_domains {
                return Err(ConfigError::new(
                    file,
                    format!(
                        "domain '{}' is already defined in {} (set --merge-domains to merge them)",
                        parsed.domain,
                        first_file.display()
                    ),
                ));
            }
            let root = config.domains.entry(parsed.domain.clone()).or_default();
            builder.file = file.clone();
            builder.stats_path = vec![parsed.domain.clone()];
            builder
                .children(root, &parsed.descriptors, &mut Vec::new())
                .map_err(in_domain)?;
        }
        for (domain, (_, builder)) in builders {
            config.limit_count += builder.limit_count;
            config.has_replaces |= builder.has_replaces;
            config.warnings.extend(builder.dangling_replaces(&domain));
            config.warnings.extend(builder.warnings);
        }
        config.warnings.sort();
        config.file_domains = file_domains;
        config.xds_domains = xds_domains;
        Ok(config)
    }
}

/// Parses one file's YAML.
pub fn parse_file(file: &Path, text: &str) -> Result<DomainFile, ConfigError> {
    if text.trim().is_empty() {
        return Err(ConfigError::new(file, "file is empty"));
    }
    serde_yaml::from_str(text).map_err(|e| ConfigError::new(file, format!("invalid YAML: {e}")))
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

/// Builds one domain's tree, from one file or (merged) several.
#[derive(Default)]
struct Builder {
    /// The file being read, for warnings.
    file: PathBuf,
    limit_count: usize,
    has_replaces: bool,
    /// Explicit limit name → descriptor path where it is defined.
    names: HashMap<String, String>,
    /// (descriptor path, replaced name) of every `replaces` entry.
    replaces: Vec<(PathBuf, String, String)>,
    warnings: Vec<String>,
    /// The domain and the levels above the node being built, as upstream's
    /// stats keys spell them (`key` or `key_value`).
    stats_path: Vec<String>,
}

struct PathDisplay<'a>(&'a [String]);

impl fmt::Display for PathDisplay<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0.join(" > "))
    }
}

impl Builder {
    fn warn(&mut self, message: String) {
        self.warnings
            .push(format!("{}: {message}", self.file.display()));
    }

    fn children(
        &mut self,
        children: &mut Children,
        nodes: &[DescriptorNode],
        path: &mut Vec<String>,
    ) -> Result<(), String> {
        for spec in nodes {
            let label = match &spec.value {
                Some(value) => format!("{}={}", spec.key, value),
                None => spec.key.clone(),
            };
            path.push(label);
            self.stats_path.push(match &spec.value {
                Some(value) if !value.is_empty() => format!("{}_{value}", spec.key),
                _ => spec.key.clone(),
            });
            let node = self.node(spec, path);
            self.stats_path.pop();
            let node = node?;
            let at = PathDisplay(path).to_string();
            path.pop();
            if !children.insert(spec, node) {
                return Err(format!("descriptor '{at}' is defined twice"));
            }
        }
        Ok(())
    }

    fn node(&mut self, spec: &DescriptorNode, path: &mut Vec<String>) -> Result<Node, String> {
        let at = PathDisplay(path).to_string();
        if spec.key.is_empty() {
            return Err(format!("descriptor '{at}' has an empty 'key'"));
        }
        if spec.share_threshold && !spec.value.as_deref().is_some_and(|v| v.contains('*')) {
            return Err(format!(
                "descriptor '{at}': share_threshold needs a wildcard value (containing '*')"
            ));
        }
        let limit = match &spec.rate_limit {
            None => {
                let ignored = [
                    (spec.shadow_mode, "shadow_mode"),
                    (spec.quota_mode, "quota_mode"),
                    (spec.metadata.is_some(), "metadata"),
                ];
                for (set, key) in ignored {
                    if set {
                        self.warn(format!(
                            "descriptor '{at}' sets {key} but has no rate_limit; it has no effect"
                        ));
                    }
                }
                None
            }
            Some(rate) => Some(self.limit(spec, rate, &at, path)?),
        };
        let mut children = Children::default();
        self.children(&mut children, &spec.descriptors, path)?;
        Ok(Node { limit, children })
    }

    fn limit(
        &mut self,
        spec: &DescriptorNode,
        rate: &model::RateLimitSpec,
        at: &str,
        path: &[String],
    ) -> Result<Matched, String> {
        let name = rate.name.clone().filter(|n| !n.is_empty());
        let replaces = self.replaces_of(rate, name.as_deref(), at)?;
        if let Some(explicit) = &name {
            if let Some(other) = self.names.get(explicit) {
                let message = format!(
                    "descriptor '{at}': limit name '{explicit}' is also used by '{other}' (both are replaced together)"
                );
                self.warn(message);
            }
            self.names.insert(explicit.clone(), at.to_string());
        }
        self.limit_count += 1;
        let display_name = name.clone().unwrap_or_else(|| path.join("."));
        if rate.unlimited {
            if rate.unit.is_some() {
                return Err(format!(
                    "descriptor '{at}': an unlimited rate_limit must not set a unit"
                ));
            }
            return Ok(Matched::Unlimited {
                name: display_name,
                replaces,
            });
        }
        let unit = rate
            .unit
            .ok_or_else(|| format!("descriptor '{at}': rate_limit has no 'unit'"))?;
        let requests_per_unit = rate.requests_per_unit.unwrap_or_else(|| {
            self.warn(format!(
                "descriptor '{at}': rate_limit has no requests_per_unit; 0 (every request is over), as envoyproxy/ratelimit reads it"
            ));
            0
        });
        Ok(Matched::Limited(Arc::new(Limit {
            named: name.is_some(),
            shadow_mode: spec.shadow_mode,
            quota_mode: spec.quota_mode,
            detailed_metric: spec.detailed_metric || spec.value_to_metric,
            replaces,
            metadata: spec.metadata.clone(),
            sluice: rate.sluice.unwrap_or_default(),
            stats_key: self.stats_path.join("."),
            ..Limit::new(display_name, unit, requests_per_unit)
        })))
    }

    fn replaces_of(
        &mut self,
        rate: &model::RateLimitSpec,
        name: Option<&str>,
        at: &str,
    ) -> Result<Vec<String>, String> {
        let mut replaces = Vec::with_capacity(rate.replaces.len());
        for entry in &rate.replaces {
            if entry.name.is_empty() {
                return Err(format!(
                    "descriptor '{at}': every 'replaces' entry needs a non-empty name"
                ));
            }
            if Some(entry.name.as_str()) == name {
                return Err(format!(
                    "descriptor '{at}': limit '{}' replaces itself",
                    entry.name
                ));
            }
            self.replaces
                .push((self.file.clone(), at.to_string(), entry.name.clone()));
            replaces.push(entry.name.clone());
        }
        self.has_replaces |= !replaces.is_empty();
        Ok(replaces)
    }

    /// `replaces` naming no limit of the domain: upstream accepts it (it
    /// replaces nothing); Sluice warns, since it is usually a typo.
    fn dangling_replaces(&self, domain: &str) -> Vec<String> {
        self.replaces
            .iter()
            .filter(|(_, _, target)| !self.names.contains_key(target))
            .map(|(file, at, target)| {
                format!(
                    "{}: domain '{domain}': descriptor '{at}' replaces '{target}', which no limit of this domain is named; it replaces nothing",
                    file.display()
                )
            })
            .collect()
    }
}

#[cfg(test)]
mod tests;
