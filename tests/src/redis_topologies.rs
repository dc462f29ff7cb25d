//! Real Redis Cluster and Sentinel deployments on free loopback ports, for
//! tests and benches: `redis-server` processes driven with `redis-cli`, as an
//! operator would. Nodes can be killed with SIGKILL to force a failover.

use crate::{find_binary, wait_for_port, KillOnDrop};
use anyhow::{bail, Context};
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// How long a node may be unreachable before the others fail it over.
pub const NODE_TIMEOUT_MS: u64 = 1_000;

fn redis_server() -> anyhow::Result<PathBuf> {
    find_binary("REDIS_SERVER", "redis-server")
        .context("redis-server not found: run the set-up command (apt install redis-server)")
}

fn redis_cli() -> anyhow::Result<PathBuf> {
    find_binary("REDIS_CLI", "redis-cli")
        .context("redis-cli not found: run the set-up command (apt install redis-tools)")
}

/// A free port whose cluster-bus twin (port + 10000) is free as well.
fn free_port_pair() -> anyhow::Result<u16> {
    for _ in 0..200 {
        let Ok(listener) = TcpListener::bind("127.0.0.1:0") else {
            continue;
        };
        let port = listener.local_addr()?.port();
        if port > 55_000 {
            continue;
        }
        if TcpListener::bind(("127.0.0.1", port + 10_000)).is_ok() {
            return Ok(port);
        }
    }
    bail!("no free port pair for a cluster node")
}

/// `redis-cli -p port args…`, its trimmed output.
pub fn cli(port: u16, args: &[&str]) -> anyhow::Result<String> {
    let output = Command::new(redis_cli()?)
        .args(["-h", "127.0.0.1", "-p", &port.to_string()])
        .args(args)
        .output()
        .context("running redis-cli")?;
    if !output.status.success() {
        bail!(
            "redis-cli -p {port} {}: {}",
            args.join(" "),
            String::from_utf8_lossy(&output.stderr)
        );
    }
    Ok(String::from_utf8_lossy(&output.stdout).trim().to_string())
}

/// One `redis-server` process; SIGKILLed when dropped.
struct Node {
    port: u16,
    child: Option<KillOnDrop>,
    args: Vec<String>,
    dir: PathBuf,
}

impl Node {
    fn spawn(port: u16, dir: &Path, args: Vec<String>) -> anyhow::Result<Node> {
        std::fs::create_dir_all(dir)?;
        let mut node = Node {
            port,
            child: None,
            args,
            dir: dir.to_path_buf(),
        };
        node.start()?;
        Ok(node)
    }

    fn start(&mut self) -> anyhow::Result<()> {
        let child = Command::new(redis_server()?)
            .args(&self.args)
            .current_dir(&self.dir)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .context("spawning redis-server")?;
        // Killed on the way out if it never accepts.
        let child = KillOnDrop(child);
        wait_for_port(([127, 0, 0, 1], self.port).into(), Duration::from_secs(10))?;
        self.child = Some(child);
        Ok(())
    }

    fn kill(&mut self) {
        self.child = None;
    }
}

/// `127.0.0.1:port` of each node.
fn addresses(nodes: &[Node]) -> Vec<String> {
    nodes
        .iter()
        .map(|n| format!("127.0.0.1:{}", n.port))
        .collect()
}

/// The node listening on `port`.
fn node_on(nodes: &mut [Node], port: u16) -> Option<&mut Node> {
    nodes.iter_mut().find(|n| n.port == port)
}

