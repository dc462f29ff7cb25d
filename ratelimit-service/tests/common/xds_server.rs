//! A small state-of-the-world ADS management server for tests: it serves
//! whatever snapshot the test sets (to every stream, at once) and records
//! the clients' requests (subscriptions, ACKs, NACKs).

#![allow(dead_code)] // each test file uses part of it

use sluice_proto::pb::envoy::service::discovery::v3::aggregated_discovery_service_server::{
    AggregatedDiscoveryService, AggregatedDiscoveryServiceServer,
};
use sluice_proto::pb::envoy::service::discovery::v3::{
    DeltaDiscoveryRequest, DeltaDiscoveryResponse, DiscoveryRequest, DiscoveryResponse,
};
use sluice_proto::pb::google::protobuf::Any;
use sluice_proto::rls_config::{RateLimitConfig, RATE_LIMIT_CONFIG_TYPE_URL};
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::{mpsc, watch, Mutex};
use tokio_stream::{Stream, StreamExt};

type Snapshot = Option<(String, Vec<Any>)>;

#[derive(Clone)]
struct Ads {
    snapshot: watch::Receiver<Snapshot>,
    requests: mpsc::UnboundedSender<DiscoveryRequest>,
    nonce: Arc<AtomicU64>,
}

#[tonic::async_trait]
impl AggregatedDiscoveryService for Ads {
    type StreamAggregatedResourcesStream =
        Pin<Box<dyn Stream<Item = Result<DiscoveryResponse, tonic::Status>> + Send>>;
    type DeltaAggregatedResourcesStream =
        Pin<Box<dyn Stream<Item = Result<DeltaDiscoveryResponse, tonic::Status>> + Send>>;

    async fn stream_aggregated_resources(
        &self,
        request: tonic::Request<tonic::Streaming<DiscoveryRequest>>,
    ) -> Result<tonic::Response<Self::StreamAggregatedResourcesStream>, tonic::Status> {
        let mut incoming = request.into_inner();
        let recorder = self.requests.clone();
        tokio::spawn(async move {
            while let Some(Ok(request)) = incoming.next().await {
                let _ = recorder.send(request);
            }
        });
        let mut snapshot = self.snapshot.clone();
        let nonce = self.nonce.clone();
        let responses = async_stream(move |tx| async move {
            loop {
                let current = snapshot.borrow_and_update().clone();
                if let Some((version, resources)) = current {
                    let response = DiscoveryResponse {
                        version_info: version,
                        resources,
                        type_url: RATE_LIMIT_CONFIG_TYPE_URL.to_string(),
                        nonce: nonce.fetch_add(1, Ordering::SeqCst).to_string(),
                        ..Default::default()
                    };
                    if tx.send(Ok(response)).await.is_err() {
                        return;
                    }
                }
                if snapshot.changed().await.is_err() {
                    return;
                }
            }
        });
        Ok(tonic::Response::new(responses))
    }

    async fn delta_aggregated_resources(
        &self,
        _request: tonic::Request<tonic::Streaming<DeltaDiscoveryRequest>>,
    ) -> Result<tonic::Response<Self::DeltaAggregatedResourcesStream>, tonic::Status> {
        Err(tonic::Status::unimplemented("state of the world only"))
    }
}

/// A stream fed by a task.
fn async_stream<F, Fut>(
    body: F,
) -> Pin<Box<dyn Stream<Item = Result<DiscoveryResponse, tonic::Status>> + Send>>
where
    F: FnOnce(mpsc::Sender<Result<DiscoveryResponse, tonic::Status>>) -> Fut,
    Fut: std::future::Future<Output = ()> + Send + 'static,
{
    let (tx, rx) = mpsc::channel(4);
    tokio::spawn(body(tx));
    Box::pin(tokio_stream::wrappers::ReceiverStream::new(rx))
}

/// A running management server.
pub struct ManagementServer {
    pub addr: SocketAddr,
    snapshot: watch::Sender<Snapshot>,
    requests: Mutex<mpsc::UnboundedReceiver<DiscoveryRequest>>,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    task: Option<tokio::task::JoinHandle<()>>,
}

impl ManagementServer {
    /// Starts on a free loopback port (or on `addr`, to come back after a stop).
    pub async fn start(addr: Option<SocketAddr>) -> ManagementServer {
        Self::start_with_tls(addr, None).await
    }

    /// [`Self::start`], serving TLS when `tls` is given.
    pub async fn start_with_tls(
        addr: Option<SocketAddr>,
        tls: Option<tonic::transport::ServerTlsConfig>,
    ) -> ManagementServer {
        let listener =
            tokio::net::TcpListener::bind(addr.unwrap_or_else(|| "127.0.0.1:0".parse().unwrap()))
                .await
                .unwrap();
        let addr = listener.local_addr().unwrap();
        let (snapshot, snapshots) = watch::channel(None);
        let (recorder, requests) = mpsc::unbounded_channel();
        let ads = Ads {
            snapshot: snapshots,
            requests: recorder,
            nonce: Arc::new(AtomicU64::new(1)),
        };
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let mut builder = tonic::transport::Server::builder();
        if let Some(tls) = tls {
            builder = builder.tls_config(tls).unwrap();
        }
        let task = tokio::spawn(async move {
            let _ = builder
                .add_service(AggregatedDiscoveryServiceServer::new(ads))
                .serve_with_incoming_shutdown(
                    tokio_stream::wrappers::TcpListenerStream::new(listener),
                    async {
                        let _ = stopped.await;
                    },
                )
                .await;
        });
        ManagementServer {
            addr,
            snapshot,
            requests: Mutex::new(requests),
            stop: Some(stop),
            task: Some(task),
        }
    }

    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// Serves `resources` as `version` from now on.
    pub fn set(&self, version: &str, resources: &[RateLimitConfig]) {
        let encoded = resources
            .iter()
            .map(sluice_ratelimit::xds::encode)
            .collect();
        self.snapshot
            .send_replace(Some((version.to_string(), encoded)));
    }

    /// Serves raw resources (for resources that are not RateLimitConfigs).
    pub fn set_raw(&self, version: &str, resources: Vec<Any>) {
        self.snapshot
            .send_replace(Some((version.to_string(), resources)));
    }

    /// The next request a client sent that answers a response (has a nonce).
    pub async fn next_reply(&self) -> DiscoveryRequest {
        let mut requests = self.requests.lock().await;
        loop {
            let request = tokio::time::timeout(Duration::from_secs(10), requests.recv())
                .await
                .expect("a client request within 10 s")
                .expect("server alive");
            if !request.response_nonce.is_empty() {
                return request;
            }
        }
    }

    /// Stops serving and closes every stream.
    pub async fn stop(mut self) -> SocketAddr {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        // Streams end when the server drops them; the snapshot sender goes too.
        drop(self.snapshot);
        if let Some(task) = self.task.take() {
            let _ = task.await;
        }
        self.addr
    }
}
