//! envoyproxy/ratelimit's environment variables, for installs that configure
//! the service only through them (Envoy Gateway's generated Deployment):
//! with `SLUICE_RLS_UPSTREAM_ENV=true`, each upstream variable that is set
//! becomes the matching sluice-rls flag, unless that flag's own variable is
//! set too. Upstream's answers, counters and metric names come with it:
//! `--counting increment-all`, `--key-layout upstream`, `--upstream-metrics`,
//! and no rate-limit headers unless `LIMIT_RESPONSE_HEADERS_ENABLED`.

use std::time::Duration;

/// The switch that turns the translation on.
pub const SWITCH: &str = "SLUICE_RLS_UPSTREAM_ENV";

/// A variable that cannot be translated.
#[derive(Debug, thiserror::Error)]
#[error("{variable}={value}: {problem}")]
pub struct UpstreamEnvError {
    pub variable: &'static str,
    pub value: String,
    pub problem: &'static str,
}

/// One upstream variable → one flag, when sluice-rls's own variable is unset.
struct Plain {
    upstream: &'static str,
    own: &'static str,
    flag: &'static str,
}

/// Variables whose value carries over as is.
const PLAIN: &[Plain] = &[
    Plain {
        upstream: "CONFIG_GRPC_XDS_NODE_ID",
        own: "SLUICE_RLS_XDS_NODE_ID",
        flag: "--xds-node-id",
    },
    Plain {
        upstream: "CONFIG_GRPC_XDS_SERVER_TLS_SAN",
        own: "SLUICE_RLS_XDS_TLS_SERVER_NAME",
        flag: "--xds-tls-server-name",
    },
    Plain {
        upstream: "LIMIT_LIMIT_HEADER",
        own: "SLUICE_RLS_LIMIT_HEADER",
        flag: "--limit-header",
    },
    Plain {
        upstream: "LIMIT_REMAINING_HEADER",
        own: "SLUICE_RLS_REMAINING_HEADER",
        flag: "--remaining-header",
    },
    Plain {
        upstream: "LIMIT_RESET_HEADER",
        own: "SLUICE_RLS_RESET_HEADER",
        flag: "--reset-header",
    },
    Plain {
        upstream: "LOCAL_CACHE_SIZE_IN_BYTES",
        own: "SLUICE_RLS_LOCAL_CACHE_BYTES",
        flag: "--local-cache-bytes",
    },
    Plain {
        upstream: "CACHE_KEY_PREFIX",
        own: "SLUICE_RLS_CACHE_KEY_PREFIX",
        flag: "--cache-key-prefix",
    },
    Plain {
        upstream: "EXPIRATION_JITTER_MAX_SECONDS",
        own: "SLUICE_RLS_EXPIRATION_JITTER_MAX_S",
        flag: "--expiration-jitter-max-s",
    },
    Plain {
        upstream: "NEAR_LIMIT_RATIO",
        own: "SLUICE_RLS_NEAR_LIMIT_RATIO",
        flag: "--near-limit-ratio",
    },
    Plain {
        upstream: "XDS_CLIENT_MAX_MSG_SIZE_IN_BYTES",
        own: "SLUICE_RLS_XDS_MAX_MESSAGE_BYTES",
        flag: "--xds-max-message-bytes",
    },
];

/// Boolean variables (`true`) that turn a flag on.
const SWITCHES: &[Plain] = &[
    Plain {
        upstream: "MERGE_DOMAIN_CONFIG",
        own: "SLUICE_RLS_MERGE_DOMAINS",
        flag: "--merge-domains",
    },
    Plain {
        upstream: "SHADOW_MODE",
        own: "SLUICE_RLS_GLOBAL_SHADOW_MODE",
        flag: "--global-shadow-mode",
    },
    Plain {
        upstream: "QUOTA_MODE",
        own: "SLUICE_RLS_GLOBAL_QUOTA_MODE",
        flag: "--global-quota-mode",
    },
    Plain {
        upstream: "RESPONSE_DYNAMIC_METADATA",
        own: "SLUICE_RLS_RESPONSE_DYNAMIC_METADATA",
        flag: "--response-dynamic-metadata",
    },
    Plain {
        upstream: "FORCE_START_WITHOUT_INITIAL_CONFIG",
        own: "SLUICE_RLS_XDS_START_WITHOUT_CONFIG",
        flag: "--xds-start-without-config",
    },
];

