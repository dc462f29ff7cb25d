//! Many waiting responses, few Redis connections.
//!
//! Response streams are spread over the contract's shards (`keys::shard`);
//! each reader serves a fixed set of shards — exactly one on a Redis
//! Cluster, where one `XREAD` may only name keys of one slot — and owns one
//! dedicated connection, on which it runs
//! `XREAD BLOCK <ms> STREAMS <wake> <k1> ... <kn> <wake-id> <id1> ... <idn>`
//! over every stream registered with it: one blocked call waits on all of
//! them, server side, with no polling. A new registration interrupts the
//! current call by appending to the reader's own wake stream, so a new
//! request's first chunk is not held back until the block times out.
//! Subscribers get entries through a bounded channel; a slow subscriber's
//! cursor simply stays behind (the entries wait in Redis, not in memory).

use redis::streams::{StreamReadOptions, StreamReadReply};
use redis::AsyncCommands;
use sluice_contract::{keys, StreamEvent};
use sluice_redis::{RedisClient, RedisConn};
use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::mpsc;

/// One stream entry: its id and fields.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Entry {
    pub id: String,
    pub fields: HashMap<String, String>,
}

impl Entry {
    pub fn field(&self, name: &str) -> Option<&str> {
        self.fields.get(name).map(String::as_str)
    }

    /// The entry as the contract's typed event; `None` for a type this
    /// version does not know (skipped).
    pub fn event(&self) -> Option<StreamEvent> {
        StreamEvent::from_fields(|name| self.field(name))
    }
}

#[derive(Clone, Debug)]
pub struct HubOptions {
    /// Readers = dedicated Redis connections (at most one per shard; on a
    /// Redis Cluster always one per shard).
    pub readers: usize,
    /// Longest server-side block of one XREAD.
    pub block: Duration,
    /// Entries buffered per subscriber before its cursor waits in Redis.
    pub buffer: usize,
}

impl Default for HubOptions {
    fn default() -> Self {
        HubOptions {
            readers: 4,
            block: Duration::from_secs(5),
            buffer: 256,
        }
    }
}

enum Command {
    Watch {
        key: String,
        from: String,
        entries: mpsc::Sender<Entry>,
    },
    Forget {
        key: String,
    },
}

struct Reader {
    commands: mpsc::UnboundedSender<Command>,
    wake_key: String,
    /// True once the reader's connection has answered once: from then on,
    /// an outage fails its next read, and the hub sees it.
    connected: tokio::sync::watch::Receiver<bool>,
}

/// How long `subscribe` waits for its reader's first connection (Redis down
/// at start-up): past it, the watch is kept and read once Redis answers.
const FIRST_CONNECTION_WAIT: Duration = Duration::from_secs(2);

/// The shared reader pool.
pub struct StreamHub {
    readers: Vec<Reader>,
    /// Non-blocking connection for wake-ups.
    control: RedisConn,
    buffer: usize,
    /// When a reader last saw Redis fail (see [`StreamHub::last_redis_failure`]).
    last_failure: Arc<FailureClock>,
}

/// When a read last failed; shared by the readers and the hub.
#[derive(Default)]
struct FailureClock(std::sync::Mutex<Option<std::time::Instant>>);

impl FailureClock {
    fn record(&self) {
        *self.0.lock().unwrap_or_else(|p| p.into_inner()) = Some(std::time::Instant::now());
    }

    fn last(&self) -> Option<std::time::Instant> {
        *self.0.lock().unwrap_or_else(|p| p.into_inner())
    }
}

/// A subscriber's end: entries of one stream, in order. Dropping it stops the watch.
pub struct Subscription {
    pub entries: mpsc::Receiver<Entry>,
    key: String,
    commands: mpsc::UnboundedSender<Command>,
}

impl Drop for Subscription {
    fn drop(&mut self) {
        let _ = self.commands.send(Command::Forget {
            key: std::mem::take(&mut self.key),
        });
    }
}

impl StreamHub {
    /// Starts the reader tasks on their own connections.
    pub fn start(
        client: RedisClient,
        options: HubOptions,
    ) -> Result<Arc<StreamHub>, sluice_redis::OptionsError> {
        let control = client
            .with_response_timeout(Duration::from_secs(2))
            .connect()?;
        Self::start_with_control(client, control, options)
    }

