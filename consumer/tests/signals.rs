//! The capacity signal reader against sluice-llm-sim's GPU model (vLLM's
//! gauges over real HTTP).
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // tests fail loudly

use sluice_consumer::signals::{metrics_url, CapacitySignal, SignalError, SignalReader};
use sluice_llm_sim::gpu::{Capacity, GpuConfig};
use sluice_llm_sim::SimConfig;
use sluice_testkit::retry_until;
use std::net::SocketAddr;
use std::time::Duration;
use tokio::io::AsyncWriteExt;
use tokio::net::TcpStream;

const MODEL: &str = "gpu-model";

/// Opens a streamed chat request of many tokens and leaves it open.
async fn hold_a_stream(addr: SocketAddr) -> TcpStream {
    let body = format!(
        r#"{{"model":"{MODEL}","messages":[{{"role":"user","content":"hi"}}],"stream":true}}"#
    );
    let request = format!(
        "POST /v1/chat/completions HTTP/1.1\r\nHost: {addr}\r\ncontent-type: application/json\r\n\
         x-sim-completion-tokens: 100000\r\ncontent-length: {}\r\n\r\n{body}",
        body.len()
    );
    let mut tcp = TcpStream::connect(addr).await.unwrap();
    tcp.write_all(request.as_bytes()).await.unwrap();
    tcp
}

/// Reads until `check` holds (fails after 10 s).
async fn read_until(
    reader: &SignalReader,
    url: &str,
    check: impl Fn(&CapacitySignal) -> bool,
) -> CapacitySignal {
    let within = Duration::from_secs(10);
    let (signal, _) = retry_until(within, Duration::from_millis(20), async || {
        let signal = reader.read(url, MODEL).await.unwrap();
        if check(&signal) {
            Ok(signal)
        } else {
            Err(signal)
        }
    })
    .await;
    signal
}

#[tokio::test]
async fn reads_llm_sims_vllm_gauges() {
    let sim = sluice_llm_sim::spawn(SimConfig {
        models: vec![MODEL.to_string()],
        gpu: Some(GpuConfig {
            capacity: Capacity {
                tokens_per_s: 20.0,
                kv_cache_tokens: 1_000_000,
                max_batch: 2,
            },
            ..GpuConfig::default()
        }),
        ..SimConfig::fast()
    })
    .await
    .unwrap();
    let url = metrics_url(&sim.url());
    let reader = SignalReader::new(Duration::from_secs(2)).unwrap();

    let idle = reader.read(&url, MODEL).await.unwrap();
    assert_eq!(
        idle,
        CapacitySignal {
            waiting: 0.0,
            running: 0.0,
            kv_cache_usage: Some(0.0),
        }
    );

    let mut streams = Vec::new();
    for _ in 0..5 {
        streams.push(hold_a_stream(sim.addr()).await);
    }
    let busy = read_until(&reader, &url, |s| s.waiting == 3.0).await;
    assert_eq!(busy.running, 2.0);
    let usage = busy.kv_cache_usage.unwrap();
    assert!(usage > 0.0 && usage <= 1.0, "{usage}");
    // Another name for the model: the server's only series count.
    let alias = reader.read(&url, "alias").await.unwrap();
    assert_eq!((alias.waiting, alias.running), (3.0, 2.0));

    // Clients that leave empty the queue and the batch.
    drop(streams);
    read_until(&reader, &url, |s| s.waiting == 0.0 && s.running == 0.0).await;
    sim.shutdown().await.unwrap();
}

#[tokio::test]
async fn a_server_without_queue_gauges_or_a_wrong_path_is_an_error() {
    let plain = sluice_llm_sim::spawn(SimConfig::fast()).await.unwrap();
    let reader = SignalReader::new(Duration::from_secs(2)).unwrap();
    let no_signal = reader.read(&metrics_url(&plain.url()), MODEL).await;
    assert!(
        matches!(no_signal, Err(SignalError::NoSignal)),
        "{no_signal:?}"
    );
    let wrong_path = reader.read(&format!("{}/nope", plain.url()), MODEL).await;
    match wrong_path {
        Err(SignalError::Status { status, .. }) => assert_eq!(status.as_u16(), 404),
        other => panic!("{other:?}"),
    }
    plain.shutdown().await.unwrap();
}

#[tokio::test]
async fn a_server_that_does_not_answer_times_out() {
    // Accepts connections, never answers.
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let silent = tokio::spawn(async move {
        let mut held = Vec::new();
        while let Ok((tcp, _)) = listener.accept().await {
            held.push(tcp);
        }
    });
    let reader = SignalReader::new(Duration::from_millis(300)).unwrap();
    let started = std::time::Instant::now();
    let result = reader.read(&format!("http://{addr}/metrics"), MODEL).await;
    assert!(
        matches!(result, Err(SignalError::Timeout { .. })),
        "{result:?}"
    );
    assert!(started.elapsed() < Duration::from_secs(2));
    silent.abort();
}
