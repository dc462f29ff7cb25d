//! Pure, deterministic helpers: approximate token counting, the generated
//! text, pseudo-random draws and embedding vectors.
//!
//! Everything here depends only on its arguments, so tests (in this crate and
//! in others) can compute exactly what the simulator answers.

/// The words the simulator "generates", in order: token `i` is
/// `WORDS[i % WORDS.len()]`, with a leading space for every token but the
/// first (as real BPE tokens carry their leading space).
pub const WORDS: [&str; 32] = [
    "the", "quick", "brown", "fox", "jumps", "over", "a", "lazy", "dog", "while", "seven", "tired",
    "models", "stream", "tokens", "to", "patient", "clients", "behind", "one", "busy", "gateway",
    "and", "every", "request", "waits", "its", "turn", "for", "scarce", "GPU", "time",
];

/// Approximate token count of a text: one token per started 4 bytes of UTF-8
/// (OpenAI's rule of thumb for English). Empty text is 0 tokens.
pub fn approx_tokens(text: &str) -> u64 {
    (text.len() as u64).div_ceil(4)
}

/// Prompt tokens of a chat request: 3 per message plus the message content,
/// plus 3 for priming the reply (the overhead OpenAI documents for its chat
/// format), with contents counted by [`approx_tokens`].
pub fn chat_prompt_tokens<'a>(contents: impl IntoIterator<Item = &'a str>) -> u64 {
    3 + contents
        .into_iter()
        .map(|content| 3 + approx_tokens(content))
        .sum::<u64>()
}

/// Text of generated token `index` (0-based).
pub fn token_text(index: u64) -> String {
    let word = WORDS[(index % WORDS.len() as u64) as usize];
    if index == 0 {
        word.to_string()
    } else {
        format!(" {word}")
    }
}

/// The whole text of a completion of `tokens` tokens: what a client gets by
/// concatenating the streamed deltas, or in `message.content`.
pub fn completion_text(tokens: u64) -> String {
    (0..tokens).map(token_text).collect()
}

/// The pieces of a tool call's `arguments` of `tokens` tokens, one token
/// each, as a model streams them: `{"query":"` then the generated words,
/// closed by `"}` (a cut that leaves fewer than four tokens is truncated
/// JSON, as a model cut by `max_tokens` sends).
pub fn tool_arguments(tokens: u64) -> Vec<String> {
    const OPEN: [&str; 3] = ["{\"", "query", "\":\""];
    const CLOSE: &str = "\"}";
    let tokens = usize::try_from(tokens).unwrap_or(usize::MAX);
    if tokens < OPEN.len() + 1 {
        return OPEN.iter().take(tokens).map(|p| p.to_string()).collect();
    }
    let words = (tokens - OPEN.len() - 1) as u64;
    OPEN.iter()
        .map(|p| p.to_string())
        .chain((0..words).map(token_text))
        .chain(std::iter::once(CLOSE.to_string()))
        .collect()
}

/// Tokens of a tool call's function name (sent whole in its first delta):
/// [`approx_tokens`], at least one.
pub fn tool_name_tokens(name: &str) -> u64 {
    approx_tokens(name).max(1)
}