    /// As [`StreamHub::start`], sharing `control` (a non-blocking connection
    /// the caller also uses) for wake-ups: readers + 1 connections in all.
    pub fn start_with_control(
        client: RedisClient,
        control: RedisConn,
        options: HubOptions,
    ) -> Result<Arc<StreamHub>, sluice_redis::OptionsError> {
        let instance = format!("{:x}", std::process::id() as u64 ^ random_seed());
        let count = if client.is_cluster() {
            usize::from(keys::RESPONSE_SHARDS)
        } else {
            options.readers.clamp(1, usize::from(keys::RESPONSE_SHARDS))
        };
        // A blocking XREAD must not share a connection with anything else,
        // and its round trip lasts as long as the block.
        let blocking = client.with_response_timeout(options.block + Duration::from_secs(5));
        let last_failure = Arc::new(FailureClock::default());
        let mut readers = Vec::with_capacity(count);
        for index in 0..count {
            let (commands, receiver) = mpsc::unbounded_channel();
            // In the slot of the shards this reader serves (on a cluster: its one shard).
            let wake_key = keys::wake(index as u16, &instance);
            let (connected_tx, connected) = tokio::sync::watch::channel(false);
            tokio::spawn(run_reader(
                blocking.connect()?,
                wake_key.clone(),
                receiver,
                options.block,
                last_failure.clone(),
                connected_tx,
            ));
            readers.push(Reader {
                commands,
                wake_key,
                connected,
            });
        }
        Ok(Arc::new(StreamHub {
            readers,
            control,
            buffer: options.buffer.max(1),
            last_failure,
        }))
    }

    /// When a reader last saw Redis fail. Every reader waits on Redis all
    /// the time, so it sees even an outage too short for a waiting request's
    /// own look at Redis to meet: a Redis that restarted empty in between
    /// shows every lease and claim as gone. On a Cluster, redis-rs retries
    /// a failed read on a fresh connection by itself: a master that
    /// restarts faster than those retries (3, 50 ms–1 s apart) is not seen.
    pub fn last_redis_failure(&self) -> Option<std::time::Instant> {
        self.last_failure.last()
    }

    /// Watch `key` for entries after `from` (`0-0` for all of them).
    /// `key` is a per-request key of the contract (its shard picks the reader).
    /// Once it returns, a Redis outage is seen by the hub
    /// ([`StreamHub::last_redis_failure`]): the reader's connection is up
    /// (or Redis did not answer within [`FIRST_CONNECTION_WAIT`]).
    pub async fn subscribe(&self, key: &str, from: &str) -> Subscription {
        let shard = keys::shard_of_key(key).unwrap_or(0);
        let reader = &self.readers[usize::from(shard) % self.readers.len()];
        if !*reader.connected.borrow() {
            let mut connected = reader.connected.clone();
            let _ = tokio::time::timeout(FIRST_CONNECTION_WAIT, connected.wait_for(|up| *up)).await;
        }
        let (sender, entries) = mpsc::channel(self.buffer);
        let _ = reader.commands.send(Command::Watch {
            key: key.to_string(),
            from: from.to_string(),
            entries: sender,
        });
        // Interrupt the reader's current XREAD so it picks the new key up now.
        let mut control = self.control.clone();
        let woken: Result<String, _> = redis::cmd("XADD")
            .arg(&reader.wake_key)
            .arg("MAXLEN")
            .arg("~")
            .arg(64)
            .arg("*")
            .arg("w")
            .arg(1)
            .query_async(&mut control)
            .await;
        if let Err(error) = woken {
            tracing::warn!(%error, "cannot wake stream reader; the new watch waits for the next block timeout");
        }
        let _: Result<(), _> = control.expire(&reader.wake_key, 3600).await;
        Subscription {
            entries,
            key: key.to_string(),
            commands: reader.commands.clone(),
        }
    }
}

fn random_seed() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos() as u64)
        .unwrap_or(0)
}

struct Watch {
    cursor: String,
    entries: mpsc::Sender<Entry>,
}

