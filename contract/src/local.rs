//! In-process mode's response channel: when the deferral endpoint and the
//! consumer run in one process, a request's chunks go from the model call
//! straight to the waiting client through a channel instead of through the
//! Redis Stream `response:{id}`.
//!
//! Only chunks take this path. Terminal entries (`done` / `error`) and the
//! idempotency markers stay in Redis, written by the same scripts as always,
//! so a request popped by another instance (which has no local waiter for
//! it) is answered through Redis as usual, and the endpoint learns of the end
//! the usual way. The endpoint reads its local channel dry before it acts on
//! a terminal entry: every chunk was sent before the terminal was written.
//!
//! Trade-offs (see docs/operations.md): chunks exist only in this process,
//! so they die with it and a stream cannot be resumed with `Last-Event-ID`;
//! in exchange a chunk costs no Redis round trip.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};
use tokio::sync::mpsc;

/// Chunks buffered per waiting client before the model call waits for it.
const CHANNEL_CAPACITY: usize = 256;

/// Waiting clients of this process, by request id.
#[derive(Debug, Default)]
pub struct LocalBus {
    waiters: Mutex<HashMap<String, mpsc::Sender<String>>>,
}

/// A waiting client's end; dropping it unregisters the request (a model call
/// still sending then sees the client gone and stops).
#[derive(Debug)]
pub struct LocalReceiver {
    bus: Arc<LocalBus>,
    req_id: String,
    pub chunks: mpsc::Receiver<String>,
}

impl Drop for LocalReceiver {
    fn drop(&mut self) {
        self.bus.lock().remove(&self.req_id);
    }
}

impl LocalBus {
    pub fn new() -> Arc<Self> {
        Arc::new(LocalBus::default())
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, mpsc::Sender<String>>> {
        self.waiters.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Register a waiting client before its request is published.
    pub fn register(self: &Arc<Self>, req_id: &str) -> LocalReceiver {
        let (sender, chunks) = mpsc::channel(CHANNEL_CAPACITY);
        self.lock().insert(req_id.to_string(), sender);
        LocalReceiver {
            bus: self.clone(),
            req_id: req_id.to_string(),
            chunks,
        }
    }

    /// The channel to `req_id`'s client, if it waits in this process.
    pub fn sender(&self, req_id: &str) -> Option<mpsc::Sender<String>> {
        self.lock().get(req_id).cloned()
    }

    /// Clients waiting in this process now.
    pub fn waiting(&self) -> usize {
        self.lock().len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn chunks_reach_the_registered_waiter_and_a_dropped_one_is_gone() {
        let bus = LocalBus::new();
        assert!(bus.sender("r1").is_none());
        let mut receiver = bus.register("r1");
        let sender = bus.sender("r1").unwrap();
        sender.send("a".into()).await.unwrap();
        sender.send("b".into()).await.unwrap();
        assert_eq!(receiver.chunks.recv().await.as_deref(), Some("a"));
        assert_eq!(receiver.chunks.recv().await.as_deref(), Some("b"));
        assert_eq!(bus.waiting(), 1);
        drop(receiver);
        assert_eq!(bus.waiting(), 0);
        assert!(bus.sender("r1").is_none());
        // A sender taken before the client left now fails: the call stops.
        assert!(sender.send("c".into()).await.is_err());
    }
}
