//! Store key layout.
//!
//! `sluice:{<domain>}:<unit>:<window start>:<k>=<v>/<k>=<v>...`
//!
//! * The domain is the Redis Cluster hash tag: every key of one decision is in
//!   one slot, so the decision script can touch them all atomically. (Config
//!   validation keeps braces out of domains.)
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
    let mut key = String::with_capacity(64);
    key.push_str("sluice:{");
    key.push_str(domain);
    let _ = write!(key, "}}:{}:{}:", unit.as_str(), window.start);
    for (index, (k, v)) in entries.into_iter().enumerate() {
        if index > 0 {
            key.push('/');
        }
        encode_into(&mut key, k);
        key.push('=');
        encode_into(&mut key, v);
    }
    key
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

    #[test]
    fn keys_carry_tag_unit_window_and_entries() {
        let window = Window::containing(Unit::Minute, 125_000);
        let key = counter_key(
            "llm",
            [("tenant", "acme"), ("model", "gpt-4o")],
            Unit::Minute,
            window,
        );
        assert_eq!(key, "sluice:{llm}:minute:120:tenant=acme/model=gpt-4o");
    }

    #[test]
    fn hostile_values_cannot_collide_or_forge_tags() {
        let window = Window::containing(Unit::Second, 0);
        let forged = counter_key("d", [("a", "x/b=y")], Unit::Second, window);
        let honest = counter_key("d", [("a", "x"), ("b", "y")], Unit::Second, window);
        assert_ne!(forged, honest);
        let braces = counter_key("d", [("a", "{other}")], Unit::Second, window);
        assert_eq!(braces, "sluice:{d}:second:0:a=%7Bother%7D");
        let utf8 = counter_key("d", [("a", "é\n")], Unit::Second, window);
        assert_eq!(utf8, "sluice:{d}:second:0:a=%C3%A9%0A");
    }
}
