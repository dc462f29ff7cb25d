//! What the binaries that run the consumer (`sluice-consumer`,
//! `sluice-allinone`) share: the flags they name alike.

use crate::admin::auth::{load_token, AdminToken, TokenError, ADMIN_TOKEN_FILE_ENV};
use crate::embedded::{FileConfig, StartError};
use std::path::{Path, PathBuf};

/// Flags of the same name in every binary that runs the consumer.
#[derive(clap::Args)]
pub struct ConsumerFlags {
    /// Backend base URL for models without their own entry in the config file.
    #[arg(long, env = "SLUICE_BACKEND_URL")]
    pub backend_url: Option<String>,

    /// File holding the consumer admin API's bearer token (else
    /// $SLUICE_ADMIN_TOKEN). When set, every admin write needs
    /// `Authorization: Bearer <token>`.
    #[arg(long, env = ADMIN_TOKEN_FILE_ENV)]
    pub admin_token_file: Option<PathBuf>,
}

impl ConsumerFlags {
    /// The consumer's YAML at `path` (or the defaults), with --backend-url applied.
    pub fn file_config(&self, path: Option<&Path>) -> Result<FileConfig, StartError> {
        let mut file = FileConfig::load(path)?;
        if let Some(url) = &self.backend_url {
            file.processor.backend.default.base_url = url.clone();
        }
        Ok(file)
    }

    /// The admin API's token, read before anything starts so that a bad
    /// file stops the process at once.
    pub fn admin_token(&self) -> Result<Option<AdminToken>, TokenError> {
        load_token(self.admin_token_file.as_deref())
    }
}
