//! The deferred path's accounting: once a call's answer is known, the
//! bucket's token debt is corrected from the estimate it was paced with to
//! the real usage, and the tenant's usage is counted.

use crate::call::processor::Outcome;
use crate::call::usage::counted_usage;
use crate::keys::BucketId;
use crate::metrics::{Correction, Metrics};
use crate::pacing::pacer::Pacer;
use sluice_contract::WorkItem;
use sluice_openai::Usage;

/// After a call: count the tenant's usage and correct its bucket's token
/// debt. Outcomes that made no call of this attempt's (already done,
/// interrupted, retry later, ...) are left alone; a complete answer without
/// usage is counted (prompt and streamed output, with the model's
/// tokenizer); a broken call keeps its estimate. Returns the usage counted.
pub(crate) async fn settle(
    pacer: &Pacer,
    metrics: &Metrics,
    item: &WorkItem,
    outcome: &Outcome,
) -> Option<Usage> {
    let usage = match outcome {
        Outcome::Completed {
            usage,
            output_tokens,
            ..
        } => usage
            .as_ref()
            .and_then(Usage::from_value)
            .or_else(|| output_tokens.and_then(|tokens| counted_usage(item, tokens))),
        Outcome::Failed { .. } | Outcome::Cancelled { .. } => None,
        _ => return None,
    };
    let correction = match &usage {
        None => Correction::NoUsage,
        Some(usage) => {
            metrics.tenant_usage(&item.tenant, &item.model, usage);
            correct(pacer, item, usage).await
        }
    };
    metrics.pacing_correction(correction.as_str());
    usage
}

/// Pacing protects the model's throughput, so a cached token counts in full
/// here (the filter's `cached_tokens_weight` is a billing choice).
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
