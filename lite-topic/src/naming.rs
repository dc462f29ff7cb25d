//! Names: the LiteTopic of a (tenant, model) pair, and the checks every name
//! sent to the broker goes through.
//!
//! The rocketmq-rust broker does not check a LiteTopic name at all: it files
//! the message under the queue `%LMQ%$<parent>$<lite>`, and that queue name
//! becomes a directory name in the store. A `/`, a `$`, a `,` (the
//! multi-dispatch separator) or a control character would break the store or
//! the routing, so this crate only ever sends names made of `[A-Za-z0-9_-]`,
//! bounded so that the queue name stays within RocketMQ's 127-byte topic limit.

use sha2::{Digest, Sha256};

use crate::error::LiteError;

/// Longest LiteTopic name this crate sends (Apache RocketMQ's own lite-topic
/// limit is 64 as well).
pub const MAX_LITE_TOPIC_LEN: usize = 64;

/// Longest parent topic: `%LMQ%$` (6) + parent + `$` + 64 stays under 127.
pub const MAX_PARENT_TOPIC_LEN: usize = 48;

/// RocketMQ's limit for topic and group names.
pub const MAX_GROUP_LEN: usize = 127;

/// Hex digits of the SHA-256 suffix (64 bits) in a hashed name.
const HASH_HEX_LEN: usize = 16;

/// Separator between the tenant part and the model part (and before the hash).
/// A clean part never contains it, which is what makes names unambiguous.
const SEP: char = '_';

/// The broker's queue of a LiteTopic: `%LMQ%$<parent>$<lite>` (also its
/// directory name in the store's `consumequeue/`).
pub(crate) fn lmq_name(parent: &str, lite_topic: &str) -> String {
    format!("%LMQ%${parent}${lite_topic}")
}

/// The LiteTopic for `(tenant, model)`.
///
/// * When both parts are already clean, lowercase `[a-z0-9-]+`, and fit, the
///   name is `tenant_model` (exactly one `_`): readable, and the pair is
///   recovered by splitting at the `_`.
/// * Otherwise the name is `t_m_h` (exactly two `_`): `t` and `m` are the
///   parts lowercased, with every run of other characters turned into one `-`,
///   trimmed, and cut so the whole fits in [`MAX_LITE_TOPIC_LEN`]; `h` is 16
///   hex digits of SHA-256 over the exact pair (length-prefixed, so
///   `("ab", "c")` and `("a", "bc")` differ).
///
/// So two different pairs never get the same name: clean names differ by
/// their parts, hashed names by their hash (a 64-bit SHA-256 prefix: a chosen
/// tenant name hitting a given other tenant's name is a second-preimage
/// search), and a clean name never equals a hashed one (one `_` against two).
/// The result always passes [`validate_lite_topic`].
pub fn lite_topic_name(tenant: &str, model: &str) -> String {
    if is_clean(tenant) && is_clean(model) && tenant.len() + 1 + model.len() <= MAX_LITE_TOPIC_LEN {
        return format!("{tenant}{SEP}{model}");
    }
    let hash = pair_hash(tenant, model);
    // Room for the two readable parts: total minus the hash and two separators.
    let room = MAX_LITE_TOPIC_LEN - HASH_HEX_LEN - 2;
    let mut t = sanitize(tenant);
    let mut m = sanitize(model);
    if t.is_empty() {
        t.push('x');
    }
    if m.is_empty() {
        m.push('x');
    }
    // Share the room: each part gets half, a short part leaves its rest to
    // the other.
    let half = room / 2;
    let t_len = t.len().min(half.max(room.saturating_sub(m.len())));
    let m_len = m.len().min(room - t_len);
    truncate_part(&mut t, t_len);
    truncate_part(&mut m, m_len);
    format!("{t}{SEP}{m}{SEP}{hash}")
}

/// Check a LiteTopic name before it goes to the broker: 1 to
/// [`MAX_LITE_TOPIC_LEN`] characters of `[A-Za-z0-9_-]`.
pub fn validate_lite_topic(name: &str) -> Result<(), LiteError> {
    check_name("LiteTopic", name, MAX_LITE_TOPIC_LEN)
}

/// Check a parent topic name: 1 to [`MAX_PARENT_TOPIC_LEN`] characters of
/// `[A-Za-z0-9_-]`.
pub fn validate_parent_topic(name: &str) -> Result<(), LiteError> {
    check_name("parent topic", name, MAX_PARENT_TOPIC_LEN)
}

/// Check a consumer or producer group name: 1 to [`MAX_GROUP_LEN`]
/// characters of `[A-Za-z0-9_-]`.
pub fn validate_group(name: &str) -> Result<(), LiteError> {
    check_name("group", name, MAX_GROUP_LEN)
}

