//! Store key layouts: Sluice's own (the default), or envoyproxy/ratelimit's
//! ([`KeyLayout::Upstream`]) so that both can share counters while a
//! migration runs them side by side.
//!
//! Sluice's: `sluice:{<domain>/<k1>=<v1>}:<unit>:<window start>:<k1>=<v1>/<k2>=<v2>...`
//!
//! * The hash tag is the domain and the descriptor's first entry (in Sluice's
//!   descriptors, the tenant): different tenants land on different Redis
//!   Cluster slots, while every counter of one ordinary request (the
//!   tenant's requests and tokens, per model) shares one slot, so its
//!   decision stays one atomic script call. A decision whose descriptors
//!   start differently spans slots; the Redis store then decides per slot
//!   (see `store::redis`). Config validation keeps braces out of domains;
//!   entries are encoded below, so no value can open or close a tag.
//! * Keys and values come from requests, so they are percent-encoded: a hostile
//!   value cannot forge a separator, a hash tag or another descriptor's key.
//! * Unit and window start are part of the key: a window never reads another's
//!   counter, and a reload that changes a unit starts fresh counters.

use crate::window::{Unit, Window};
use std::fmt::Write;

/// How counter keys are spelled.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub enum KeyLayout {
    /// [`counter_key`]: hash-tagged per tenant, keys and values encoded.
    #[default]
    Sluice,
    /// envoyproxy/ratelimit's [`upstream_key`], with its `CACHE_KEY_PREFIX`.
    Upstream { prefix: String },
}

impl KeyLayout {
    /// The key of the counter over `entries` in `window` of `unit`.
    pub fn key<'a, I>(&self, domain: &str, entries: I, unit: Unit, window: Window) -> String
    where
        I: IntoIterator<Item = (&'a str, &'a str)>,
    {
        match self {
            KeyLayout::Sluice => counter_key(domain, entries, unit, window),
            KeyLayout::Upstream { prefix } => upstream_key(prefix, domain, entries, window),
        }
    }
}

/// The `--key-layout` values.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, clap::ValueEnum)]
pub enum KeyLayoutName {
    #[default]
    Sluice,
    Upstream,
}

/// The flags of the counter keys and their expiry, flattened into
/// sluice-rls's command line.
#[derive(Clone, Debug, Default, clap::Args)]
pub struct KeyArgs {
    /// `sluice`: Sluice's keys (one Redis Cluster slot per tenant, values
    /// encoded); `upstream`: envoyproxy/ratelimit's, so that both share
    /// counters during a migration.
    #[arg(long, env = "SLUICE_RLS_KEY_LAYOUT", value_enum, default_value = "sluice")]
    pub key_layout: KeyLayoutName,

    /// Prefix of every key in the `upstream` layout (CACHE_KEY_PREFIX).
    #[arg(long, env = "SLUICE_RLS_CACHE_KEY_PREFIX", default_value = "")]
    pub cache_key_prefix: String,

    /// Up to this many seconds, chosen at random, added to the expiry of each
    /// counter created, so that keys created together do not expire together
    /// (EXPIRATION_JITTER_MAX_SECONDS). 0: none.
    #[arg(long, env = "SLUICE_RLS_EXPIRATION_JITTER_MAX_S", default_value_t = 0)]
    pub expiration_jitter_max_s: u64,
}

impl KeyArgs {
    pub fn options(&self) -> KeyOptions {
        KeyOptions {
            layout: match self.key_layout {
                KeyLayoutName::Sluice => KeyLayout::Sluice,
                KeyLayoutName::Upstream => KeyLayout::Upstream {
                    prefix: self.cache_key_prefix.clone(),
                },
            },
            expiration_jitter_max_secs: self.expiration_jitter_max_s,
        }
    }
}

/// The counter keys' layout and expiry.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct KeyOptions {
    pub layout: KeyLayout,
    /// Expiry jitter: `[0, max)` seconds more, as upstream's `Int63n(max)`.
    pub expiration_jitter_max_secs: u64,
}

impl KeyOptions {
    /// A random extra expiry in `[0, max)` seconds (0 when off).
    pub fn expiration_jitter_secs(&self) -> u64 {
        match self.expiration_jitter_max_secs {
            0 => 0,
            max => getrandom::u64().unwrap_or(0) % max,
        }
    }
}

/// envoyproxy/ratelimit's key (`GenerateCacheKey` in
/// `src/limiter/cache_key.go`): `<prefix><domain>_` then `<key>_<value>_` for
/// each entry, then the window start in Unix seconds. Values are written as
/// they come (`share_threshold` entries as their pattern), so, as upstream,
/// `a_b=c` and `a=b_c` share a counter, and no hash tag keeps a request's
/// counters in one Redis Cluster slot (a decision over several slots is decided
/// per slot, see `store::redis`).
pub fn upstream_key<'a, I>(prefix: &str, domain: &str, entries: I, window: Window) -> String
where
    I: IntoIterator<Item = (&'a str, &'a str)>,
{
    let mut key = String::with_capacity(prefix.len() + domain.len() + 48);
    key.push_str(prefix);
    key.push_str(domain);
    key.push('_');
    for (k, v) in entries {
        key.push_str(k);
        key.push('_');
        key.push_str(v);
        key.push('_');
    }
    key.push_str(itoa::Buffer::new().format(window.start));
    key
}

