//! Broker disk per deferred byte, and whether the broker's retention
//! settings (`lite-topic/broker/broker.toml.in`) delete anything.
//!
//! ```sh
//! cargo run -p sluice-bench --bin broker_disk -- [requests] [body KiB]   # default 64 × 1024 KiB
//! ```
//!
//! 1. Starts the broker with the shipped template, publishes `requests`
//!    deferred requests whose body carries `body KiB` of text through the
//!    deferral endpoint's own publisher (`LitePublisher`: what sluice-rls
//!    queues), and prints what the store grew by (`du`, allocated blocks).
//! 2. Restarts the broker on the same store with `fileReservedTime = 0` and
//!    a one-second `cleanResourceInterval` (everything but the newest
//!    commit-log file is then expired) and prints the commit-log files left,
//!    once with the template's `deleteFileBatchMax` and once without it.
//!
//! Loopback only; bounded by the counts given.

use sluice_contract::work::WorkItem;
use sluice_deferral::endpoint::Publisher;
use sluice_deferral::publisher::LitePublisher;
use sluice_testkit::stack::{redis_connection, start_broker, work_item, GROUP, PARENT};
use sluice_testkit::{RedisServer, RocketMq};
use std::path::Path;
use std::process::Command;
use std::time::Duration;

/// Allocated bytes under `path` (`du -s --block-size=1`).
fn du(path: &Path) -> anyhow::Result<u64> {
    let out = Command::new("du")
        .arg("-s")
        .arg("--block-size=1")
        .arg(path)
        .output()?;
    let text = String::from_utf8_lossy(&out.stdout);
    let bytes = text.split_whitespace().next().unwrap_or("0").parse()?;
    Ok(bytes)
}

fn commit_log_files(broker: &RocketMq) -> anyhow::Result<Vec<String>> {
    let mut names: Vec<String> = std::fs::read_dir(broker.dir().join("store/commitlog"))?
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    Ok(names)
}

/// A deferred request whose one message holds `body_bytes` of text.
fn deferred(index: usize, body_bytes: usize) -> WorkItem {
    let req_id = format!("{index:032x}");
    let mut work = work_item("disk", "gpt-4o", &req_id, 100);
    work.body = serde_json::json!({
        "model": "gpt-4o",
        "messages": [{"role": "user", "content": "x".repeat(body_bytes)}]
    });
    work
}

/// Rewrites the running broker's config: `edit` the text, then restart it.
fn restart_with(broker: &mut RocketMq, edit: impl Fn(&str) -> String) -> anyhow::Result<()> {
    let path = broker.dir().join("broker.toml");
    let text = std::fs::read_to_string(&path)?;
    std::fs::write(&path, edit(&text))?;
    broker.restart_broker()
}

fn set_key(text: &str, key: &str, value: &str) -> String {
    let mut found = false;
    let mut lines: Vec<String> = text
        .lines()
        .map(|line| {
            if line.trim_start().starts_with(&format!("{key} ")) {
                found = true;
                format!("{key} = {value}")
            } else {
                line.to_string()
            }
        })
        .collect();
    if !found {
        lines.push(format!("{key} = {value}"));
    }
    lines.join("\n") + "\n"
}

fn drop_key(text: &str, key: &str) -> String {
    text.lines()
        .filter(|line| !line.trim_start().starts_with(&format!("{key} ")))
        .collect::<Vec<_>>()
        .join("\n")
        + "\n"
}

async fn files_after_cleaning(broker: &RocketMq) -> anyhow::Result<Vec<String>> {
    // Several cleaner rounds (1 s apart) on a loaded machine.
    tokio::time::sleep(Duration::from_secs(8)).await;
    commit_log_files(broker)
}

#[derive(clap::Parser)]
#[command(about = "The broker's disk use for deferred request bodies")]
struct Args {
    /// Deferred requests.
    #[arg(default_value_t = 64, value_parser = clap::value_parser!(u16).range(1..=1000))]
    requests: u16,
    /// Each request's body, in KiB.
    #[arg(default_value_t = 1024, value_parser = clap::value_parser!(u16).range(1..=3900))]
    body_kib: u16,
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() -> anyhow::Result<()> {
    let args = <Args as clap::Parser>::parse();
    let (requests, body_kib) = (usize::from(args.requests), usize::from(args.body_kib));
    let body_bytes = body_kib * 1024;

    let redis = RedisServer::start()?;
    let mut broker = start_broker().await;
    let publisher = LitePublisher::connect(
        &broker.namesrv_addr(),
        PARENT,
        GROUP,
        redis_connection(&redis),
    )
    .await
    .map_err(|e| anyhow::anyhow!("publisher: {e}"))?;
    let store = broker.dir().join("store");
    // One small request first: the parent topic, its queue and the bucket exist.
    let first = deferred(0, 10);
    publisher
        .publish("disk", "gpt-4o", &first.req_id, first.to_json().into())
        .await?;
    tokio::time::sleep(Duration::from_secs(1)).await;
    let (store_before, log_before) = (du(&store)?, du(&store.join("commitlog"))?);

    let mut message_bytes = 0u64;
    for index in 1..=requests {
        let work = deferred(index, body_bytes);
        let json = work.to_json();
        message_bytes += json.len() as u64;
        publisher
            .publish("disk", "gpt-4o", &work.req_id, json.into())
            .await
            .map_err(|e| anyhow::anyhow!("publish {index}: {e}"))?;
    }
    // Past the broker's asynchronous flush.
    tokio::time::sleep(Duration::from_secs(2)).await;
    let (store_after, log_after) = (du(&store)?, du(&store.join("commitlog"))?);
    let body_total = (requests * body_bytes) as u64;
    let grown = store_after.saturating_sub(store_before);
    println!(
        "{requests} deferred requests × {body_kib} KiB body ({message_bytes} message bytes): \
         store +{grown} B (commit log +{} B) = {:.3} B of disk per body byte, {:.3} per message byte",
        log_after.saturating_sub(log_before),
        grown as f64 / body_total as f64,
        grown as f64 / message_bytes as f64,
    );
    let files = commit_log_files(&broker)?;
    println!("commit-log files: {files:?}");

    // Retention: every file but the newest is expired at fileReservedTime 0.
    restart_with(&mut broker, |t| {
        let t = drop_key(t, "deleteFileBatchMax");
        let t = set_key(&t, "fileReservedTime", "0");
        set_key(&t, "cleanResourceInterval", "1000")
    })?;
    let left = files_after_cleaning(&broker).await?;
    println!(
        "fileReservedTime 0, no deleteFileBatchMax: {} commit-log files left: {left:?}",
        left.len()
    );
    restart_with(&mut broker, |t| set_key(t, "deleteFileBatchMax", "10"))?;
    let left = files_after_cleaning(&broker).await?;
    println!(
        "fileReservedTime 0, deleteFileBatchMax 10: {} commit-log files left: {left:?}",
        left.len()
    );
    Ok(())
}
