//! One scenario, run as two tests: on a single Redis server and on a Redis
//! Cluster, where no command may cross hash slots.

/// Fails the test if any Redis command of this process crossed hash slots
/// (counted by sluice-redis; a cluster refuses such commands).
pub fn assert_no_cross_slot_commands() {
    assert_eq!(
        sluice_redis::cross_slot_errors(),
        0,
        "a command crossed slots"
    );
}

/// Two tests of each `scenario` (an `async fn(RedisKind)`): `$single` on
/// a single Redis server, `$cluster` on a Redis Cluster followed by
/// [`assert_no_cross_slot_commands`]. Several scenarios, separated by `;`,
/// make one table of what a file runs on both.
#[macro_export]
macro_rules! single_and_cluster_tests {
    ($($scenario:ident, $single:ident, $cluster:ident);+ $(;)?) => {
        $(
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn $single() {
                $scenario($crate::redis_topologies::RedisKind::Single).await;
            }

            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn $cluster() {
                $scenario($crate::redis_topologies::RedisKind::Cluster).await;
                $crate::redis_scenarios::assert_no_cross_slot_commands();
            }
        )+
    };
}
