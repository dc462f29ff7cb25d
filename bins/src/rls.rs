//! `sluice-rls`: the Sluice rate-limit service, with its deferral endpoint
//! when `--deferral-addr` is given.

use crate::{BrokerArgs, RedisArgs};
use anyhow::Context;
use clap::{Parser, Subcommand};
use sluice_deferral::{DeferralArgs, DeferralMetrics, InProcess};
use sluice_ratelimit::cli::{self, PendingSideServer, ServeArgs, Wiring};
use sluice_ratelimit::config::{LimitsConfig, LoadOptions};
use sluice_ratelimit::metrics::Metrics;
use sluice_ratelimit::upstream_env;
use std::path::PathBuf;

extern "C" {
    /// mimalloc's collection (in the C library the `mimalloc` crate links):
    /// frees the calling thread's empty pages and purges, process-wide, the
    /// freed memory whose `purge_delay` has passed.
    fn mi_collect(force: bool);
}

/// How often [`give_memory_back`] runs.
const ALLOCATOR_COLLECT_EVERY: std::time::Duration = std::time::Duration::from_secs(1);

/// mimalloc hands freed memory back to the OS `purge_delay` (1 s) after the
/// free, but only when some thread next allocates or collects past that
/// point: once a burst of large deferred bodies ended and the process went
/// quiet, RSS stayed at its peak (measured: 221 MiB against 103 MiB idle,
/// still 20 s after 16 waiting 3.9 MiB requests ended; tests/tests/
/// deferral_memory.rs). A collection every second lets it go.
fn give_memory_back() {
    tokio::spawn(async {
        let mut tick = tokio::time::interval(ALLOCATOR_COLLECT_EVERY);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tick.tick().await;
            // SAFETY: `mi_collect` takes no pointer and may be called from
            // any thread at any time (mimalloc's documented API).
            unsafe { mi_collect(false) };
        }
    });
}

/// `sluice-rls`'s command line.
#[derive(Parser)]
#[command(
    name = "sluice-rls",
    version,
    args_override_self = true,
    about = "Envoy rate limit service (RLS v3) with token-aware limits for LLM traffic"
)]
struct Cli {
    /// Check a limits file or directory, print what it holds, and exit (status 1 on error).
    #[arg(long, value_name = "FILE|DIR")]
    validate: Option<PathBuf>,

    #[command(flatten)]
    rls: RlsArgs,

    #[command(subcommand)]
    command: Option<Command>,
}

#[derive(Subcommand)]
enum Command {
    /// Ask a running service for one decision and print it (for operators and smoke tests).
    Query {
        /// gRPC address of the service.
        #[arg(long, default_value = "http://127.0.0.1:8081")]
        addr: String,
        #[arg(long)]
        domain: String,
        /// A descriptor as key=value[,key=value...]; repeat for several.
        #[arg(long = "descriptor", required = true)]
        descriptors: Vec<String>,
        /// Request-level hits_addend.
        #[arg(long, default_value_t = 1)]
        hits: u32,
    },
    /// Check the RocketMQ broker (--namesrv) with one real round trip: send to a probe LiteTopic and pop it back within a deadline; exit 0 when it came back, 1 otherwise (or serve it as GET /livez, for Kubernetes).
    BrokerProbe(crate::probe::ProbeArgs),
}

/// The command line's definition (its `--help`).
pub fn command() -> clap::Command {
    <Cli as clap::CommandFactory>::command()
}

/// Parses the command line (see [`arguments`]) and runs what it asks for.
pub async fn run() -> anyhow::Result<()> {
    let cli = match Cli::try_parse_from(arguments()) {
        Ok(cli) => cli,
        Err(error) => error.exit(),
    };
    let _traces = cli.rls.serve.init_telemetry("sluice-rls")?;
    if let Some(path) = &cli.validate {
        return validate(path, cli.rls.serve.load_options());
    }
    match cli.command {
        Some(Command::Query {
            addr,
            domain,
            descriptors,
            hits,
        }) => query(addr, domain, descriptors, hits).await,
        Some(Command::BrokerProbe(args)) => {
            crate::probe::run(cli.rls.broker.namesrv.clone(), args).await
        }
        None => {
            give_memory_back();
            cli.rls.serve(None).await
        }
    }
}

/// The flags of the RLS and its deferral endpoint: `sluice-rls`'s, and
/// `sluice-allinone`'s before the consumer's.
#[derive(clap::Args)]
pub(crate) struct RlsArgs {
    #[command(flatten)]
    pub(crate) serve: ServeArgs,

    #[command(flatten)]
    pub(crate) redis: RedisArgs,

    #[command(flatten)]
    pub(crate) broker: BrokerArgs,

    #[command(flatten)]
    pub(crate) deferral: DeferralArgs,
}

impl RlsArgs {
    /// Serves the RLS (and, with --deferral-addr, the endpoint) until
    /// SIGTERM / Ctrl-C; `in_process`: a consumer in this process.
    pub(crate) async fn serve(self, in_process: Option<InProcess>) -> anyhow::Result<()> {
        let wiring = wiring(
            &self.serve,
            &self.redis,
            &self.broker,
            self.deferral,
            in_process,
        )?;
        cli::serve(self.serve, wiring, sluice_runtime::shutdown_signal()).await
    }
}