/// Whether the translation is asked for.
pub fn enabled(env: impl Fn(&str) -> Option<String>) -> bool {
    is_true(env(SWITCH))
}

/// The flags upstream's variables stand for, given a reader of the environment.
pub fn flags(env: impl Fn(&str) -> Option<String>) -> Result<Vec<String>, UpstreamEnvError> {
    let mut out = Flags {
        env: &env,
        flags: Vec::new(),
    };
    for plain in PLAIN {
        if let Some(value) = env(plain.upstream) {
            out.add(plain.own, plain.flag, Some(value));
        }
    }
    for switch in SWITCHES {
        if is_true(env(switch.upstream)) {
            out.add(switch.own, switch.flag, None);
        }
    }
    out.add(
        "SLUICE_RLS_COUNTING",
        "--counting",
        Some("increment-all".into()),
    );
    // Upstream's keys: instances of both share counters during a migration.
    out.add(
        "SLUICE_RLS_KEY_LAYOUT",
        "--key-layout",
        Some("upstream".into()),
    );
    // Upstream's stats (statsd or Prometheus, always on there) under the names
    // its Prometheus mapping gives them: its dashboards keep working.
    out.add("SLUICE_RLS_UPSTREAM_METRICS", "--upstream-metrics", None);
    let headers = if is_true(env("LIMIT_RESPONSE_HEADERS_ENABLED")) {
        "upstream"
    } else {
        "off"
    };
    out.add(
        "SLUICE_RLS_RESPONSE_HEADERS",
        "--response-headers",
        Some(headers.into()),
    );
    config_source(&mut out)?;
    listeners(&mut out)?;
    tls(&mut out);
    redis(&mut out)?;
    backoff(&mut out)?;
    if env("LOG_FORMAT").as_deref() == Some("json") {
        out.add("SLUICE_LOG_FORMAT", "--log-format", Some("json".into()));
    }
    Ok(out.flags)
}

struct Flags<'e> {
    env: &'e dyn Fn(&str) -> Option<String>,
    flags: Vec<String>,
}

impl Flags<'_> {
    fn get(&self, name: &str) -> Option<String> {
        (self.env)(name).filter(|v| !v.is_empty())
    }

    /// Adds `flag [value]` unless sluice-rls's own variable `own` is set.
    fn add(&mut self, own: &str, flag: &str, value: Option<String>) {
        if (self.env)(own).is_some() {
            return;
        }
        self.flags.push(flag.to_string());
        self.flags.extend(value);
    }
}

fn is_true(value: Option<String>) -> bool {
    value.is_some_and(|v| v.eq_ignore_ascii_case("true") || v == "1")
}

/// `CONFIG_TYPE=FILE` (the default): the runtime directory; `GRPC_XDS_SOTW`: the server.
fn config_source(out: &mut Flags<'_>) -> Result<(), UpstreamEnvError> {
    let kind = out.get("CONFIG_TYPE").unwrap_or_else(|| "FILE".into());
    match kind.as_str() {
        "FILE" => {
            let root = out
                .get("RUNTIME_ROOT")
                .unwrap_or_else(|| "/srv/runtime_data/current".into());
            let sub = out.get("RUNTIME_SUBDIRECTORY").unwrap_or_default();
            let app = out
                .get("RUNTIME_APPDIRECTORY")
                .unwrap_or_else(|| "config".into());
            let path: std::path::PathBuf =
                [root, sub, app].iter().filter(|p| !p.is_empty()).collect();
            out.add(
                "SLUICE_RLS_CONFIG",
                "--config",
                Some(path.display().to_string()),
            );
        }
        "GRPC_XDS_SOTW" => {
            let server = out
                .get("CONFIG_GRPC_XDS_SERVER_URL")
                .unwrap_or_else(|| "localhost:18000".into());
            out.add("SLUICE_RLS_XDS_SERVER", "--xds-server", Some(server));
            if let Some(metadata) = out.get("CONFIG_GRPC_XDS_NODE_METADATA") {
                // Upstream writes `k:v` or `k=v`, comma-separated.
                let metadata = metadata.replace(':', "=");
                out.add(
                    "SLUICE_RLS_XDS_NODE_METADATA",
                    "--xds-node-metadata",
                    Some(metadata),
                );
            }
        }
        _ => {
            return Err(UpstreamEnvError {
                variable: "CONFIG_TYPE",
                value: kind,
                problem: "expected FILE or GRPC_XDS_SOTW",
            })
        }
    }
    Ok(())
}

