//! Redis key names shared by the deferral endpoint and the consumer.
//!
//! Per-request keys share one hash tag, `{r<shard>}`, where the shard is a
//! fixed hash of the request id ([`shard`], [`RESPONSE_SHARDS`] of them), so
//! every script and pipeline of one request stays on one Redis Cluster slot,
//! and the endpoint reads the response streams of many requests with one
//! `XREAD` per shard (a cluster refuses an `XREAD` over several slots):
//! `sluice:{r<k>}:response:<id>`, `…:cancel:<id>`, `…:done:<id>`,
//! `…:processing:<id>`, `…:lease:<id>`, `…:owner:<id>`.
//!
//! Bucket bookkeeping keys share the `{buckets}` tag (see [`BUCKETS`]). The
//! consumer's own pacing keys (`sluice:pace:{model}:…`, `sluice:rates:…`)
//! are not part of the contract: they live in the consumer.

use std::fmt::Write as _;

/// How many shards per-request keys are spread over. Part of the key
/// layout: the endpoint and the consumer must agree on it, so it is a
/// constant of the contract, not a setting. 16 spreads the response traffic
/// over up to 16 cluster masters; each endpoint reads with one blocking
/// connection per shard.
pub const RESPONSE_SHARDS: u16 = 16;

/// The shard of a request id: FNV-1a of its bytes, modulo [`RESPONSE_SHARDS`].
/// Never change it: keys of requests in flight during an upgrade depend on it.
pub fn shard(req_id: &str) -> u16 {
    let mut hash: u32 = 0x811c_9dc5;
    for byte in req_id.bytes() {
        hash ^= u32::from(byte);
        hash = hash.wrapping_mul(0x0100_0193);
    }
    (hash % u32::from(RESPONSE_SHARDS)) as u16
}

/// The shard named by a per-request key's tag (`…{r<k>}…`), if it has one.
pub fn shard_of_key(key: &str) -> Option<u16> {
    let open = key.find("{r")?;
    let close = open + key[open..].find('}')?;
    key[open + 2..close]
        .parse()
        .ok()
        .filter(|k| *k < RESPONSE_SHARDS)
}

fn request_key(kind: &str, req_id: &str) -> String {
    format!("sluice:{{r{}}}:{kind}:{req_id}", shard(req_id))
}

/// The response stream.
pub fn response(req_id: &str) -> String {
    request_key("response", req_id)
}

/// Set by the HTTP side when the client went away.
pub fn cancel(req_id: &str) -> String {
    request_key("cancel", req_id)
}

/// How many times the request's stream was resumed (`INCR` by the
/// deferral endpoint at each resume). A waiter whose connection closed
/// cancels the model call only if no resume came after its own within the
/// cancel grace: a proxy's restart looks like a client that left.
pub fn resumed(req_id: &str) -> String {
    request_key("resumed", req_id)
}

/// A terminal entry (`done` or `error`) was written.
pub fn done(req_id: &str) -> String {
    request_key("done", req_id)
}

/// The owner of the running call and its heartbeat.
pub fn processing(req_id: &str) -> String {
    request_key("processing", req_id)
}

/// Held by the consumer from pop until the call ends. The deferral endpoint
/// publishes a request again if it lapses while the request is unclaimed or
/// its claim is dead (this broker never redelivers).
pub fn lease(req_id: &str) -> String {
    request_key("lease", req_id)
}

/// The tenant a request id belongs to. The deferral endpoint sets it once
/// (`SET NX`) when it accepts a request — a second request with the same id
/// is refused — and checks it before a resume.
pub fn owner(req_id: &str) -> String {
    request_key("owner", req_id)
}

/// A stream reader's wake-up stream: in `shard`'s slot, so a reader that
/// reads one shard's streams can wait on it in the same `XREAD`.
pub fn wake(shard: u16, instance: &str) -> String {
    format!("sluice:{{r{shard}}}:wake:{instance}")
}

/// Bucket bookkeeping keys share the `{buckets}` hash tag: the consumer
/// retires an idle bucket with one script over several of them, which must
/// stay on one Redis Cluster slot. They are touched once per publish and per
/// pop, small next to the per-request traffic.
///
/// The Redis set of known buckets (LiteTopic names): the endpoint adds, the
/// consumers subscribe to what is in it.
pub const BUCKETS: &str = "sluice:{buckets}";

