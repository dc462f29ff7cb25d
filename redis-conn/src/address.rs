//! One string names any Redis deployment Sluice can use.
//!
//! ```text
//! redis://[[user]:password@]host[:port][/db]            one server (also rediss://, unix://)
//! redis+cluster://[[user]:password@]host:port,host:port  Redis Cluster: seed nodes
//! redis+sentinel://[[user]:password@]host:port,…/master[/db][?sentinel_auth=same]
//! ```
//!
//! `rediss` instead of `redis` turns TLS on for every node (and, for
//! Sentinel, for the sentinels too). Credentials are those of the data nodes
//! (an ACL user, or only a password); sentinels are asked without
//! credentials unless `sentinel_auth=same`. A password may also come from a
//! file (see [`crate::RedisOptions::password_file`]), which wins over the URL.

use redis::sentinel::SentinelNodeConnectionInfo;
use redis::{ConnectionInfo, IntoConnectionInfo, TlsMode};
use std::fmt;

const CLUSTER_PORT: u16 = 6379;
const SENTINEL_PORT: u16 = 26379;

/// Where the data lives, resolved from a URL.
#[derive(Clone)]
pub enum Topology {
    /// One server (possibly a managed endpoint that fails over by itself).
    Standalone(ConnectionInfo),
    /// Seed nodes of a Redis Cluster; the client learns the rest.
    Cluster(Vec<ConnectionInfo>),
    /// A master found through sentinels, followed across failovers.
    Sentinel {
        sentinels: Vec<ConnectionInfo>,
        master_name: String,
        node: SentinelNodeConnectionInfo,
        db: i64,
    },
}

impl Topology {
    pub fn kind(&self) -> &'static str {
        match self {
            Topology::Standalone(_) => "standalone",
            Topology::Cluster(_) => "cluster",
            Topology::Sentinel { .. } => "sentinel",
        }
    }
}

impl fmt::Debug for Topology {
    // Never prints credentials.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let addrs = |infos: &[ConnectionInfo]| {
            infos
                .iter()
                .map(|i| i.addr().to_string())
                .collect::<Vec<_>>()
                .join(",")
        };
        match self {
            Topology::Standalone(info) => write!(f, "standalone {}", info.addr()),
            Topology::Cluster(nodes) => write!(f, "cluster seeds {}", addrs(nodes)),
            Topology::Sentinel {
                sentinels,
                master_name,
                ..
            } => write!(
                f,
                "sentinel master {master_name:?} via {}",
                addrs(sentinels)
            ),
        }
    }
}

/// A Redis URL that cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum AddressError {
    #[error("redis URL has no scheme (expected redis://, rediss://, redis+cluster:// or redis+sentinel://)")]
    NoScheme,
    #[error("redis URL: {0}")]
    Invalid(String),
    #[error("redis URL: {what}: {source}")]
    Redis {
        what: String,
        #[source]
        source: redis::RedisError,
    },
}

/// Parses `url`; `password`, when given, replaces the URL's password.
pub fn parse(url: &str, password: Option<&str>) -> Result<Topology, AddressError> {
    let (scheme, rest) = url.split_once("://").ok_or(AddressError::NoScheme)?;
    let (base, kind) = match scheme.split_once('+') {
        Some((base @ ("redis" | "rediss"), kind @ ("cluster" | "sentinel"))) => (base, kind),
        _ => {
            let info = url
                .into_connection_info()
                .map_err(|source| AddressError::Redis {
                    what: "not a redis URL".into(),
                    source,
                })?;
            return Ok(Topology::Standalone(with_password(info, password)));
        }
    };
    let parts = Parts::split(rest)?;
    match kind {
        "cluster" => cluster(base, &parts, password),
        _ => sentinel(base, &parts, password),
    }
}

/// `[userinfo@]host,host[/path][?query]`
struct Parts<'a> {
    userinfo: Option<&'a str>,
    hosts: Vec<&'a str>,
    path: Vec<&'a str>,
    query: Vec<(&'a str, &'a str)>,
}

