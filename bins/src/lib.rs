#![recursion_limit = "256"] // rocketmq-client futures are deeply nested
//! Sluice's processes, assembled in one place from the libraries:
//!
//! - `sluice-rls` ([`rls`]): the rate-limit service, with the deferral
//!   endpoint when `--deferral-addr` is given;
//! - `sluice-consumer` ([`consumer`]): the paced consumer;
//! - `sluice-allinone` ([`allinone`]): both in one process (small installs).
//!
//! The flags two of them share ([`RedisArgs`], [`BrokerArgs`]) are declared
//! here once; each library declares its own (`ServeArgs`, `DeferralArgs`,
//! `ConsumerFlags`). Each `src/bin/` file is a `main` over [`run_main`].

pub mod allinone;
pub mod consumer;
mod probe;
pub mod rls;

use sluice_redis::RedisOptions;
use std::future::Future;
use std::path::PathBuf;
use std::process::ExitCode;

/// Redis, as every process names it.
#[derive(clap::Args)]
pub struct RedisArgs {
    /// Redis (sluice-rls: `--store redis` and the deferral endpoint; the
    /// consumer: response streams, pacing, membership):
    /// redis://[user:password@]host:port[/db] (one server),
    /// redis+cluster://host:port,host:port (Redis Cluster seeds),
    /// redis+sentinel://host:port,host:port/master[/db] (Sentinel);
    /// rediss… for TLS. See docs/configuration.md.
    #[arg(
        long,
        env = "SLUICE_REDIS_URL",
        default_value = "redis://127.0.0.1:6379",
        hide_env_values = true
    )]
    pub redis_url: String,

    /// File holding the Redis password (wins over one in --redis-url).
    #[arg(long, env = "SLUICE_REDIS_PASSWORD_FILE")]
    pub redis_password_file: Option<PathBuf>,
}

impl RedisArgs {
    /// The connection settings every Redis user in the process shares.
    pub fn options(&self) -> RedisOptions {
        RedisOptions {
            password_file: self.redis_password_file.clone(),
            ..RedisOptions::from_url(self.redis_url.as_str())
        }
    }
}

/// The RocketMQ broker deferred requests are queued on.
#[derive(clap::Args)]
pub struct BrokerArgs {
    /// RocketMQ name server, for queuing deferred requests.
    #[arg(long, env = "SLUICE_NAMESRV", default_value = "127.0.0.1:9876")]
    pub namesrv: String,

    /// Parent topic of the per tenant × model LiteTopics.
    #[arg(long, env = "SLUICE_LITE_PARENT", default_value = "sluice-deferred")]
    pub lite_parent: String,

    /// Consumer group bound to the parent topic (created if missing).
    #[arg(long, env = "SLUICE_CONSUMER_GROUP", default_value = "sluice-consumer")]
    pub consumer_group: String,
}

impl BrokerArgs {
    /// The broker as the deferral endpoint takes it.
    pub fn for_deferral(&self) -> sluice_deferral::Broker {
        sluice_deferral::Broker {
            namesrv: self.namesrv.clone(),
            parent: self.lite_parent.clone(),
            consumer_group: self.consumer_group.clone(),
        }
    }
}

/// A binary's life: rustls's process-wide crypto provider chosen, then `run`
/// on a multi-threaded runtime; an error is printed as `name: error` and
/// the process exits with status 1.
pub fn run_main(name: &str, run: impl Future<Output = anyhow::Result<()>>) -> ExitCode {
    install_rustls_provider();
    let result = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .map_err(anyhow::Error::from)
        .and_then(|runtime| runtime.block_on(run));
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("{name}: {error:#}");
            ExitCode::FAILURE
        }
    }
}

/// Selects rustls's process-wide crypto provider (ring): the build links two
/// (through different dependencies), so rustls cannot pick one itself, and
/// every TLS user (rediss:// URLs, https backends, the gRPC listener, the
/// xDS client) needs one. Done once, before anything else runs.
fn install_rustls_provider() {
    let _ = rustls::crypto::ring::default_provider().install_default();
}
