//! Exports for bench.mjs: build a tokenizer, hand out a buffer, count.
#![allow(clippy::missing_safety_doc)]

use sluice_tokenizer::{Encoding, Tokenizer};

/// Builds a tokenizer (0: cl100k_base, 1: o200k_base); never freed.
#[no_mangle]
pub extern "C" fn tok_new(encoding: u32) -> *const Tokenizer {
    let e = if encoding == 0 {
        Encoding::Cl100kBase
    } else {
        Encoding::O200kBase
    };
    Box::into_raw(Box::new(Tokenizer::new(e)))
}

/// A buffer of `len` bytes for the caller to write a text into; never freed.
#[no_mangle]
pub extern "C" fn buf_new(len: usize) -> *mut u8 {
    Box::leak(vec![0u8; len].into_boxed_slice()).as_mut_ptr()
}

/// Token count of the UTF-8 text at `ptr`, `len` bytes (u32::MAX if not UTF-8).
#[no_mangle]
pub unsafe extern "C" fn tok_count(tok: *const Tokenizer, ptr: *const u8, len: usize) -> u32 {
    count_utf8(ptr, len, |text| (*tok).count(text))
}

/// Loads a Hugging Face tokenizer.json or a Mistral tekken.json from the
/// `len` bytes at `ptr`; null if it is refused. Never freed.
#[no_mangle]
pub unsafe extern "C" fn hf_new(
    ptr: *const u8,
    len: usize,
) -> *const sluice_tokenizer::HfTokenizer {
    let bytes = std::slice::from_raw_parts(ptr, len);
    match sluice_tokenizer::HfTokenizer::from_vocabulary_file(bytes) {
        Ok(t) => Box::into_raw(Box::new(t)),
        Err(_) => std::ptr::null(),
    }
}

/// Token count of the UTF-8 text at `ptr` with a loaded tokenizer: by
/// `count` (`heap` 0), or (`heap` 1) with the heap merge, the engine of
/// before where the linear merge now serves (tekken), for the old-vs-new
/// figures.
#[no_mangle]
pub unsafe extern "C" fn hf_count(
    tok: *const sluice_tokenizer::HfTokenizer,
    ptr: *const u8,
    len: usize,
    heap: u32,
) -> u32 {
    count_utf8(ptr, len, |text| match heap {
        0 => (*tok).count(text),
        _ => (*tok).count_with_heap_merge(text),
    })
}

/// Empties the linear merge's pair cache (shared by all calls), so that a
/// timed count of a text counted before is cold.
#[no_mangle]
pub unsafe extern "C" fn hf_clear(tok: *const sluice_tokenizer::HfTokenizer) {
    (*tok).clear_cache()
}

/// The same count with the engine of before the linear merge (tiktoken's
/// merge, heap-based for long pieces), for the old-vs-new table.
#[no_mangle]
pub unsafe extern "C" fn tok_count_old(tok: *const Tokenizer, ptr: *const u8, len: usize) -> u32 {
    count_utf8(ptr, len, |text| (*tok).count_with_tiktoken_merge(text))
}

/// `count` of the UTF-8 text at `ptr`, `len` bytes (u32::MAX if not UTF-8).
unsafe fn count_utf8(ptr: *const u8, len: usize, count: impl FnOnce(&str) -> usize) -> u32 {
    let bytes = std::slice::from_raw_parts(ptr, len);
    match std::str::from_utf8(bytes) {
        Ok(text) => count(text) as u32,
        Err(_) => u32::MAX,
    }
}