/// `GRPC_HOST`/`GRPC_PORT` and upstream's HTTP port (`/healthcheck`) as the admin listener.
fn listeners(out: &mut Flags<'_>) -> Result<(), UpstreamEnvError> {
    let grpc = listen_addr(out, "GRPC_HOST", "GRPC_PORT", 8081)?;
    out.add("SLUICE_RLS_GRPC_ADDR", "--grpc-addr", Some(grpc));
    let admin = listen_addr(out, "HOST", "PORT", 8080)?;
    out.add("SLUICE_RLS_ADMIN_ADDR", "--admin-addr", Some(admin));
    Ok(())
}

/// `host:port` from one of upstream's host and port pairs (all interfaces
/// when the host is unset).
fn listen_addr(
    out: &Flags<'_>,
    host_variable: &str,
    port_variable: &'static str,
    default_port: u16,
) -> Result<String, UpstreamEnvError> {
    let host = out.get(host_variable).unwrap_or_else(|| "0.0.0.0".into());
    let port = port(out.get(port_variable), port_variable, default_port)?;
    Ok(format!("{host}:{port}"))
}

fn port(
    value: Option<String>,
    variable: &'static str,
    default: u16,
) -> Result<u16, UpstreamEnvError> {
    match value {
        None => Ok(default),
        Some(text) => text.parse().map_err(|_| UpstreamEnvError {
            variable,
            value: text,
            problem: "not a port number",
        }),
    }
}

