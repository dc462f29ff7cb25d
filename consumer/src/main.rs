//! `sluice-consumer`: drains the deferred-request LiteTopics at each bucket's
//! pace and streams the model's answers into Redis.
#![recursion_limit = "256"] // rocketmq-client futures are deeply nested

use anyhow::Context;
use clap::{CommandFactory, FromArgMatches};
use sluice_consumer::keys::Dimension;
use sluice_consumer::{
    connect, parse_override, parse_rate, parse_weight, serve_admin, ConsumerFlags, FileConfig,
    Pacer, RedisOptions, Scope, StartOptions,
};
use sluice_runtime::{init_tracing, shutdown_signal, LogFormat};

#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

#[derive(clap::Parser)]
#[command(
    name = "sluice-consumer",
    version,
    about = "Paced consumer of Sluice's deferred LLM requests"
)]
struct Cli {
    #[command(subcommand)]
    command: Option<Command>,
    #[arg(long, env = "SLUICE_NAMESRV", default_value = "127.0.0.1:9876")]
    namesrv: String,
    #[arg(long, env = "SLUICE_LITE_PARENT", default_value = "sluice-deferred")]
    lite_parent: String,
    #[arg(
        long = "consumer-group",
        visible_alias = "group",
        env = "SLUICE_CONSUMER_GROUP",
        default_value = "sluice-consumer"
    )]
    group: String,
    #[arg(
        long,
        env = "SLUICE_REDIS_URL",
        default_value = "redis://127.0.0.1:6379",
        hide_env_values = true,
        global = true
    )]
    redis_url: String,
    /// File holding the Redis password (wins over one in --redis-url).
    #[arg(long, env = "SLUICE_REDIS_PASSWORD_FILE", global = true)]
    redis_password_file: Option<std::path::PathBuf>,
    #[command(flatten)]
    flags: ConsumerFlags,
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

#[tokio::main]
async fn main() -> std::process::ExitCode {
    init_tracing(LogFormat::Text);
    let command = sluice_consumer::with_short_names(Cli::command());
    let cli = match Cli::from_arg_matches(&command.get_matches()) {
        Ok(cli) => cli,
        Err(error) => error.exit(),
    };
    match run(cli).await {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("sluice-consumer: {error:#}");
            std::process::ExitCode::FAILURE
        }
    }
}

async fn run(cli: Cli) -> anyhow::Result<()> {
    let _ = rustls::crypto::ring::default_provider().install_default();
    if let Some(Command::Rates(command)) = &cli.command {
        return rates(&cli, command).await;
    }
    let file = cli.flags.file_config()?;
    let admin_token = cli.flags.admin_token()?;
    let id = cli.flags.id();
    let started = sluice_consumer::start(StartOptions {
        file,
        namesrv: cli.namesrv.clone(),
        parent: cli.lite_parent.clone(),
        group: cli.group.clone(),
        redis: redis_options(&cli),
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
    tracing::info!(id = %id, namesrv = %cli.namesrv, admin = %admin_addr, "sluice-consumer started");
    started.runner.clone().run(shutdown_signal()).await;
    drop(started);
    Ok(())
}

/// Redis as the flags name it: URL (standalone, cluster or sentinel) and password file.
fn redis_options(cli: &Cli) -> RedisOptions {
    RedisOptions {
        password_file: cli.redis_password_file.clone(),
        ..RedisOptions::from_url(cli.redis_url.as_str())
    }
}

/// `sluice-consumer rates ...`: the admin API's rate changes, straight in Redis.
async fn rates(cli: &Cli, command: &RatesCommand) -> anyhow::Result<()> {
    let file = FileConfig::load(cli.flags.consumer_config.as_deref())?;
    let redis = connect(&redis_options(cli)).context("--redis-url")?;
    let pacer = Pacer::new(redis, file.pacing, None)?;
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
            let mut redis = connect(&redis_options(cli)).context("--redis-url")?;
            sluice_consumer::control_loop::set_override(&mut redis, model, limit).await?;
            println!("applied");
            Ok(())
        }
        RatesCommand::Weight { tenant, weight } => {
            let weight = parse_weight(weight).map_err(|e| anyhow::anyhow!("{e}"))?;
            let mut redis = connect(&redis_options(cli)).context("--redis-url")?;
            sluice_consumer::control_loop::set_weight(&mut redis, tenant, weight).await?;
            println!("applied");
            Ok(())
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
            println!("applied");
            Ok(())
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
