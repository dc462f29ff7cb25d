// Sluice patch `store-lmq-offset-order` (vendor/PATCHES.md, issue #29).
//
// A message dispatched to LMQ queues (a RocketMQ LiteTopic) reads each
// queue's next offset before the commit-log append (`prepare_lmq_dispatch`)
// and counts it up after (`update_lmq_offsets`), with no lock between: two
// sends to one LMQ queue from two connections at once read the same offset,
// and the consume queue then holds one message in the other's place, which
// is never delivered. Upstream's Java broker does the three steps under the
// topic-queue lock. Here one stripe lock per LMQ queue name, taken before the
// read and released after the count, makes them one step per queue.

use std::hash::{DefaultHasher, Hash, Hasher};
use std::sync::LazyLock;

use rocketmq_model::common::mix_all::MULTI_DISPATCH_QUEUE_SPLITTER;
use tokio::sync::{Mutex, MutexGuard};

/// Stripes: sends to different LiteTopics rarely wait on each other.
const STRIPES: usize = 64;

static LMQ_OFFSET_LOCKS: LazyLock<Vec<Mutex<()>>> =
    LazyLock::new(|| (0..STRIPES).map(|_| Mutex::new(())).collect());

/// Held from the offset read to the offset count of one put.
pub(crate) struct LmqOffsetGuard {
    _guards: Vec<MutexGuard<'static, ()>>,
}

/// The stripes of the queues named in a message's multi-dispatch property,
/// ascending and without repeats (taken in that order, two puts can never
/// wait on each other in a cycle).
pub(crate) fn lmq_offset_stripes(multi_dispatch: Option<&str>) -> Vec<usize> {
    let Some(queues) = multi_dispatch else {
        return Vec::new();
    };
    let mut stripes: Vec<usize> = queues
        .split(MULTI_DISPATCH_QUEUE_SPLITTER)
        .filter(|queue| !queue.is_empty())
        .map(|queue| {
            let mut hasher = DefaultHasher::new();
            queue.hash(&mut hasher);
            (hasher.finish() % STRIPES as u64) as usize
        })
        .collect();
    stripes.sort_unstable();
    stripes.dedup();
    stripes
}

/// Lock the LMQ queues a message is dispatched to (none: nothing locked).
pub(crate) async fn lock_lmq_offsets(multi_dispatch: Option<&str>) -> LmqOffsetGuard {
    let mut guards = Vec::new();
    for stripe in lmq_offset_stripes(multi_dispatch) {
        guards.push(LMQ_OFFSET_LOCKS[stripe].lock().await);
    }
    LmqOffsetGuard { _guards: guards }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stripes_are_sorted_unique_and_skip_empty_names() {
        assert!(lmq_offset_stripes(None).is_empty());
        assert!(lmq_offset_stripes(Some("")).is_empty());
        let one = lmq_offset_stripes(Some("%LMQ%a"));
        assert_eq!(one.len(), 1);
        assert_eq!(lmq_offset_stripes(Some("%LMQ%a,%LMQ%a,")), one);
        let many = lmq_offset_stripes(Some("%LMQ%a,%LMQ%b,%LMQ%c,%LMQ%d"));
        assert!(many.windows(2).all(|w| w[0] < w[1]), "{many:?}");
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
    async fn concurrent_puts_to_one_queue_read_and_count_one_at_a_time() {
        // The put's shape: read the offset, yield (the append), count up.
        let offset = std::sync::Arc::new(std::sync::atomic::AtomicI64::new(0));
        let mut tasks = Vec::new();
        for _ in 0..8 {
            let offset = offset.clone();
            tasks.push(tokio::spawn(async move {
                let mut seen = Vec::new();
                for _ in 0..50 {
                    let _guard = lock_lmq_offsets(Some("%LMQ%one")).await;
                    let read = offset.load(std::sync::atomic::Ordering::SeqCst);
                    tokio::task::yield_now().await;
                    offset.store(read + 1, std::sync::atomic::Ordering::SeqCst);
                    seen.push(read);
                }
                seen
            }));
        }
        let mut all = Vec::new();
        for task in tasks {
            all.extend(task.await.unwrap());
        }
        all.sort_unstable();
        assert_eq!(all, (0..400).collect::<Vec<i64>>(), "every put read its own offset");
    }
}
