//! The deferred path's accounting: once a call's answer is known, the
//! bucket's token debt is corrected from the estimate it was paced with to
//! the real usage, and the tenant's usage is counted.

use crate::keys::BucketId;
use crate::metrics::Metrics;
use crate::pacing::Pacer;
use crate::processor::Outcome;
use serde::Deserialize;
use sluice_contract::WorkItem;

/// The token counts of a model's `usage` object.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Usage {
    pub prompt_tokens: u64,
    pub completion_tokens: u64,
    /// Prompt tokens served from the backend's cache (part of `prompt_tokens`).
    pub cached_tokens: u64,
}

/// `usage` as chat/completions, completions and the Responses API send it.
#[derive(Deserialize)]
struct UsageWire {
    #[serde(alias = "input_tokens")]
    prompt_tokens: u64,
    #[serde(default, alias = "output_tokens")]
    completion_tokens: Option<u64>,
    #[serde(default)]
    total_tokens: Option<u64>,
    #[serde(default, alias = "input_tokens_details")]
    prompt_tokens_details: Option<CachedWire>,
}

#[derive(Deserialize)]
struct CachedWire {
    #[serde(default)]
    cached_tokens: Option<u64>,
}

impl Usage {
    /// `None` when `value` carries no prompt count.
    pub fn from_value(value: &serde_json::Value) -> Option<Usage> {
        let wire = UsageWire::deserialize(value).ok()?;
        let completion = wire
            .completion_tokens
            .or_else(|| {
                wire.total_tokens
                    .map(|t| t.saturating_sub(wire.prompt_tokens))
            })
            .unwrap_or(0);
        let cached = wire
            .prompt_tokens_details
            .and_then(|d| d.cached_tokens)
            .unwrap_or(0);
        Some(Usage {
            prompt_tokens: wire.prompt_tokens,
            completion_tokens: completion,
            cached_tokens: cached.min(wire.prompt_tokens),
        })
    }

    /// What the model processed: prompt (cached included) plus completion.
    /// Pacing protects the model's throughput, so a cached token counts in
    /// full here (the filter's `cached_tokens_weight` is a billing choice).
    pub fn total(&self) -> u64 {
        self.prompt_tokens.saturating_add(self.completion_tokens)
    }
}

/// What became of a request's pacing estimate (metric label).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Correction {
    /// The debt moved by real − estimated.
    Corrected,
    /// Real = estimated, or nothing to move (tokens unpaced, bucket paused,
    /// an empty bucket owed a refund).
    Unchanged,
    /// The answer carried no usage (broken stream, cancel, backend error):
    /// the estimate stays.
    NoUsage,
    /// Redis refused the correction: the estimate stays.
    Failed,
}

impl Correction {
    pub const ALL: [Correction; 4] = [
        Correction::Corrected,
        Correction::Unchanged,
        Correction::NoUsage,
        Correction::Failed,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            Correction::Corrected => "corrected",
            Correction::Unchanged => "unchanged",
            Correction::NoUsage => "no_usage",
            Correction::Failed => "failed",
        }
    }
}

/// After a call: count the tenant's usage and correct its bucket's token
/// debt. Outcomes that made no call of this attempt's (already done,
/// interrupted, retry later, ...) are left alone; a call that ended
/// without usage keeps its estimate.
pub(crate) async fn settle(
    pacer: &Pacer,
    metrics: &Metrics,
    item: &WorkItem,
    outcome: &Outcome,
) -> Option<Correction> {
    let usage = match outcome {
        Outcome::Completed { usage, .. } => usage.as_ref().and_then(Usage::from_value),
        Outcome::Failed { .. } | Outcome::Cancelled { .. } => None,
        _ => return None,
    };
    let correction = match usage {
        None => Correction::NoUsage,
        Some(usage) => {
            metrics.tenant_usage(&item.tenant, &item.model, &usage);
            correct(pacer, item, &usage).await
        }
    };
    metrics.pacing_correction(correction.as_str());
    Some(correction)
}

async fn correct(pacer: &Pacer, item: &WorkItem, usage: &Usage) -> Correction {
    let delta = usage.total() as i64 - item.estimated_tokens as i64;
    if delta == 0 {
        return Correction::Unchanged;
    }
    let bucket = BucketId::new(&item.tenant, &item.model);
    match pacer.correct(&bucket, delta, None).await {
        Ok(true) => Correction::Corrected,
        Ok(false) => Correction::Unchanged,
        Err(error) => {
            tracing::warn!(%error, req_id = %item.req_id, delta, "pacing correction failed; the estimate stays");
            Correction::Failed
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn usage_of_every_shape() {
        let chat = json!({"prompt_tokens": 11, "completion_tokens": 30, "total_tokens": 41,
            "prompt_tokens_details": {"cached_tokens": 8}});
        assert_eq!(
            Usage::from_value(&chat),
            Some(Usage {
                prompt_tokens: 11,
                completion_tokens: 30,
                cached_tokens: 8
            })
        );
        let responses = json!({"input_tokens": 5, "output_tokens": 7,
            "input_tokens_details": {"cached_tokens": 9}});
        let usage = Usage::from_value(&responses);
        assert_eq!(usage.map(|u| (u.total(), u.cached_tokens)), Some((12, 5)));
        let totals_only = json!({"prompt_tokens": 4, "total_tokens": 10});
        assert_eq!(
            Usage::from_value(&totals_only).map(|u| u.completion_tokens),
            Some(6)
        );
        assert_eq!(Usage::from_value(&json!({"completion_tokens": 3})), None);
        assert_eq!(Usage::from_value(&json!(null)), None);
    }
}
