//! When a model call's request is on its way.
//!
//! A bucket's next message may start only once this one's request is handed
//! to its connection: released earlier (before its claim and send), the
//! next message's call could reach the model server first on a busy
//! consumer (seen once in 16 consumer_bench runs). [`SentBody`] tells
//! [`OnSent`]'s receiver when hyper reads the body to write it, which is
//! when the request's head is in the connection's write buffer.

use bytes::Bytes;
use http_body_util::Full;
use hyper::body::{Body, Frame, SizeHint};
use std::convert::Infallible;
use std::pin::Pin;
use std::task::{Context, Poll};
use tokio::sync::oneshot;

/// Fired once, when the call's request is being written; dropped unfired
/// (its receiver sees the sender gone) when no request goes out — the claim
/// answered already, the request could not be built, the connection failed.
/// Either way the receiver's wait ends.
#[derive(Debug, Default)]
pub struct OnSent(Option<oneshot::Sender<()>>);

impl OnSent {
    /// A signal and the future that ends when it fires or is dropped.
    pub fn new() -> (OnSent, oneshot::Receiver<()>) {
        let (tx, rx) = oneshot::channel();
        (OnSent(Some(tx)), rx)
    }

    fn fire(&mut self) {
        if let Some(tx) = self.0.take() {
            let _ = tx.send(());
        }
    }
}

/// A request body that fires its [`OnSent`] when hyper first reads it.
#[derive(Debug)]
pub(crate) struct SentBody {
    inner: Full<Bytes>,
    on_sent: OnSent,
}

impl SentBody {
    pub(crate) fn new(bytes: Bytes, on_sent: OnSent) -> SentBody {
        SentBody {
            inner: Full::new(bytes),
            on_sent,
        }
    }
}

impl Body for SentBody {
    type Data = Bytes;
    type Error = Infallible;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Infallible>>> {
        self.on_sent.fire();
        Pin::new(&mut self.inner).poll_frame(cx)
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use http_body_util::BodyExt;

    #[tokio::test]
    async fn fires_when_read_and_ends_the_wait_when_dropped() {
        let (on_sent, mut sent) = OnSent::new();
        let body = SentBody::new(Bytes::from_static(b"{}"), on_sent);
        assert!(sent.try_recv().is_err(), "not read yet");
        let bytes = body.collect().await.map(|b| b.to_bytes());
        assert_eq!(bytes.ok().as_deref(), Some(&b"{}"[..]));
        assert_eq!(sent.await, Ok(()));

        let (on_sent, sent) = OnSent::new();
        drop(SentBody::new(Bytes::from_static(b"{}"), on_sent));
        assert!(sent.await.is_err(), "dropped unread: the wait ends unfired");
    }
}
