//! An in-process OTLP/gRPC trace collector for tests: it takes what an
//! exporter sends (`TraceService/Export`, protobuf decoded by
//! opentelemetry-proto) and keeps every span for the test to read.

use opentelemetry_proto::tonic::collector::trace::v1::trace_service_server::{
    TraceService, TraceServiceServer,
};
use opentelemetry_proto::tonic::collector::trace::v1::{
    ExportTraceServiceRequest, ExportTraceServiceResponse,
};
use opentelemetry_proto::tonic::common::v1::any_value::Value;
use opentelemetry_proto::tonic::common::v1::KeyValue;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// One span as received, ids in lowercase hex (`parent_span_id` empty for
/// a root).
#[derive(Clone, Debug)]
pub struct CollectedSpan {
    pub service: String,
    pub name: String,
    pub trace_id: String,
    pub span_id: String,
    pub parent_span_id: String,
    pub start_unix_nanos: u64,
    pub end_unix_nanos: u64,
}

impl CollectedSpan {
    /// How long the span lasted.
    pub fn duration(&self) -> Duration {
        Duration::from_nanos(self.end_unix_nanos.saturating_sub(self.start_unix_nanos))
    }
}

/// The collector; it stops when dropped.
pub struct OtlpCollector {
    pub addr: SocketAddr,
    spans: Arc<Mutex<Vec<CollectedSpan>>>,
    _stop: tokio::sync::oneshot::Sender<()>,
}

struct Receiver {
    spans: Arc<Mutex<Vec<CollectedSpan>>>,
}

#[tonic::async_trait]
impl TraceService for Receiver {
    async fn export(
        &self,
        request: tonic::Request<ExportTraceServiceRequest>,
    ) -> Result<tonic::Response<ExportTraceServiceResponse>, tonic::Status> {
        let mut received = Vec::new();
        for resource_spans in request.into_inner().resource_spans {
            let service = resource_spans
                .resource
                .as_ref()
                .and_then(|resource| string_attribute(&resource.attributes, "service.name"))
                .unwrap_or_default();
            for span in resource_spans
                .scope_spans
                .into_iter()
                .flat_map(|scope| scope.spans)
            {
                received.push(CollectedSpan {
                    service: service.clone(),
                    name: span.name,
                    trace_id: hex(&span.trace_id),
                    span_id: hex(&span.span_id),
                    parent_span_id: hex(&span.parent_span_id),
                    start_unix_nanos: span.start_time_unix_nano,
                    end_unix_nanos: span.end_time_unix_nano,
                });
            }
        }
        self.spans.lock().unwrap().extend(received);
        Ok(tonic::Response::new(ExportTraceServiceResponse::default()))
    }
}

impl OtlpCollector {
    /// A collector on a free loopback port.
    pub async fn start() -> OtlpCollector {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let spans = Arc::new(Mutex::new(Vec::new()));
        let service = TraceServiceServer::new(Receiver {
            spans: spans.clone(),
        });
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        tokio::spawn(
            tonic::transport::Server::builder()
                .add_service(service)
                .serve_with_incoming_shutdown(
                    tokio_stream::wrappers::TcpListenerStream::new(listener),
                    async {
                        let _ = stopped.await;
                    },
                ),
        );
        OtlpCollector {
            addr,
            spans,
            _stop: stop,
        }
    }

    /// The endpoint to give an exporter (`--otlp-endpoint`).
    pub fn endpoint(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// Every span received so far.
    pub fn spans(&self) -> Vec<CollectedSpan> {
        self.spans.lock().unwrap().clone()
    }

    /// The spans of trace `trace_id` received so far.
    pub fn trace(&self, trace_id: &str) -> Vec<CollectedSpan> {
        let mut spans: Vec<_> = self
            .spans()
            .into_iter()
            .filter(|span| span.trace_id == trace_id)
            .collect();
        spans.sort_by_key(|span| span.start_unix_nanos);
        spans
    }
}

fn string_attribute(attributes: &[KeyValue], key: &str) -> Option<String> {
    attributes.iter().find(|kv| kv.key == key).and_then(|kv| {
        match kv.value.as_ref()?.value.as_ref()? {
            Value::StringValue(value) => Some(value.clone()),
            _ => None,
        }
    })
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// The spans of one trace as an indented tree (parents first, children by
/// start), each with its service and duration: what docs/operations.md shows.
pub fn render_tree(spans: &[CollectedSpan]) -> String {
    let mut out = String::new();
    let ids: std::collections::HashSet<&str> = spans.iter().map(|s| s.span_id.as_str()).collect();
    let roots = spans
        .iter()
        .filter(|span| !ids.contains(span.parent_span_id.as_str()));
    for root in roots {
        render_span(spans, root, 0, &mut out);
    }
    out
}

fn render_span(spans: &[CollectedSpan], span: &CollectedSpan, depth: usize, out: &mut String) {
    let parent = match span.parent_span_id.as_str() {
        "" => "root".to_string(),
        id => format!("parent {id}"),
    };
    out.push_str(&format!(
        "{}{} [{}] {:.1} ms (span {}, {parent})\n",
        "  ".repeat(depth),
        span.name,
        span.service,
        span.duration().as_secs_f64() * 1000.0,
        span.span_id,
    ));
    let mut children: Vec<_> = spans
        .iter()
        .filter(|child| child.parent_span_id == span.span_id)
        .collect();
    children.sort_by_key(|child| child.start_unix_nanos);
    for child in children {
        render_span(spans, child, depth + 1, out);
    }
}
