//! What an SSE client keeps of a stream to resume it after a break: the
//! text of the events it received whole, the id of the last one (sent back
//! as `Last-Event-ID`), and whether the ids only ever went up (a resumed
//! stream that repeats or skips back shows here).
//!
//! The deferral endpoint's event ids are Redis Stream entry ids
//! (`<ms>-<seq>`), increasing within one response stream.

/// An SSE stream as received so far, over one or more connections.
#[derive(Debug)]
pub struct SseProgress {
    /// The events received whole (each ending in a blank line).
    text: String,
    /// Bytes after the last blank line: an event still arriving. Dropped at
    /// a break: the resumed stream sends it again.
    partial: Vec<u8>,
    last_id: Option<String>,
    ids_increase: bool,
}

impl Default for SseProgress {
    fn default() -> SseProgress {
        SseProgress {
            text: String::new(),
            partial: Vec::new(),
            last_id: None,
            ids_increase: true,
        }
    }
}

impl SseProgress {
    /// Adds bytes as they came off the connection.
    pub fn feed(&mut self, bytes: &[u8]) {
        self.partial.extend_from_slice(bytes);
        while let Some(end) = find_event_end(&self.partial) {
            let event: Vec<u8> = self.partial.drain(..end).collect();
            let event = String::from_utf8_lossy(&event).into_owned();
            self.note_id(&event);
            self.text.push_str(&event);
        }
    }

    /// The connection broke: an event cut in the middle is forgotten.
    pub fn broke(&mut self) {
        self.partial.clear();
    }

    /// What to send as `Last-Event-ID` on resuming (none before the first
    /// event with an id: the stream starts over).
    pub fn last_event_id(&self) -> Option<&str> {
        self.last_id.as_deref()
    }

    /// The whole events received, in order.
    pub fn text(&self) -> &str {
        &self.text
    }

    /// Whether every event id was greater than the one before it.
    pub fn ids_increase(&self) -> bool {
        self.ids_increase
    }

    fn note_id(&mut self, event: &str) {
        let Some(id) = event.lines().find_map(|l| l.strip_prefix("id: ")) else {
            return;
        };
        let after = match self.last_id.as_deref() {
            None => true,
            Some(last) => match (entry_id(last), entry_id(id)) {
                (Some(last), Some(id)) => id > last,
                _ => false,
            },
        };
        self.ids_increase &= after;
        self.last_id = Some(id.to_string());
    }
}

/// The end (exclusive) of the first whole event: after its blank line.
fn find_event_end(bytes: &[u8]) -> Option<usize> {
    bytes.windows(2).position(|w| w == b"\n\n").map(|at| at + 2)
}

/// A Redis Stream entry id `<ms>-<seq>` as a comparable pair.
fn entry_id(id: &str) -> Option<(u64, u64)> {
    let (ms, seq) = id.split_once('-')?;
    Some((ms.parse().ok()?, seq.parse().ok()?))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn whole_events_are_kept_and_a_cut_one_is_dropped_at_a_break() {
        let mut progress = SseProgress::default();
        progress.feed(b": queued\n\nid: 5-0\ndata: {\"a\":1}\n");
        assert_eq!(progress.text(), ": queued\n\n");
        assert_eq!(progress.last_event_id(), None);
        progress.feed(b"\nid: 5-1\nda");
        assert_eq!(progress.last_event_id(), Some("5-0"));
        progress.broke();
        // The resumed stream sends 5-1 again, whole.
        progress.feed(b"id: 5-1\ndata: {\"a\":2}\n\ndata: [DONE]\n\n");
        assert_eq!(
            progress.text(),
            ": queued\n\nid: 5-0\ndata: {\"a\":1}\n\nid: 5-1\ndata: {\"a\":2}\n\ndata: [DONE]\n\n"
        );
        assert_eq!(progress.last_event_id(), Some("5-1"));
        assert!(progress.ids_increase());
    }

    #[test]
    fn a_repeated_or_earlier_id_is_seen() {
        let mut repeated = SseProgress::default();
        repeated.feed(b"id: 9-0\ndata: x\n\nid: 10-0\ndata: y\n\n");
        assert!(repeated.ids_increase(), "10-0 follows 9-0 (numerically)");
        repeated.feed(b"id: 10-0\ndata: y\n\n");
        assert!(!repeated.ids_increase());

        let mut earlier = SseProgress::default();
        earlier.feed(b"id: 7-3\ndata: x\n\nid: 7-2\ndata: y\n\n");
        assert!(!earlier.ids_increase());

        let mut foreign = SseProgress::default();
        foreign.feed(b"id: 7-3\ndata: x\n\nid: local-1\ndata: y\n\n");
        assert!(!foreign.ids_increase(), "an id that is not an entry id");
    }

    #[test]
    fn an_event_split_across_many_reads_is_whole_once() {
        let mut progress = SseProgress::default();
        for byte in b"id: 1-0\ndata: {}\n\n" {
            progress.feed(&[*byte]);
        }
        assert_eq!(progress.text(), "id: 1-0\ndata: {}\n\n");
        assert_eq!(progress.last_event_id(), Some("1-0"));
    }
}
