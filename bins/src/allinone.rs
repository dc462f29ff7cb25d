//! `sluice-allinone`: `sluice-rls` with its deferral endpoint and the paced
//! consumer in one process, for small installs (the in-process mode).
//!
//! The composition root of the two libraries: `sluice-rls` itself does not
//! link the consumer. Chunks of requests waiting in this process go from the
//! model call to the client through a channel ([`sluice_contract::LocalBus`])
//! instead of the Redis Stream; terminal entries and every marker still go
//! through Redis. In-flight requests die with the process and their streams
//! cannot be resumed (see docs/operations.md, "In-process mode").

use crate::rls::RlsArgs;
use crate::{BrokerArgs, RedisArgs};
use anyhow::Context;
use clap::{CommandFactory, Parser};
use sluice_consumer::{serve_admin, ConsumerFlags, StartOptions};
use sluice_contract::LocalBus;
use sluice_deferral::InProcess;
use std::sync::Arc;

#[derive(Parser)]
#[command(
    name = "sluice-allinone",
    version,
    about = "sluice-rls, its deferral endpoint and the paced consumer in one process"
)]
struct Cli {
    #[command(flatten)]
    rls: RlsArgs,

    // sluice-rls's own admin is read-only: the admin token is the consumer's.
    #[command(flatten)]
    consumer: ConsumerFlags,
}

/// The running consumer: stop it with `stop`, then await `task`.
struct RunningConsumer {
    stop: tokio::sync::oneshot::Sender<()>,
    task: tokio::task::JoinHandle<()>,
}

/// The command line's definition (its `--help`).
pub fn command() -> clap::Command {
    Cli::command()
}

/// Parses the command line and runs the three parts until SIGTERM / Ctrl-C.
pub async fn run() -> anyhow::Result<()> {
    let cli = Cli::parse();
    let _traces = cli.rls.serve.init_telemetry("sluice-allinone")?;
    run_parts(cli).await
}

async fn run_parts(cli: Cli) -> anyhow::Result<()> {
    anyhow::ensure!(
        cli.rls.deferral.deferral_addr.is_some(),
        "the in-process consumer answers deferred requests: pass --deferral-addr"
    );
    let bus = LocalBus::new();
    let (consumer, claim_timing) =
        start_consumer(&cli.rls.redis, &cli.rls.broker, &cli.consumer, bus.clone()).await?;
    let in_process = InProcess {
        local: bus,
        claim_timing,
    };
    let served = cli.rls.serve(Some(in_process)).await;
    let _ = consumer.stop.send(());
    let _ = consumer.task.await;
    served
}

/// The consumer's pop loop and admin API in this process.
async fn start_consumer(
    redis: &RedisArgs,
    broker: &BrokerArgs,
    flags: &ConsumerFlags,
    bus: Arc<LocalBus>,
) -> anyhow::Result<(RunningConsumer, sluice_contract::ClaimTiming)> {
    let file = flags.file_config()?;
    let admin_token = flags.admin_token()?;
    flags.load_tokenizers().map_err(anyhow::Error::msg)?;
    let claim_timing = file.processor.idempotency.claim_timing();
    let started = sluice_consumer::start(StartOptions {
        file,
        namesrv: broker.namesrv.clone(),
        parent: broker.lite_parent.clone(),
        group: broker.consumer_group.clone(),
        redis: redis.options(),
        id: flags.id(),
        runner: flags.runner_options(),
        local: Some(bus),
    })
    .await
    .context("in-process consumer")?;
    let admin_addr = serve_admin(
        flags.consumer_admin_addr,
        "consumer admin API",
        &started,
        admin_token,
    )
    .await?;
    tracing::info!(admin = %admin_addr, "in-process consumer started");
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let task = tokio::spawn(async move {
        started
            .runner
            .clone()
            .run(async move {
                let _ = stopped.await;
            })
            .await;
        drop(started.client);
    });
    Ok((RunningConsumer { stop, task }, claim_timing))
}
