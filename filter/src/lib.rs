//! The thin proxy-wasm layer of Sluice's filter: it implements the admission
//! core's [`Host`] trait over Envoy's ABI and forwards callbacks. All decisions
//! live in `sluice-admission`, tested natively.

use proxy_wasm::traits::{Context, HttpContext, RootContext};
use proxy_wasm::types::{Action, BufferType, ContextType, LogLevel as WasmLogLevel, MetricType};
use sluice_admission::admission::{RequestAdmission, Shared, Verdict};
use sluice_admission::config::FilterConfig;
use sluice_admission::counter_write::{sign_reconciliation, COUNTER_WRITE_AUTH_METADATA};
use sluice_admission::descriptors::{
    ADMITTED_AT_METADATA, ASKED_AT_METADATA, FORCE_CHARGE_METADATA, MAX_TRACE_CONTEXT_METADATA_LEN,
    TRACE_CONTEXT_METADATA,
};
use sluice_admission::encoders::BpeEncoders;
use sluice_admission::errors::LocalReply;
use sluice_admission::host::{Host, LogLevel, Metric, TenantUsage};
use std::collections::HashMap;
use std::rc::Rc;
use std::sync::Arc;
use std::time::Duration;
use tenant_usage::TenantCounters;

mod tenant_usage;

const RLS_SERVICE: &str = "envoy.service.ratelimit.v3.RateLimitService";
const RLS_METHOD: &str = "ShouldRateLimit";
/// Shared queue the HTTP contexts hand reconciliation calls to; the root
/// context (which outlives every stream) sends them.
const RECONCILE_QUEUE: &str = "sluice.reconcile";
/// Reconciliation calls are fire-and-forget; a generous timeout is fine.
const RECONCILE_TIMEOUT: Duration = Duration::from_secs(5);

proxy_wasm::main! {{
    proxy_wasm::set_log_level(WasmLogLevel::Info);
    proxy_wasm::set_root_context(|_| -> Box<dyn RootContext> { Box::new(SluiceRoot::default()) });
}}

/// Metric ids defined once per VM.
#[derive(Default, Clone)]
struct Metrics(HashMap<Metric, u32>);

/// The vocabularies compiled into the module (`SLUICE_VOCAB_BUNDLE` at
/// build time, see build.rs); empty when none were.
static EMBEDDED_VOCABULARIES: &[u8] = include_bytes!(concat!(env!("OUT_DIR"), "/vocab.bundle"));

#[derive(Default)]
struct SluiceRoot {
    /// The VM configuration's bundle of vocabularies, until `on_configure`
    /// has loaded it.
    vm_vocabularies: Option<Vec<u8>>,
    shared: Option<Arc<Shared<BpeEncoders>>>,
    metrics: Rc<Metrics>,
    tenants: Option<Rc<TenantCounters>>,
    queue: Option<u32>,
}

impl SluiceRoot {
    /// Envoy's clock, Unix milliseconds.
    fn now_ms(&self) -> u64 {
        self.get_current_time()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_millis() as u64)
            .unwrap_or(0)
    }
}

impl Context for SluiceRoot {
    fn on_grpc_call_response(&mut self, _token: u32, status: u32, _size: usize) {
        if status != 0 {
            log::warn!("sluice: reconciliation call failed with gRPC status {status}");
        }
    }
}

/// Bytes of the VM's linear memory (what a worker's VM holds).
fn vm_memory_bytes() -> usize {
    #[cfg(target_arch = "wasm32")]
    {
        core::arch::wasm32::memory_size(0) * 65536
    }
    #[cfg(not(target_arch = "wasm32"))]
    {
        0
    }
}

impl SluiceRoot {
    /// The tokenizers, from the VM configuration's vocabularies, else those
    /// compiled in: built now, so that no request waits for them; a
    /// `model_tokenizers` file missing from both falls back (and says so).
    fn encoders(&mut self, config: &FilterConfig) -> BpeEncoders {
        let started = self.get_current_time();
        let from_vm = self.vm_vocabularies.take().filter(|b| !b.is_empty());
        let (source, bundle) = match &from_vm {
            Some(bytes) => ("VM configuration", bytes.as_slice()),
            None => ("module", EMBEDDED_VOCABULARIES),
        };
        let (encoders, warnings) = BpeEncoders::from_bundle(config, bundle);
        for warning in warnings {
            log::warn!("sluice: {warning}");
        }
        let took = self
            .get_current_time()
            .duration_since(started)
            .unwrap_or_default();
        if !config.model_tokenizers.is_empty() {
            log::info!(
                "sluice: tokenizers built in {} us from the {source}'s vocabularies ({} bytes); \
                 VM memory {} bytes",
                took.as_micros(),
                bundle.len(),
                vm_memory_bytes()
            );
        }
        encoders
    }
}

