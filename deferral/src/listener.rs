//! Serving the deferral endpoint: hyper's HTTP/1 server with a header
//! deadline, a cap on connections and a smaller cap on connections that
//! have not yet presented a valid deferral token.
//!
//! Every accepted connection takes a slot of both caps. The endpoint gives
//! the *unauthenticated* slot back as soon as a request on the connection
//! carries a valid token ([`PreTokenSlot::authenticated`]); a connection
//! that never does keeps it until it closes — at the latest
//! `header_timeout` after its last request began, since hyper closes a
//! connection whose next request head does not arrive in time (that also
//! bounds how long a keep-alive connection may sit idle). Beyond a cap, the
//! connection gets a plain `503` and is closed before anything is read.

use axum::Router;
use futures::future::BoxFuture;
use hyper::body::Incoming;
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::service::TowerToHyperService;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use std::future::Future;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::io::AsyncWriteExt;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

/// Default `--deferral-header-timeout-ms`: a request head (or the next one
/// on a kept-alive connection) not complete this long after it may start
/// closes the connection.
pub const DEFAULT_HEADER_TIMEOUT_MS: u64 = 10_000;
/// Default `--deferral-max-connections`: one per waiting request (Envoy
/// holds one HTTP/1 connection per request in flight), plus room for
/// connections between requests.
pub const DEFAULT_MAX_CONNECTIONS: usize = crate::budget::DEFAULT_MAX_IN_FLIGHT + 1_024;
/// Default `--deferral-max-unauthenticated-connections`: connections with
/// no valid deferral token yet. Envoy opens connections as deferred
/// requests arrive, each authenticated by its first request within
/// milliseconds; only a burst of new connections needs room here.
pub const DEFAULT_MAX_UNAUTHENTICATED: usize = 256;
/// Largest request head accepted (hyper's default is 400 KiB): the
/// endpoint's headers are a dozen short values.
const MAX_HEADER_BYTES: usize = 64 * 1024;

/// The bounds of the listener.
#[derive(Clone, Debug)]
pub struct ListenerLimits {
    pub header_timeout: Duration,
    pub max_connections: usize,
    pub max_unauthenticated: usize,
}

impl Default for ListenerLimits {
    fn default() -> Self {
        ListenerLimits {
            header_timeout: Duration::from_millis(DEFAULT_HEADER_TIMEOUT_MS),
            max_connections: DEFAULT_MAX_CONNECTIONS,
            max_unauthenticated: DEFAULT_MAX_UNAUTHENTICATED,
        }
    }
}

/// Metrics of the listener (`sluice_rls_deferral_connections`,
/// `..._unauthenticated_connections`, `..._connections_refused_total{reason}`,
/// `..._header_timeouts_total`).
#[derive(Clone, Debug, Default)]
pub struct ListenerMetrics {
    pub connections: Gauge,
    pub unauthenticated: Gauge,
    pub refused: Family<Vec<(String, String)>, Counter>,
    /// Connections hyper closed, without an answer, because a request head
    /// was not complete within the header deadline.
    pub header_timeouts: Counter,
}

crate::metrics::deferral_registration!(ListenerMetrics {
    "connections", "Open connections to the deferral endpoint" => connections;
    "unauthenticated_connections", "Open connections to the deferral endpoint that have not yet presented a valid deferral token" => unauthenticated;
    "connections_refused", "Connections to the deferral endpoint closed at once, by reason (connections, unauthenticated_connections)" => refused;
    "header_timeouts", "Connections to the deferral endpoint closed without an answer because a request head (or the next one on a kept-alive connection) was not complete within --deferral-header-timeout-ms" => header_timeouts;
});

impl ListenerMetrics {
    fn refuse(&self, reason: &str) {
        self.refused
            .get_or_create(&vec![("reason".to_string(), reason.to_string())])
            .inc();
    }
}

/// A connection's unauthenticated slot, in every request's extensions: the
/// endpoint calls [`PreTokenSlot::authenticated`] once a token checks out.
#[derive(Clone)]
pub struct PreTokenSlot(Arc<Mutex<Option<SlotHeld>>>);

struct SlotHeld {
    _permit: OwnedSemaphorePermit,
    gauge: Gauge,
}

impl Drop for SlotHeld {
    fn drop(&mut self) {
        self.gauge.dec();
    }
}

impl PreTokenSlot {
    fn new(permit: OwnedSemaphorePermit, gauge: Gauge) -> Self {
        gauge.inc();
        PreTokenSlot(Arc::new(Mutex::new(Some(SlotHeld {
            _permit: permit,
            gauge,
        }))))
    }

    /// The connection presented a valid token: its slot goes back.
    pub fn authenticated(&self) {
        let held = match self.0.lock() {
            Ok(mut slot) => slot.take(),
            Err(poisoned) => poisoned.into_inner().take(),
        };
        drop(held);
    }
}

/// The deferral endpoint's listener, router and bounds, as sluice-rls
/// serves them beside its gRPC server.
pub struct DeferralListener {
    pub listener: TcpListener,
    pub router: Router,
    pub limits: ListenerLimits,
    pub metrics: ListenerMetrics,
}

impl DeferralListener {
    /// Serves until `shutdown` resolves (see [`serve`]).
    pub async fn serve(
        self,
        shutdown: impl Future<Output = ()> + Send + 'static,
    ) -> std::io::Result<()> {
        serve(
            self.listener,
            self.router,
            self.limits,
            self.metrics,
            shutdown,
        )
        .await
    }

