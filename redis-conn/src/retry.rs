//! Riding out a short Redis outage: the same command sent again while the
//! error is one that passes by itself (a connection lost, a server loading
//! its data or failing over), for at most a grace period.
//!
//! Only for commands whose second run is harmless: reads, `SET`s of the
//! same value, and scripts written to be idempotent. A reply lost with the
//! connection leaves it unknown whether the first one ran.

use redis::{RedisError, RetryMethod};
use std::future::Future;
use std::time::Duration;
use tokio::time::Instant;

/// The first wait between two tries; it doubles up to [`MAX_WAIT`].
const FIRST_WAIT: Duration = Duration::from_millis(50);
/// The longest wait between two tries: a Redis that is back is used within
/// this long (the connection's own reconnect waits at most 500 ms too).
const MAX_WAIT: Duration = Duration::from_millis(500);

/// Whether `error` may pass by itself, so that the same command is worth
/// sending again (redis-rs's own judgement: anything but "do not retry").
pub fn is_transient(error: &RedisError) -> bool {
    !matches!(error.retry_method(), RetryMethod::NoRetry)
}

/// Runs `op` until it succeeds, fails with an error that is not
/// [`is_transient`], or `grace` has passed since its first failure; the
/// last error then. A zero `grace` runs it once.
pub async fn ride_out<T, F, Fut>(grace: Duration, mut op: F) -> Result<T, RedisError>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<T, RedisError>>,
{
    let mut first_failure: Option<Instant> = None;
    let mut wait = FIRST_WAIT;
    loop {
        let error = match op().await {
            Ok(value) => return Ok(value),
            Err(error) => error,
        };
        let since = *first_failure.get_or_insert_with(Instant::now);
        if !is_transient(&error) || since.elapsed() + wait > grace {
            return Err(error);
        }
        tracing::debug!(%error, "Redis unavailable; trying again");
        tokio::time::sleep(wait).await;
        wait = (wait * 2).min(MAX_WAIT);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use redis::ErrorKind;
    use std::cell::Cell;

    fn io_error() -> RedisError {
        RedisError::from(std::io::Error::from(std::io::ErrorKind::ConnectionRefused))
    }

    #[tokio::test]
    async fn a_transient_error_is_tried_again_until_it_passes() {
        let tries = Cell::new(0);
        let result = ride_out(Duration::from_secs(60), || {
            tries.set(tries.get() + 1);
            let n = tries.get();
            async move {
                if n < 4 {
                    Err(io_error())
                } else {
                    Ok(n)
                }
            }
        })
        .await;
        assert_eq!(result.ok(), Some(4));
    }

    #[tokio::test]
    async fn a_lasting_outage_ends_after_the_grace() {
        let started = Instant::now();
        let tries = Cell::new(0);
        let result: Result<(), _> = ride_out(Duration::from_millis(1000), || {
            tries.set(tries.get() + 1);
            async { Err(io_error()) }
        })
        .await;
        assert!(result.is_err());
        // It stops only when the next wait would end past the grace, so no
        // earlier than the grace less one longest wait (however slow the
        // machine: a late wake-up only means fewer tries).
        assert!(tries.get() >= 2, "{} tries", tries.get());
        assert!(started.elapsed() >= Duration::from_millis(1000) - MAX_WAIT);
    }

    #[tokio::test]
    async fn a_permanent_error_is_returned_at_once() {
        let tries = Cell::new(0);
        let result: Result<(), _> = ride_out(Duration::from_secs(5), || {
            tries.set(tries.get() + 1);
            async { Err(RedisError::from((ErrorKind::Client, "bad script"))) }
        })
        .await;
        assert!(result.is_err());
        assert_eq!(tries.get(), 1);
    }

    #[tokio::test]
    async fn zero_grace_tries_once() {
        let tries = Cell::new(0);
        let _: Result<(), _> = ride_out(Duration::ZERO, || {
            tries.set(tries.get() + 1);
            async { Err(io_error()) }
        })
        .await;
        assert_eq!(tries.get(), 1);
    }
}