impl RootContext for SluiceRoot {
    fn on_vm_start(&mut self, size: usize) -> bool {
        if size > 0 {
            self.vm_vocabularies = self.get_vm_configuration();
        }
        true
    }

    fn on_configure(&mut self, _size: usize) -> bool {
        let Some(bytes) = self.get_plugin_configuration() else {
            log::error!("sluice: no plugin configuration (need at least {{\"tenant\": {{\"header\": \"...\"}}}})");
            return false;
        };
        let config = match FilterConfig::from_json(&bytes) {
            Ok(config) => config,
            Err(message) => {
                log::error!("sluice: {message}");
                return false;
            }
        };
        for warning in config.warnings() {
            log::warn!("sluice: {warning}");
        }
        if config.reconcile && config.deferral.secrets.is_empty() {
            log::warn!(
                "sluice: reconcile is on but deferral.secrets is empty: reconciliation calls go \
                 unsigned, and sluice-rls (--counter-writes signed, its default) refuses their \
                 refunds and charges; set deferral.secrets to sluice-rls's secret"
            );
        }
        // Build the tokenizers now, so no request pays for loading ranks.
        // OpenAI's model table uses both encodings.
        let encoders = self.encoders(&config);
        let mut metrics = HashMap::new();
        for metric in Metric::ALL {
            match proxy_wasm::hostcalls::define_metric(MetricType::Counter, metric.name()) {
                Ok(id) => {
                    metrics.insert(metric, id);
                }
                Err(status) => {
                    log::warn!("sluice: cannot define metric {}: {status:?}", metric.name())
                }
            }
        }
        self.metrics = Rc::new(Metrics(metrics));
        self.tenants = Some(Rc::new(TenantCounters::new(config.tenant_usage_series)));
        self.queue = Some(self.register_shared_queue(RECONCILE_QUEUE));
        log::info!(
            "sluice: configured (rls cluster {}, domain {}, failure mode {:?})",
            config.rls_cluster,
            config.domain,
            config.failure_mode
        );
        self.shared = Some(Arc::new(Shared::new(config, encoders)));
        true
    }

    fn on_queue_ready(&mut self, queue_id: u32) {
        let Some(shared) = &self.shared else { return };
        let cluster = shared.config.rls_cluster.clone();
        // sluice-rls accepts refunds and forced charges only with this
        // signature (any of its secrets; signers use the first). Set apart
        // from `deferral.enabled`: reconciliation needs it without deferral too.
        let secret = shared.config.deferral.secrets.first().cloned();
        while let Ok(Some(queued)) = self.dequeue_shared_queue(queue_id) {
            let Some((admitted_at_ms, message)) = queued_reconcile::decode(&queued) else {
                log::warn!("sluice: dropping a malformed reconciliation from the queue");
                continue;
            };
            let admitted_at = admitted_at_ms.to_string();
            let mut metadata = vec![
                FORCE_CHARGE_METADATA,
                (ADMITTED_AT_METADATA, admitted_at.as_bytes()),
            ];
            let signature = secret
                .as_ref()
                .and_then(|s| sign_reconciliation(s, message, admitted_at_ms, self.now_ms()));
            match &signature {
                Some(signature) => {
                    metadata.push((COUNTER_WRITE_AUTH_METADATA, signature.as_bytes()))
                }
                None if secret.is_some() => {
                    log::warn!("sluice: cannot sign a reconciliation (unreadable request)")
                }
                None => {}
            }
            if let Err(status) = self.dispatch_grpc_call(
                &cluster,
                RLS_SERVICE,
                RLS_METHOD,
                metadata,
                Some(message),
                RECONCILE_TIMEOUT,
            ) {
                log::warn!("sluice: cannot send reconciliation: {status:?}");
            }
        }
    }

    fn create_http_context(&self, _context_id: u32) -> Option<Box<dyn HttpContext>> {
        let shared = self.shared.clone()?;
        let cluster = shared.config.rls_cluster.clone();
        Some(Box::new(SluiceHttp {
            admission: RequestAdmission::new(shared),
            io: EnvoyIo {
                metrics: self.metrics.clone(),
                tenants: self.tenants.clone(),
                queue: self.queue,
                cluster,
            },
        }))
    }

