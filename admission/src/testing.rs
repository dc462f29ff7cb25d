//! A fake [`Host`]: Envoy as the state machine sees it, recording what it is
//! asked to do. Shared by this crate's unit tests and the `admission` fuzz
//! target (feature `testing`).

use std::collections::HashMap;

use prost::Message;
use sluice_proto::rls::{self, RateLimitRequest};

use crate::descriptors::sluice_metadata;
use crate::errors::LocalReply;
use crate::host::{Host, LogLevel, Metric, TenantUsage};

/// The token the fake answers every RLS dispatch with.
pub const RLS_TOKEN: u32 = 7;

/// Records what the state machine asks of Envoy.
#[derive(Default)]
pub struct FakeHost {
    pub request_headers: HashMap<String, String>,
    pub response_headers: Vec<(String, String)>,
    pub properties: HashMap<Vec<String>, Vec<u8>>,
    /// The request body received so far.
    pub body: Vec<u8>,
    pub response_chunk: Vec<u8>,
    /// What the client receives (every chunk as the filter left it).
    pub sent_downstream: Vec<u8>,
    pub dispatched: Vec<RateLimitRequest>,
    pub dispatch_fails: bool,
    pub reconciles: Vec<RateLimitRequest>,
    /// The admission time sent with each reconciliation.
    pub reconciled_at: Vec<u64>,
    /// The filter's clock sent with each RLS call.
    pub asked_at: Vec<u64>,
    pub replies: Vec<LocalReply>,
    pub resumed: u32,
    pub metrics: HashMap<Metric, u64>,
    pub tenant_usage: Vec<(String, TenantUsage)>,
    /// Counter behind `random_128` (distinct ids per call); `None`: no randomness.
    pub random: Option<u8>,
    /// Nanoseconds added to the clock (for deadlines).
    pub elapsed: u64,
}

/// The state machine encodes its RLS calls itself: one that does not decode
/// is its bug, which the fake makes loud.
#[allow(clippy::panic)]
fn decoded(message: &[u8]) -> RateLimitRequest {
    RateLimitRequest::decode(message)
        .unwrap_or_else(|e| panic!("the state machine sent a malformed RLS request: {e}"))
}

impl Host for FakeHost {
    fn request_header(&self, name: &str) -> Option<String> {
        self.request_headers.get(name).cloned()
    }
    fn request_header_names(&self) -> Vec<String> {
        self.request_headers.keys().cloned().collect()
    }
    fn set_request_header(&mut self, name: &str, value: &str) {
        self.request_headers.insert(name.into(), value.into());
    }
    fn remove_request_header(&mut self, name: &str) {
        self.request_headers.remove(name);
    }
    fn add_response_header(&mut self, name: &str, value: &str) {
        self.response_headers.push((name.into(), value.into()));
    }
    fn response_header(&self, name: &str) -> Option<String> {
        self.response_headers
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.clone())
    }
    fn property(&self, path: &[&str]) -> Option<Vec<u8>> {
        self.properties
            .get(&path.iter().map(|s| s.to_string()).collect::<Vec<_>>())
            .cloned()
    }
    fn request_body(&self, size: usize) -> Option<Vec<u8>> {
        self.body
            .get(..size.min(self.body.len()))
            .map(<[u8]>::to_vec)
    }
    fn response_body_chunk(&self, size: usize) -> Option<Vec<u8>> {
        self.response_chunk
            .get(..size.min(self.response_chunk.len()))
            .map(<[u8]>::to_vec)
    }
    fn replace_request_body(&mut self, body: &[u8]) -> bool {
        self.body = body.to_vec();
        true
    }
    fn replace_response_body_chunk(&mut self, size: usize, bytes: &[u8]) -> bool {
        assert_eq!(size, self.response_chunk.len());
        self.response_chunk = bytes.to_vec();
        true
    }
    fn remove_response_header(&mut self, name: &str) {
        self.response_headers.retain(|(k, _)| k != name);
    }
    fn dispatch_rls(
        &mut self,
        message: &[u8],
        _timeout_ms: u64,
        asked_at_ms: u64,
    ) -> Result<u32, String> {
        self.asked_at.push(asked_at_ms);
        if self.dispatch_fails {
            return Err("cluster sluice_rls not found".into());
        }
        self.dispatched.push(decoded(message));
        Ok(RLS_TOKEN)
    }
    fn send_reconcile(&mut self, message: Vec<u8>, admitted_at_ms: u64) {
        self.reconciled_at.push(admitted_at_ms);
        self.reconciles.push(decoded(&message));
    }
    fn send_local_reply(&mut self, reply: &LocalReply) {
        self.replies.push(reply.clone());
    }
    fn resume_request(&mut self) {
        self.resumed += 1;
    }
    fn count(&mut self, metric: Metric, by: u64) {
        *self.metrics.entry(metric).or_default() += by;
    }
    fn count_tenant_usage(&mut self, tenant: &str, usage: TenantUsage) {
        self.tenant_usage.push((tenant.to_string(), usage));
    }
    fn log(&self, _level: LogLevel, _message: &str) {}
    fn now_nanos(&self) -> u64 {
        12_345_000 + self.elapsed
    }
    fn random_128(&mut self) -> Option<[u8; 16]> {
        let next = self.random?;
        self.random = Some(next.wrapping_add(1));
        Some([next; 16])
    }
}

/// The `dynamic_metadata` of an RLS answer: `{"sluice": {key: "value", ...}}`.
pub fn sluice_metadata(fields: &[(&str, &str)]) -> rls::Struct {
    let text = |value: &str| rls::Value {
        kind: Some(rls::value::Kind::StringValue(value.into())),
    };
    let inner = rls::Struct {
        fields: fields
            .iter()
            .map(|(key, value)| (key.to_string(), text(value)))
            .collect(),
    };
    rls::Struct {
        fields: [(
            sluice_metadata::NAMESPACE.to_string(),
            rls::Value {
                kind: Some(rls::value::Kind::StructValue(inner)),
            },
        )]
        .into_iter()
        .collect(),
    }
}