async fn run_reader(
    mut conn: RedisConn,
    wake_key: String,
    mut commands: mpsc::UnboundedReceiver<Command>,
    block: Duration,
    last_failure: Arc<FailureClock>,
    connected: tokio::sync::watch::Sender<bool>,
) {
    // Connect now, not at the first watch: a connection made after a Redis
    // restart cannot fail, so a restart between a request's first write and
    // its reader's first read would go unseen.
    if !first_connection(&mut conn, &commands).await {
        return;
    }
    connected.send_replace(true);
    let mut watches: HashMap<String, Watch> = HashMap::new();
    let mut wake_cursor = "0-0".to_string();
    let mut backoff = Duration::from_millis(50);
    loop {
        if !apply_commands(&mut commands, &mut watches).await {
            return;
        }
        watches.retain(|_, w| !w.entries.is_closed());
        if watches.is_empty() {
            continue;
        }
        let mut keys: Vec<&str> = Vec::with_capacity(watches.len() + 1);
        let mut ids: Vec<&str> = Vec::with_capacity(watches.len() + 1);
        keys.push(&wake_key);
        ids.push(&wake_cursor);
        let mut paused = false;
        for (key, watch) in &watches {
            // A subscriber with a full buffer sits this round out: reading its
            // stream again now would return the same entries at once (a busy loop).
            if watch.entries.capacity() == 0 {
                paused = true;
                continue;
            }
            keys.push(key);
            ids.push(&watch.cursor);
        }
        let wait = if paused {
            block.min(Duration::from_millis(200))
        } else {
            block
        };
        let options = StreamReadOptions::default()
            .block(wait.as_millis().max(1) as usize)
            .count(128);
        let reply: Result<Option<StreamReadReply>, _> =
            conn.xread_options(&keys, &ids, &options).await;
        match reply {
            Ok(Some(reply)) => {
                backoff = Duration::from_millis(50);
                for stream in reply.keys {
                    if stream.key == wake_key {
                        if let Some(last) = stream.ids.last() {
                            wake_cursor = last.id.clone();
                        }
                    } else if let Some(watch) = watches.get_mut(&stream.key) {
                        deliver(watch, stream.ids);
                    }
                }
            }
            Ok(None) => backoff = Duration::from_millis(50), // block timed out
            Err(error) => {
                last_failure.record();
                // The connection reconnects by itself; wait before asking again.
                tracing::warn!(%error, "stream reader: Redis read failed; retrying");
                tokio::time::sleep(backoff).await;
                // At most 500 ms: a Redis that is back is read again soon (the
                // answers of requests in flight at an outage wait on it).
                backoff = (backoff * 2).min(Duration::from_millis(500));
            }
        }
    }
}

/// PINGs until Redis answers once; false if the hub is gone first. A failure
/// here is not recorded: this reader had not seen that Redis yet.
async fn first_connection(
    conn: &mut RedisConn,
    commands: &mpsc::UnboundedReceiver<Command>,
) -> bool {
    let mut backoff = Duration::from_millis(50);
    loop {
        let pong: Result<String, _> = redis::cmd("PING").query_async(conn).await;
        match pong {
            Ok(_) => return true,
            Err(error) if !commands.is_closed() => {
                tracing::warn!(%error, "stream reader: Redis does not answer yet; retrying");
                tokio::time::sleep(backoff).await;
                backoff = (backoff * 2).min(Duration::from_millis(500));
            }
            Err(_) => return false,
        }
    }
}

/// Applies every queued command; with nothing to watch, sleeps until asked.
/// False once the hub is gone.
async fn apply_commands(
    commands: &mut mpsc::UnboundedReceiver<Command>,
    watches: &mut HashMap<String, Watch>,
) -> bool {
    loop {
        let command = if watches.is_empty() {
            match commands.recv().await {
                Some(c) => c,
                None => return false,
            }
        } else {
            match commands.try_recv() {
                Ok(c) => c,
                Err(mpsc::error::TryRecvError::Empty) => return true,
                Err(mpsc::error::TryRecvError::Disconnected) => return false,
            }
        };
        match command {
            Command::Watch { key, from, entries } => {
                watches.insert(
                    key,
                    Watch {
                        cursor: from,
                        entries,
                    },
                );
            }
            Command::Forget { key } => {
                watches.remove(&key);
            }
        }
    }
}

/// Hands a stream's new entries to its subscriber, moving its cursor past
/// each one taken; a full buffer leaves the rest to be read again later.
fn deliver(watch: &mut Watch, ids: Vec<redis::streams::StreamId>) {
    for id in ids {
        let fields = id
            .map
            .iter()
            .filter_map(|(k, v)| {
                redis::from_redis_value::<String>(v.clone())
                    .ok()
                    .map(|v| (k.clone(), v))
            })
            .collect();
        let entry = Entry {
            id: id.id.clone(),
            fields,
        };
        match watch.entries.try_send(entry) {
            Ok(()) => watch.cursor = id.id,
            Err(mpsc::error::TrySendError::Full(_)) | Err(mpsc::error::TrySendError::Closed(_)) => {
                break
            }
        }
    }
}