/// The lane of LiteTopic `lite_topic` among `lanes` (handles, producers):
/// the same for every call about a LiteTopic while the process runs, so its
/// calls keep their order, and spread evenly over LiteTopics.
pub fn lane_of(lite_topic: &str, lanes: usize) -> usize {
    use std::hash::{Hash, Hasher};
    // Fixed keys: the lane must not change while the process runs.
    let mut hasher = std::collections::hash_map::DefaultHasher::new();
    lite_topic.hash(&mut hasher);
    (hasher.finish() % lanes.max(1) as u64) as usize
}

fn check_name(what: &str, name: &str, max: usize) -> Result<(), LiteError> {
    if name.is_empty() || name.len() > max {
        return Err(LiteError::InvalidArgument(format!(
            "{what} name must have 1 to {max} characters, got {}",
            name.len()
        )));
    }
    if let Some(bad) = name
        .chars()
        .find(|c| !(c.is_ascii_alphanumeric() || *c == '_' || *c == '-'))
    {
        return Err(LiteError::InvalidArgument(format!(
            "{what} name {name:?} has the character {bad:?}; only [A-Za-z0-9_-] is allowed"
        )));
    }
    Ok(())
}

fn is_clean(part: &str) -> bool {
    !part.is_empty()
        && part
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
}

/// Lowercase ASCII letters and digits kept, every run of anything else one `-`,
/// no `-` at either end.
fn sanitize(part: &str) -> String {
    let mut out = String::with_capacity(part.len());
    for c in part.chars() {
        let c = c.to_ascii_lowercase();
        if c.is_ascii_lowercase() || c.is_ascii_digit() {
            out.push(c);
        } else if !out.ends_with('-') {
            out.push('-');
        }
    }
    out.trim_matches('-').to_owned()
}

fn truncate_part(part: &mut String, len: usize) {
    // ASCII only after sanitize, so any index is a char boundary.
    part.truncate(len);
    while part.ends_with('-') {
        part.pop();
    }
    if part.is_empty() {
        part.push('x');
    }
}