    /// [`Self::serve`] as a boxed task, the shape sluice-rls's server runs
    /// beside its gRPC one (`sluice_ratelimit::server::SideServer`) without
    /// either crate linking the other.
    pub fn side_server(self) -> SideServer {
        Box::new(move |shutdown| Box::pin(self.serve(shutdown)))
    }
}

/// A server to run until its stop signal resolves.
pub type SideServer =
    Box<dyn FnOnce(BoxFuture<'static, ()>) -> BoxFuture<'static, std::io::Result<()>> + Send>;

/// With the default bounds and metrics of its own.
impl From<(TcpListener, Router)> for DeferralListener {
    fn from((listener, router): (TcpListener, Router)) -> Self {
        DeferralListener {
            listener,
            router,
            limits: ListenerLimits::default(),
            metrics: ListenerMetrics::default(),
        }
    }
}

/// The answer to a connection beyond a cap: written at once, then closed.
fn refusal_bytes(reason: &str) -> Vec<u8> {
    let body = sluice_admission::errors::openai_error_body(
        "too many connections to the deferral endpoint; retry shortly",
        "sluice_deferral",
        reason,
    );
    format!(
        "HTTP/1.1 503 Service Unavailable\r\ncontent-type: application/json\r\nretry-after: 1\r\nconnection: close\r\ncontent-length: {}\r\n\r\n{body}",
        body.len()
    )
    .into_bytes()
}

/// Serves `router` on `listener` within `limits` until `shutdown` resolves,
/// then lets open connections finish their current request.
pub async fn serve(
    listener: TcpListener,
    router: Router,
    limits: ListenerLimits,
    metrics: ListenerMetrics,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    let connections = Arc::new(Semaphore::new(limits.max_connections.max(1)));
    let unauthenticated = Arc::new(Semaphore::new(limits.max_unauthenticated.max(1)));
    let graceful = hyper_util::server::graceful::GracefulShutdown::new();
    tokio::pin!(shutdown);
    loop {
        let (stream, _peer) = tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok(accepted) => accepted,
                Err(error) => {
                    // EMFILE and friends: back off instead of spinning.
                    tracing::warn!(%error, "deferral endpoint: accept failed");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                }
            },
            _ = &mut shutdown => break,
        };
        let Ok(connection) = connections.clone().try_acquire_owned() else {
            refuse(stream, "connections", &metrics);
            continue;
        };
        let Ok(pre_token) = unauthenticated.clone().try_acquire_owned() else {
            refuse(stream, "unauthenticated_connections", &metrics);
            continue;
        };
        let _ = stream.set_nodelay(true);
        let slot = PreTokenSlot::new(pre_token, metrics.unauthenticated.clone());
        let router = router.clone();
        let service = tower::ServiceExt::map_request(
            router,
            move |mut request: axum::http::Request<Incoming>| {
                request.extensions_mut().insert(slot.clone());
                request
            },
        );
        let mut builder = hyper::server::conn::http1::Builder::new();
        builder
            .timer(TokioTimer::new())
            .header_read_timeout(limits.header_timeout)
            .max_buf_size(MAX_HEADER_BYTES);
        let conn =
            builder.serve_connection(TokioIo::new(stream), TowerToHyperService::new(service));
        let conn = graceful.watch(conn);
        let metrics = metrics.clone();
        metrics.connections.inc();
        tokio::spawn(async move {
            if let Err(error) = conn.await {
                connection_failed(&error, &metrics);
            }
            metrics.connections.dec();
            drop(connection);
        });
    }
    drop(listener);
    graceful.shutdown().await;
    Ok(())
}

/// A connection that ended in an error. hyper closes one whose request
/// head is late without writing anything: counted, so that a client that
/// got no answer shows up somewhere.
fn connection_failed(error: &hyper::Error, metrics: &ListenerMetrics) {
    if error.is_timeout() {
        metrics.header_timeouts.inc();
        tracing::debug!(%error, "deferral endpoint connection closed: request head not complete in time");
    } else {
        tracing::debug!(%error, "deferral endpoint connection ended");
    }
}

/// Closes a connection beyond a cap with a 503, never waiting on the peer.
fn refuse(stream: TcpStream, reason: &'static str, metrics: &ListenerMetrics) {
    metrics.refuse(reason);
    tracing::debug!(reason, "deferral endpoint connection refused");
    tokio::spawn(async move {
        let mut stream = stream;
        let answer = refusal_bytes(reason);
        let write = async {
            stream.write_all(&answer).await?;
            stream.shutdown().await
        };
        let _ = tokio::time::timeout(Duration::from_millis(100), write).await;
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_refusal_is_a_complete_http_answer() {
        let text = String::from_utf8(refusal_bytes("connections")).unwrap_or_default();
        let (head, body) = text.split_once("\r\n\r\n").unwrap_or_default();
        assert!(head.starts_with("HTTP/1.1 503 "), "{head}");
        assert!(head.contains(&format!("content-length: {}", body.len())));
        assert!(body.contains("\"code\":\"connections\""), "{body}");
    }

    #[test]
    fn authenticating_gives_the_slot_back_once() {
        let semaphore = Arc::new(Semaphore::new(1));
        let gauge = Gauge::default();
        let permit = semaphore
            .clone()
            .try_acquire_owned()
            .unwrap_or_else(|_| panic!("free"));
        let slot = PreTokenSlot::new(permit, gauge.clone());
        assert_eq!((semaphore.available_permits(), gauge.get()), (0, 1));
        slot.clone().authenticated();
        slot.authenticated();
        assert_eq!((semaphore.available_permits(), gauge.get()), (1, 0));
    }
}
