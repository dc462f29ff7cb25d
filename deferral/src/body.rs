//! Reading a deferred request's body: bounded in size and in time, so a
//! client trickling bytes or going silent cannot hold a slot.

use axum::body::{Body, Bytes};
use std::time::Duration;

/// Why a request body could not be read.
#[derive(Debug, PartialEq, Eq)]
pub enum BodyError {
    TooLarge,
    TimedOut,
    Unreadable,
}

/// The whole body, at most `max` bytes, complete within `deadline` of the
/// call: a client trickling bytes or going silent is cut off.
pub async fn read_body(body: Body, max: usize, deadline: Duration) -> Result<Bytes, BodyError> {
    use futures::StreamExt;
    let mut stream = body.into_data_stream();
    let read = async {
        let mut buffer = Vec::new();
        while let Some(chunk) = stream.next().await {
            let chunk = chunk.map_err(|_| BodyError::Unreadable)?;
            if buffer.len() + chunk.len() > max {
                return Err(BodyError::TooLarge);
            }
            buffer.extend_from_slice(&chunk);
        }
        Ok(Bytes::from(buffer))
    };
    tokio::time::timeout(deadline, read)
        .await
        .unwrap_or(Err(BodyError::TimedOut))
}

#[allow(clippy::unwrap_used)] // tests fail loudly
#[cfg(test)]
mod tests {
    use super::*;

    fn trickle(pieces: usize, every: Duration) -> Body {
        let stream = futures::stream::unfold(0, move |n| async move {
            if n == pieces {
                return None;
            }
            tokio::time::sleep(every).await;
            Some((Ok::<_, std::io::Error>(Bytes::from_static(b"x")), n + 1))
        });
        Body::from_stream(stream)
    }

    #[tokio::test]
    async fn a_body_within_limit_and_deadline_is_read_whole() {
        let body = read_body(Body::from("abc"), 3, Duration::from_secs(1)).await;
        assert_eq!(body.unwrap(), Bytes::from_static(b"abc"));
        let body = read_body(
            trickle(3, Duration::from_millis(10)),
            3,
            Duration::from_secs(1),
        );
        assert_eq!(body.await.unwrap().len(), 3);
    }

    #[tokio::test]
    async fn one_byte_over_the_limit_is_too_large() {
        let body = read_body(Body::from("abcd"), 3, Duration::from_secs(1)).await;
        assert_eq!(body, Err(BodyError::TooLarge));
    }

    #[tokio::test]
    async fn a_trickling_body_is_cut_at_the_deadline() {
        let started = std::time::Instant::now();
        let body = read_body(
            trickle(30, Duration::from_millis(100)),
            100,
            Duration::from_millis(500),
        );
        assert_eq!(body.await, Err(BodyError::TimedOut));
        assert!(started.elapsed() < Duration::from_secs(2));
    }
}