/// SplitMix64: a tiny, well-mixed deterministic generator step.
pub fn splitmix64(x: u64) -> u64 {
    let mut z = x.wrapping_add(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// A uniform draw in `[0, 1)` from a 64-bit value.
pub fn unit_f64(x: u64) -> f64 {
    (x >> 11) as f64 / (1u64 << 53) as f64
}

/// The `k`-th deterministic draw in `[0, 1)` of the sequence seeded by `seed`.
pub fn draw(seed: u64, k: u64) -> f64 {
    unit_f64(splitmix64(seed ^ splitmix64(k)))
}

/// FNV-1a, 64 bits.
pub fn fnv1a64(bytes: &[u8]) -> u64 {
    let mut hash: u64 = 0xCBF2_9CE4_8422_2325;
    for byte in bytes {
        hash ^= u64::from(*byte);
        hash = hash.wrapping_mul(0x0000_0100_0000_01B3);
    }
    hash
}

/// A deterministic unit-length embedding of `dimensions` floats for an input
/// identified by `key` (a hash of its text or tokens).
pub fn embedding(key: u64, dimensions: usize) -> Vec<f32> {
    let raw: Vec<f64> = (0..dimensions as u64)
        .map(|j| unit_f64(splitmix64(key ^ splitmix64(j))) * 2.0 - 1.0)
        .collect();
    let norm = raw.iter().map(|v| v * v).sum::<f64>().sqrt();
    raw.iter()
        .map(|v| if norm > 0.0 { (v / norm) as f32 } else { 0.0 })
        .collect()
}

/// Standard base64 (RFC 4648, with padding).
pub fn base64_encode(bytes: &[u8]) -> String {
    const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = String::with_capacity(bytes.len().div_ceil(3) * 4);
    for chunk in bytes.chunks(3) {
        let b = [
            chunk[0],
            chunk.get(1).copied().unwrap_or(0),
            chunk.get(2).copied().unwrap_or(0),
        ];
        let n = (u32::from(b[0]) << 16) | (u32::from(b[1]) << 8) | u32::from(b[2]);
        for (i, shift) in [18u32, 12, 6, 0].into_iter().enumerate() {
            if i <= chunk.len() {
                out.push(char::from(ALPHABET[((n >> shift) & 63) as usize]));
            } else {
                out.push('=');
            }
        }
    }
    out
}

/// An embedding as OpenAI's `encoding_format: "base64"` sends it: the
/// little-endian bytes of the f32 values, base64-encoded.
pub fn embedding_base64(vector: &[f32]) -> String {
    let bytes: Vec<u8> = vector.iter().flat_map(|v| v.to_le_bytes()).collect();
    base64_encode(&bytes)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn approx_tokens_counts_started_quads_of_bytes() {
        assert_eq!(approx_tokens(""), 0);
        assert_eq!(approx_tokens("a"), 1);
        assert_eq!(approx_tokens("abcd"), 1);
        assert_eq!(approx_tokens("abcde"), 2);
        assert_eq!(approx_tokens("héllo"), 2); // 6 bytes
    }

    #[test]
    fn chat_prompt_tokens_adds_per_message_overhead() {
        assert_eq!(chat_prompt_tokens([]), 3);
        assert_eq!(chat_prompt_tokens(["Hello there!"]), 3 + 3 + 3);
        assert_eq!(chat_prompt_tokens(["", "abcdefgh"]), 3 + 3 + 3 + 2);
    }

    #[test]
    fn completion_text_is_the_concatenated_tokens() {
        assert_eq!(completion_text(0), "");
        assert_eq!(completion_text(1), "the");
        assert_eq!(completion_text(4), "the quick brown fox");
        let long = completion_text(40);
        assert_eq!(long.split(' ').count(), 40);
        assert!(long.ends_with(" the quick brown fox jumps over a lazy"));
        assert_eq!(token_text(32), " the");
    }

    #[test]
    fn tool_arguments_are_one_token_per_piece() {
        assert!(tool_arguments(0).is_empty());
        assert_eq!(tool_arguments(2).concat(), "{\"query");
        assert_eq!(tool_arguments(4).concat(), "{\"query\":\"\"}");
        assert_eq!(tool_arguments(6).concat(), "{\"query\":\"the quick\"}");
        assert_eq!(tool_arguments(50).len(), 50);
        assert_eq!(tool_name_tokens(""), 1);
        assert_eq!(tool_name_tokens("get_time"), 2);
    }

    #[test]
    fn draws_are_deterministic_and_spread() {
        let a: Vec<f64> = (0..1000).map(|k| draw(42, k)).collect();
        let b: Vec<f64> = (0..1000).map(|k| draw(42, k)).collect();
        assert_eq!(a, b);
        assert!(a.iter().all(|v| (0.0..1.0).contains(v)));
        let below_half = a.iter().filter(|v| **v < 0.5).count();
        assert!((400..600).contains(&below_half), "{below_half}");
        let other: Vec<f64> = (0..1000).map(|k| draw(43, k)).collect();
        assert_ne!(a, other);
    }

    #[test]
    fn embeddings_are_deterministic_unit_vectors() {
        let a = embedding(fnv1a64(b"hello"), 16);
        assert_eq!(a, embedding(fnv1a64(b"hello"), 16));
        assert_ne!(a, embedding(fnv1a64(b"hellp"), 16));
        assert_eq!(a.len(), 16);
        let norm: f32 = a.iter().map(|v| v * v).sum::<f32>().sqrt();
        assert!((norm - 1.0).abs() < 1e-5, "{norm}");
        assert!(embedding(1, 0).is_empty());
    }

    #[test]
    fn base64_matches_rfc4648_vectors() {
        assert_eq!(base64_encode(b""), "");
        assert_eq!(base64_encode(b"f"), "Zg==");
        assert_eq!(base64_encode(b"fo"), "Zm8=");
        assert_eq!(base64_encode(b"foo"), "Zm9v");
        assert_eq!(base64_encode(b"foob"), "Zm9vYg==");
        assert_eq!(base64_encode(b"fooba"), "Zm9vYmE=");
        assert_eq!(base64_encode(b"foobar"), "Zm9vYmFy");
        assert_eq!(embedding_base64(&[1.0]), "AACAPw==");
    }
}
