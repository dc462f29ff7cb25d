//! Where the controller's saturation state is read from: the controller
//! hashes in the consumers' Redis, all tracked models in one pipelined
//! round trip.

use futures::future::BoxFuture;
use sluice_contract::keys;
use sluice_contract::saturation::{self, Saturation};
use sluice_redis::RedisConn;
use std::time::Duration;

/// Where the controller's state is read from.
pub trait SaturationSource: Send + Sync + 'static {
    /// Each of `models`' last written state, in their order (`None`: the
    /// controller wrote none), in one round trip.
    fn read<'a>(
        &'a self,
        models: &'a [String],
    ) -> BoxFuture<'a, Result<Vec<Option<Saturation>>, String>>;
}

/// The controller hashes in Redis (the consumers' Redis).
pub struct RedisSaturation {
    connection: RedisConn,
    timeout: Duration,
}

impl RedisSaturation {
    pub fn new(connection: RedisConn, timeout: Duration) -> Self {
        RedisSaturation {
            connection,
            timeout,
        }
    }
}

impl SaturationSource for RedisSaturation {
    fn read<'a>(
        &'a self,
        models: &'a [String],
    ) -> BoxFuture<'a, Result<Vec<Option<Saturation>>, String>> {
        Box::pin(async move {
            if models.is_empty() {
                return Ok(Vec::new());
            }
            // One HMGET per model (each hash in its own slot), pipelined.
            let mut pipeline = redis::pipe();
            for model in models {
                pipeline
                    .cmd("HMGET")
                    .arg(keys::controller(model))
                    .arg(saturation::SATURATED)
                    .arg(saturation::SATURATED_AT_MS);
            }
            let mut connection = self.connection.clone();
            let fields: Vec<(Option<String>, Option<String>)> =
                tokio::time::timeout(self.timeout, pipeline.query_async(&mut connection))
                    .await
                    .map_err(|_| format!("reading {} models timed out", models.len()))?
                    .map_err(|e| e.to_string())?;
            Ok(fields
                .iter()
                .map(|(saturated, at_ms)| {
                    Saturation::from_fields(saturated.as_deref(), at_ms.as_deref())
                })
                .collect())
        })
    }
}
