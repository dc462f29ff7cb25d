//! The shared bucket bookkeeping on a real Redis: a publish (endpoint or
//! re-publish) registers the bucket and counts its backlog with an expiry; a
//! pop counts down and takes the lease; a lapsed lease is judged by the
//! claim's heartbeat.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // tests fail loudly

use sluice_contract::bookkeeping::{
    self, Announced, Bookkeeping, CapHit, CapValues, Lapse, BACKLOG_TTL_SECS,
};
use sluice_contract::{keys, ClaimTiming};
use sluice_testkit::RedisServer;
use std::time::Duration;

/// `command` with `args`, answered.
async fn query<T: redis::FromRedisValue>(
    conn: &mut sluice_redis::RedisConn,
    command: &str,
    args: impl redis::ToRedisArgs,
) -> T {
    redis::cmd(command)
        .arg(args)
        .query_async(conn)
        .await
        .unwrap()
}

async fn redis() -> (RedisServer, sluice_redis::RedisConn) {
    let server = RedisServer::start().unwrap();
    let conn = sluice_redis::RedisClient::open(&server.url())
        .and_then(|client| client.connect())
        .unwrap();
    (server, conn)
}

#[tokio::test]
async fn a_publish_registers_the_bucket_and_counts_its_backlog() {
    let (_server, mut conn) = redis().await;
    let book = Bookkeeping::default();
    let (tenant, topic) = ("acme", "acme_m");
    let now = sluice_contract::now_ms();
    // A re-publish (no cap) to a bucket nobody knows: registered like the
    // endpoint's first publish, with its tenant.
    let first = book
        .announce(&mut conn, tenant, topic, now, &CapValues::UNBOUNDED)
        .await
        .unwrap();
    assert_eq!(
        first.outcome,
        Announced::Admitted {
            created: true,
            subscribed: false
        }
    );
    assert_eq!(first.known, 1);
    let member: bool = query(&mut conn, "SISMEMBER", (keys::BUCKETS, topic)).await;
    assert!(member);
    let owner: Option<String> = query(&mut conn, "HGET", (keys::BUCKET_TENANTS, topic)).await;
    assert_eq!(owner.as_deref(), Some(tenant));
    let stamped: Option<u64> = query(&mut conn, "ZSCORE", (keys::ACTIVITY, topic)).await;
    assert_eq!(stamped, Some(now));

    // Counted, with an expiry.
    assert_eq!(
        bookkeeping::count_publish(&mut conn, topic).await.unwrap(),
        1
    );
    assert_eq!(
        bookkeeping::count_publish(&mut conn, topic).await.unwrap(),
        2
    );
    let ttl: i64 = query(&mut conn, "TTL", keys::backlog(topic)).await;
    assert!(ttl > 0 && ttl <= BACKLOG_TTL_SECS as i64, "{ttl}");

    // A pop counts down and takes the lease; both are visible to the endpoint.
    // A first pop: the request was never claimed.
    let seen = bookkeeping::record_pop(&mut conn, topic, Some("r-1"), Duration::from_secs(15))
        .await
        .unwrap();
    assert!(!seen, "a fresh request reads as claimed");
    assert_eq!(
        bookkeeping::backlog(&mut conn, topic).await.unwrap(),
        Some(1)
    );
    assert!(bookkeeping::lease_held(&mut conn, "r-1").await.unwrap());
    bookkeeping::drop_lease(&mut conn, "r-1").await.unwrap();
    assert!(!bookkeeping::lease_held(&mut conn, "r-1").await.unwrap());

    // A pop of a request claimed (or answered) before: seen.
    for key in [keys::processing("r-2"), keys::done("r-3")] {
        let _: () = query(&mut conn, "SET", (&key, "x")).await;
    }
    for req_id in ["r-2", "r-3"] {
        let seen = bookkeeping::record_pop(&mut conn, topic, Some(req_id), Duration::from_secs(1))
            .await
            .unwrap();
        assert!(seen, "{req_id} was claimed or answered");
    }
    // An unreadable message: only counted.
    assert!(
        !bookkeeping::record_pop(&mut conn, topic, None, Duration::from_secs(1))
            .await
            .unwrap()
    );

    // The bucket exists now: a second announce only stamps it.
    let again = book
        .announce(&mut conn, tenant, topic, now + 5, &CapValues::UNBOUNDED)
        .await
        .unwrap();
    assert_eq!(
        again.outcome,
        Announced::Admitted {
            created: false,
            subscribed: false
        }
    );
}

#[tokio::test]
async fn caps_refuse_new_buckets_only_and_a_reclaim_blocks_the_announce() {
    let (_server, mut conn) = redis().await;
    let book = Bookkeeping::default();
    let one = CapValues {
        max_buckets: 1,
        max_buckets_per_tenant: 1,
        max_new_buckets_per_minute: 10,
    };
    let now = sluice_contract::now_ms();
    let mut announce = async |tenant: &str, topic: &str, caps: &CapValues| {
        book.announce(&mut conn, tenant, topic, now, caps)
            .await
            .unwrap()
            .outcome
    };
    assert!(matches!(
        announce("a", "a_m", &one).await,
        Announced::Admitted { created: true, .. }
    ));
    assert_eq!(
        announce("a", "a_n", &one).await,
        Announced::Refused(CapHit::Tenant)
    );
    assert_eq!(
        announce("b", "b_m", &one).await,
        Announced::Refused(CapHit::Global)
    );
    assert!(matches!(
        announce("a", "a_m", &one).await,
        Announced::Admitted { created: false, .. }
    ));

    let _: () = query(&mut conn, "SET", (keys::reclaiming("c_m"), 1)).await;
    let reclaiming = book
        .announce(&mut conn, "c", "c_m", now, &CapValues::UNBOUNDED)
        .await
        .unwrap();
    assert_eq!(reclaiming.outcome, Announced::Reclaiming);
}

#[tokio::test]
async fn a_lapsed_lease_is_judged_by_the_claim_heartbeat() {
    let (_server, mut conn) = redis().await;
    let timing = ClaimTiming::default();
    assert_eq!(
        bookkeeping::lapsed_request(&mut conn, "r", &timing)
            .await
            .unwrap(),
        Lapse::Lost {
            call_started: false
        }
    );
    // A claim written now (Redis time) is alive; one from long ago is dead;
    // an answer ends it all. Each step writes one key, then judges.
    let (seconds, _micros): (u64, u64) = redis::cmd("TIME").query_async(&mut conn).await.unwrap();
    let fresh = sluice_contract::claim::value("c/1", seconds * 1000);
    let stale = sluice_contract::claim::value("c/1", seconds * 1000 - 60_000);
    let steps = [
        (keys::processing("r"), fresh, Lapse::Running),
        (
            keys::processing("r"),
            stale,
            Lapse::Lost { call_started: true },
        ),
        (keys::done("r"), "ok".to_string(), Lapse::Finished),
    ];
    for (key, value, expected) in steps {
        let _: () = query(&mut conn, "SET", (&key, &value)).await;
        assert_eq!(
            bookkeeping::lapsed_request(&mut conn, "r", &timing)
                .await
                .unwrap(),
            expected,
            "{key} = {value}"
        );
    }
}