    fn get_type(&self) -> Option<ContextType> {
        Some(ContextType::HttpContext)
    }
}

struct SluiceHttp {
    admission: RequestAdmission<BpeEncoders>,
    io: EnvoyIo,
}

/// The proxy-wasm side of [`Host`]. proxy-wasm's accessors are default trait
/// methods acting on the stream Envoy is currently calling into, so this
/// small struct (kept apart from the admission state, to borrow both) can
/// serve them.
struct EnvoyIo {
    metrics: Rc<Metrics>,
    tenants: Option<Rc<TenantCounters>>,
    queue: Option<u32>,
    cluster: String,
}

impl Context for EnvoyIo {}
impl HttpContext for EnvoyIo {}

impl Host for EnvoyIo {
    fn request_header(&self, name: &str) -> Option<String> {
        self.get_http_request_header(name)
    }
    fn request_header_names(&self) -> Vec<String> {
        self.get_http_request_headers()
            .into_iter()
            .map(|(name, _)| name)
            .collect()
    }
    fn set_request_header(&mut self, name: &str, value: &str) {
        self.set_http_request_header(name, Some(value));
    }
    fn remove_request_header(&mut self, name: &str) {
        self.set_http_request_header(name, None);
    }
    fn add_response_header(&mut self, name: &str, value: &str) {
        self.add_http_response_header(name, value);
    }
    fn response_header(&self, name: &str) -> Option<String> {
        self.get_http_response_header(name)
    }
    fn property(&self, path: &[&str]) -> Option<Vec<u8>> {
        self.get_property(path.to_vec())
    }
    fn request_body(&self, size: usize) -> Option<Vec<u8>> {
        self.get_http_request_body(0, size)
    }
    fn response_body_chunk(&self, size: usize) -> Option<Vec<u8>> {
        self.get_http_response_body(0, size)
    }
    // The SDK's `set_http_*_body` panic when Envoy refuses; these report it.
    fn replace_request_body(&mut self, body: &[u8]) -> bool {
        // Start 0 and a length past the end: Envoy replaces the whole buffer.
        replace_buffer(BufferType::HttpRequestBody, u32::MAX as usize, body)
    }
    fn replace_response_body_chunk(&mut self, size: usize, bytes: &[u8]) -> bool {
        replace_buffer(BufferType::HttpResponseBody, size, bytes)
    }
    fn remove_response_header(&mut self, name: &str) {
        self.set_http_response_header(name, None);
    }
    fn dispatch_rls(
        &mut self,
        message: &[u8],
        timeout_ms: u64,
        asked_at_ms: u64,
    ) -> Result<u32, String> {
        let asked_at = asked_at_ms.to_string();
        // The client's trace context rides along: sluice-rls's decision
        // span is a child of the client's span (the filter opens none).
        let trace: Vec<(&str, String)> = TRACE_CONTEXT_METADATA
            .iter()
            .filter_map(|&name| Some((name, self.get_http_request_header(name)?)))
            .filter(|(_, value)| value.len() <= MAX_TRACE_CONTEXT_METADATA_LEN)
            .collect();
        let mut metadata = vec![(ASKED_AT_METADATA, asked_at.as_bytes())];
        metadata.extend(trace.iter().map(|(name, value)| (*name, value.as_bytes())));
        self.dispatch_grpc_call(
            &self.cluster,
            RLS_SERVICE,
            RLS_METHOD,
            metadata,
            Some(message),
            Duration::from_millis(timeout_ms),
        )
        .map_err(|status| {
            format!(
                "{status:?} (is cluster '{}' defined, with HTTP/2?)",
                self.cluster
            )
        })
    }
    fn send_reconcile(&mut self, message: Vec<u8>, admitted_at_ms: u64) {
        let Some(queue) = self.queue else { return };
        let queued = queued_reconcile::encode(admitted_at_ms, &message);
        if let Err(status) = self.enqueue_shared_queue(queue, Some(&queued)) {
            log::warn!("sluice: cannot queue reconciliation: {status:?}");
        }
    }
    fn send_local_reply(&mut self, reply: &LocalReply) {
        let headers: Vec<(&str, &str)> = reply
            .headers
            .iter()
            .map(|(k, v)| (k.as_str(), v.as_str()))
            .collect();
        self.send_http_response(reply.status, headers, Some(reply.body.as_bytes()));
    }
    fn resume_request(&mut self) {
        self.resume_http_request();
    }
    fn count(&mut self, metric: Metric, by: u64) {
        if let Some(&id) = self.metrics.0.get(&metric) {
            let _ = proxy_wasm::hostcalls::increment_metric(id, by.min(i64::MAX as u64) as i64);
        }
    }
    fn count_tenant_usage(&mut self, tenant: &str, usage: TenantUsage) {
        if let Some(tenants) = &self.tenants {
            tenants.add(tenant, usage);
        }
    }
    fn now_nanos(&self) -> u64 {
        self.get_current_time()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos() as u64)
            .unwrap_or(0)
    }
    fn random_128(&mut self) -> Option<[u8; 16]> {
        let mut bytes = [0u8; 16];
        // SAFETY: `random_get` writes exactly `len` bytes into the buffer we own.
        let errno = unsafe { wasi::random_get(bytes.as_mut_ptr(), bytes.len()) };
        (errno == 0).then_some(bytes)
    }
    fn log(&self, level: LogLevel, message: &str) {
        match level {
            LogLevel::Debug => log::debug!("{message}"),
            LogLevel::Info => log::info!("{message}"),
            LogLevel::Warn => log::warn!("{message}"),
            LogLevel::Error => log::error!("{message}"),
        }
    }
}

