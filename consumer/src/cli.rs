//! What the binaries that run the consumer (`sluice-consumer`,
//! `sluice-allinone`) share: the consumer's flags, declared once. A flag's
//! name is its environment variable's without `SLUICE_`; the rest of the
//! consumer's settings are in its YAML.

use crate::admin::auth::{load_token, AdminToken, TokenError, ADMIN_TOKEN_FILE_ENV};
use crate::embedded::{FileConfig, StartError};
use crate::queue::runner::RunnerOptions;
use crate::sharing::membership::DEFAULT_MEMBERSHIP_TTL;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

/// The consumer's flags, the same in every binary that runs it.
#[derive(clap::Args)]
pub struct ConsumerFlags {
    /// The consumer's YAML: backend, stream, idempotency, pacing, limits
    /// (see consumer/README.md).
    #[arg(long, env = "SLUICE_CONSUMER_CONFIG", global = true)]
    pub consumer_config: Option<PathBuf>,

    /// Backend base URL for models without their own entry in the config file.
    #[arg(long, env = "SLUICE_BACKEND_URL")]
    pub backend_url: Option<String>,

    /// File holding the consumer admin API's bearer token (else
    /// $SLUICE_ADMIN_TOKEN). When set, every admin write needs
    /// `Authorization: Bearer <token>`.
    #[arg(long, env = ADMIN_TOKEN_FILE_ENV)]
    pub admin_token_file: Option<PathBuf>,

    /// The consumer's admin API: /metrics, /healthz, and run-time rate
    /// changes. Loopback by default; bound elsewhere, writes need the admin
    /// token.
    #[arg(long, env = "SLUICE_CONSUMER_ADMIN_ADDR", default_value = "127.0.0.1:9092")]
    pub consumer_admin_addr: SocketAddr,

    /// Unique id of this instance in the consumer group (default: host name + pid).
    #[arg(long, env = "SLUICE_CONSUMER_ID")]
    pub consumer_id: Option<String>,

    /// An instance silent for this long is gone and its buckets move to the others.
    #[arg(long, env = "SLUICE_MEMBERSHIP_TTL_MS", default_value_t = DEFAULT_MEMBERSHIP_TTL.as_millis() as u64,
          value_parser = clap::value_parser!(u64).range(1_000..))]
    pub membership_ttl_ms: u64,

    /// Unsubscribe a bucket after this long without requests (and nothing queued).
    #[arg(long, env = "SLUICE_IDLE_TTL_S", default_value_t = 600,
          value_parser = clap::value_parser!(u64).range(1..))]
    pub idle_ttl_s: u64,

    /// At SIGTERM, held messages go back to the queue at once; running calls get this long.
    #[arg(long, env = "SLUICE_SHUTDOWN_GRACE_S", default_value_t = 30)]
    pub shutdown_grace_s: u64,

    /// The admission JSON of the filter / ext_authz (config/ext-authz.json's
    /// schema): the consumer counts an answer without usage with the same
    /// `model_tokenizers`, `model_encodings` and `default_encoding`.
    #[arg(long, env = "SLUICE_ADMISSION_CONFIG")]
    pub admission_config: Option<PathBuf>,
}

/// `sluice-consumer`'s own earlier names, kept as aliases: in
/// `sluice-allinone`, `--config` and `--admin-addr` are the RLS's.
const SHORT_NAMES: [(&str, &str); 3] = [
    ("consumer_config", "config"),
    ("consumer_admin_addr", "admin-addr"),
    ("consumer_id", "id"),
];

/// `command` (a binary that runs only the consumer) with the consumer's
/// flags also under their short names (`--config`, `--admin-addr`, `--id`).
pub fn with_short_names(command: clap::Command) -> clap::Command {
    SHORT_NAMES.iter().fold(command, |command, &(id, alias)| {
        command.mut_arg(id, |arg| arg.visible_alias(alias))
    })
}

impl ConsumerFlags {
    /// The consumer's YAML (or the defaults), with --backend-url applied.
    pub fn file_config(&self) -> Result<FileConfig, StartError> {
        let mut file = FileConfig::load(self.consumer_config.as_deref())?;
        if let Some(url) = &self.backend_url {
            file.processor.backend.default.base_url = url.clone();
        }
        Ok(file)
    }

