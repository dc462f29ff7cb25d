//! Limits from an xDS management server, as envoyproxy/ratelimit takes them
//! with `CONFIG_TYPE=GRPC_XDS_SOTW` (and Envoy Gateway serves them): the
//! state-of-the-world Aggregated Discovery Service, resource type
//! `ratelimit.config.ratelimit.v3.RateLimitConfig`.
//!
//! Every response carries the whole set of resources. It is validated as a
//! file reload is and swapped in atomically next to the files' domains, then
//! ACKed; a bad set is NACKed (with the problem) and the last good config
//! stays. An empty set withdraws every xDS domain. A lost stream is
//! reopened with exponential backoff and jitter; the config stays meanwhile.

mod resource;

pub use resource::{decode, encode, source_name, to_resource, ResourceError};

use crate::limiter::Limiter;
use crate::metrics::ResultLabels;
use sluice_proto::pb::envoy::config::core::v3::Node;
use sluice_proto::pb::envoy::service::discovery::v3::aggregated_discovery_service_client::AggregatedDiscoveryServiceClient;
use sluice_proto::pb::envoy::service::discovery::v3::{DiscoveryRequest, DiscoveryResponse};
use sluice_proto::pb::google::protobuf::{value::Kind, Struct, Value};
use sluice_proto::pb::google::rpc::Status;
use sluice_proto::rls_config::RATE_LIMIT_CONFIG_TYPE_URL;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::{mpsc, watch};
use tokio_stream::wrappers::ReceiverStream;

/// Where and how to fetch limits over xDS.
#[derive(Clone, Debug)]
pub struct XdsOptions {
    /// `http://host:port` (or `host:port`) of the management server.
    pub server: String,
    /// `node.id` sent to the server (upstream's CONFIG_GRPC_XDS_NODE_ID).
    pub node_id: String,
    /// `node.metadata` string fields (CONFIG_GRPC_XDS_NODE_METADATA).
    pub node_metadata: Vec<(String, String)>,
    /// First wait after a failed or lost stream; doubles up to `backoff_max`.
    pub backoff_initial: Duration,
    pub backoff_max: Duration,
    /// Largest response accepted (XDS_CLIENT_MAX_MSG_SIZE_IN_BYTES); tonic's 4 MiB if `None`.
    pub max_message_bytes: Option<usize>,
    /// TLS to the management server (CONFIG_GRPC_XDS_SERVER_USE_TLS).
    pub tls: Option<XdsTls>,
}

/// TLS to the management server, PEM contents.
#[derive(Clone, Debug, Default)]
pub struct XdsTls {
    /// CA the server's certificate must chain to (CONFIG_GRPC_XDS_SERVER_TLS_CACERT).
    pub ca: Vec<u8>,
    /// Client certificate and key, for servers that ask for one
    /// (CONFIG_GRPC_XDS_CLIENT_TLS_CERT / _KEY).
    pub identity: Option<(Vec<u8>, Vec<u8>)>,
    /// Name to check the server's certificate against, when not the
    /// address's host (CONFIG_GRPC_XDS_SERVER_TLS_SAN).
    pub server_name: Option<String>,
}

impl XdsTls {
    fn client_config(&self) -> tonic::transport::ClientTlsConfig {
        use tonic::transport::{Certificate, ClientTlsConfig, Identity};
        let mut config = ClientTlsConfig::new().ca_certificate(Certificate::from_pem(&self.ca));
        if let Some((cert, key)) = &self.identity {
            config = config.identity(Identity::from_pem(cert, key));
        }
        if let Some(name) = &self.server_name {
            config = config.domain_name(name.clone());
        }
        config
    }
}

impl Default for XdsOptions {
    fn default() -> Self {
        XdsOptions {
            server: "http://127.0.0.1:18000".into(),
            node_id: "default".into(),
            node_metadata: Vec::new(),
            backoff_initial: Duration::from_secs(1),
            backoff_max: Duration::from_secs(60),
            max_message_bytes: None,
            tls: None,
        }
    }
}

