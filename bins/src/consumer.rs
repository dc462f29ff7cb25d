//! `sluice-consumer`: drains the deferred-request LiteTopics at each bucket's
//! pace and streams the model's answers into Redis.

use crate::{BrokerArgs, RedisArgs};
use anyhow::Context;
use clap::{CommandFactory, FromArgMatches};
use sluice_consumer::keys::Dimension;
use sluice_consumer::{
    connect, control_loop, parse_override, parse_rate, parse_weight, serve_admin, ConsumerFlags,
    FileConfig, Pacer, Scope, StartOptions,
};
use sluice_runtime::{init_telemetry, shutdown_signal, LogFormat, TraceArgs};

#[derive(clap::Parser)]
#[command(
    name = "sluice-consumer",
    version,
    about = "Paced consumer of Sluice's deferred LLM requests"
)]
struct Cli {
    #[command(subcommand)]
    command: Option<Command>,
    #[command(flatten)]
    broker: BrokerArgs,
    #[command(flatten)]
    redis: RedisArgs,
    #[command(flatten)]
    flags: ConsumerFlags,
    /// Log format.
    #[arg(long, env = "SLUICE_LOG_FORMAT", value_enum, default_value = "text")]
    log_format: LogFormat,
    /// OpenTelemetry trace export (off by default).
    #[command(flatten)]
    traces: TraceArgs,
}

#[derive(clap::Subcommand)]
enum Command {
    /// Show or change pacing rates at run time (in Redis: every consumer
    /// instance applies a change on its next pacing check, no restart).
    #[command(subcommand)]
    Rates(RatesCommand),
}

#[derive(clap::Subcommand)]
enum RatesCommand {
    /// Overrides of one model column, or of every column with overrides (JSON).
    Show { model: Option<String> },
    /// The rates one bucket runs at now (configured defaults, overrides, factor).
    Effective { model: String, tenant: String },
    /// Set the rates of a model column, or of one bucket with --tenant.
    Set {
        model: String,
        #[arg(long)]
        tenant: Option<String>,
        /// Requests per second, or `unlimited`.
        #[arg(long)]
        rps: Option<String>,
        /// Tokens per second, or `unlimited`.
        #[arg(long)]
        tps: Option<String>,
    },
    /// Remove overrides (the scope inherits again); both dimensions unless one is named.
    Clear {
        model: String,
        #[arg(long)]
        tenant: Option<String>,
        #[arg(long)]
        rps: bool,
        #[arg(long)]
        tps: bool,
    },
    /// Set a model's admitted concurrency by hand (wins over its adaptive
    /// controller on every instance), or `auto` to hand it back.
    Limit { model: String, limit: String },
    /// Set a tenant's fair-share weight on every instance, or `default`.
    Weight { tenant: String, weight: String },
    /// Scale every bucket of a model column (0 pauses it, 1 is neutral); `--clear` resets.
    Factor {
        model: String,
        #[arg(required_unless_present = "clear")]
        factor: Option<f64>,
        #[arg(long)]
        clear: bool,
    },
}

/// The command line's definition (its `--help`): the consumer's flags also
/// under their short names (`--config`, `--admin-addr`, `--id`, `--group`),
/// the Redis ones for the `rates` commands too.
pub fn command() -> clap::Command {
    sluice_consumer::with_short_names(Cli::command())
        .mut_arg("consumer_group", |arg| arg.visible_alias("group"))
        .mut_arg("redis_url", |arg| arg.global(true))
        .mut_arg("redis_password_file", |arg| arg.global(true))
}

/// Parses the command line and runs what it asks for.
pub async fn run() -> anyhow::Result<()> {
    let cli = match Cli::from_arg_matches(&command().get_matches()) {
        Ok(cli) => cli,
        Err(error) => error.exit(),
    };
    let _traces = init_telemetry(
        cli.log_format,
        &cli.traces,
        "sluice-consumer",
        sluice_contract::TRACE_TARGET,
    )?;
    match cli.command {
        Some(Command::Rates(ref command)) => rates(&cli, command).await,
        None => serve(cli).await,
    }
}

/// The consumer until SIGTERM / Ctrl-C.
async fn serve(cli: Cli) -> anyhow::Result<()> {
    let file = cli.flags.file_config()?;
    let admin_token = cli.flags.admin_token()?;
    cli.flags.load_tokenizers().map_err(anyhow::Error::msg)?;
    let id = cli.flags.id();
    let started = sluice_consumer::start(StartOptions {
        file,
        namesrv: cli.broker.namesrv.clone(),
        parent: cli.broker.lite_parent.clone(),
        group: cli.broker.consumer_group.clone(),
        redis: cli.redis.options(),
        id: id.clone(),
        runner: cli.flags.runner_options(),
        local: None,
    })
    .await?;

    let admin_addr = serve_admin(
        cli.flags.consumer_admin_addr,
        "admin API",
        &started,
        admin_token,
    )
    .await?;
    tracing::info!(id = %id, namesrv = %cli.broker.namesrv, admin = %admin_addr, "sluice-consumer started");
    started.runner.clone().run(shutdown_signal()).await;
    drop(started);
    Ok(())
}