    /// Loads the tokenizers `--admission-config` names (its
    /// `model_tokenizers` files are read now, so a bad one stops the start).
    pub fn load_tokenizers(&self) -> Result<(), String> {
        let Some(path) = &self.admission_config else {
            return Ok(());
        };
        let json = std::fs::read(path).map_err(|e| format!("{}: {e}", path.display()))?;
        let config = sluice_admission::config::FilterConfig::from_json(&json)
            .map_err(|e| format!("{}: {e}", path.display()))?;
        crate::use_model_tokenizers(config)
    }

    /// The admin API's token, read before anything starts so that a bad
    /// file stops the process at once.
    pub fn admin_token(&self) -> Result<Option<AdminToken>, TokenError> {
        load_token(self.admin_token_file.as_deref())
    }

    /// This instance's id in the group: the flag, else host name + pid.
    pub fn id(&self) -> String {
        self.consumer_id
            .clone()
            .unwrap_or_else(crate::embedded::default_id)
    }

    /// The pop loop's options these flags set (the rest default).
    pub fn runner_options(&self) -> RunnerOptions {
        RunnerOptions {
            membership_ttl: Duration::from_millis(self.membership_ttl_ms),
            idle_ttl: Duration::from_secs(self.idle_ttl_s),
            retire_interval: Duration::from_secs(self.idle_ttl_s.clamp(1, 30)),
            shutdown_grace: Duration::from_secs(self.shutdown_grace_s),
            ..Default::default()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::{CommandFactory, FromArgMatches, Parser};

    /// A binary that runs only the consumer, as sluice-consumer declares it.
    #[derive(Parser)]
    struct Alone {
        #[command(flatten)]
        flags: ConsumerFlags,
    }

    /// A binary where `--config` and `--admin-addr` belong to another part,
    /// as in sluice-allinone.
    #[derive(Parser)]
    struct Beside {
        #[arg(long)]
        config: Option<PathBuf>,
        #[arg(long)]
        admin_addr: Option<SocketAddr>,
        #[command(flatten)]
        flags: ConsumerFlags,
    }

    fn alone(args: &[&str]) -> Result<ConsumerFlags, clap::Error> {
        let matches = with_short_names(Alone::command())
            .try_get_matches_from(std::iter::once("alone").chain(args.iter().copied()))?;
        Alone::from_arg_matches(&matches).map(|alone| alone.flags)
    }

    #[test]
    fn the_long_names_and_the_short_ones_set_the_same_settings() {
        for args in [
            [
                "--consumer-config=c.yaml",
                "--consumer-admin-addr=127.0.0.1:1",
                "--consumer-id=a",
            ],
            ["--config=c.yaml", "--admin-addr=127.0.0.1:1", "--id=a"],
        ] {
            let flags = alone(&args).unwrap();
            assert_eq!(flags.consumer_config, Some(PathBuf::from("c.yaml")));
            assert_eq!(flags.consumer_admin_addr, "127.0.0.1:1".parse().unwrap());
            assert_eq!(flags.id(), "a");
        }
    }

    #[test]
    fn the_runner_options_default_as_the_runner_does() {
        let flags = alone(&[]).unwrap();
        let (set, default) = (flags.runner_options(), RunnerOptions::default());
        assert_eq!(set.membership_ttl, default.membership_ttl);
        assert_eq!(set.idle_ttl, default.idle_ttl);
        assert_eq!(set.retire_interval, default.retire_interval);
        assert_eq!(set.shutdown_grace, default.shutdown_grace);
        let flags = alone(&["--idle-ttl-s=5", "--shutdown-grace-s=2"]).unwrap();
        let set = flags.runner_options();
        assert_eq!(set.idle_ttl, Duration::from_secs(5));
        assert_eq!(set.retire_interval, Duration::from_secs(5));
        assert_eq!(set.shutdown_grace, Duration::from_secs(2));
        assert!(alone(&["--membership-ttl-ms=999"]).is_err());
    }

    #[test]
    fn beside_another_part_the_flags_keep_their_long_names_only() {
        Beside::command().debug_assert();
        let beside = Beside::try_parse_from([
            "beside",
            "--config=rls.yaml",
            "--admin-addr=127.0.0.1:1",
            "--consumer-config=c.yaml",
            "--consumer-admin-addr=127.0.0.1:2",
        ])
        .unwrap();
        assert_eq!(beside.config, Some(PathBuf::from("rls.yaml")));
        assert_eq!(beside.admin_addr, Some("127.0.0.1:1".parse().unwrap()));
        assert_eq!(beside.flags.consumer_config, Some(PathBuf::from("c.yaml")));
        assert_eq!(
            beside.flags.consumer_admin_addr,
            "127.0.0.1:2".parse().unwrap()
        );
    }
}
