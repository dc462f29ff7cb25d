//! sluice-redis against real deployments: a Redis Cluster (3 masters, 3
//! replicas) and a Sentinel set (master, replica, 3 sentinels), started here
//! on free ports, with a master SIGKILLed under writes; and ACL credentials
//! from the URL and from a password file on a single server.

use redis::AsyncCommands;
use sluice_redis::{RedisClient, RedisConn, RedisOptions};
use sluice_testkit::redis_topologies::{cli, RedisCluster, RedisSentinelSet};
use sluice_testkit::{retry_until, RedisServer};
use std::time::{Duration, Instant};

fn options(url: String) -> RedisOptions {
    RedisOptions {
        connect_timeout_ms: 300,
        response_timeout_ms: 500,
        ..RedisOptions::from_url(url)
    }
}

fn connect(url: String) -> RedisConn {
    RedisClient::new(&options(url))
        .and_then(|client| client.connect())
        .unwrap_or_else(|e| panic!("connect: {e}"))
}

/// INCRs `key` until one succeeds after `since`; the time it took.
async fn time_to_first_write(conn: &mut RedisConn, key: &str, limit: Duration) -> Duration {
    let write = async || conn.incr::<_, _, i64>(key, 1).await;
    retry_until(limit, Duration::from_millis(20), write).await.1
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cluster_routes_commands_scripts_and_pipelines_and_survives_a_master_kill() {
    let mut cluster = RedisCluster::start(3, 1).expect("cluster");
    let mut conn = connect(cluster.url());

    // Keys spread over every master; each command goes to its slot's owner.
    for i in 0..64 {
        let () = conn.set(format!("k{i}"), i).await.expect("set");
    }
    let owners: std::collections::BTreeSet<u16> = (0..64)
        .map(|i| cluster.master_of(&format!("k{i}")).expect("owner"))
        .collect();
    assert_eq!(owners.len(), 3, "64 keys should touch all 3 masters");
    for i in 0..64 {
        let value: i64 = conn.get(format!("k{i}")).await.expect("get");
        assert_eq!(value, i);
    }

    // A script over two keys of one hash tag runs where the tag lives.
    let script = redis::Script::new(
        "redis.call('INCRBY', KEYS[1], ARGV[1]); return redis.call('INCRBY', KEYS[2], ARGV[1])",
    );
    let total: i64 = script
        .key("{t1}:a")
        .key("{t1}:b")
        .arg(5)
        .invoke_async(&mut conn)
        .await
        .expect("script");
    assert_eq!(total, 5);
    // Two keys of different slots in one script: the cluster refuses it.
    let crossslot = script
        .key("{t1}:a")
        .key("{t2}:b")
        .arg(1)
        .invoke_async::<i64>(&mut conn)
        .await;
    assert!(crossslot.is_err(), "a cross-slot script must fail");

    // A pipeline on one slot.
    let (a, b): (i64, i64) = redis::pipe()
        .incr("{t1}:a", 1)
        .incr("{t1}:b", 1)
        .query_async(&mut conn)
        .await
        .expect("pipeline");
    assert_eq!((a, b), (6, 6));

    // Kill the master that owns the busy key; writes come back after the
    // replica's promotion.
    let key = "{tenant-busy}:requests";
    let () = conn.set(key, 0).await.expect("set");
    let victim = cluster.master_of(key).expect("owner");
    cluster.kill(victim).expect("kill");
    let recovery = time_to_first_write(&mut conn, key, Duration::from_secs(20)).await;
    // The node asked may learn of the promotion a moment after the client did.
    let asked = Instant::now();
    let new_owner = loop {
        match cluster.master_of(key) {
            Ok(owner) if owner != victim => break owner,
            other => assert!(
                asked.elapsed() < Duration::from_secs(10),
                "no new owner: {other:?}"
            ),
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    assert_ne!(new_owner, victim);
    println!("cluster failover: writes succeed again {recovery:?} after SIGKILL of the master");
    assert!(
        recovery < Duration::from_secs(10),
        "recovery took {recovery:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sentinel_follows_the_master_across_a_failover() {
    let mut set = RedisSentinelSet::start().expect("sentinel set");
    let mut conn = connect(set.url());
    let () = conn.set("counter", 41).await.expect("set via sentinel");
    // Wait until the replica has the write, so the failover keeps it.
    let acked: i64 = redis::cmd("WAIT")
        .arg(1)
        .arg(2000)
        .query_async(&mut conn)
        .await
        .expect("WAIT");
    assert_eq!(acked, 1, "the replica acknowledged the write");

    let killed = set.kill_master().expect("kill");
    let recovery = time_to_first_write(&mut conn, "counter", Duration::from_secs(30)).await;
    let new = set.master_port().expect("new master");
    assert_ne!(new, killed, "the sentinels promoted the replica");
    let value: i64 = conn.get("counter").await.expect("get");
    assert_eq!(value, 42, "the acknowledged write survived, then one INCR");
    println!("sentinel failover: writes succeed again {recovery:?} after SIGKILL of the master");
}

#[tokio::test]
async fn acl_credentials_from_the_url_or_a_password_file() {
    let redis = RedisServer::start().expect("redis");
    cli(
        redis.port(),
        &["acl", "setuser", "app", "on", ">s3cret", "~*", "+@all"],
    )
    .expect("acl setuser");
    cli(redis.port(), &["acl", "setuser", "default", "off"]).expect("default off");

    let url = format!("redis://app:s3cret@127.0.0.1:{}", redis.port());
    let mut conn = connect(url);
    let () = conn.set("a", 1).await.expect("with URL credentials");

    let dir = tempfile::tempdir().expect("tempdir");
    let file = dir.path().join("password");
    std::fs::write(&file, "s3cret\n").expect("write");
    let from_file = RedisOptions {
        password_file: Some(file),
        ..options(format!("redis://app:wrong@127.0.0.1:{}", redis.port()))
    };
    let mut conn = RedisClient::new(&from_file)
        .and_then(|c| c.connect())
        .expect("client");
    let value: i64 = conn.get("a").await.expect("the file's password wins");
    assert_eq!(value, 1);

    let mut wrong = connect(format!("redis://app:wrong@127.0.0.1:{}", redis.port()));
    let refused: Result<i64, _> = wrong.get("a").await;
    assert!(refused.is_err(), "a wrong password is refused");
}