impl<'a> Parts<'a> {
    fn split(rest: &'a str) -> Result<Self, AddressError> {
        let (rest, query) = match rest.split_once('?') {
            Some((rest, query)) => (rest, query),
            None => (rest, ""),
        };
        let (authority, path) = match rest.split_once('/') {
            Some((authority, path)) => (authority, path),
            None => (rest, ""),
        };
        // The password may contain '@' only percent-encoded; the last '@' ends it.
        let (userinfo, hosts) = match authority.rsplit_once('@') {
            Some((userinfo, hosts)) => (Some(userinfo), hosts),
            None => (None, authority),
        };
        let hosts: Vec<&str> = hosts.split(',').map(str::trim).collect();
        if hosts.iter().any(|h| h.is_empty()) {
            return Err(AddressError::Invalid("empty host in the node list".into()));
        }
        let query = query
            .split('&')
            .filter(|pair| !pair.is_empty())
            .map(|pair| pair.split_once('=').unwrap_or((pair, "")))
            .collect();
        Ok(Parts {
            userinfo,
            hosts,
            path: path.split('/').filter(|p| !p.is_empty()).collect(),
            query,
        })
    }

    fn node_url(&self, base: &str, host: &str, default_port: u16, db: &str) -> String {
        let host = with_port(host, default_port);
        match self.userinfo {
            Some(userinfo) => format!("{base}://{userinfo}@{host}/{db}"),
            None => format!("{base}://{host}/{db}"),
        }
    }
}

fn node_info(url: &str, password: Option<&str>) -> Result<ConnectionInfo, AddressError> {
    let info = url
        .into_connection_info()
        .map_err(|source| AddressError::Redis {
            // The node's address only: the URL may hold a password.
            what: format!(
                "node {}",
                url.rsplit_once('@').map_or(url, |(_, host)| host)
            ),
            source,
        })?;
    Ok(with_password(info, password))
}

fn with_password(info: ConnectionInfo, password: Option<&str>) -> ConnectionInfo {
    match password {
        Some(password) => {
            let settings = info.redis_settings().clone().set_password(password);
            info.set_redis_settings(settings)
        }
        None => info,
    }
}

fn cluster(base: &str, parts: &Parts, password: Option<&str>) -> Result<Topology, AddressError> {
    if parts.path.iter().any(|p| *p != "0") {
        return Err(AddressError::Invalid(
            "a Redis Cluster has only database 0; drop the path".into(),
        ));
    }
    if !parts.query.is_empty() {
        return Err(AddressError::Invalid(
            "redis+cluster:// takes no query parameters".into(),
        ));
    }
    let nodes = parts
        .hosts
        .iter()
        .map(|host| node_info(&parts.node_url(base, host, CLUSTER_PORT, "0"), password))
        .collect::<Result<Vec<_>, _>>()?;
    Ok(Topology::Cluster(nodes))
}

fn sentinel(base: &str, parts: &Parts, password: Option<&str>) -> Result<Topology, AddressError> {
    let (master_name, db) = match parts.path.as_slice() {
        [master] => (*master, "0"),
        [master, db] => (*master, *db),
        _ => {
            return Err(AddressError::Invalid(
                "redis+sentinel:// needs the master's name as its path: …/mymaster[/db]".into(),
            ))
        }
    };
    let mut sentinel_auth_same = false;
    for (key, value) in &parts.query {
        match (*key, *value) {
            ("sentinel_auth", "same") => sentinel_auth_same = true,
            ("sentinel_auth", "none") => sentinel_auth_same = false,
            _ => {
                return Err(AddressError::Invalid(format!(
                    "unknown query parameter `{key}` (known: sentinel_auth=same|none)"
                )))
            }
        }
    }
    // The master's own settings (credentials, db), taken from a URL of the
    // same shape as a standalone one.
    let master = node_info(&parts.node_url(base, "master:1", 1, db), password)?;
    let mut node = SentinelNodeConnectionInfo::default()
        .set_redis_connection_info(master.redis_settings().clone());
    if base == "rediss" {
        node = node.set_tls_mode(TlsMode::Secure);
    }
    let sentinels = parts
        .hosts
        .iter()
        .map(|host| {
            let url = if sentinel_auth_same {
                parts.node_url(base, host, SENTINEL_PORT, "0")
            } else {
                format!("{base}://{}/0", with_port(host, SENTINEL_PORT))
            };
            node_info(&url, sentinel_auth_same.then_some(password).flatten())
        })
        .collect::<Result<Vec<_>, _>>()?;
    Ok(Topology::Sentinel {
        sentinels,
        master_name: master_name.to_string(),
        node,
        db: master.redis_settings().db(),
    })
}