/// Sorted set: bucket → time of its last publish (ms). Idle buckets are
/// retired from it and from [`BUCKETS`].
pub const ACTIVITY: &str = "sluice:{buckets}:activity";

/// Sorted set: consumer instance id → its last heartbeat (ms).
pub const CONSUMERS: &str = "sluice:{buckets}:consumers";

/// Set by a consumer once it is subscribed to `lite_topic`; deleted when
/// the bucket is retired.
pub fn subscribed(lite_topic: &str) -> String {
    format!("sluice:{{buckets}}:subscribed:{lite_topic}")
}

/// Queued requests of a bucket: the endpoint counts up at publish, the
/// consumer down at pop.
pub fn backlog(lite_topic: &str) -> String {
    format!("sluice:{{buckets}}:backlog:{lite_topic}")
}

/// Sorted set of low-priority requests of a bucket between the endpoint's
/// backlog check and their publish (request id, scored by the check's time
/// in ms): counted with [`backlog`] so that concurrent checks never admit
/// more than the cap. Written by the endpoint only.
pub fn low_pending(lite_topic: &str) -> String {
    format!("sluice:{{buckets}}:low_pending:{lite_topic}")
}

/// Body bytes `tenant` published to the broker in the clock minute
/// `minute` (Unix ms / 60,000). Written by the endpoint only.
pub fn deferred_bytes(tenant: &str, minute: u64) -> String {
    format!("sluice:deferred_bytes:{{{tenant}}}:{minute}")
}

/// Set while a consumer deletes a retired bucket's queue at the broker
/// (between the retire script and the broker's answer): the endpoint does
/// not publish to the bucket meanwhile, since the delete would take the
/// message with it. Expires after [`RECLAIM_MARK_TTL_MS`] should the
/// consumer die half-way.
pub fn reclaiming(lite_topic: &str) -> String {
    format!("sluice:{{buckets}}:reclaiming:{lite_topic}")
}

/// Lifetime of a [`reclaiming`] mark, ms: above the two broker requests of a
/// reclaim (3 s timeout each).
pub const RECLAIM_MARK_TTL_MS: u64 = 10_000;

/// Hash: bucket (LiteTopic) → its tenant (sanitized). Written by the
/// endpoint's bucket caps when it adds a bucket to [`BUCKETS`]; read and
/// dropped by the retire script, which counts the tenant down.
pub const BUCKET_TENANTS: &str = "sluice:{buckets}:owners";

/// Hash: tenant (sanitized) → how many of its buckets are in [`BUCKETS`]
/// (the per-tenant cap). A tenant's field is dropped at zero.
pub const TENANT_BUCKET_COUNTS: &str = "sluice:{buckets}:per-tenant";

/// Buckets created in one minute (`unix_ms / 60_000`): the per-minute cap.
/// Expires two minutes after its window started.
pub fn created_in_minute(minute: u64) -> String {
    format!("sluice:{{buckets}}:created:{minute}")
}

/// The adaptive concurrency controller of a model (consumer): a hash with
/// the current limit, an operator's override and the overload answers
/// counted since the last step. Every key of one model's controller shares
/// the `{ctl:<model>}` hash tag (one Redis Cluster slot per model, so the
/// models spread over the masters).
pub fn controller(model: &str) -> String {
    format!("sluice:{{ctl:{}}}", sanitize(model))
}

/// Who steps `model`'s controller this interval: `SET NX PX` by one
/// consumer instance (see [`controller`]).
pub fn controller_lease(model: &str) -> String {
    format!("sluice:{{ctl:{}}}:lease", sanitize(model))
}

/// Hash: tenant (unsanitized) → its fair-share weight, set at run time
/// through the consumer's admin API; read by every consumer instance.
pub const FAIR_WEIGHTS: &str = "sluice:{fair}:weights";

/// Longest sanitized name component; longer names are shortened with a hash.
pub const MAX_COMPONENT_LEN: usize = 64;

