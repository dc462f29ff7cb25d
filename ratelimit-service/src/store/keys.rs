//! Store key layout.
//!
//! `sluice:{<domain>/<k1>=<v1>}:<unit>:<window start>:<k1>=<v1>/<k2>=<v2>...`
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
    let _ = write!(key, "}}:{}:{}:", unit.as_str(), window.start);
    key.push_str(&body);
    key
}

/// The hash tag of a key made by [`counter_key`]: keys with equal tags are
/// in one Redis Cluster slot.
pub fn hash_tag(key: &str) -> &str {
    match (key.find('{'), key.find('}')) {
        (Some(open), Some(close)) if close > open + 1 => &key[open + 1..close],
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
