//! In-quota requests of a bucket over quota lately (issue 28): while a
//! tenant × model asks over its quota and defers, its in-quota requests
//! join its deferred backlog in the token-fair queue instead of
//! overtaking it at the model server; a bucket that has not been over
//! within the memory goes straight to the server as before.
//!
//! Measured in `fairness_bench` (policy `tenant-backlog`): the heavy
//! tenants' in-quota bursts at the start of each quota window no longer
//! jump the fair queue, and the light tenants (never over) never take the
//! queue hop. Per sluice-rls instance, in memory: with several instances
//! each remembers the over-quota answers it gave (a tenant over quota
//! sends many requests, and every instance sees some of them).

use super::plan::{Plan, Resolved};
use crate::config::OverLimitAction;
use sluice_proto::pb::envoy::service::ratelimit::v3::rate_limit_response::Code;
use sluice_proto::pb::envoy::service::ratelimit::v3::{RateLimitRequest, RateLimitResponse};
use std::collections::HashMap;
use std::sync::Mutex;

/// Buckets remembered at most (bucket names come from clients).
pub const MAX_BUCKETS: usize = 100_000;

/// How often a full memory is swept for answers past the memory, at most:
/// a sweep reads every entry under the lock, and a tenant spraying new
/// over-quota bucket names would otherwise have one swept per decision.
const SWEEP_EVERY_MS: u64 = 1_000;

/// When each deferring bucket last answered over quota.
#[derive(Debug)]
pub struct OverQuotaMemory {
    memory_ms: u64,
    last_over: Mutex<LastOver>,
}

/// The remembered answers, and when a full map was last swept.
#[derive(Debug, Default)]
struct LastOver {
    at: HashMap<String, u64>,
    swept_ms: u64,
}

impl OverQuotaMemory {
    /// Remembers a bucket's over-quota answer for `memory_ms`.
    pub fn new(memory_ms: u64) -> Self {
        OverQuotaMemory {
            memory_ms,
            last_over: Mutex::new(LastOver::default()),
        }
    }

    /// Notes the deferring buckets `response` found over quota, and says
    /// whether one of the deferring buckets of an allowed `response` was
    /// over within the memory (then it goes into the fair queue).
    pub fn observe(
        &self,
        request: &RateLimitRequest,
        plan: &Plan<'_>,
        response: &RateLimitResponse,
        now_ms: u64,
    ) -> bool {
        let allowed = response.overall_code == Code::Ok as i32;
        let mut last_over = self
            .last_over
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let mut lately = false;
        for (bucket, over) in deferring_buckets(request, plan, response) {
            if over {
                remember(&mut last_over, bucket, now_ms, self.memory_ms);
            } else if allowed {
                lately |= last_over
                    .at
                    .get(&bucket)
                    .is_some_and(|at| now_ms.saturating_sub(*at) <= self.memory_ms);
            }
        }
        lately
    }
}

/// Notes `bucket` over at `now_ms`; a full map first forgets what is past
/// the memory (at most once per [`SWEEP_EVERY_MS`]), and takes nothing new
/// if that frees no room.
fn remember(last_over: &mut LastOver, bucket: String, now_ms: u64, memory_ms: u64) {
    if last_over.at.len() >= MAX_BUCKETS && !last_over.at.contains_key(&bucket) {
        if now_ms.saturating_sub(last_over.swept_ms) >= SWEEP_EVERY_MS {
            last_over.swept_ms = now_ms;
            last_over
                .at
                .retain(|_, at| now_ms.saturating_sub(*at) <= memory_ms);
        }
        if last_over.at.len() >= MAX_BUCKETS {
            return;
        }
    }
    last_over.at.insert(bucket, now_ms);
}

/// The request's buckets under a limit that says `over_limit: defer`
/// (domain, limit, descriptor entries), each with whether it is over.
fn deferring_buckets<'a>(
    request: &'a RateLimitRequest,
    plan: &'a Plan<'a>,
    response: &'a RateLimitResponse,
) -> impl Iterator<Item = (String, bool)> + 'a {
    request
        .descriptors
        .iter()
        .zip(&plan.resolved)
        .zip(&response.statuses)
        .filter_map(move |((descriptor, resolved), status)| {
            let Resolved::Limited(applied) = resolved else {
                return None;
            };
            if applied.limit.sluice.over_limit != OverLimitAction::Defer {
                return None;
            }
            let mut bucket = format!("{}\u{1f}{}", request.domain, applied.limit.name);
            for entry in &descriptor.entries {
                bucket.push('\u{1f}');
                bucket.push_str(&entry.key);
                bucket.push('=');
                bucket.push_str(&entry.value);
            }
            Some((bucket, status.code == Code::OverLimit as i32))
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn full(at_ms: u64) -> LastOver {
        let mut last_over = LastOver::default();
        for i in 0..MAX_BUCKETS {
            last_over.at.insert(format!("b{i}"), at_ms);
        }
        last_over
    }

    #[test]
    fn a_full_memory_is_swept_at_most_once_a_second() {
        // Remembered for 10 ms, all at 0: past the memory from 11 ms on.
        let mut last_over = full(0);
        last_over.swept_ms = 0;
        // Within a second of the last sweep: no sweep, no room, not taken.
        remember(&mut last_over, "early".into(), 500, 10);
        assert_eq!(last_over.at.len(), MAX_BUCKETS);
        assert!(!last_over.at.contains_key("early"));
        // A second on: swept, the new bucket taken.
        remember(&mut last_over, "late".into(), 1_000, 10);
        assert_eq!(last_over.at.len(), 1);
        assert!(last_over.at.contains_key("late"));
    }

    #[test]
    fn a_full_memory_of_live_answers_takes_nothing_new() {
        let mut last_over = full(5_000);
        remember(&mut last_over, "new".into(), 5_005, 10);
        assert_eq!(last_over.at.len(), MAX_BUCKETS);
        assert!(!last_over.at.contains_key("new"));
        // A bucket already remembered is refreshed whatever the room.
        remember(&mut last_over, "b7".into(), 5_006, 10);
        assert_eq!(last_over.at.get("b7"), Some(&5_006));
    }
}
