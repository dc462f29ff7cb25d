//! Wiring: the gRPC server, the admin server and the reloader, stopped together.

use crate::admin;
use crate::ext_authz::ExtAuthzService;
use crate::guard::CallGuard;
use crate::limiter::Limiter;
use crate::reload::Reloader;
use crate::service::RlsService;
use futures::future::BoxFuture;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;
use tokio::net::TcpListener;
use tokio::sync::watch;
use tokio_stream::wrappers::TcpListenerStream;
use tokio_stream::StreamExt;
use tonic::transport::ServerTlsConfig;

/// Everything `run` needs besides the listeners.
pub struct Deps {
    pub limiter: Arc<Limiter>,
    /// What the RLS checks before the limiter: call size, and the filter's
    /// authority for refunds and forced charges.
    pub guard: CallGuard,
    /// Limits file or directory to watch; `None` disables hot reload.
    pub config_path: Option<PathBuf>,
    pub reload_interval: Duration,
    /// The ext_authz front door on the same gRPC port, when configured.
    pub ext_authz: Option<ExtAuthzService>,
    /// The deferral endpoint (HTTP), when configured:
    /// `sluice_deferral::listener::DeferralListener::side_server`.
    pub deferral: Option<SideServer>,
}

/// A server run beside the gRPC one and stopped with it, given its stop
/// signal (the deferral endpoint; the RLS does not link it).
pub type SideServer =
    Box<dyn FnOnce(BoxFuture<'static, ()>) -> BoxFuture<'static, std::io::Result<()>> + Send>;

/// Serve gRPC on `grpc` and the admin endpoints on `admin` until `shutdown`
/// resolves, then drain in-flight calls and return.
pub async fn run(
    grpc: TcpListener,
    admin: Option<TcpListener>,
    deps: Deps,
    shutdown: impl std::future::Future<Output = ()> + Send + 'static,
) -> anyhow::Result<()> {
    run_with_tls(grpc, admin, deps, None, shutdown).await
}

/// [`run`], with TLS on the gRPC listener when `grpc_tls` is given.
pub async fn run_with_tls(
    grpc: TcpListener,
    admin: Option<TcpListener>,
    deps: Deps,
    grpc_tls: Option<ServerTlsConfig>,
    shutdown: impl std::future::Future<Output = ()> + Send + 'static,
) -> anyhow::Result<()> {
    let mut builder = tonic::transport::Server::builder();
    if let Some(tls) = grpc_tls {
        builder = builder.tls_config(tls)?;
    }
    let (stop_tx, stop_rx) = watch::channel(false);
    let stopped = move |mut rx: watch::Receiver<bool>| async move {
        // Err means the sender is gone, which also means stop.
        let _ = rx.wait_for(|stop| *stop).await;
    };

    let mut tasks = tokio::task::JoinSet::new();
    if let Some(path) = deps.config_path.clone() {
        if !deps.reload_interval.is_zero() {
            let reloader = Reloader::new(path, deps.limiter.clone());
            let interval = deps.reload_interval;
            let rx = stop_rx.clone();
            tasks.spawn(async move {
                reloader.run(interval, stopped(rx)).await;
                Ok(())
            });
        }
    }
    // The HTTP listeners: the deferral endpoint's (with its own bounds),
    // then the admin one's.
    if let Some(deferral) = deps.deferral {
        let rx = stop_rx.clone();
        tasks.spawn(async move {
            deferral(Box::pin(stopped(rx)))
                .await
                .map_err(anyhow::Error::from)
        });
    }
    if let Some(listener) = admin {
        let router = admin::router(deps.limiter.clone());
        let rx = stop_rx.clone();
        tasks.spawn(async move {
            axum::serve(listener, router)
                .with_graceful_shutdown(stopped(rx))
                .await
                .map_err(anyhow::Error::from)
        });
    }
    {
        let service = RlsService::new(deps.limiter.clone(), deps.guard).into_server();
        let ext_authz = deps.ext_authz.map(ExtAuthzService::into_server);
        let rx = stop_rx.clone();
        tasks.spawn(async move {
            builder
                .add_service(service)
                .add_optional_service(ext_authz)
                .serve_with_incoming_shutdown(nodelay_incoming(grpc), stopped(rx))
                .await
                .map_err(anyhow::Error::from)
        });
    }
    drop(stop_rx);

    run_until_stopped(tasks, stop_tx, shutdown).await
}

/// Runs the parts until `shutdown`, or until any part ends on its own (an
/// error); then stops the others and returns the first error.
async fn run_until_stopped(
    mut tasks: tokio::task::JoinSet<anyhow::Result<()>>,
    stop_tx: watch::Sender<bool>,
    shutdown: impl std::future::Future<Output = ()>,
) -> anyhow::Result<()> {
    let mut first_error = None;
    tokio::select! {
        _ = shutdown => {}
        Some(result) = tasks.join_next() => {
            if let Ok(Err(error)) | Err(error) = result.map_err(anyhow::Error::from) {
                first_error = Some(error);
            }
        }
    }
    let _ = stop_tx.send(true);
    while let Some(result) = tasks.join_next().await {
        if let Ok(Err(error)) | Err(error) = result.map_err(anyhow::Error::from) {
            first_error.get_or_insert(error);
        }
    }
    match first_error {
        Some(error) => Err(error),
        None => Ok(()),
    }
}

/// Accepted connections with Nagle's algorithm off. A decision's response is
/// written in more than one segment; with Nagle on, the second one waits for
/// the client's delayed ACK (~40 ms on Linux), which dwarfs the decision.
pub fn nodelay_incoming(
    listener: TcpListener,
) -> impl tokio_stream::Stream<Item = std::io::Result<tokio::net::TcpStream>> {
    TcpListenerStream::new(listener).map(|stream| {
        let stream = stream?;
        stream.set_nodelay(true)?;
        Ok(stream)
    })
}