pub fn counter_key<'a, I>(domain: &str, entries: I, unit: Unit, window: Window) -> String
where
    I: IntoIterator<Item = (&'a str, &'a str)>,
{
    let mut body = String::with_capacity(48);
    let mut first_entry_end = 0;
    for (index, (k, v)) in entries.into_iter().enumerate() {
        if index > 0 {
            body.push('/');
        }
        encode_into(&mut body, k);
        body.push('=');
        encode_into(&mut body, v);
        if index == 0 {
            first_entry_end = body.len();
        }
    }
    let mut key = String::with_capacity(body.len() + first_entry_end + domain.len() + 32);
    key.push_str("sluice:{");
    key.push_str(domain);
    key.push('/');
    key.push_str(&body[..first_entry_end]);
    key.push_str("}:");
    key.push_str(unit.as_str());
    key.push(':');
    key.push_str(itoa::Buffer::new().format(window.start));
    key.push(':');
    key.push_str(&body);
    key
}

/// The hash tag of a key, as Redis Cluster reads it (the text between the
/// first `{` and the first `}` after it, if not empty; else the whole key):
/// keys with equal tags are in one slot. An upstream-layout key has a tag
/// only if a domain or value carries braces.
pub fn hash_tag(key: &str) -> &str {
    let Some(open) = key.find('{') else {
        return key;
    };
    match key[open + 1..].find('}') {
        Some(length) if length > 0 => &key[open + 1..open + 1 + length],
        _ => key,
    }
}

fn encode_into(out: &mut String, text: &str) {
    for byte in text.bytes() {
        if byte.is_ascii_alphanumeric() || matches!(byte, b'-' | b'_' | b'.' | b'~') {
            out.push(byte as char);
        } else {
            let _ = write!(out, "%{byte:02X}");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The key of domain `llm`'s counter over `entries` for the `unit`
    /// window containing `at_ms`.
    fn llm_key(entries: &[(&str, &str)], unit: Unit, at_ms: u64) -> String {
        counter_key(
            "llm",
            entries.iter().copied(),
            unit,
            Window::containing(unit, at_ms),
        )
    }

    #[test]
    fn keys_carry_tag_unit_window_and_entries() {
        let key = llm_key(
            &[("tenant", "acme"), ("model", "gpt-4o")],
            Unit::Minute,
            125_000,
        );
        assert_eq!(
            key,
            "sluice:{llm/tenant=acme}:minute:120:tenant=acme/model=gpt-4o"
        );
        assert_eq!(hash_tag(&key), "llm/tenant=acme");
    }

    #[test]
    fn one_tenants_counters_share_a_tag_and_tenants_differ() {
        let requests = llm_key(&[("tenant", "a"), ("model", "m")], Unit::Minute, 0);
        let tokens = llm_key(
            &[("tenant", "a"), ("model", "m"), ("tokens", "1")],
            Unit::Hour,
            0,
        );
        let other = llm_key(&[("tenant", "b"), ("model", "m")], Unit::Minute, 0);
        assert_eq!(hash_tag(&requests), hash_tag(&tokens));
        assert_ne!(hash_tag(&requests), hash_tag(&other));
    }

    #[test]
    fn upstream_keys_are_upstreams() {
        // upstream's test/redis/fixed_cache_impl_test.go spells them so:
        // `domain_key_value_<window start>`, with CACHE_KEY_PREFIX in front.
        let window = Window::containing(Unit::Second, 1_234_000);
        let layout = KeyLayout::Upstream {
            prefix: String::new(),
        };
        assert_eq!(
            layout.key("domain", [("key", "value")], Unit::Second, window),
            "domain_key_value_1234"
        );
        let window = Window::containing(Unit::Minute, 1_234_000);
        assert_eq!(
            layout.key(
                "domain",
                [("key2", "value2"), ("subkey2", "subvalue2")],
                Unit::Minute,
                window
            ),
            "domain_key2_value2_subkey2_subvalue2_1200"
        );
        let layout = KeyLayout::Upstream {
            prefix: "prefix:".into(),
        };
        assert_eq!(
            layout.key(
                "domain",
                [("key", "value"), ("k2", "")],
                Unit::Minute,
                window
            ),
            "prefix:domain_key_value_k2__1200"
        );
        assert_eq!(hash_tag("domain_key_value_1200"), "domain_key_value_1200");
    }

    #[test]
    fn hash_tags_are_read_as_redis_reads_them() {
        assert_eq!(hash_tag("a}b{c}d"), "c");
        assert_eq!(hash_tag("a{}b{c}"), "a{}b{c}", "an empty first tag: no tag");
        assert_eq!(hash_tag("a{b"), "a{b");
    }

    #[test]
    fn jitter_stays_below_its_maximum() {
        let off = KeyOptions::default();
        assert_eq!(off.expiration_jitter_secs(), 0);
        let on = KeyOptions {
            expiration_jitter_max_secs: 3,
            ..Default::default()
        };
        let draws: Vec<u64> = (0..200).map(|_| on.expiration_jitter_secs()).collect();
        assert!(draws.iter().all(|&j| j < 3), "{draws:?}");
        assert!(draws.iter().any(|&j| j > 0), "{draws:?}");
    }

    #[test]
    fn hostile_values_cannot_collide_or_forge_tags() {
        let window = Window::containing(Unit::Second, 0);
        let forged = counter_key("d", [("a", "x/b=y")], Unit::Second, window);
        let honest = counter_key("d", [("a", "x"), ("b", "y")], Unit::Second, window);
        assert_ne!(forged, honest);
        let braces = counter_key("d", [("a", "{other}")], Unit::Second, window);
        assert_eq!(braces, "sluice:{d/a=%7Bother%7D}:second:0:a=%7Bother%7D");
        assert_eq!(hash_tag(&braces), "d/a=%7Bother%7D");
        let utf8 = counter_key("d", [("a", "é\n")], Unit::Second, window);
        assert_eq!(utf8, "sluice:{d/a=%C3%A9%0A}:second:0:a=%C3%A9%0A");
    }
}
