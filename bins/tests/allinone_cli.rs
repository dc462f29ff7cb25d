//! sluice-allinone's command line.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // tests fail loudly

use sluice_testkit::process::help_text;
use std::process::Command;

fn bin() -> Command {
    Command::new(env!("CARGO_BIN_EXE_sluice-allinone"))
}

#[test]
fn admin_listeners_default_to_loopback() {
    let help = help_text(env!("CARGO_BIN_EXE_sluice-allinone")).unwrap();
    // sluice-rls's admin and the in-process consumer admin.
    assert!(help.contains("[default: 127.0.0.1:9091]"), "{help}");
    assert!(help.contains("[default: 127.0.0.1:9092]"), "{help}");
    assert!(!help.contains("[default: 0.0.0.0:909"), "{help}");
    assert!(help.contains("--admin-token-file"), "{help}");
}

#[test]
fn every_consumer_setting_has_a_flag() {
    let help = help_text(env!("CARGO_BIN_EXE_sluice-allinone")).unwrap();
    for flag in [
        "--consumer-config",
        "--consumer-admin-addr",
        "--consumer-id",
        "--membership-ttl-ms",
        "--idle-ttl-s",
        "--shutdown-grace-s",
    ] {
        assert!(help.contains(flag), "{flag} not in\n{help}");
    }
}

#[test]
fn the_deferral_endpoint_is_required() {
    let dir = std::env::temp_dir();
    let output = bin()
        .args(["--config", dir.to_str().unwrap()])
        .output()
        .unwrap();
    assert!(!output.status.success());
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("--deferral-addr"), "{stderr}");
}
