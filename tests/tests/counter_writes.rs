//! Counter writes need the filter's authority, against a real sluice-rls
//! over gRPC: an unsigned refund and an unsigned forced charge are refused
//! and move no counter; the filter's signed ones are applied; a call of
//! 5,000 descriptors is refused before anything is counted.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // tests fail loudly

use prost::Message;
use sluice_admission::counter_write::{sign_reconciliation, COUNTER_WRITE_AUTH_METADATA};
use sluice_admission::deferral::Secret;
use sluice_admission::descriptors::{
    reconcile_request, Budget, ADMITTED_AT_METADATA, FORCE_CHARGE_METADATA,
};
use sluice_proto::pb::envoy::service::ratelimit::v3::rate_limit_service_client::RateLimitServiceClient;
use sluice_proto::pb::envoy::service::ratelimit::v3::RateLimitRequest;
use sluice_ratelimit::config::LimitsConfig;
use sluice_ratelimit::limiter::{Limiter, ManualClock};
use sluice_ratelimit::metrics::Metrics;
use sluice_ratelimit::store::{CountingMode, MemoryStore};
use sluice_testkit::example_deferral_secret;
use sluice_testkit::rls::{descriptor, request, with_hits};
use sluice_testkit::stack::{start_rls, tokens_left, Rls, RlsParts};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{SystemTime, UNIX_EPOCH};
use tonic::transport::Channel;

const TOKENS_PER_HOUR: u32 = 1_000;
const LIMITS: &str = r#"domain: sluice
descriptors:
  - key: tenant
    descriptors:
      - key: model
        rate_limit: { unit: hour, requests_per_unit: 1000 }
        descriptors:
          - key: tokens
            rate_limit: { unit: hour, requests_per_unit: 1000, name: tokens }
"#;

/// The limiter's clock stands still, so every call lands in one window
/// however slow the machine.
const T0: u64 = 1_700_000_000_000;

struct Harness {
    rls: Rls,
    client: RateLimitServiceClient<Channel>,
}

async fn start() -> Harness {
    let limits =
        LimitsConfig::from_sources(&[(PathBuf::from("limits.yaml"), LIMITS.into())]).unwrap();
    let limiter = Arc::new(Limiter::new(
        limits,
        Arc::new(MemoryStore::new()),
        CountingMode::AllOrNothing,
        Arc::new(ManualClock::new(T0)),
        Arc::new(Metrics::new()),
    ));
    // The default guard: signed counter writes, the example secret.
    let rls = start_rls(limiter, RlsParts::default()).await;
    let client = RateLimitServiceClient::connect(format!("http://127.0.0.1:{}", rls.port))
        .await
        .unwrap();
    Harness { rls, client }
}

fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_millis() as u64
}

/// The filter's reconciliation of `delta` tokens for acme × m.
fn reconciliation(delta: i64) -> sluice_proto::rls::RateLimitRequest {
    reconcile_request("sluice", "acme", "m", &[(Budget::Total, delta)]).unwrap()
}

/// How a call is sent: with which of the filter's metadata.
#[derive(Clone, Copy)]
enum Sent<'a> {
    Plain,
    /// `x-sluice-charge: force` and the admission time, unsigned.
    Forced,
    /// Forced and signed with this secret, as the filter sends it.
    Signed(&'a Secret),
}

impl Harness {
    async fn send(
        &mut self,
        call: &sluice_proto::rls::RateLimitRequest,
        sent: Sent<'_>,
    ) -> Result<(), tonic::Status> {
        let bytes = call.encode_to_vec();
        let mut grpc = tonic::Request::new(RateLimitRequest::decode(bytes.as_slice()).unwrap());
        let metadata = grpc.metadata_mut();
        if !matches!(sent, Sent::Plain) {
            let (key, value) = FORCE_CHARGE_METADATA;
            metadata.insert(key, std::str::from_utf8(value).unwrap().parse().unwrap());
            metadata.insert(ADMITTED_AT_METADATA, T0.to_string().parse().unwrap());
        }
        if let Sent::Signed(secret) = sent {
            let signature = sign_reconciliation(secret, &bytes, T0, now_ms()).unwrap();
            metadata.insert(COUNTER_WRITE_AUTH_METADATA, signature.parse().unwrap());
        }
        self.client.should_rate_limit(grpc).await.map(|_| ())
    }