fn pair_hash(tenant: &str, model: &str) -> String {
    let mut hasher = Sha256::new();
    hasher.update((tenant.len() as u64).to_be_bytes());
    hasher.update(tenant.as_bytes());
    hasher.update(model.as_bytes());
    let digest = hasher.finalize();
    let mut hex = String::with_capacity(HASH_HEX_LEN);
    for byte in digest.iter().take(HASH_HEX_LEN / 2) {
        hex.push_str(&format!("{byte:02x}"));
    }
    hex
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashSet;

    #[test]
    fn a_lite_topic_keeps_its_lane_and_lite_topics_spread_over_the_lanes() {
        let mut per_lane = [0usize; 4];
        for bucket in 0..1000 {
            let topic = lite_topic_name(&format!("tenant-{bucket}"), "gpt-4o");
            let lane = lane_of(&topic, 4);
            assert_eq!(lane, lane_of(&topic, 4));
            per_lane[lane] += 1;
        }
        // 250 each on average; a skewed hash would leave a lane idle.
        assert!(
            per_lane.iter().all(|n| (180..=320).contains(n)),
            "{per_lane:?}"
        );
        assert_eq!(lane_of("any", 1), 0);
        assert_eq!(lane_of("any", 0), 0);
    }

    #[test]
    fn lmq_names_are_the_brokers() {
        assert_eq!(
            Some(lmq_name("sluice-deferred", "acme_gpt-4o")),
            rocketmq_model::lite::to_lmq_name("sluice-deferred", "acme_gpt-4o")
        );
    }

    #[test]
    fn clean_pairs_stay_readable() {
        assert_eq!(lite_topic_name("acme", "gpt-4o"), "acme_gpt-4o");
        assert_eq!(lite_topic_name("t1", "llama-3-8b"), "t1_llama-3-8b");
    }

    #[test]
    fn anything_else_gets_a_readable_prefix_and_a_hash() {
        let name = lite_topic_name("Acme Corp", "meta-llama/Llama-3.1-8B");
        assert!(
            name.starts_with("acme-corp_meta-llama-llama-3-1-8b_"),
            "{name}"
        );
        assert_eq!(name.matches('_').count(), 2);
        assert_eq!(name.rsplit('_').next().map(str::len), Some(HASH_HEX_LEN));
        validate_lite_topic(&name).unwrap();
    }

    #[test]
    fn hostile_tenant_names_are_neutralised() {
        for tenant in [
            "../../etc/passwd",
            "a$b",
            "%LMQ%$parent$x",
            "a,b",
            "tab\there",
            "nul\0byte",
            "\u{1}\u{2}",
            "",
            "_",
            "---",
            "a_b",
            " ",
        ] {
            let name = lite_topic_name(tenant, "m");
            validate_lite_topic(&name).unwrap_or_else(|e| panic!("{tenant:?} -> {name}: {e}"));
            assert!(!name.contains('/') && !name.contains('$') && !name.contains(','));
        }
    }

    #[test]
    fn very_long_names_are_bounded_and_still_distinct() {
        let long_a = "a".repeat(10_000);
        let long_b = format!("{}b", "a".repeat(9_999));
        let n1 = lite_topic_name(&long_a, "model");
        let n2 = lite_topic_name(&long_b, "model");
        assert!(n1.len() <= MAX_LITE_TOPIC_LEN && n2.len() <= MAX_LITE_TOPIC_LEN);
        assert_ne!(n1, n2);
        validate_lite_topic(&n1).unwrap();
        // A clean pair just over the limit is hashed, one at the limit is not.
        let t = "t".repeat(30);
        let fits = "m".repeat(MAX_LITE_TOPIC_LEN - 31);
        assert_eq!(lite_topic_name(&t, &fits), format!("{t}_{fits}"));
        let over = format!("{fits}m");
        let hashed = lite_topic_name(&t, &over);
        assert_eq!(hashed.matches('_').count(), 2);
        assert!(hashed.len() <= MAX_LITE_TOPIC_LEN);
        // Long model, short tenant: the tenant keeps all of its characters.
        let n = lite_topic_name("Tenant", &"x".repeat(500));
        assert!(n.starts_with("tenant_xxx"), "{n}");
        assert!(n.len() <= MAX_LITE_TOPIC_LEN);
    }

    #[test]
    fn unicode_is_hashed_not_merged() {
        let a = lite_topic_name("café", "m");
        let b = lite_topic_name("cafe", "m");
        let c = lite_topic_name("caf\u{e9}", "m");
        let d = lite_topic_name("cafe\u{301}", "m"); // decomposed é
        assert_eq!(b, "cafe_m");
        assert_ne!(a, b);
        assert_eq!(a, c);
        assert_ne!(a, d, "different byte sequences are different tenants");
        for n in [&a, &d] {
            validate_lite_topic(n).unwrap();
        }
        let emoji = lite_topic_name("🚀🚀", "模型");
        assert!(emoji.starts_with("x_x_"), "{emoji}");
        validate_lite_topic(&emoji).unwrap();
    }

    #[test]
    fn pairs_that_sanitize_alike_do_not_collide() {
        let pairs = [
            ("a-b", "c"),
            ("a", "b-c"),
            ("a_b", "c"),
            ("a", "b_c"),
            ("A", "b"),
            ("a", "b"),
            ("a.b", "c"),
            ("a/b", "c"),
            ("a b", "c"),
            ("ab", "c"),
            ("a", "bc"),
            ("a_b_0123456789abcdef", "x"),
            ("", "ab"),
            ("ab", ""),
            ("a", "b_0123456789abcdef"),
        ];
        let mut seen = HashSet::new();
        for (t, m) in pairs {
            let name = lite_topic_name(t, m);
            assert!(
                seen.insert(name.clone()),
                "collision on {name} for ({t:?}, {m:?})"
            );
        }
    }

    #[test]
    fn many_random_like_pairs_do_not_collide() {
        let mut seen = HashSet::new();
        for i in 0..5_000u32 {
            let t = format!("Tenant {}", i % 97);
            let m = format!("model/{}", i / 97);
            assert!(seen.insert(lite_topic_name(&t, &m)));
        }
    }

    #[test]
    fn names_are_stable() {
        // The name is a contract between producers and consumers in different
        // binaries: it must never change for a given pair.
        assert_eq!(
            lite_topic_name("Acme", "gpt-4o"),
            format!("acme_gpt-4o_{}", pair_hash("Acme", "gpt-4o"))
        );
        assert_eq!(pair_hash("Acme", "gpt-4o").len(), HASH_HEX_LEN);
        assert_eq!(
            lite_topic_name("Acme", "gpt-4o"),
            lite_topic_name("Acme", "gpt-4o")
        );
    }

    #[test]
    fn validators_refuse_bad_names() {
        assert!(validate_lite_topic("").is_err());
        assert!(validate_lite_topic(&"a".repeat(65)).is_err());
        assert!(validate_lite_topic("a$b").is_err());
        assert!(validate_lite_topic("a/b").is_err());
        assert!(validate_lite_topic("a.b").is_err());
        assert!(validate_lite_topic("A_b-9").is_ok());
        assert!(validate_parent_topic(&"p".repeat(49)).is_err());
        assert!(validate_parent_topic("sluice-deferred").is_ok());
        assert!(validate_group("sluice_consumer").is_ok());
        assert!(validate_group("bad group").is_err());
    }
}
