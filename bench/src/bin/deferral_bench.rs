//! `cargo run --release -p sluice-bench --bin deferral_bench -- --help`
//!
//! The deferral endpoint's response side at scale: N clients (default 9,000;
//! client and server sockets share this process's file-descriptor limit)
//! hold deferred SSE requests open at once through the real HTTP endpoint
//! and a real Redis; then every response stream gets its chunks and `done`.
//! Prints: Redis connections the endpoint used, the process's RSS while all
//! wait, and how long until every client had its complete answer.
//!
//! The publisher here accepts without a broker: this measures the response
//! channel (the queue side is measured by the consumer/lite-topic benches).

use clap::Parser;
use futures::future::BoxFuture;
use redis::AsyncCommands;
use sluice_deferral::caps::PublishError;
use sluice_deferral::endpoint::{router, EndpointMetrics, EndpointOptions, Publisher};
use sluice_deferral::hub::{HubOptions, StreamHub};
use sluice_testkit::RedisServer;
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

#[derive(Parser)]
#[command(about = "Deferred SSE streams held open at once, then answered")]
struct Args {
    /// Clients holding a deferred stream open at once.
    #[arg(long, env = "STREAMS", default_value_t = 9_000)]
    streams: usize,
    /// The stream hub's Redis readers.
    #[arg(long, env = "READERS", default_value_t = 7)]
    readers: usize,
}

struct Accept;

impl Publisher for Accept {
    fn publish<'a>(
        &'a self,
        _: &'a str,
        _: &'a str,
        _: &'a str,
        _: axum::body::Bytes,
    ) -> BoxFuture<'a, Result<Option<u64>, PublishError>> {
        Box::pin(async { Ok(None) })
    }
}

fn rss_mib() -> f64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("VmRSS:"))
                .map(str::to_string)
        })
        .and_then(|l| {
            l.split_whitespace()
                .nth(1)
                .and_then(|n| n.parse::<f64>().ok())
        })
        .map(|kib| kib / 1024.0)
        .unwrap_or(f64::NAN)
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let Args {
        streams: n,
        readers,
    } = Args::parse();
    let redis = RedisServer::start()?;
    let client = sluice_redis::RedisClient::open(&redis.url())?;
    let control = client.connect()?;
    let hub = StreamHub::start_with_control(
        client.clone(),
        control.clone(),
        HubOptions {
            readers,
            ..Default::default()
        },
    )?;
    let options = EndpointOptions {
        max_in_flight: n + 10,
        announce_queued: true,
        secrets: vec![sluice_testkit::example_deferral_secret()],
        ..Default::default()
    };
    let app = router(
        hub,
        Arc::new(Accept),
        control,
        options,
        Arc::new(EndpointMetrics::default()),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let addr = listener.local_addr()?;
    tokio::spawn(async move { axum::serve(listener, app).await });
    let baseline = rss_mib();
    println!("deferral bench: {n} concurrent SSE clients, {readers} stream readers, RSS before {baseline:.0} MiB");

    // Open N deferred requests; each client reads until [DONE].
    let started = Instant::now();
    let body =
        r#"{"model": "gpt-4o", "stream": true, "messages": [{"role": "user", "content": "hi"}]}"#;
    let mut clients = Vec::with_capacity(n);
    for i in 0..n {
        let markers = sluice_testkit::deferral_headers(
            &format!("r{i}"),
            &format!("t{}", i % 100),
            "gpt-4o",
            "normal",
            0,
            body.as_bytes(),
        );
        let mut request = String::from("POST /v1/chat/completions HTTP/1.1\r\nHost: b\r\n");
        for (name, value) in markers {
            request.push_str(&format!("{name}: {value}\r\n"));
        }
        request.push_str(&format!("content-length: {}\r\n\r\n{body}", body.len()));
        let mut stream = tokio::net::TcpStream::connect(addr).await?;
        stream.write_all(request.as_bytes()).await?;
        clients.push(tokio::spawn(async move {
            let mut seen = Vec::new();
            let mut buf = vec![0u8; 4096];
            loop {
                match stream.read(&mut buf).await {
                    Ok(0) | Err(_) => return (false, Instant::now()),
                    Ok(k) => {
                        seen.extend_from_slice(&buf[..k]);
                        if seen.windows(12).any(|w| w == b"data: [DONE]") {
                            return (true, Instant::now());
                        }
                    }
                }
            }
        }));
    }
    // Let every request reach its wait.
    tokio::time::sleep(Duration::from_secs(2)).await;
    let opened = started.elapsed();
    let waiting_rss = rss_mib();
    let mut admin = client.connect()?;
    let clients_list: String = redis::cmd("CLIENT")
        .arg("LIST")
        .query_async(&mut admin)
        .await?;
    // The writer below and this admin connection are the bench's own.
    let endpoint_connections = clients_list.lines().count().saturating_sub(1);

    // Answer everyone: 5 chunks + done per stream, pipelined.
    let answering = Instant::now();
    let chunk = r#"{"id":"c","object":"chat.completion.chunk","created":1,"model":"gpt-4o","choices":[{"index":0,"delta":{"content":"word "},"finish_reason":null}]}"#;
    let mut writer = client.connect()?;
    for batch in (0..n).collect::<Vec<_>>().chunks(500) {
        let mut pipe = redis::pipe();
        for i in batch {
            let key = sluice_contract::keys::response(&format!("r{i}"));
            for _ in 0..5 {
                pipe.xadd(&key, "*", &[("type", "chunk"), ("data", chunk)])
                    .ignore();
            }
            pipe.xadd(&key, "*", &[("type", "done")]).ignore();
        }
        let _: () = pipe.query_async(&mut writer).await?;
    }
    let mut complete = 0;
    let mut last = answering;
    for client in clients {
        if let Ok((ok, at)) = client.await {
            complete += usize::from(ok);
            last = last.max(at);
        }
    }
    let _: () = writer.del("unused").await.unwrap_or(());
    println!("opened {n} waits in {:.1} s", opened.as_secs_f64());
    println!("Redis connections held by the endpoint: {endpoint_connections} ({readers} stream readers + 1 shared)");
    println!(
        "RSS with all {n} waiting: {waiting_rss:.0} MiB (+{:.0} MiB over the idle process)",
        waiting_rss - baseline
    );
    println!(
        "all answers delivered: {complete}/{n} complete, last one {:.2} s after the first chunk was written ({:.0} streams/s)",
        (last - answering).as_secs_f64(),
        n as f64 / (last - answering).as_secs_f64()
    );
    Ok(())
}
