//! The limiter's error, shared by its planning and its answer.

use crate::store::StoreError;

/// Why a request could not be decided.
#[derive(Debug, thiserror::Error)]
pub enum DecisionError {
    #[error("invalid request: {0}")]
    InvalidRequest(String),
    #[error(transparent)]
    Store(#[from] StoreError),
}
