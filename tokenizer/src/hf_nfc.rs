//! Unicode Normalization Form C, for the `NFC` normalizer (Qwen2/2.5/3).
//!
//! Decompose canonically (tables, Hangul by arithmetic), order the marks by
//! combining class (stable), compose again (primary composites, Hangul).
//! The tables (`hf_nfc_tables.rs`) are generated from Python's unicodedata
//! by `tests/hf/gen_nfc.py`; PyPI `tokenizers`' NFC agrees with them on
//! every code point alone and on the differential corpus (see
//! `tests/hf_reference.rs`). Text in which no character can change —
//! nearly all text — is returned as it is, without allocating.

use alloc::borrow::Cow;
use alloc::string::String;
use alloc::vec::Vec;

use crate::hf_nfc_tables::{CCC, COMPOSE, DECOMP, DECOMP_DATA, MAYBE};

const S_BASE: u32 = 0xAC00;
const L_BASE: u32 = 0x1100;
const V_BASE: u32 = 0x1161;
const T_BASE: u32 = 0x11A7;
const L_COUNT: u32 = 19;
const V_COUNT: u32 = 21;
const T_COUNT: u32 = 28;
const N_COUNT: u32 = V_COUNT * T_COUNT;
const S_COUNT: u32 = L_COUNT * N_COUNT;

fn maybe_changes(c: char) -> bool {
    let cp = c as u32;
    if cp < 0xC0 {
        return false;
    }
    MAYBE
        .binary_search_by(|&(a, b)| range_order(a, b, cp))
        .is_ok()
}

/// Where the range `a..=b` lies against `cp`, for a binary search of sorted
/// ranges: `Equal` when it holds `cp`.
fn range_order(a: u32, b: u32, cp: u32) -> core::cmp::Ordering {
    if b < cp {
        core::cmp::Ordering::Less
    } else if a > cp {
        core::cmp::Ordering::Greater
    } else {
        core::cmp::Ordering::Equal
    }
}

fn ccc(cp: u32) -> u8 {
    if cp < 0x300 {
        return 0;
    }
    match CCC.binary_search_by(|&(a, b, _)| range_order(a, b, cp)) {
        Ok(i) => CCC.get(i).map_or(0, |x| x.2),
        Err(_) => 0,
    }
}

fn decompose(cp: u32, out: &mut Vec<u32>) {
    if (S_BASE..S_BASE + S_COUNT).contains(&cp) {
        let s = cp - S_BASE;
        out.push(L_BASE + s / N_COUNT);
        out.push(V_BASE + (s % N_COUNT) / T_COUNT);
        if !s.is_multiple_of(T_COUNT) {
            out.push(T_BASE + s % T_COUNT);
        }
        return;
    }
    if let Ok(i) = DECOMP.binary_search_by_key(&cp, |x| x.0) {
        if let Some(&(_, start, len)) = DECOMP.get(i) {
            let (start, len) = (start as usize, len as usize);
            if let Some(d) = DECOMP_DATA.get(start..start + len) {
                out.extend_from_slice(d);
                return;
            }
        }
    }
    out.push(cp);
}

fn compose_pair(a: u32, b: u32) -> Option<u32> {
    if (L_BASE..L_BASE + L_COUNT).contains(&a) && (V_BASE..V_BASE + V_COUNT).contains(&b) {
        return Some(S_BASE + ((a - L_BASE) * V_COUNT + (b - V_BASE)) * T_COUNT);
    }
    if (S_BASE..S_BASE + S_COUNT).contains(&a)
        && (a - S_BASE).is_multiple_of(T_COUNT)
        && (T_BASE + 1..T_BASE + T_COUNT).contains(&b)
    {
        return Some(a + (b - T_BASE));
    }
    COMPOSE
        .binary_search_by(|&(x, y, _)| (x, y).cmp(&(a, b)))
        .ok()
        .and_then(|i| COMPOSE.get(i))
        .map(|x| x.2)
}

/// `text` in Normalization Form C.
pub fn nfc(text: &str) -> Cow<'_, str> {
    if !text.chars().any(maybe_changes) {
        return Cow::Borrowed(text);
    }
    // Decompose, then order each run of non-starters by class (stable).
    let mut d: Vec<u32> = Vec::with_capacity(text.len());
    for c in text.chars() {
        decompose(c as u32, &mut d);
    }
    let mut i = 0;
    while i < d.len() {
        if ccc(d[i]) == 0 {
            i += 1;
            continue;
        }
        let start = i;
        while i < d.len() && ccc(d[i]) != 0 {
            i += 1;
        }
        d[start..i].sort_by_key(|&cp| ccc(cp));
    }
    // Compose: each character joins the last starter unless blocked (a
    // character between them of class 0 or of a class not lower than its).
    let mut out: Vec<u32> = Vec::with_capacity(d.len());
    let mut starter: Option<usize> = None;
    let mut last_ccc: i32 = -1;
    for &cp in &d {
        let c = ccc(cp) as i32;
        if let Some(s) = starter {
            let blocked = last_ccc != -1 && (last_ccc == 0 || last_ccc >= c);
            if !blocked {
                if let Some(comp) = compose_pair(out[s], cp) {
                    out[s] = comp;
                    continue;
                }
            }
        }
        if c == 0 {
            starter = Some(out.len());
            last_ccc = -1;
        } else {
            last_ccc = c;
        }
        out.push(cp);
    }
    let mut s = String::with_capacity(text.len());
    s.extend(out.into_iter().filter_map(char::from_u32));
    Cow::Owned(s)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn composes_and_orders() {
        assert_eq!(nfc("abc"), "abc");
        assert!(matches!(nfc("héllo 中文"), Cow::Borrowed(_)));
        assert_eq!(nfc("e\u{301}"), "\u{e9}");
        assert_eq!(nfc("\u{1100}\u{1161}\u{11a8}"), "\u{ac01}");
        assert_eq!(nfc("a\u{323}\u{302}"), "\u{1ead}");
        assert_eq!(nfc("a\u{302}\u{323}"), "\u{1ead}");
        assert_eq!(nfc("\u{212b}"), "\u{c5}");
        assert_eq!(nfc("e\u{301}\u{301}"), "\u{e9}\u{301}");
    }
}