fn replace_buffer(buffer: BufferType, size: usize, bytes: &[u8]) -> bool {
    match proxy_wasm::hostcalls::set_buffer(buffer, 0, size, bytes) {
        Ok(()) => true,
        Err(status) => {
            log::warn!("sluice: Envoy refused to replace the {buffer:?}: {status:?}");
            false
        }
    }
}

/// A reconciliation call on the shared queue: the admission time (8 bytes,
/// big-endian Unix ms), then the RateLimitRequest.
mod queued_reconcile {
    pub fn encode(admitted_at_ms: u64, message: &[u8]) -> Vec<u8> {
        let mut queued = Vec::with_capacity(8 + message.len());
        queued.extend_from_slice(&admitted_at_ms.to_be_bytes());
        queued.extend_from_slice(message);
        queued
    }

    pub fn decode(queued: &[u8]) -> Option<(u64, &[u8])> {
        let (at, message) = queued.split_first_chunk::<8>()?;
        Some((u64::from_be_bytes(*at), message))
    }
}

/// Envoy gives every Wasm module WASI's `random_get` (proxy-wasm has no
/// random call of its own), backed by the host's CSPRNG.
mod wasi {
    #[cfg(target_arch = "wasm32")]
    #[link(wasm_import_module = "wasi_snapshot_preview1")]
    extern "C" {
        pub fn random_get(buf: *mut u8, len: usize) -> u16;
    }

    /// Native builds (unit tests of this crate) have no Envoy: no randomness.
    #[cfg(not(target_arch = "wasm32"))]
    pub unsafe fn random_get(_buf: *mut u8, _len: usize) -> u16 {
        52 // ENOSYS
    }
}

fn action(verdict: Verdict) -> Action {
    match verdict {
        Verdict::Continue => Action::Continue,
        Verdict::Pause => Action::Pause,
    }
}

impl Context for SluiceHttp {
    fn on_grpc_call_response(&mut self, token: u32, status: u32, size: usize) {
        let body = if status == 0 {
            self.io.get_grpc_call_response_body(0, size)
        } else {
            None
        };
        self.admission
            .on_rls_response(&mut self.io, token, status, body.as_deref());
    }
}

impl HttpContext for SluiceHttp {
    fn on_http_request_headers(&mut self, _headers: usize, end_of_stream: bool) -> Action {
        action(
            self.admission
                .on_request_headers(&mut self.io, end_of_stream),
        )
    }

    fn on_http_request_body(&mut self, body_size: usize, end_of_stream: bool) -> Action {
        action(
            self.admission
                .on_request_body(&mut self.io, body_size, end_of_stream),
        )
    }

    fn on_http_response_headers(&mut self, _headers: usize, _end_of_stream: bool) -> Action {
        action(self.admission.on_response_headers(&mut self.io))
    }

    fn on_http_response_body(&mut self, body_size: usize, end_of_stream: bool) -> Action {
        action(
            self.admission
                .on_response_body(&mut self.io, body_size, end_of_stream),
        )
    }

    /// Every stream ends here, also one the client or the upstream broke.
    fn on_log(&mut self) {
        self.admission.on_stream_end(&mut self.io);
    }
}
