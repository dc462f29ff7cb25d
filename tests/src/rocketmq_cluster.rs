//! Two RocketMQ brokers registered with one name server: the
//! [`RocketMq`](crate::RocketMq) name server and broker (`sluice-broker-a`),
//! plus a second broker (`sluice-broker-b`) with its own ports, store and
//! name, that a test can kill (SIGKILL) and start again on the same ports
//! and store. Both rendered from `lite-topic/broker/broker.toml.in`; every
//! store lives in one temporary directory removed on drop.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use anyhow::bail;

use crate::{
    broker_ports, render_rocketmq_template, rocketmq_binary, rocketmq_cluster_info, spawn_broker,
    wait_for_port, KillOnDrop, RocketMq,
};

/// The broker name the template gives (the first broker's).
const TEMPLATE_BROKER_NAME: &str = "sluice-broker-a";
/// The second broker's name.
pub const SECOND_BROKER_NAME: &str = "sluice-broker-b";

/// A name server with two brokers; everything killed on drop.
pub struct RocketMqCluster {
    /// Declared first so it is dropped first: its store lies in the first's
    /// temporary directory.
    second: ExtraBroker,
    /// Name server and first broker.
    first: RocketMq,
}

impl RocketMqCluster {
    pub fn start() -> anyhow::Result<Self> {
        let first = RocketMq::start()?;
        let home = first.dir().join(SECOND_BROKER_NAME);
        std::fs::create_dir_all(home.join("store"))?;
        let mut second = ExtraBroker {
            name: SECOND_BROKER_NAME,
            binary: rocketmq_binary("ROCKETMQ_BROKER_BIN", "rocketmq-broker-rust")?,
            home,
            namesrv_port: first.namesrv_port,
            port: 0,
            ha_port: 0,
            child: None,
        };
        second.start_on_free_ports()?;
        Ok(RocketMqCluster { second, first })
    }

    /// `127.0.0.1:PORT` of the name server.
    pub fn namesrv_addr(&self) -> String {
        self.first.namesrv_addr()
    }

    /// Registered names of the two brokers, first then second.
    pub fn broker_names(&self) -> [&'static str; 2] {
        [TEMPLATE_BROKER_NAME, self.second.name]
    }

    /// Kill the second broker with SIGKILL (no shutdown hook runs).
    pub fn kill_second(&mut self) {
        self.second.kill();
    }

    /// Start the second broker again on its ports, with its store.
    pub fn restart_second(&mut self) -> anyhow::Result<()> {
        self.second.start()
    }

    /// The last lines of the second broker's log.
    pub fn second_log_tail(&self) -> String {
        log_tail(&self.second.home.join("broker.log"))
    }

    /// The last lines of the first broker's log.
    pub fn first_log_tail(&self) -> String {
        self.first.log_tail("broker.log")
    }
}

struct ExtraBroker {
    name: &'static str,
    binary: PathBuf,
    home: PathBuf,
    namesrv_port: u16,
    port: u16,
    ha_port: u16,
    child: Option<KillOnDrop>,
}

impl ExtraBroker {
    fn start_on_free_ports(&mut self) -> anyhow::Result<()> {
        let mut last_error = None;
        for _ in 0..5 {
            (self.port, self.ha_port) = broker_ports();
            match self.start() {
                Ok(()) => return Ok(()),
                Err(error) => last_error = Some(error),
            }
        }
        Err(last_error.unwrap_or_else(|| anyhow::anyhow!("the second broker did not start")))
    }

    /// Start on `self.port` / `self.ha_port` and wait until the name server
    /// lists it.
    fn start(&mut self) -> anyhow::Result<()> {
        let namesrv = format!("127.0.0.1:{}", self.namesrv_port);
        let config = render_rocketmq_template(
            "broker.toml.in",
            &[
                ("HOME", &self.home.to_string_lossy()),
                ("NAMESRV", &namesrv),
                ("PORT", &self.port.to_string()),
                ("HA_PORT", &self.ha_port.to_string()),
            ],
        )?;
        let template_name = format!("brokerName = \"{TEMPLATE_BROKER_NAME}\"");
        if !config.contains(&template_name) {
            bail!("broker.toml.in no longer names its broker {TEMPLATE_BROKER_NAME}");
        }
        let config = config.replace(&template_name, &format!("brokerName = \"{}\"", self.name));
        let config_path = self.home.join("broker.toml");
        std::fs::write(&config_path, config)?;
        self.child = Some(spawn_broker(
            &self.binary,
            &self.home,
            "broker.log",
            &config_path,
            &namesrv,
        )?);
        let addr = format!("127.0.0.1:{}", self.port);
        if wait_for_port(([127, 0, 0, 1], self.port).into(), Duration::from_secs(15)).is_ok()
            && wait_for_port(
                ([127, 0, 0, 1], self.port - 2).into(),
                Duration::from_secs(5),
            )
            .is_ok()
            && self.wait_registered(&addr, Duration::from_secs(10))
        {
            return Ok(());
        }
        self.kill();
        bail!(
            "broker {} did not start on {addr}; its log:\n{}",
            self.name,
            log_tail(&self.home.join("broker.log"))
        )
    }

    fn wait_registered(&mut self, addr: &str, timeout: Duration) -> bool {
        let deadline = Instant::now() + timeout;
        while Instant::now() < deadline {
            if let Some(Ok(Some(_))) = self.child.as_mut().map(|c| c.0.try_wait()) {
                return false;
            }
            if rocketmq_cluster_info(self.namesrv_port).is_some_and(|info| info.contains(addr)) {
                return true;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        false
    }

    fn kill(&mut self) {
        self.child = None;
    }
}

fn log_tail(path: &Path) -> String {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    let lines: Vec<&str> = text.lines().collect();
    lines[lines.len().saturating_sub(40)..].join("\n")
}
