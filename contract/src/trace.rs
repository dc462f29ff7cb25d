//! The client's W3C trace context (`traceparent`, `tracestate`), carried in
//! the work item from the deferral endpoint to the consumer, which sends it
//! to the model with its call: a deferred request stays in its client's
//! trace as a direct one does (Envoy passes these headers through).
//!
//! Only well-formed values travel (W3C Trace Context, level 1): a
//! malformed `traceparent` is dropped with its `tracestate`, as the
//! specification says, and a `tracestate` longer than 512 bytes or with
//! characters outside printable ASCII is dropped alone.

use serde::{Deserialize, Serialize};

/// Request header of the trace context's position: `00-<trace id>-<parent id>-<flags>`.
pub const TRACEPARENT_HEADER: &str = "traceparent";
/// Request header of the vendors' trace state, sent along with `traceparent`.
pub const TRACESTATE_HEADER: &str = "tracestate";
/// Longest `tracestate` carried (the specification's minimum to propagate).
pub const MAX_TRACESTATE_LEN: usize = 512;
/// Longest `traceparent` carried: version 00 is 55 bytes; later versions may
/// append fields, bounded here.
pub const MAX_TRACEPARENT_LEN: usize = 256;

/// A request's W3C trace context, as received.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct TraceContext {
    /// The `traceparent` header, validated.
    pub traceparent: String,
    /// The `tracestate` header (several joined with `,`), if any and valid.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tracestate: Option<String>,
}

impl TraceContext {
    /// The trace context of a request's `traceparent` and `tracestate`
    /// values; `None` when `traceparent` is absent or malformed.
    pub fn from_headers(traceparent: Option<&str>, tracestate: Option<&str>) -> Option<Self> {
        let traceparent = traceparent?.trim();
        trace_id_of(traceparent)?;
        let tracestate = tracestate
            .map(str::trim)
            .filter(|state| valid_tracestate(state))
            .map(str::to_string);
        Some(TraceContext {
            traceparent: traceparent.to_string(),
            tracestate,
        })
    }

    /// The trace id: 32 lowercase hex digits.
    pub fn trace_id(&self) -> &str {
        trace_id_of(&self.traceparent).unwrap_or_default()
    }

    /// Whether a context read back from a message is still well formed (a
    /// work item is input to the consumer, too).
    pub fn is_valid(&self) -> bool {
        trace_id_of(&self.traceparent).is_some()
            && self.tracestate.as_deref().is_none_or(valid_tracestate)
    }
}

/// The trace id of a well-formed `traceparent`, `None` otherwise:
/// `version-traceid-parentid-flags`, lowercase hex of 2, 32, 16 and 2
/// digits, version not `ff`, ids not all zeros; version `00` has nothing
/// after the flags, a later version may have more after a `-`.
pub fn trace_id_of(traceparent: &str) -> Option<&str> {
    let bytes = traceparent.as_bytes();
    if bytes.len() < 55 || bytes.len() > MAX_TRACEPARENT_LEN {
        return None;
    }
    let hex = |range: std::ops::Range<usize>| {
        bytes[range]
            .iter()
            .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(b))
    };
    let dashes = [2, 35, 52].iter().all(|&i| bytes[i] == b'-');
    if !(dashes && hex(0..2) && hex(3..35) && hex(36..52) && hex(53..55)) {
        return None;
    }
    let version = &traceparent[0..2];
    let (trace_id, parent_id) = (&traceparent[3..35], &traceparent[36..52]);
    let zeros = |id: &str| id.bytes().all(|b| b == b'0');
    let rest_ok = match version {
        "ff" => false,
        "00" => bytes.len() == 55,
        _ => bytes.len() == 55 || bytes[55] == b'-',
    };
    (rest_ok && !zeros(trace_id) && !zeros(parent_id)).then_some(trace_id)
}

/// The span every log line about one deferred request is written in, on
/// both sides (the deferral endpoint and the consumer): its Sluice request
/// id and its client's trace id (empty without one). At error level so it
/// is enabled at whatever level the logs are filtered to: a warning about a
/// request is never written without its ids. A macro, so that the span's
/// target is the caller's module (`RUST_LOG=sluice_deferral=debug` keeps
/// it): `request_span!(req_id: &str, trace: Option<&TraceContext>)`.
#[macro_export]
macro_rules! request_span {
    ($req_id:expr, $trace:expr) => {
        ::tracing::error_span!(
            "deferred",
            req_id = %$req_id,
            trace_id = %$trace.map_or("", $crate::TraceContext::trace_id),
        )
    };
}

/// The `tracing` target of the spans Sluice exports as a request's trace
/// (the binaries export only these; see sluice-runtime's `traces`). Open
/// them with [`trace_span!`].
pub const TRACE_TARGET: &str = "sluice_trace";

/// A span of a request's trace, exported when the binary exports traces
/// (target [`TRACE_TARGET`], level info): `trace_span!("deferral.publish",
/// field = value, …)` or `trace_span!(parent: &span, "…")`. Under another
/// such span it is that span's child; [`join_trace`] makes a first one the
/// child of the client's span.
#[macro_export]
macro_rules! trace_span {
    ($($args:tt)*) => {
        ::tracing::info_span!(target: $crate::trace::TRACE_TARGET, $($args)*)
    };
}