    async fn left(&self) -> u32 {
        tokens_left(&self.rls.limiter, "acme", "m").await
    }

    fn metric(&self, line_start: &str) -> String {
        let text = self.rls.limiter.metrics().encode();
        text.lines()
            .find(|l| l.starts_with(line_start))
            .unwrap_or_else(|| panic!("no {line_start} in\n{text}"))
            .to_string()
    }
}

fn assert_denied(result: Result<(), tonic::Status>, what: &str) {
    let status = result.expect_err(what);
    assert_eq!(
        status.code(),
        tonic::Code::PermissionDenied,
        "{what}: {status:?}"
    );
    assert!(
        status.message().contains(COUNTER_WRITE_AUTH_METADATA),
        "{what}: {}",
        status.message()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn refunds_and_forced_charges_need_the_filters_signature() {
    let mut h = start().await;
    // A plain decision (what Envoy's own rate-limit filter sends) needs nothing.
    h.send(&reconciliation(600), Sent::Plain).await.unwrap();
    assert_eq!(h.left().await, TOKENS_PER_HOUR - 600);

    assert_denied(
        h.send(&reconciliation(-500), Sent::Plain).await,
        "unsigned refund",
    );
    assert_denied(
        h.send(&reconciliation(-500), Sent::Forced).await,
        "unsigned forced refund",
    );
    assert_denied(
        h.send(&reconciliation(900), Sent::Forced).await,
        "unsigned forced charge",
    );
    let stranger = Secret::new("a-secret-sluice-rls-does-not-know-about").unwrap();
    assert_denied(
        h.send(&reconciliation(-500), Sent::Signed(&stranger)).await,
        "refund signed with another secret",
    );
    assert_eq!(h.left().await, TOKENS_PER_HOUR - 600, "nothing moved");

    // The filter's own, signed with the secret sluice-rls holds.
    let secret = example_deferral_secret();
    h.send(&reconciliation(-500), Sent::Signed(&secret))
        .await
        .unwrap();
    assert_eq!(h.left().await, TOKENS_PER_HOUR - 100, "the refund applied");
    h.send(&reconciliation(1_500), Sent::Signed(&secret))
        .await
        .unwrap();
    assert_eq!(h.left().await, 0, "the forced charge went past the limit");

    assert_eq!(
        h.metric("sluice_rls_counter_writes_refused_total{reason=\"unsigned\"}"),
        "sluice_rls_counter_writes_refused_total{reason=\"unsigned\"} 3"
    );
    assert_eq!(
        h.metric("sluice_rls_counter_writes_refused_total{reason=\"bad_signature\"}"),
        "sluice_rls_counter_writes_refused_total{reason=\"bad_signature\"} 1"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn five_thousand_descriptors_are_refused_and_count_nothing() {
    let mut h = start().await;
    let one = with_hits(
        descriptor(&[("tenant", "acme"), ("model", "m"), ("tokens", "total")]),
        1,
    );
    let flood = request("sluice", vec![one.clone(); 5_000]);
    let status = h.client.should_rate_limit(flood).await.unwrap_err();
    assert_eq!(status.code(), tonic::Code::InvalidArgument, "{status:?}");
    assert!(
        status.message().contains("5000 descriptors"),
        "{}",
        status.message()
    );
    assert_eq!(h.left().await, TOKENS_PER_HOUR, "nothing counted");
    assert_eq!(
        h.metric("sluice_rls_requests_refused_total{reason=\"too_many_descriptors\"}"),
        "sluice_rls_requests_refused_total{reason=\"too_many_descriptors\"} 1"
    );
    // At the bound, the call is decided as usual (the store merges the
    // repeated counter: it moves once).
    let bounded = request("sluice", vec![one; 64]);
    let answer = h.client.should_rate_limit(bounded).await.unwrap();
    assert_eq!(answer.into_inner().statuses.len(), 64);
    assert!(h.left().await < TOKENS_PER_HOUR, "counted");
}
