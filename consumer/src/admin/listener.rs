//! The admin API's listener, as the binaries that run the consumer start it.

use crate::admin::auth::{AdminToken, WritePolicy};
use crate::admin::router::router;
use crate::embedded::Started;
use std::net::SocketAddr;

#[derive(Debug, thiserror::Error)]
#[error("cannot listen on {addr} ({name}): {source}")]
pub struct AdminListenError {
    addr: SocketAddr,
    name: &'static str,
    source: std::io::Error,
}

/// Serves the admin API (`name` in logs) of `started` on `addr` in the
/// background; returns the address bound.
pub async fn serve_admin(
    addr: SocketAddr,
    name: &'static str,
    started: &Started,
    token: Option<AdminToken>,
) -> Result<SocketAddr, AdminListenError> {
    let listen_error = |source| AdminListenError { addr, name, source };
    let listener = tokio::net::TcpListener::bind(addr)
        .await
        .map_err(listen_error)?;
    let bound = listener.local_addr().map_err(listen_error)?;
    let writes = WritePolicy::for_listener(bound, token);
    writes.log_startup(name, bound);
    let router = router(started.metrics.clone(), started.pacer.clone(), writes);
    tokio::spawn(async move {
        if let Err(error) = axum::serve(listener, router).await {
            tracing::error!(%error, name, "admin server stopped");
        }
    });
    Ok(bound)
}