fn base_args(port: u16) -> Vec<String> {
    [
        "--port",
        &port.to_string(),
        "--bind",
        "127.0.0.1",
        "--protected-mode",
        "no",
        "--save",
        "",
        "--appendonly",
        "no",
        // Replicas sync at once instead of after the default 5 s wait.
        "--repl-diskless-sync-delay",
        "0",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect()
}

/// A master, or a replica whose link to its master is up.
fn replica_in_sync_or_master(port: u16) -> bool {
    cli(port, &["info", "replication"])
        .is_ok_and(|info| info.contains("role:master") || info.contains("master_link_status:up"))
}

fn wait_until(
    what: &str,
    timeout: Duration,
    mut check: impl FnMut() -> bool,
) -> anyhow::Result<()> {
    let deadline = Instant::now() + timeout;
    while Instant::now() < deadline {
        if check() {
            return Ok(());
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    bail!("{what} after {timeout:?}")
}

/// A Redis Cluster: `masters` masters with `replicas` replicas each.
pub struct RedisCluster {
    nodes: Vec<Node>,
    _dir: tempfile::TempDir,
}

impl RedisCluster {
    pub fn start(masters: usize, replicas: usize) -> anyhow::Result<Self> {
        let dir = tempfile::tempdir()?;
        let mut nodes = Vec::new();
        for i in 0..masters * (1 + replicas) {
            let port = free_port_pair()?;
            let mut args = base_args(port);
            args.extend(
                [
                    "--cluster-enabled",
                    "yes",
                    "--cluster-config-file",
                    "nodes.conf",
                    "--cluster-node-timeout",
                    &NODE_TIMEOUT_MS.to_string(),
                ]
                .iter()
                .map(|s| s.to_string()),
            );
            nodes.push(Node::spawn(port, &dir.path().join(format!("n{i}")), args)?);
        }
        let addrs = addresses(&nodes);
        let output = Command::new(redis_cli()?)
            .arg("--cluster")
            .arg("create")
            .args(&addrs)
            .args(["--cluster-replicas", &replicas.to_string(), "--cluster-yes"])
            .output()
            .context("redis-cli --cluster create")?;
        if !output.status.success() {
            bail!(
                "redis-cli --cluster create: {}{}",
                String::from_utf8_lossy(&output.stdout),
                String::from_utf8_lossy(&output.stderr)
            );
        }
        let cluster = RedisCluster { nodes, _dir: dir };
        cluster.wait_healthy(Duration::from_secs(30))?;
        Ok(cluster)
    }

    /// `redis+cluster://` URL with every node as a seed.
    pub fn url(&self) -> String {
        format!("redis+cluster://{}", addresses(&self.nodes).join(","))
    }

    pub fn ports(&self) -> Vec<u16> {
        self.nodes.iter().map(|n| n.port).collect()
    }

    fn live_ports(&self) -> Vec<u16> {
        self.nodes
            .iter()
            .filter(|n| n.child.is_some())
            .map(|n| n.port)
            .collect()
    }

    /// Every live node says `cluster_state:ok` and knows all 16384 slots,
    /// and every replica is in sync with its master (a replica that never
    /// synced refuses to fail over).
    pub fn wait_healthy(&self, timeout: Duration) -> anyhow::Result<()> {
        let ports = self.live_ports();
        wait_until("the cluster is not healthy", timeout, || {
            ports.iter().all(|port| {
                cli(*port, &["cluster", "info"]).is_ok_and(|info| {
                    info.contains("cluster_state:ok") && info.contains("cluster_slots_ok:16384")
                }) && replica_in_sync_or_master(*port)
            })
        })
    }

    /// Port of the master serving `key`'s slot, as a live node sees it.
    pub fn master_of(&self, key: &str) -> anyhow::Result<u16> {
        let probe = *self.live_ports().first().context("no live node")?;
        let slot: u16 = cli(probe, &["cluster", "keyslot", key])?.parse()?;
        let nodes = cli(probe, &["cluster", "nodes"])?;
        for line in nodes.lines() {
            let fields: Vec<&str> = line.split_whitespace().collect();
            if fields.len() < 9 || !fields[2].contains("master") || fields[2].contains("fail") {
                continue;
            }
            let port = fields[1]
                .split(['@', ':'])
                .nth(1)
                .and_then(|p| p.parse::<u16>().ok());
            for range in &fields[8..] {
                let (from, to) = match range.split_once('-') {
                    Some((a, b)) => (a.parse::<u16>(), b.parse::<u16>()),
                    None => (range.parse::<u16>(), range.parse::<u16>()),
                };
                if let (Ok(from), Ok(to), Some(port)) = (from, to, port) {
                    if (from..=to).contains(&slot) {
                        return Ok(port);
                    }
                }
            }
        }
        bail!("no master serves slot {slot} of {key:?}")
    }

    /// SIGKILLs the node on `port` (its replica takes over after
    /// [`NODE_TIMEOUT_MS`] and an election).
    pub fn kill(&mut self, port: u16) -> anyhow::Result<()> {
        let node = node_on(&mut self.nodes, port).context("no such node")?;
        node.kill();
        Ok(())
    }

    /// Starts a killed node again; it rejoins (as a replica if it was failed over).
    pub fn restart(&mut self, port: u16) -> anyhow::Result<()> {
        let node = node_on(&mut self.nodes, port).context("no such node")?;
        node.start()
    }

    /// Starts every killed node again.
    pub fn restart_killed(&mut self) -> anyhow::Result<()> {
        restart_killed(&mut self.nodes)
    }
}

/// Starts again every node of `nodes` that was killed.
fn restart_killed(nodes: &mut [Node]) -> anyhow::Result<()> {
    for node in nodes.iter_mut().filter(|n| n.child.is_none()) {
        node.start()?;
    }
    Ok(())
}

/// The sentinels' name for the master.
pub const SENTINEL_MASTER: &str = "sluice";

/// One master, one replica and three sentinels (quorum 2).
pub struct RedisSentinelSet {
    data: Vec<Node>,
    sentinels: Vec<Node>,
    /// The master [`RedisSentinelSet::kill_master`] killed, until restarted.
    killed_master: Option<u16>,
    _dir: tempfile::TempDir,
}

impl RedisSentinelSet {
    pub fn start() -> anyhow::Result<Self> {
        let dir = tempfile::tempdir()?;
        let master_port = free_port_pair()?;
        let master = Node::spawn(
            master_port,
            &dir.path().join("master"),
            base_args(master_port),
        )?;
        let replica_port = free_port_pair()?;
        let mut replica_args = base_args(replica_port);
        replica_args.extend(
            ["--replicaof", "127.0.0.1", &master_port.to_string()]
                .iter()
                .map(|s| s.to_string()),
        );
        let replica = Node::spawn(replica_port, &dir.path().join("replica"), replica_args)?;
        let mut sentinels = Vec::new();
        for i in 0..3 {
            let port = free_port_pair()?;
            let node_dir = dir.path().join(format!("sentinel{i}"));
            std::fs::create_dir_all(&node_dir)?;
            // Sentinel rewrites its config file: it must be its own, writable.
            let config = node_dir.join("sentinel.conf");
            std::fs::write(
                &config,
                format!(
                    "port {port}\nbind 127.0.0.1\nprotected-mode no\n\
                     sentinel monitor {SENTINEL_MASTER} 127.0.0.1 {master_port} 2\n\
                     sentinel down-after-milliseconds {SENTINEL_MASTER} {NODE_TIMEOUT_MS}\n\
                     sentinel failover-timeout {SENTINEL_MASTER} 5000\n\
                     sentinel parallel-syncs {SENTINEL_MASTER} 1\n"
                ),
            )?;
            sentinels.push(Node::spawn(
                port,
                &node_dir,
                vec![config.display().to_string(), "--sentinel".into()],
            )?);
        }
        let set = RedisSentinelSet {
            data: vec![master, replica],
            sentinels,
            killed_master: None,
            _dir: dir,
        };
        set.wait_ready(Duration::from_secs(30))?;
        Ok(set)
    }

    /// `redis+sentinel://` URL naming every sentinel.
    pub fn url(&self) -> String {
        let sentinels = addresses(&self.sentinels).join(",");
        format!("redis+sentinel://{sentinels}/{SENTINEL_MASTER}")
    }

    /// The master's port as the first live sentinel reports it.
    pub fn master_port(&self) -> anyhow::Result<u16> {
        let sentinel = self
            .sentinels
            .iter()
            .find(|n| n.child.is_some())
            .context("no live sentinel")?;
        let answer = cli(
            sentinel.port,
            &["sentinel", "get-master-addr-by-name", SENTINEL_MASTER],
        )?;
        answer
            .lines()
            .nth(1)
            .and_then(|p| p.trim().parse().ok())
            .context("sentinel knows no master")
    }

    /// Every sentinel sees the master and the other sentinels, and the
    /// replica is in sync.
    pub fn wait_ready(&self, timeout: Duration) -> anyhow::Result<()> {
        wait_until("the sentinel set is not ready", timeout, || {
            self.sentinels.iter().all(|s| {
                cli(s.port, &["sentinel", "master", SENTINEL_MASTER]).is_ok_and(|info| {
                    let field = |name: &str| {
                        let lines: Vec<&str> = info.lines().collect();
                        lines
                            .iter()
                            .position(|l| *l == name)
                            .and_then(|i| lines.get(i + 1).map(|v| v.to_string()))
                    };
                    field("num-other-sentinels").as_deref() == Some("2")
                        && field("num-slaves").as_deref() == Some("1")
                        && field("flags").as_deref() == Some("master")
                })
            }) && self.data.iter().all(|n| replica_in_sync_or_master(n.port))
        })
    }

    /// SIGKILLs the current master; the sentinels promote the replica.
    pub fn kill_master(&mut self) -> anyhow::Result<u16> {
        let port = self.master_port()?;
        let node = node_on(&mut self.data, port).context("the master is not one of ours")?;
        node.kill();
        self.killed_master = Some(port);
        Ok(port)
    }

    /// Starts again every data node that was killed, once the sentinels
    /// have promoted another master: it comes back empty (no persistence
    /// here) and the sentinels turn it into a replica of the new master,
    /// which it then copies (measured here: ~15 s after its start; until
    /// then the new master has no replica). Back before the failover, an
    /// empty master would be kept as the master and the replica would copy
    /// its empty data set: Redis's documentation warns against restarting
    /// a master without persistence automatically for this reason.
    pub fn restart_killed(&mut self) -> anyhow::Result<()> {
        if let Some(old) = self.killed_master.take() {
            self.wait_failover(old, Duration::from_secs(30))?;
        }
        restart_killed(&mut self.data)
    }

    /// Waits until the sentinels name a master other than `old`.
    pub fn wait_failover(&self, old: u16, timeout: Duration) -> anyhow::Result<u16> {
        let mut new = old;
        wait_until("no failover", timeout, || {
            new = self.master_port().unwrap_or(old);
            new != old
        })?;
        Ok(new)
    }
}

/// The Redis a test runs on: one server, a Cluster (3 masters + 3
/// replicas) or a Sentinel set; every component reaches it through
/// [`RedisDeployment::url`].
pub enum RedisDeployment {
    Single(crate::RedisServer),
    Cluster(RedisCluster),
    Sentinel(RedisSentinelSet),
}

/// Which [`RedisDeployment`] to start.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum RedisKind {
    #[default]
    Single,
    Cluster,
    Sentinel,
}

impl RedisDeployment {
    pub fn start(kind: RedisKind) -> anyhow::Result<Self> {
        Self::start_with(kind, crate::Durability::Volatile, Vec::new())
    }

    /// A single server keeps `durability` and takes `single_args` (more
    /// `redis-server` arguments); a Cluster's and a Sentinel set's nodes
    /// keep nothing on disk: their replicas hold the copies.
    pub fn start_with(
        kind: RedisKind,
        durability: crate::Durability,
        single_args: Vec<String>,
    ) -> anyhow::Result<Self> {
        Ok(match kind {
            RedisKind::Single => RedisDeployment::Single(crate::RedisServer::start_with_args(
                durability,
                single_args,
            )?),
            RedisKind::Cluster => RedisDeployment::Cluster(RedisCluster::start(3, 1)?),
            RedisKind::Sentinel => RedisDeployment::Sentinel(RedisSentinelSet::start()?),
        })
    }

    /// The server's process id, when it is one server that runs.
    pub fn pid(&self) -> Option<u32> {
        match self {
            RedisDeployment::Single(server) => server.pid(),
            _ => None,
        }
    }

    /// What an operator's dashboard would name it: `redis-server
    /// 127.0.0.1:PORT`, a Cluster's or a Sentinel set's URL.
    pub fn describe(&self) -> String {
        match self {
            RedisDeployment::Single(server) => {
                format!("redis-server        127.0.0.1:{}", server.port())
            }
            RedisDeployment::Cluster(cluster) => format!("Redis Cluster       {}", cluster.url()),
            RedisDeployment::Sentinel(set) => format!("Redis Sentinel set  {}", set.url()),
        }
    }

    /// The Redis fault of a chaos run: a single server is killed; a
    /// Sentinel set loses its master (the sentinels promote the replica); a
    /// Cluster loses every node.
    pub fn fail(&mut self) -> anyhow::Result<()> {
        match self {
            RedisDeployment::Sentinel(set) => set.kill_master().map(|_| ()),
            _ => {
                self.stop();
                Ok(())
            }
        }
    }

    /// After [`RedisDeployment::fail`] or [`RedisDeployment::stop`]: what
    /// was killed starts again on its ports (a single server with what its
    /// [`crate::Durability`] kept; a Sentinel set's old master as a replica).
    pub fn restart(&mut self) -> anyhow::Result<()> {
        match self {
            RedisDeployment::Single(server) => server.restart(),
            RedisDeployment::Cluster(cluster) => cluster.restart_killed(),
            RedisDeployment::Sentinel(set) => set.restart_killed(),
        }
    }

    pub fn url(&self) -> String {
        match self {
            RedisDeployment::Single(server) => server.url(),
            RedisDeployment::Cluster(cluster) => cluster.url(),
            RedisDeployment::Sentinel(set) => set.url(),
        }
    }

    /// Stops every data node (a Redis outage).
    pub fn stop(&mut self) {
        match self {
            RedisDeployment::Single(server) => server.stop(),
            RedisDeployment::Cluster(cluster) => {
                for port in cluster.ports() {
                    let _ = cluster.kill(port);
                }
            }
            RedisDeployment::Sentinel(set) => {
                for node in &mut set.data {
                    node.kill();
                }
            }
        }
    }
}
