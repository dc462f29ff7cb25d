//! Redis key names: the contract's shared keys (re-exported), and the
//! consumer's own pacing keys.
//!
//! Pacing keys carry the (sanitized) model as hash tag: a pacing decision
//! reads the model column's rate hash and writes the bucket's two GCRA keys
//! in one script, so all three must share a slot. Pacing traffic is one small
//! script per deferred message, so one slot per model column is not a hot
//! spot in practice.

// The keys shared with the deferral endpoint (request keys, bucket
// bookkeeping, `sanitize`) are the contract's.
pub use sluice_contract::keys::*;

/// A pacing bucket: tenant × model, names sanitized.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct BucketId {
    tenant: String,
    model: String,
}

/// The two pacing dimensions.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Dimension {
    Requests,
    Tokens,
}

impl Dimension {
    pub fn as_str(self) -> &'static str {
        match self {
            Dimension::Requests => "requests",
            Dimension::Tokens => "tokens",
        }
    }
}

impl BucketId {
    pub fn new(tenant: &str, model: &str) -> Self {
        BucketId {
            tenant: sanitize(tenant),
            model: sanitize(model),
        }
    }

    /// Sanitized tenant.
    pub fn tenant(&self) -> &str {
        &self.tenant
    }

    /// Sanitized model.
    pub fn model(&self) -> &str {
        &self.model
    }

    /// `tenant/model` (sanitized): the metric label of the bucket.
    pub fn label(&self) -> String {
        format!("{}/{}", self.tenant, self.model)
    }

    /// `sluice:pace:{<model>}:<tenant>:r|t`: the bucket's theoretical
    /// arrival time (GCRA) in one dimension, in milliseconds.
    pub fn pace_key(&self, dimension: Dimension) -> String {
        let suffix = match dimension {
            Dimension::Requests => "r",
            Dimension::Tokens => "t",
        };
        format!("sluice:pace:{{{}}}:{}:{}", self.model, self.tenant, suffix)
    }

    /// The rate hash of this bucket's model column.
    pub fn rates_key(&self) -> String {
        rates_key_sanitized(&self.model)
    }
}

/// `sluice:rates:{<model>}`: runtime rate overrides of one model column.
/// Fields: `factor`, `rps:*` / `tps:*` (the column's own rates),
/// `rps:<tenant>` / `tps:<tenant>` (one bucket), `name:<tenant>` (the
/// tenant's unsanitized name, for listings).
pub fn rates_key(model: &str) -> String {
    rates_key_sanitized(&sanitize(model))
}

fn rates_key_sanitized(model: &str) -> String {
    format!("sluice:rates:{{{model}}}")
}

/// Hash of the model columns that have overrides: field = sanitized model,
/// value = the model's name. Written next to (not atomically with) the rate
/// hashes; only listings read it.
pub const RATES_INDEX: &str = "sluice:rates:models";

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bucket_keys_share_the_model_tag() {
        let bucket = BucketId::new("acme", "gpt-4o");
        assert_eq!(
            bucket.pace_key(Dimension::Requests),
            "sluice:pace:{gpt-4o}:acme:r"
        );
        assert_eq!(
            bucket.pace_key(Dimension::Tokens),
            "sluice:pace:{gpt-4o}:acme:t"
        );
        assert_eq!(bucket.rates_key(), "sluice:rates:{gpt-4o}");
        assert_eq!(rates_key("gpt-4o"), bucket.rates_key());
        assert_eq!(bucket.label(), "acme/gpt-4o");
        let hostile = BucketId::new("x}:y", "m{1}");
        assert_eq!(
            hostile.pace_key(Dimension::Tokens),
            "sluice:pace:{m%7B1%7D}:x%7D%3Ay:t"
        );
    }
}
