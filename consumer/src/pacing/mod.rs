//! Whether a bucket may start a call now: its paced rate (GCRA in Redis,
//! shared by every instance), the model's in-flight cap on this instance,
//! and, once the answer is known, the correction of the bucket's token debt.

pub(crate) mod accounting;
pub(crate) mod limits;
pub(crate) mod pacer;
