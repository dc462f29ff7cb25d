//! The ext_authz Check handler, called directly (Envoy end to end is in tests/).
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // tests fail loudly

use sluice_admission::config::FilterConfig;
use sluice_proto::pb::envoy::config::core::v3::Metadata;
use sluice_proto::pb::envoy::service::auth::v3::attribute_context::{
    HttpRequest, Request as AttrRequest,
};
use sluice_proto::pb::envoy::service::auth::v3::authorization_server::Authorization;
use sluice_proto::pb::envoy::service::auth::v3::check_response::HttpResponse;
use sluice_proto::pb::envoy::service::auth::v3::{AttributeContext, CheckRequest, CheckResponse};
use sluice_proto::pb::google::protobuf::{value::Kind, Struct, Value};
use sluice_ratelimit::config::LimitsConfig;
use sluice_ratelimit::ext_authz::ExtAuthzService;
use std::path::PathBuf;

mod common;

const LIMITS: &str = "domain: sluice\ndescriptors:\n  - key: tenant\n    value: from-jwt\n    descriptors:\n      - key: model\n        rate_limit: { unit: hour, requests_per_unit: 1, name: jwt-rph }\n";

fn service(config: &str) -> ExtAuthzService {
    let limits = LimitsConfig::from_sources(&[(PathBuf::from("l.yaml"), LIMITS.into())]).unwrap();
    let limiter = common::memory_limiter(limits);
    ExtAuthzService::new(limiter, FilterConfig::from_json(config.as_bytes()).unwrap())
}

/// What `service` answers to `request`.
async fn ask(service: &ExtAuthzService, request: CheckRequest) -> CheckResponse {
    service
        .check(tonic::Request::new(request))
        .await
        .unwrap()
        .into_inner()
}

fn check(body: &str, claims: Option<&str>) -> CheckRequest {
    let string = |s: &str| Value {
        kind: Some(Kind::StringValue(s.into())),
    };
    let metadata = claims.map(|tenant| {
        let payload = Struct {
            fields: [("tenant".to_string(), string(tenant))]
                .into_iter()
                .collect(),
        };
        let jwt = Struct {
            fields: [(
                "payload".to_string(),
                Value {
                    kind: Some(Kind::StructValue(payload)),
                },
            )]
            .into_iter()
            .collect(),
        };
        Metadata {
            filter_metadata: [("envoy.filters.http.jwt_authn".to_string(), jwt)]
                .into_iter()
                .collect(),
            ..Default::default()
        }
    });
    CheckRequest {
        attributes: Some(AttributeContext {
            request: Some(AttrRequest {
                http: Some(HttpRequest {
                    method: "POST".into(),
                    path: "/v1/chat/completions".into(),
                    headers: [("content-type".to_string(), "application/json".to_string())]
                        .into_iter()
                        .collect(),
                    raw_body: body.as_bytes().to_vec(),
                    ..Default::default()
                }),
                ..Default::default()
            }),
            metadata_context: metadata,
            ..Default::default()
        }),
    }
}

const CONFIG: &str = r#"{"tenant": {"property": ["metadata", "filter_metadata", "envoy.filters.http.jwt_authn", "payload", "tenant"]}}"#;
const BODY: &str = r#"{"model": "gpt-4o", "messages": [{"role": "user", "content": "hi"}]}"#;

#[tokio::test]
async fn tenant_from_jwt_metadata_and_decisions() {
    let service = service(CONFIG);
    let first = ask(&service, check(BODY, Some("from-jwt"))).await;
    let Some(HttpResponse::OkResponse(ok)) = first.http_response else {
        panic!("{first:?}")
    };
    let upstream: Vec<_> = ok
        .headers
        .iter()
        .filter_map(|h| h.header.as_ref())
        .map(|h| h.key.as_str())
        .collect();
    assert!(upstream.contains(&"x-sluice-prompt-tokens"), "{upstream:?}");
    assert!(ok
        .response_headers_to_add
        .iter()
        .any(|h| h.header.as_ref().unwrap().key == "RateLimit-Remaining"));

    // The tenant came from the JWT claim: its 1-per-hour limit now rejects.
    let second = ask(&service, check(BODY, Some("from-jwt"))).await;
    let Some(HttpResponse::DeniedResponse(denied)) = second.http_response else {
        panic!("{second:?}")
    };
    assert_eq!(denied.status.unwrap().code, 429);
    assert!(
        denied.body.contains("rate_limit_exceeded"),
        "{}",
        denied.body
    );

    // No claim: 401, nothing counted.
    let third = ask(&service, check(BODY, None)).await;
    let Some(HttpResponse::DeniedResponse(denied)) = third.http_response else {
        panic!("{third:?}")
    };
    assert_eq!(denied.status.unwrap().code, 401);
}

#[tokio::test]
async fn non_inference_requests_pass_untouched() {
    let service = service(CONFIG);
    let mut request = check("", None);
    if let Some(http) = request
        .attributes
        .as_mut()
        .and_then(|a| a.request.as_mut())
        .and_then(|r| r.http.as_mut())
    {
        http.path = "/v1/models".into();
        http.method = "GET".into();
    }
    let answer = ask(&service, request).await;
    assert!(
        matches!(answer.http_response, Some(HttpResponse::OkResponse(_))),
        "{answer:?}"
    );
    let empty = ask(&service, CheckRequest::default()).await;
    assert!(matches!(
        empty.http_response,
        Some(HttpResponse::OkResponse(_))
    ));
}