/// What the RLS gets besides its flags: the Redis settings, the deferral
/// secrets and, with --deferral-addr, the endpoint (its metrics on the RLS's
/// admin port); `in_process`: a consumer in this process (`sluice-allinone`).
fn wiring(
    serve: &ServeArgs,
    redis: &RedisArgs,
    broker: &BrokerArgs,
    deferral: DeferralArgs,
    in_process: Option<InProcess>,
) -> anyhow::Result<Wiring> {
    let secrets = deferral.secrets()?;
    let mut metrics = Metrics::new().with_upstream_stats(serve.upstream_stats.options());
    let endpoint = deferral.deferral_addr.map(|addr| {
        let endpoint_metrics = DeferralMetrics::default();
        endpoint_metrics.register(&mut metrics.registry);
        let (redis, broker, secrets) = (redis.options(), broker.for_deferral(), secrets.clone());
        let pending: PendingSideServer = Box::pin(async move {
            let listener = deferral
                .listener(addr, redis, broker, secrets, endpoint_metrics, in_process)
                .await?;
            Ok(listener.side_server())
        });
        pending
    });
    Ok(Wiring {
        redis: redis.options(),
        secrets,
        metrics,
        deferral: endpoint,
    })
}

/// The command line, preceded by the flags envoyproxy/ratelimit's variables
/// stand for when `SLUICE_RLS_UPSTREAM_ENV=true` (flags given later win).
fn arguments() -> Vec<std::ffi::OsString> {
    let mut args: Vec<std::ffi::OsString> = std::env::args_os().collect();
    let env = |name: &str| std::env::var(name).ok();
    if upstream_env::enabled(env) {
        match upstream_env::flags(env) {
            Ok(flags) => {
                let at = args.len().min(1);
                args.splice(at..at, flags.into_iter().map(Into::into));
            }
            Err(error) => {
                eprintln!("sluice-rls: {}: {error}", upstream_env::SWITCH);
                std::process::exit(1);
            }
        }
    }
    args
}

fn validate(path: &std::path::Path, options: LoadOptions) -> anyhow::Result<()> {
    let config = LimitsConfig::load_with(path, options)?;
    for warning in config.warnings() {
        println!("warning: {warning}");
    }
    let mut domains: Vec<&str> = config.domains().collect();
    domains.sort_unstable();
    println!(
        "{}: OK — {} file(s), {} domain(s) [{}], {} limit(s)",
        path.display(),
        config.files().len(),
        domains.len(),
        domains.join(", "),
        config.limit_count()
    );
    Ok(())
}

async fn query(
    addr: String,
    domain: String,
    descriptors: Vec<String>,
    hits: u32,
) -> anyhow::Result<()> {
    use sluice_proto::pb::envoy::extensions::common::ratelimit::v3::{
        rate_limit_descriptor::Entry, RateLimitDescriptor,
    };
    use sluice_proto::pb::envoy::service::ratelimit::v3::{
        rate_limit_service_client::RateLimitServiceClient, RateLimitRequest,
    };
    let descriptors = descriptors
        .iter()
        .map(|text| {
            let entries = text
                .split(',')
                .map(|pair| {
                    let (key, value) = pair
                        .split_once('=')
                        .with_context(|| format!("descriptor entry '{pair}' is not key=value"))?;
                    Ok(Entry {
                        key: key.to_string(),
                        value: value.to_string(),
                    })
                })
                .collect::<anyhow::Result<Vec<_>>>()?;
            Ok(RateLimitDescriptor {
                entries,
                ..Default::default()
            })
        })
        .collect::<anyhow::Result<Vec<_>>>()?;
    let mut client = RateLimitServiceClient::connect(addr.clone())
        .await
        .with_context(|| format!("cannot connect to {addr}"))?;
    let response = client
        .should_rate_limit(RateLimitRequest {
            domain,
            descriptors,
            hits_addend: hits,
        })
        .await?
        .into_inner();
    let code = |c: i32| match c {
        1 => "OK",
        2 => "OVER_LIMIT",
        _ => "UNKNOWN",
    };
    println!("overall: {}", code(response.overall_code));
    for (index, status) in response.statuses.iter().enumerate() {
        let limit = status
            .current_limit
            .as_ref()
            .map(|l| {
                let unit = sluice_ratelimit::window::Unit::from_proto(l.unit)
                    .map(|u| u.as_str())
                    .unwrap_or("?");
                format!("{} ({}/{unit})", l.name, l.requests_per_unit)
            })
            .unwrap_or_else(|| "no limit".into());
        let reset = status
            .duration_until_reset
            .as_ref()
            .map(|d| format!("{}.{:03}s", d.seconds, d.nanos / 1_000_000))
            .unwrap_or_else(|| "-".into());
        println!(
            "  descriptor {index}: {} limit={limit} remaining={} reset={reset}",
            code(status.code),
            status.limit_remaining
        );
    }
    for header in &response.response_headers_to_add {
        println!("  header {}: {}", header.key, header.value);
    }
    Ok(())
}