/// A name made safe for Redis keys, metric labels and hash fields: bytes
/// outside `[A-Za-z0-9._-]` are percent-encoded (so the mapping is
/// injective: two different names never share a bucket), and results longer
/// than [`MAX_COMPONENT_LEN`] become a readable prefix, `~`, and the SHA-1 of
/// the whole name (`~` cannot occur in an encoded name, so a shortened name
/// never equals an unshortened one). The result never contains `{`, `}`,
/// `:`, `*` or whitespace.
pub fn sanitize(name: &str) -> String {
    let mut out = String::with_capacity(name.len());
    for byte in name.bytes() {
        if byte.is_ascii_alphanumeric() || matches!(byte, b'.' | b'_' | b'-') {
            out.push(byte as char);
        } else {
            let _ = write!(out, "%{byte:02X}");
        }
    }
    if out.is_empty() {
        // The empty name is distinct from every other: "%" alone never
        // results from encoding.
        return "%".into();
    }
    if out.len() <= MAX_COMPONENT_LEN {
        return out;
    }
    let digest = sha1_smol::Sha1::from(name.as_bytes()).digest().to_string();
    let keep = MAX_COMPONENT_LEN - 1 - digest.len();
    // `out` is ASCII, so any byte index is a char boundary.
    format!("{}~{}", &out[..keep], digest)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn request_keys_share_the_hash_tag() {
        let k = shard("abc");
        assert_eq!(response("abc"), format!("sluice:{{r{k}}}:response:abc"));
        assert_eq!(cancel("abc"), format!("sluice:{{r{k}}}:cancel:abc"));
        assert_eq!(done("abc"), format!("sluice:{{r{k}}}:done:abc"));
        assert_eq!(processing("abc"), format!("sluice:{{r{k}}}:processing:abc"));
        assert_eq!(lease("abc"), format!("sluice:{{r{k}}}:lease:abc"));
        assert_eq!(owner("abc"), format!("sluice:{{r{k}}}:owner:abc"));
        assert_eq!(shard_of_key(&response("abc")), Some(k));
        assert_eq!(shard_of_key(&wake(k, "x")), Some(k));
        assert_eq!(shard_of_key("sluice:{buckets}"), None);
    }

    #[test]
    fn shards_are_stable_and_spread() {
        // Fixed values: the shard function is part of the key layout.
        assert_eq!(shard(""), (0x811c_9dc5u32 % 16) as u16);
        assert_eq!(shard("a"), (0xe40c_292cu32 % 16) as u16);
        let mut counts = [0u32; RESPONSE_SHARDS as usize];
        for i in 0..16_000 {
            counts[usize::from(shard(&format!("{i:032x}")))] += 1;
        }
        let (min, max) = (counts.iter().min().unwrap(), counts.iter().max().unwrap());
        assert!(*min > 800 && *max < 1200, "{counts:?}");
    }

    #[test]
    fn sanitize_is_safe_and_injective() {
        assert_eq!(sanitize("acme-corp_1.x"), "acme-corp_1.x");
        assert_eq!(sanitize("a b"), "a%20b");
        assert_eq!(sanitize("a%20b"), "a%2520b");
        assert_eq!(sanitize("{evil}:*"), "%7Bevil%7D%3A%2A");
        assert_eq!(sanitize(""), "%");
        assert_ne!(sanitize("A"), sanitize("a"));
        let long = "t".repeat(500);
        let short = sanitize(&long);
        assert_eq!(short.len(), MAX_COMPONENT_LEN);
        assert!(short.contains('~'));
        assert_ne!(short, sanitize(&"t".repeat(501)));
        for name in ["ünïcødé", "x}y", "a\u{0}b", &long] {
            let s = sanitize(name);
            assert!(s.len() <= MAX_COMPONENT_LEN);
            assert!(!s.contains(['{', '}', ':', '*', ' ']), "{s}");
        }
    }

    #[test]
    fn a_models_controller_keys_share_one_slot() {
        assert_eq!(controller("llama 3"), "sluice:{ctl:llama%203}");
        assert_eq!(controller_lease("llama 3"), "sluice:{ctl:llama%203}:lease");
        // A model name cannot break out of the tag.
        assert_eq!(controller("}x{"), "sluice:{ctl:%7Dx%7B}");
    }
}