impl TraceContext {
    /// The remote span this context names, as OpenTelemetry's parent context.
    fn otel_parent(&self) -> Option<opentelemetry::Context> {
        use opentelemetry::trace::{SpanContext, SpanId, TraceContextExt, TraceFlags, TraceId};
        let trace_id = TraceId::from_hex(self.trace_id()).ok()?;
        let span_id = SpanId::from_hex(self.traceparent.get(36..52)?).ok()?;
        let flags = u8::from_str_radix(self.traceparent.get(53..55)?, 16).ok()?;
        let state = self
            .tracestate
            .as_deref()
            .and_then(|state| state.parse().ok())
            .unwrap_or_default();
        let span = SpanContext::new(trace_id, span_id, TraceFlags::new(flags), true, state);
        Some(opentelemetry::Context::new().with_remote_span_context(span))
    }
}

/// Makes `span` (a [`trace_span!`] not yet entered) a child of the span
/// `parent` names (the client's, or the publisher's across the broker).
/// Nothing when traces are not exported or there is no parent.
pub fn join_trace(span: &tracing::Span, parent: Option<&TraceContext>) {
    use tracing_opentelemetry::OpenTelemetrySpanExt;
    if span.is_disabled() {
        return;
    }
    if let Some(context) = parent.and_then(TraceContext::otel_parent) {
        let _ = span.set_parent(context);
    }
}

/// As [`join_trace`], with the parent read by `read_parent` only when
/// `span` is recorded: a disabled span (no export, logs without request
/// spans) costs no read of the caller's headers.
pub fn join_trace_read(span: &tracing::Span, read_parent: impl FnOnce() -> Option<TraceContext>) {
    if !span.is_disabled() {
        join_trace(span, read_parent().as_ref());
    }
}

/// The trace context to send onward from `span` (to the broker, to the
/// model): `span`'s own position in the trace when traces are exported,
/// with the client's `tracestate`; otherwise `client`'s context unchanged.
pub fn onward_trace(span: &tracing::Span, client: Option<&TraceContext>) -> Option<TraceContext> {
    use opentelemetry::trace::TraceContextExt;
    use tracing_opentelemetry::OpenTelemetrySpanExt;
    let context = span.context();
    let own = context.span().span_context().clone();
    if !own.is_valid() {
        return client.cloned();
    }
    Some(TraceContext {
        traceparent: format!(
            "00-{}-{}-{:02x}",
            own.trace_id(),
            own.span_id(),
            own.trace_flags().to_u8()
        ),
        tracestate: client.and_then(|client| client.tracestate.clone()),
    })
}

fn valid_tracestate(state: &str) -> bool {
    !state.is_empty()
        && state.len() <= MAX_TRACESTATE_LEN
        && state.bytes().all(|b| (0x20..=0x7e).contains(&b))
}

#[cfg(test)]
mod tests {
    use super::*;

    const PARENT: &str = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";

    #[test]
    fn reads_a_valid_context() {
        let context = TraceContext::from_headers(Some(PARENT), Some("congo=t61rcWkgMzE")).unwrap();
        assert_eq!(context.trace_id(), "4bf92f3577b34da6a3ce929d0e0e4736");
        assert_eq!(context.tracestate.as_deref(), Some("congo=t61rcWkgMzE"));
        assert!(context.is_valid());
        // A later version may carry more fields.
        let future = format!("cc{}-what-comes-next", &PARENT[2..]);
        assert!(trace_id_of(&future).is_some());
    }

    #[test]
    fn drops_malformed_values() {
        for bad in [
            "",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7",
            "00-4BF92F3577B34DA6A3CE929D0E0E4736-00f067aa0ba902b7-01",
            "00-00000000000000000000000000000000-00f067aa0ba902b7-01",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01",
            "ff-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-x",
            "00_4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
            "cc-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01x",
        ] {
            assert!(
                TraceContext::from_headers(Some(bad), Some("a=b")).is_none(),
                "{bad:?}"
            );
        }
        assert!(TraceContext::from_headers(None, Some("a=b")).is_none());
        // A bad tracestate goes alone.
        for bad_state in ["", "a=\u{7f}", &"a".repeat(513)] {
            let context = TraceContext::from_headers(Some(PARENT), Some(bad_state)).unwrap();
            assert_eq!(context.tracestate, None);
        }
    }

    #[test]
    fn the_parent_span_is_the_one_traceparent_names() {
        use opentelemetry::trace::TraceContextExt;
        let client = TraceContext::from_headers(Some(PARENT), Some("congo=t61rcWkgMzE")).unwrap();
        let parent = client.otel_parent().unwrap();
        let span = parent.span().span_context().clone();
        assert_eq!(
            span.trace_id().to_string(),
            "4bf92f3577b34da6a3ce929d0e0e4736"
        );
        assert_eq!(span.span_id().to_string(), "00f067aa0ba902b7");
        assert!(span.is_sampled() && span.is_remote());
        assert_eq!(span.trace_state().header(), "congo=t61rcWkgMzE");
    }

    #[test]
    fn without_export_the_client_context_goes_on_unchanged() {
        let client = TraceContext::from_headers(Some(PARENT), Some("a=b"));
        let span = crate::trace_span!("test.span");
        join_trace(&span, client.as_ref());
        assert_eq!(onward_trace(&span, client.as_ref()), client);
        assert_eq!(onward_trace(&span, None), None);
    }

    #[test]
    fn a_context_read_back_is_checked_again() {
        let forged = TraceContext {
            traceparent: "00-zz".into(),
            tracestate: None,
        };
        assert!(!forged.is_valid());
        assert_eq!(forged.trace_id(), "");
    }
}