/// `sluice-consumer rates ...`: the admin API's rate changes, straight in Redis.
async fn rates(cli: &Cli, command: &RatesCommand) -> anyhow::Result<()> {
    let file = FileConfig::load(cli.flags.consumer_config.as_deref())?;
    let redis = || connect(&cli.redis.options()).context("--redis-url");
    let pacer = Pacer::new(redis()?, file.pacing, None)?;
    match command {
        RatesCommand::Show { model } => show_rates(&pacer, model.as_deref()).await,
        RatesCommand::Effective { model, tenant } => {
            let rates = pacer.effective_rates(tenant, model).await?;
            println!("{}", serde_json::to_string_pretty(&rates)?);
            Ok(())
        }
        RatesCommand::Set {
            model,
            tenant,
            rps,
            tps,
        } => set_rates(&pacer, scope_of(model, tenant.as_deref()), rps, tps).await,
        RatesCommand::Clear {
            model,
            tenant,
            rps,
            tps,
        } => clear_rates(&pacer, scope_of(model, tenant.as_deref()), *rps, *tps).await,
        RatesCommand::Limit { model, limit } => {
            let limit = parse_override(limit).map_err(|e| anyhow::anyhow!("{e}"))?;
            control_loop::set_override(&mut redis()?, model, limit).await?;
            applied()
        }
        RatesCommand::Weight { tenant, weight } => {
            let weight = parse_weight(weight).map_err(|e| anyhow::anyhow!("{e}"))?;
            control_loop::set_weight(&mut redis()?, tenant, weight).await?;
            applied()
        }
        RatesCommand::Factor {
            model,
            factor,
            clear,
        } => {
            match (clear, factor) {
                (true, _) => pacer.clear_model_factor(model).await?,
                (false, Some(f)) => pacer.set_model_factor(model, *f).await?,
                (false, None) => anyhow::bail!("give a factor or --clear"),
            }
            applied()
        }
    }
}

/// `rates show [model]`: the overrides of one column, or of every column
/// with overrides, as JSON.
async fn show_rates(pacer: &Pacer, model: Option<&str>) -> anyhow::Result<()> {
    let models = match model {
        Some(m) => vec![m.to_string()],
        None => pacer.models_with_overrides().await?,
    };
    let mut out = serde_json::Map::new();
    for m in models {
        let overrides = pacer.column_overrides(&m).await?;
        out.insert(m, serde_json::to_value(overrides)?);
    }
    println!("{}", serde_json::to_string_pretty(&out)?);
    Ok(())
}

/// `rates set`: each dimension given, a number or `unlimited`.
async fn set_rates(
    pacer: &Pacer,
    scope: Scope<'_>,
    rps: &Option<String>,
    tps: &Option<String>,
) -> anyhow::Result<()> {
    // `Some(None)`: set to unlimited; `None`: flag not given.
    let parse = |flag: &str, value: &Option<String>| -> anyhow::Result<Option<Option<f64>>> {
        value
            .as_deref()
            .map(parse_rate)
            .transpose()
            .map_err(|e| anyhow::anyhow!("--{flag} {e}"))
    };
    let (rps, tps) = (parse("rps", rps)?, parse("tps", tps)?);
    anyhow::ensure!(
        rps.is_some() || tps.is_some(),
        "give --rps and/or --tps (a number or `unlimited`)"
    );
    for (dimension, rate) in [(Dimension::Requests, rps), (Dimension::Tokens, tps)] {
        if let Some(rate) = rate {
            pacer.set_rate(scope, dimension, rate).await?;
        }
    }
    applied()
}

/// What a write that went through prints.
fn applied() -> anyhow::Result<()> {
    println!("applied");
    Ok(())
}

/// `rates clear`: the dimensions named, or both.
async fn clear_rates(pacer: &Pacer, scope: Scope<'_>, rps: bool, tps: bool) -> anyhow::Result<()> {
    let both = !rps && !tps;
    if rps || both {
        pacer.clear_rate(scope, Dimension::Requests).await?;
    }
    if tps || both {
        pacer.clear_rate(scope, Dimension::Tokens).await?;
    }
    println!("cleared");
    Ok(())
}

fn scope_of<'a>(model: &'a str, tenant: Option<&'a str>) -> Scope<'a> {
    match tenant {
        Some(tenant) => Scope::Bucket { tenant, model },
        None => Scope::Column { model },
    }
}
