//! Errors of the LiteTopic client: each knows whether trying again later can
//! help ([`LiteError::is_transient`]).

use rocketmq_error::RecoveryHint;
use rocketmq_transport::api::{
    OutboundRequestContractReason, OutboundRequestRejectionReason, OutboundRequestStage,
    TransportError,
};

/// Remoting response codes this crate looks at (values of the RocketMQ wire
/// protocol, `ResponseCode` in rocketmq-protocol).
pub(crate) mod code {
    pub const SUCCESS: i32 = 0;
    pub const SYSTEM_ERROR: i32 = 1;
    pub const SYSTEM_BUSY: i32 = 2;
    pub const FLUSH_DISK_TIMEOUT: i32 = 10;
    pub const SLAVE_NOT_AVAILABLE: i32 = 11;
    pub const FLUSH_SLAVE_TIMEOUT: i32 = 12;
    pub const MESSAGE_ILLEGAL: i32 = 13;
    pub const SERVICE_NOT_AVAILABLE: i32 = 14;
    pub const TOPIC_NOT_EXIST: i32 = 17;
    pub const PULL_NOT_FOUND: i32 = 19;
    pub const SUBSCRIPTION_GROUP_NOT_EXIST: i32 = 26;
    pub const NO_MESSAGE: i32 = 208;
    pub const POLLING_FULL: i32 = 209;
    pub const POLLING_TIMEOUT: i32 = 210;
}

/// An error of the LiteTopic client.
#[derive(Debug, thiserror::Error)]
pub enum LiteError {
    /// A name, size or argument this crate refuses before anything is sent.
    #[error("invalid argument: {0}")]
    InvalidArgument(String),

    /// The broker answered with an error code.
    #[error("{operation}: broker {broker} answered code {code}: {remark}")]
    Broker {
        operation: &'static str,
        broker: String,
        code: i32,
        remark: String,
    },

    /// The request got no answer: no connection, a timeout, the client
    /// stopping (rocketmq-transport's outcome).
    #[error("{operation}: {source}")]
    Transport {
        operation: &'static str,
        #[source]
        source: TransportFailure,
    },

    /// No broker serves the topic (yet): the name server has no route.
    #[error("no broker route for {0}")]
    NoRoute(String),

    /// The topic or group exists with a different, incompatible setting.
    #[error("conflicting broker configuration: {0}")]
    Conflict(String),

    /// The message handle is no longer valid at the broker: its invisible
    /// time has passed (the LiteTopic is free again), or another pop has
    /// taken the LiteTopic since.
    #[error("stale message handle for LiteTopic {lite_topic} at offset {offset}")]
    StaleHandle { lite_topic: String, offset: i64 },

    /// A broker answer this crate could not read.
    #[error("{operation}: undecodable answer: {detail}")]
    Decode {
        operation: &'static str,
        detail: String,
    },

    /// A set-up this client does not handle.
    #[error("unsupported: {0}")]
    Unsupported(String),

    /// The client runtime could not be built or was already shut down.
    #[error("client runtime: {0}")]
    Runtime(String),
}

impl LiteError {
    /// Whether the same call may succeed later without a change on the
    /// caller's side (network, broker busy or starting, route not there yet).
    pub fn is_transient(&self) -> bool {
        match self {
            LiteError::Broker { code, .. } => is_transient_code(*code),
            LiteError::Transport { source, .. } => source.is_transient(),
            LiteError::NoRoute(_) => true,
            LiteError::InvalidArgument(_)
            | LiteError::Conflict(_)
            | LiteError::StaleHandle { .. }
            | LiteError::Decode { .. }
            | LiteError::Unsupported(_)
            | LiteError::Runtime(_) => false,
        }
    }

    /// The broker's response code, when the broker answered with one.
    pub fn broker_code(&self) -> Option<i32> {
        match self {
            LiteError::Broker { code, .. } => Some(*code),
            _ => None,
        }
    }

    pub(crate) fn transport(operation: &'static str, source: impl Into<TransportFailure>) -> Self {
        LiteError::Transport {
            operation,
            source: source.into(),
        }
    }
}

/// Why a request got no answer.
#[derive(Debug, thiserror::Error)]
pub enum TransportFailure {
    /// The transport gave up on it (rocketmq-transport's rejection: the
    /// deadline passed, the connection closed or could not be made, the
    /// write queue was full, the client is stopping).
    #[error("no answer ({reason:?} at {stage:?})")]
    Rejected {
        reason: OutboundRequestRejectionReason,
        stage: OutboundRequestStage,
    },
    /// A name-server request with no name server configured.
    #[error("no name server address")]
    NoNameServer,
    /// The transport failed (socket, codec, signing).
    #[error(transparent)]
    Failed(#[from] TransportError),
    /// The transport could not be built or started.
    #[error(transparent)]
    Setup(#[from] rocketmq_error::SharedError),
}

impl TransportFailure {
    fn is_transient(&self) -> bool {
        match self {
            TransportFailure::Rejected { reason, .. } => {
                *reason != OutboundRequestRejectionReason::ClientStopping
            }
            TransportFailure::NoNameServer | TransportFailure::Setup(_) => false,
            TransportFailure::Failed(e) => !matches!(
                e.recovery_hint(),
                RecoveryHint::Never | RecoveryHint::OperatorAction
            ),
        }
    }
}

impl From<OutboundRequestContractReason> for TransportFailure {
    fn from(reason: OutboundRequestContractReason) -> Self {
        match reason {
            OutboundRequestContractReason::NameServerEndpointMissing => {
                TransportFailure::NoNameServer
            }
        }
    }
}

fn is_transient_code(code: i32) -> bool {
    matches!(
        code,
        code::SYSTEM_ERROR
            | code::SYSTEM_BUSY
            | code::FLUSH_DISK_TIMEOUT
            | code::SLAVE_NOT_AVAILABLE
            | code::FLUSH_SLAVE_TIMEOUT
            | code::SERVICE_NOT_AVAILABLE
            | code::POLLING_FULL
            | code::TOPIC_NOT_EXIST
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn classification() {
        let busy = LiteError::Broker {
            operation: "pop",
            broker: "b".into(),
            code: code::SYSTEM_BUSY,
            remark: String::new(),
        };
        assert!(busy.is_transient());
        assert_eq!(busy.broker_code(), Some(code::SYSTEM_BUSY));
        let illegal = LiteError::Broker {
            operation: "send",
            broker: "b".into(),
            code: code::MESSAGE_ILLEGAL,
            remark: String::new(),
        };
        assert!(!illegal.is_transient());
        assert!(LiteError::NoRoute("t".into()).is_transient());
        assert!(!LiteError::InvalidArgument("x".into()).is_transient());
        assert!(!LiteError::StaleHandle {
            lite_topic: "a".into(),
            offset: 1
        }
        .is_transient());
    }
}