/// Why a stream ended.
#[derive(Debug, thiserror::Error)]
pub enum XdsError {
    #[error("invalid xDS server address '{0}': {1}")]
    Address(String, String),
    #[error("cannot connect to the xDS server: {0}")]
    Connect(#[from] tonic::transport::Error),
    #[error("xDS stream failed: {0}")]
    Stream(#[from] tonic::Status),
    #[error("xDS stream closed by the server")]
    Closed,
}

/// The xDS client; [`XdsClient::run`] keeps it connected.
pub struct XdsClient {
    options: XdsOptions,
    limiter: Arc<Limiter>,
    /// Version of the last accepted response (sent again on reconnect).
    accepted_version: String,
    accepted: watch::Sender<Option<String>>,
}

impl XdsClient {
    /// A client and a receiver of the last accepted version (`None` until
    /// the first good config arrives).
    pub fn new(
        options: XdsOptions,
        limiter: Arc<Limiter>,
    ) -> (XdsClient, watch::Receiver<Option<String>>) {
        let (accepted, versions) = watch::channel(None);
        let client = XdsClient {
            options,
            limiter,
            accepted_version: String::new(),
            accepted,
        };
        (client, versions)
    }

    /// Stays connected until `shutdown` resolves.
    pub async fn run(mut self, shutdown: impl std::future::Future<Output = ()>) {
        tokio::pin!(shutdown);
        let mut delay = self.options.backoff_initial;
        loop {
            let version_before = self.accepted_version.clone();
            let ended = tokio::select! {
                _ = &mut shutdown => return,
                ended = self.session() => ended,
            };
            // A session that got a config through was healthy: start backing off afresh.
            if self.accepted_version != version_before {
                delay = self.options.backoff_initial;
            }
            let wait = jittered(delay);
            if let Err(error) = &ended {
                tracing::warn!(server = %self.options.server, %error, retry_in_ms = wait.as_millis() as u64,
                    "xDS config stream down; keeping the last good limits");
            }
            tokio::select! {
                _ = &mut shutdown => return,
                _ = tokio::time::sleep(wait) => {}
            }
            delay = (delay * 2).min(self.options.backoff_max);
        }
    }

    /// One stream: subscribe, then validate, apply and ACK/NACK each response.
    async fn session(&mut self) -> Result<(), XdsError> {
        let url = server_url(&self.options.server, self.options.tls.is_some());
        let mut endpoint = tonic::transport::Endpoint::from_shared(url.clone())
            .map_err(|e| XdsError::Address(url.clone(), e.to_string()))?
            .connect_timeout(Duration::from_secs(5));
        if let Some(tls) = &self.options.tls {
            endpoint = endpoint
                .tls_config(tls.client_config())
                .map_err(|e| XdsError::Address(url.clone(), e.to_string()))?;
        }
        let channel = endpoint.connect().await?;
        let mut client = AggregatedDiscoveryServiceClient::new(channel);
        if let Some(limit) = self.options.max_message_bytes {
            client = client.max_decoding_message_size(limit);
        }
        let (requests, outgoing) = mpsc::channel(4);
        let subscribe = DiscoveryRequest {
            version_info: self.accepted_version.clone(),
            node: Some(self.node()),
            type_url: RATE_LIMIT_CONFIG_TYPE_URL.to_string(),
            ..Default::default()
        };
        // The receiver is alive: it was just created.
        let _ = requests.send(subscribe).await;
        let mut responses = client
            .stream_aggregated_resources(ReceiverStream::new(outgoing))
            .await?
            .into_inner();
        tracing::info!(server = %self.options.server, node = %self.options.node_id, "xDS config stream open");
        while let Some(response) = responses.message().await? {
            let reply = self.apply(&response);
            if requests.send(reply).await.is_err() {
                break;
            }
        }
        Err(XdsError::Closed)
    }

    /// Applies one response; returns its ACK or NACK.
    fn apply(&mut self, response: &DiscoveryResponse) -> DiscoveryRequest {
        let mut reply = DiscoveryRequest {
            type_url: RATE_LIMIT_CONFIG_TYPE_URL.to_string(),
            response_nonce: response.nonce.clone(),
            ..Default::default()
        };
        let result = self.validate_and_swap(response);
        let metrics = self.limiter.metrics().clone();
        match result {
            Ok(()) => {
                self.accepted_version = response.version_info.clone();
                tracing::info!(version = %response.version_info, resources = response.resources.len(),
                    "limits from xDS applied");
                metrics
                    .config_reloads
                    .get_or_create(&ResultLabels { result: "applied" })
                    .inc();
                self.accepted
                    .send_replace(Some(response.version_info.clone()));
            }
            Err(message) => {
                tracing::error!(version = %response.version_info, error = %message,
                    "limits from xDS rejected (NACK); keeping the last good ones");
                metrics
                    .config_reloads
                    .get_or_create(&ResultLabels { result: "rejected" })
                    .inc();
                reply.error_detail = Some(Status {
                    code: tonic::Code::InvalidArgument as i32,
                    message,
                    details: Vec::new(),
                });
            }
        }
        // ACK: the new version; NACK: the last accepted one.
        reply.version_info = self.accepted_version.clone();
        reply
    }

    fn validate_and_swap(&self, response: &DiscoveryResponse) -> Result<(), String> {
        if response.type_url != RATE_LIMIT_CONFIG_TYPE_URL {
            return Err(format!(
                "unexpected type '{}', subscribed to {RATE_LIMIT_CONFIG_TYPE_URL}",
                response.type_url
            ));
        }
        let domains = response
            .resources
            .iter()
            .map(decode)
            .collect::<Result<Vec<_>, _>>()
            .map_err(|e| e.to_string())?;
        let config = self
            .limiter
            .update_config(|current| current.with_xds(domains))
            .map_err(|e| e.to_string())?;
        config.log_warnings();
        Ok(())
    }

    fn node(&self) -> Node {
        let fields = self
            .options
            .node_metadata
            .iter()
            .map(|(k, v)| {
                (
                    k.clone(),
                    Value {
                        kind: Some(Kind::StringValue(v.clone())),
                    },
                )
            })
            .collect();
        Node {
            id: self.options.node_id.clone(),
            metadata: Some(Struct { fields }),
            ..Default::default()
        }
    }
}

/// upstream takes `host:port`; tonic wants a URL.
fn server_url(server: &str, tls: bool) -> String {
    if server.contains("://") {
        server.to_string()
    } else if tls {
        format!("https://{server}")
    } else {
        format!("http://{server}")
    }
}

/// `delay` ± up to half of it, so that many instances do not reconnect in step.
fn jittered(delay: Duration) -> Duration {
    let mut bytes = [0u8; 8];
    let random = getrandom::fill(&mut bytes)
        .map(|()| u64::from_le_bytes(bytes))
        .unwrap_or(0);
    let half = delay.as_millis() as u64 / 2;
    let offset = if half == 0 { 0 } else { random % (2 * half) };
    Duration::from_millis(delay.as_millis() as u64 - half + offset)
}
