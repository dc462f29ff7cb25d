//! Kept crash inputs whose failure was an allocation, not a panic: replayed
//! under an allocator that records the largest single request, since a plain
//! test would not notice a 2.6 GB `with_capacity` that the OS overcommits.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // tests fail loudly

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicUsize, Ordering};

struct Largest;

static LARGEST: AtomicUsize = AtomicUsize::new(0);

unsafe impl GlobalAlloc for Largest {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        LARGEST.fetch_max(layout.size(), Ordering::Relaxed);
        unsafe { System.alloc(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        unsafe { System.dealloc(ptr, layout) }
    }
}

#[global_allocator]
static ALLOCATOR: Largest = Largest;

/// Far above what any input of at most 64 KiB legitimately needs.
const MOST_BYTES_PER_ALLOCATION: usize = 64 * 1024 * 1024;

#[test]
fn a_pop_answer_cannot_make_the_consumer_allocate_what_its_lz4_body_claims() {
    let input = std::fs::read(
        sluice_fuzz::fuzz_dir().join("regressions/lite_topic_frame/oom-lz4-claimed-size-2.6GB"),
    )
    .unwrap();
    LARGEST.store(0, Ordering::Relaxed);
    sluice_fuzz::lite_topic_frame(&input);
    let largest = LARGEST.load(Ordering::Relaxed);
    assert!(
        largest < MOST_BYTES_PER_ALLOCATION,
        "one allocation of {largest} bytes for a {}-byte input",
        input.len()
    );
}