/// An upstream variable, ours, and our flag.
type Renamed = (&'static str, &'static str, &'static str);

/// Upstream's TLS switches, each with the variables it turns on.
const TLS_VARIABLES: [(&str, [Renamed; 3]); 2] = [
    (
        "CONFIG_GRPC_XDS_SERVER_USE_TLS",
        [
            (
                "CONFIG_GRPC_XDS_SERVER_TLS_CACERT",
                "SLUICE_RLS_XDS_TLS_CA",
                "--xds-tls-ca",
            ),
            (
                "CONFIG_GRPC_XDS_CLIENT_TLS_CERT",
                "SLUICE_RLS_XDS_TLS_CERT",
                "--xds-tls-cert",
            ),
            (
                "CONFIG_GRPC_XDS_CLIENT_TLS_KEY",
                "SLUICE_RLS_XDS_TLS_KEY",
                "--xds-tls-key",
            ),
        ],
    ),
    (
        "GRPC_SERVER_USE_TLS",
        [
            (
                "GRPC_SERVER_TLS_CERT",
                "SLUICE_RLS_GRPC_TLS_CERT",
                "--grpc-tls-cert",
            ),
            (
                "GRPC_SERVER_TLS_KEY",
                "SLUICE_RLS_GRPC_TLS_KEY",
                "--grpc-tls-key",
            ),
            (
                "GRPC_SERVER_TLS_CA_CERT",
                "SLUICE_RLS_GRPC_TLS_CLIENT_CA",
                "--grpc-tls-client-ca",
            ),
        ],
    ),
];

fn tls(out: &mut Flags<'_>) {
    for (switch, variables) in TLS_VARIABLES {
        if !is_true(out.get(switch)) {
            continue;
        }
        for (upstream, own, flag) in variables {
            if let Some(value) = out.get(upstream) {
                out.add(own, flag, Some(value));
            }
        }
    }
}

/// `REDIS_SOCKET_TYPE=tcp` + `REDIS_URL=host:port` (+ `REDIS_AUTH`, `REDIS_TLS`).
fn redis(out: &mut Flags<'_>) -> Result<(), UpstreamEnvError> {
    let Some(address) = out.get("REDIS_URL") else {
        return Ok(());
    };
    if out.get("REDIS_SOCKET_TYPE").as_deref() != Some("tcp") {
        return Err(UpstreamEnvError {
            variable: "REDIS_SOCKET_TYPE",
            value: out.get("REDIS_SOCKET_TYPE").unwrap_or_default(),
            problem: "only tcp is supported (set REDIS_SOCKET_TYPE=tcp)",
        });
    }
    let scheme = if is_true(out.get("REDIS_TLS")) {
        "rediss"
    } else {
        "redis"
    };
    let auth = out
        .get("REDIS_AUTH")
        .map(|password| format!(":{password}@"))
        .unwrap_or_default();
    out.add("SLUICE_RLS_STORE", "--store", Some("redis".into()));
    out.add(
        "SLUICE_REDIS_URL",
        "--redis-url",
        Some(format!("{scheme}://{auth}{address}")),
    );
    Ok(())
}

/// Go durations (`10s`, `500ms`, `1m`) of the xDS backoff, in milliseconds.
fn backoff(out: &mut Flags<'_>) -> Result<(), UpstreamEnvError> {
    let pairs = [
        (
            "XDS_CLIENT_BACKOFF_INITIAL_INTERVAL",
            "SLUICE_RLS_XDS_BACKOFF_INITIAL_MS",
            "--xds-backoff-initial-ms",
        ),
        (
            "XDS_CLIENT_BACKOFF_MAX_INTERVAL",
            "SLUICE_RLS_XDS_BACKOFF_MAX_MS",
            "--xds-backoff-max-ms",
        ),
    ];
    for (upstream, own, flag) in pairs {
        if let Some(text) = out.get(upstream) {
            let duration = go_duration(&text).ok_or(UpstreamEnvError {
                variable: upstream,
                value: text,
                problem: "not a duration like 10s, 500ms or 1m",
            })?;
            out.add(own, flag, Some(duration.as_millis().to_string()));
        }
    }
    Ok(())
}

/// The simple forms of Go's `time.ParseDuration`: one number and one unit.
fn go_duration(text: &str) -> Option<Duration> {
    let split = text.find(|c: char| !c.is_ascii_digit() && c != '.')?;
    let (number, unit) = text.split_at(split);
    let number: f64 = number.parse().ok()?;
    let millis = match unit {
        "ms" => number,
        "s" => number * 1_000.0,
        "m" => number * 60_000.0,
        "h" => number * 3_600_000.0,
        _ => return None,
    };
    Some(Duration::from_millis(millis as u64))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    fn flags_of(vars: &[(&str, &str)]) -> Result<Vec<String>, UpstreamEnvError> {
        let vars: HashMap<String, String> = vars
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        flags(|name| vars.get(name).cloned())
    }

    /// The flags of `vars`, joined; fails the test unless each of `expected`
    /// is among them.
    fn flags_with(vars: &[(&str, &str)], expected: &[&str]) -> String {
        let flags = flags_of(vars).unwrap().join(" ");
        for expected in expected {
            assert!(flags.contains(expected), "{expected} missing in {flags}");
        }
        flags
    }

    /// The environment Envoy Gateway's generated rate-limit Deployment sets.
    #[test]
    fn envoy_gateway_deployment() {
        let flags = flags_with(
            &[
                ("CONFIG_TYPE", "GRPC_XDS_SOTW"),
                ("CONFIG_GRPC_XDS_SERVER_URL", "envoy-gateway:18001"),
                ("CONFIG_GRPC_XDS_NODE_ID", "envoy-ratelimit"),
                ("GRPC_SERVER_USE_TLS", "true"),
                ("GRPC_SERVER_TLS_CERT", "/certs/tls.crt"),
                ("GRPC_SERVER_TLS_KEY", "/certs/tls.key"),
                ("GRPC_SERVER_TLS_CA_CERT", "/certs/ca.crt"),
                ("CONFIG_GRPC_XDS_SERVER_USE_TLS", "true"),
                ("CONFIG_GRPC_XDS_CLIENT_TLS_CERT", "/certs/tls.crt"),
                ("CONFIG_GRPC_XDS_CLIENT_TLS_KEY", "/certs/tls.key"),
                ("CONFIG_GRPC_XDS_SERVER_TLS_CACERT", "/certs/ca.crt"),
                ("FORCE_START_WITHOUT_INITIAL_CONFIG", "true"),
                ("REDIS_SOCKET_TYPE", "tcp"),
                ("REDIS_URL", "redis.redis.svc:6379"),
                ("USE_STATSD", "true"),
            ],
            &[
                "--xds-server envoy-gateway:18001",
                "--xds-node-id envoy-ratelimit",
                "--xds-start-without-config",
                "--xds-tls-ca /certs/ca.crt",
                "--xds-tls-cert /certs/tls.crt",
                "--xds-tls-key /certs/tls.key",
                "--grpc-tls-cert /certs/tls.crt",
                "--grpc-tls-key /certs/tls.key",
                "--grpc-tls-client-ca /certs/ca.crt",
                "--store redis",
                "--redis-url redis://redis.redis.svc:6379",
                "--grpc-addr 0.0.0.0:8081",
                "--admin-addr 0.0.0.0:8080",
                "--counting increment-all",
                "--key-layout upstream",
                "--upstream-metrics",
                "--response-headers off",
            ],
        );
        assert!(!flags.contains("--config"), "{flags}");
    }

    #[test]
    fn files_and_switches_and_own_variables_win() {
        let flags = flags_with(
            &[
                ("RUNTIME_ROOT", "/data"),
                ("RUNTIME_SUBDIRECTORY", "ratelimit"),
                ("SHADOW_MODE", "true"),
                ("LIMIT_RESPONSE_HEADERS_ENABLED", "true"),
                ("XDS_CLIENT_BACKOFF_INITIAL_INTERVAL", "10s"),
                ("REDIS_SOCKET_TYPE", "tcp"),
                ("REDIS_URL", "redis:6379"),
                ("REDIS_AUTH", "pw"),
                ("REDIS_TLS", "true"),
                ("SLUICE_RLS_COUNTING", "all-or-nothing"),
            ],
            &[
                "--config /data/ratelimit/config",
                "--global-shadow-mode",
                "--response-headers upstream",
                "--xds-backoff-initial-ms 10000",
                "--redis-url rediss://:pw@redis:6379",
            ],
        );
        assert!(!flags.contains("--counting"), "own variable wins: {flags}");
    }

    #[test]
    fn key_prefix_and_expiry_jitter() {
        flags_with(
            &[
                ("CACHE_KEY_PREFIX", "rl:"),
                ("EXPIRATION_JITTER_MAX_SECONDS", "300"),
                ("NEAR_LIMIT_RATIO", "0.9"),
            ],
            &[
                "--key-layout upstream",
                "--cache-key-prefix rl:",
                "--expiration-jitter-max-s 300",
                "--near-limit-ratio 0.9",
            ],
        );
        let own = flags_of(&[("SLUICE_RLS_KEY_LAYOUT", "sluice")])
            .unwrap()
            .join(" ");
        assert!(!own.contains("--key-layout"), "own variable wins: {own}");
    }

    #[test]
    fn what_cannot_be_translated_is_an_error() {
        let err = flags_of(&[("CONFIG_TYPE", "CONSUL")]).unwrap_err();
        assert!(err.to_string().contains("CONFIG_TYPE=CONSUL"), "{err}");
        let err = flags_of(&[("REDIS_URL", "/var/run/redis.sock")]).unwrap_err();
        assert!(err.to_string().contains("REDIS_SOCKET_TYPE"), "{err}");
        let err = flags_of(&[("GRPC_PORT", "x")]).unwrap_err();
        assert!(err.to_string().contains("not a port"), "{err}");
        assert_eq!(go_duration("500ms"), Some(Duration::from_millis(500)));
        assert_eq!(go_duration("1m"), Some(Duration::from_secs(60)));
        assert_eq!(go_duration("ten"), None);
    }
}