fn with_port(host: &str, port: u16) -> String {
    if host.contains(':') {
        host.to_string()
    } else {
        format!("{host}:{port}")
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use redis::ConnectionAddr;

    fn tcp(info: &ConnectionInfo) -> (String, u16) {
        match info.addr() {
            ConnectionAddr::Tcp(host, port) => (host.clone(), *port),
            ConnectionAddr::TcpTls { host, port, .. } => (host.clone(), *port),
            other => panic!("not tcp: {other:?}"),
        }
    }

    #[test]
    fn standalone_urls_pass_through() {
        let Topology::Standalone(info) = parse("redis://u:p@127.0.0.1:7000/3", None).unwrap()
        else {
            panic!("standalone expected")
        };
        assert_eq!(tcp(&info), ("127.0.0.1".into(), 7000));
        assert_eq!(info.redis_settings().username(), Some("u"));
        assert_eq!(info.redis_settings().password(), Some("p"));
        assert_eq!(info.redis_settings().db(), 3);
    }

    #[test]
    fn a_password_file_wins_over_the_url() {
        let Topology::Standalone(info) = parse("redis://u:p@h:1", Some("from-file")).unwrap()
        else {
            panic!("standalone expected")
        };
        assert_eq!(info.redis_settings().password(), Some("from-file"));
        assert_eq!(info.redis_settings().username(), Some("u"));
    }

    #[test]
    fn cluster_seeds_carry_the_credentials_and_tls() {
        let Topology::Cluster(nodes) =
            parse("rediss+cluster://app:s%40cret@a:7000,b,c:7002", None).unwrap()
        else {
            panic!("cluster expected")
        };
        assert_eq!(nodes.len(), 3);
        assert_eq!(tcp(&nodes[1]), ("b".into(), 6379));
        assert!(nodes
            .iter()
            .all(|n| matches!(n.addr(), ConnectionAddr::TcpTls { .. })));
        assert!(nodes
            .iter()
            .all(|n| n.redis_settings().password() == Some("s@cret")));
    }

    #[test]
    fn cluster_refuses_a_database() {
        assert!(parse("redis+cluster://a:1/2", None).is_err());
        assert!(parse("redis+cluster://a:1/0", None).is_ok());
    }

    #[test]
    fn sentinel_needs_a_master_name() {
        let error = parse("redis+sentinel://s1:26379", None).err().unwrap();
        assert!(error.to_string().contains("master"), "{error}");
    }

    #[test]
    fn sentinels_are_asked_without_credentials_unless_told() {
        let Topology::Sentinel {
            sentinels,
            master_name,
            ..
        } = parse("redis+sentinel://u:p@s1,s2:5000/mymaster/2", None).unwrap()
        else {
            panic!("sentinel expected")
        };
        assert_eq!(master_name, "mymaster");
        assert_eq!(tcp(&sentinels[0]), ("s1".into(), 26379));
        assert_eq!(tcp(&sentinels[1]), ("s2".into(), 5000));
        assert!(sentinels
            .iter()
            .all(|s| s.redis_settings().password().is_none()));

        let Topology::Sentinel { sentinels, .. } =
            parse("redis+sentinel://u:p@s1/m?sentinel_auth=same", None).unwrap()
        else {
            panic!("sentinel expected")
        };
        assert_eq!(sentinels[0].redis_settings().password(), Some("p"));
    }

    #[test]
    fn bad_urls_get_clear_errors() {
        assert!(matches!(
            parse("127.0.0.1:6379", None),
            Err(AddressError::NoScheme)
        ));
        assert!(parse("redis+cluster://a,,b", None).is_err());
        assert!(parse("redis+sentinel://a/m?x=1", None).is_err());
        assert!(parse("http://a", None).is_err());
    }

    #[test]
    fn debug_never_shows_the_password() {
        for url in [
            "redis://u:hunter2@h:1",
            "redis+cluster://u:hunter2@a:1,b:2",
            "redis+sentinel://u:hunter2@s:1/m?sentinel_auth=same",
        ] {
            let shown = format!("{:?}", parse(url, None).unwrap());
            assert!(!shown.contains("hunter2"), "{shown}");
        }
    }
}
