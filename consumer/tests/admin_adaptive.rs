//! The admin routes of the controllers' overrides and the fair-share
//! weights, on real Redis: a PUT sets what the GET shows, `auto` / `default`
//! hand it back, and a missing or bad value is a 400 that says why.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // tests fail loudly

mod common;

use sluice_consumer::{admin_router, ControllerView, Metrics, Pacer, PacingConfig, WritePolicy};
use sluice_testkit::{http_request, HttpResponse, RedisServer};
use std::net::SocketAddr;
use std::sync::Arc;

/// The admin API over `redis`, open to writes (a loopback listener).
async fn admin(redis: &RedisServer) -> SocketAddr {
    let metrics = Arc::new(Metrics::default());
    let pacer = Pacer::new(
        common::conn(redis),
        PacingConfig::default(),
        Some(metrics.clone()),
    )
    .unwrap();
    let router = admin_router(metrics, Arc::new(pacer), WritePolicy::Open);
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, router).await });
    addr
}

async fn call(addr: SocketAddr, method: &'static str, path: &str) -> HttpResponse {
    let path = path.to_string();
    tokio::task::spawn_blocking(move || http_request(addr, method, &path, &[], b"").unwrap())
        .await
        .unwrap()
}

fn assert_answer(response: &HttpResponse, status: u16, body: &str) {
    assert_eq!(
        (response.status, response.body.as_str()),
        (status, body),
        "{response:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_override_is_set_shown_and_handed_back() {
    let redis = RedisServer::start().unwrap();
    let addr = admin(&redis).await;
    let shown = |response: HttpResponse| -> ControllerView {
        assert_eq!(response.status, 200, "{response:?}");
        serde_json::from_str(&response.body).unwrap()
    };

    let missing = call(addr, "PUT", "/controller/m").await;
    assert_answer(&missing, 400, "limit=<n>|auto required\n");
    let zero = call(addr, "PUT", "/controller/m?limit=0").await;
    assert_answer(&zero, 400, "limit must be a whole number ≥ 1 or 'auto'\n");
    assert_eq!(shown(call(addr, "GET", "/controller/m").await).manual, None);

    let set = call(addr, "PUT", "/controller/m?limit=3").await;
    assert_answer(&set, 200, "applied\n");
    assert_eq!(
        shown(call(addr, "GET", "/controller/m").await).manual,
        Some(3.0)
    );
    let auto = call(addr, "PUT", "/controller/m?limit=auto").await;
    assert_answer(&auto, 200, "applied\n");
    assert_eq!(shown(call(addr, "GET", "/controller/m").await).manual, None);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_weight_is_set_listed_and_handed_back() {
    let redis = RedisServer::start().unwrap();
    let addr = admin(&redis).await;
    let listed = |response: HttpResponse| -> serde_json::Value {
        assert_eq!(response.status, 200, "{response:?}");
        serde_json::from_str(&response.body).unwrap()
    };

    let missing = call(addr, "PUT", "/weights/acme").await;
    assert_answer(&missing, 400, "weight=<w>|default required\n");
    let negative = call(addr, "PUT", "/weights/acme?weight=-1").await;
    assert_answer(
        &negative,
        400,
        "weight must be a positive number or 'default'\n",
    );
    assert_eq!(
        listed(call(addr, "GET", "/weights").await),
        serde_json::json!({})
    );

    let set = call(addr, "PUT", "/weights/acme?weight=2.5").await;
    assert_answer(&set, 200, "applied\n");
    assert_eq!(
        listed(call(addr, "GET", "/weights").await),
        serde_json::json!({"acme": 2.5})
    );
    let default = call(addr, "PUT", "/weights/acme?weight=default").await;
    assert_answer(&default, 200, "applied\n");
    assert_eq!(
        listed(call(addr, "GET", "/weights").await),
        serde_json::json!({})
    );
}
