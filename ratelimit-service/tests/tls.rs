//! TLS on both legs Envoy Gateway uses: sluice-rls → management server
//! (mutual TLS, as envoy-gateway:18001 asks), and Envoy → sluice-rls's gRPC
//! listener (client certificates required). Certificates come from the
//! `openssl` command line, made fresh for each run.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // tests fail loudly

mod common;

use common::xds_server::ManagementServer;
use sluice_proto::pb::envoy::service::ratelimit::v3::rate_limit_service_client::RateLimitServiceClient;
use sluice_ratelimit::config::{parse_file, LimitsConfig};
use sluice_ratelimit::server::{run_with_tls, Deps};
use sluice_ratelimit::xds::{to_resource, XdsClient, XdsOptions, XdsTls};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;
use tonic::transport::{Certificate, ClientTlsConfig, Endpoint, Identity, ServerTlsConfig};

const LIMITS: &str = "domain: tls\ndescriptors:\n  - key: tenant\n    rate_limit: { unit: minute, requests_per_unit: 5, name: tenant-rpm }\n";

/// A CA, and a server (`localhost`, 127.0.0.1) and a client certificate it signed.
struct Pki {
    _dir: tempfile::TempDir,
    ca: Vec<u8>,
    server: (Vec<u8>, Vec<u8>),
    client: (Vec<u8>, Vec<u8>),
}

fn openssl(dir: &Path, args: &[&str]) {
    let status = Command::new("openssl")
        .args(args)
        .current_dir(dir)
        .stderr(std::process::Stdio::null())
        .status()
        .expect("openssl on PATH");
    assert!(status.success(), "openssl {args:?}");
}

fn pki() -> Pki {
    // The test's own TLS (management server, RLS client) needs it too.
    let _ = rustls::crypto::ring::default_provider().install_default();
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let ec = [
        "-newkey",
        "ec",
        "-pkeyopt",
        "ec_paramgen_curve:prime256v1",
        "-nodes",
    ];
    let mut ca = vec![
        "req",
        "-x509",
        "-days",
        "1",
        "-subj",
        "/CN=test-ca",
        "-keyout",
        "ca.key",
        "-out",
        "ca.crt",
    ];
    ca.extend(ec);
    openssl(d, &ca);
    for (name, ext) in [
        (
            "server",
            "subjectAltName=DNS:localhost,IP:127.0.0.1\nextendedKeyUsage=serverAuth\n",
        ),
        (
            "client",
            "subjectAltName=DNS:sluice-rls\nextendedKeyUsage=clientAuth\n",
        ),
    ] {
        std::fs::write(d.join(format!("{name}.ext")), ext).unwrap();
        let (key, csr, crt, extfile) = (
            format!("{name}.key"),
            format!("{name}.csr"),
            format!("{name}.crt"),
            format!("{name}.ext"),
        );
        let subject = format!("/CN={name}");
        let mut req = vec!["req", "-subj", &subject, "-keyout", &key, "-out", &csr];
        req.extend(ec);
        openssl(d, &req);
        openssl(
            d,
            &[
                "x509",
                "-req",
                "-in",
                &csr,
                "-CA",
                "ca.crt",
                "-CAkey",
                "ca.key",
                "-CAcreateserial",
                "-days",
                "1",
                "-out",
                &crt,
                "-extfile",
                &extfile,
            ],
        );
    }
    let read = |name: &str| std::fs::read(d.join(name)).unwrap();
    Pki {
        ca: read("ca.crt"),
        server: (read("server.crt"), read("server.key")),
        client: (read("client.crt"), read("client.key")),
        _dir: dir,
    }
}

#[tokio::test]
async fn xds_over_mutual_tls() {
    let pki = pki();
    let server_tls = ServerTlsConfig::new()
        .identity(Identity::from_pem(&pki.server.0, &pki.server.1))
        .client_ca_root(Certificate::from_pem(&pki.ca));
    let server = ManagementServer::start_with_tls(None, Some(server_tls)).await;
    let file = parse_file(Path::new("tls.yaml"), LIMITS).unwrap();
    server.set("v1", &[to_resource("tls", &file)]);

    let start = |identity: Option<(Vec<u8>, Vec<u8>)>| {
        let limiter = common::memory_limiter(LimitsConfig::from_sources(&[]).unwrap());
        let (client, versions) = XdsClient::new(
            XdsOptions {
                // The certificate names localhost, not the address's host.
                server: server.addr.to_string(),
                backoff_initial: Duration::from_millis(50),
                backoff_max: Duration::from_millis(200),
                tls: Some(XdsTls {
                    ca: pki.ca.clone(),
                    identity,
                    server_name: Some("localhost".into()),
                }),
                ..Default::default()
            },
            limiter.clone(),
        );
        let (stop, mut stopped) = tokio::sync::watch::channel(false);
        tokio::spawn(client.run(async move {
            let _ = stopped.wait_for(|s| *s).await;
        }));
        (limiter, versions, stop)
    };

    let (limiter, mut versions, _stop) = start(Some(pki.client.clone()));
    tokio::time::timeout(Duration::from_secs(10), versions.wait_for(Option::is_some))
        .await
        .expect("config over mutual TLS within 10 s")
        .unwrap();
    assert!(limiter.config().has_domain("tls"));

    // Without a client certificate the server refuses: no config arrives.
    let (limiter, versions, _stop) = start(None);
    tokio::time::sleep(Duration::from_millis(800)).await;
    assert!(versions.borrow().is_none());
    assert!(!limiter.config().has_domain("tls"));
}

#[tokio::test]
async fn grpc_listener_with_tls_and_client_certificates() {
    let pki = pki();
    let config =
        LimitsConfig::from_sources(&[(PathBuf::from("tls.yaml"), LIMITS.to_string())]).unwrap();
    let grpc = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = grpc.local_addr().unwrap();
    let tls = ServerTlsConfig::new()
        .identity(Identity::from_pem(&pki.server.0, &pki.server.1))
        .client_ca_root(Certificate::from_pem(&pki.ca));
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    tokio::spawn(run_with_tls(
        grpc,
        None,
        Deps {
            limiter: common::memory_limiter(config),
            guard: Default::default(),
            config_path: None,
            reload_interval: Duration::ZERO,
            ext_authz: None,
            deferral: None,
        },
        Some(tls),
        async {
            let _ = stopped.await;
        },
    ));
    let request = common::one_entry_request("tls", "tenant", "acme");
    let client_tls = |identity: bool| {
        let mut config = ClientTlsConfig::new()
            .ca_certificate(Certificate::from_pem(&pki.ca))
            .domain_name("localhost");
        if identity {
            config = config.identity(Identity::from_pem(&pki.client.0, &pki.client.1));
        }
        config
    };
    let url = format!("https://{addr}");
    let channel = Endpoint::from_shared(url.clone())
        .unwrap()
        .tls_config(client_tls(true))
        .unwrap()
        .connect()
        .await
        .unwrap();
    let response = RateLimitServiceClient::new(channel)
        .should_rate_limit(request.clone())
        .await
        .unwrap()
        .into_inner();
    assert_eq!(response.statuses[0].limit_remaining, 4);

    let anonymous = async {
        let channel = Endpoint::from_shared(url)
            .unwrap()
            .tls_config(client_tls(false))
            .unwrap()
            .connect()
            .await
            .map_err(|e| e.to_string())?;
        RateLimitServiceClient::new(channel)
            .should_rate_limit(request)
            .await
            .map_err(|e| e.to_string())
    };
    assert!(
        anonymous.await.is_err(),
        "a client without a certificate is refused"
    );
    let _ = stop.send(());
}
