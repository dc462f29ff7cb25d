// Copyright 2023 The RocketMQ Rust Authors
//
// Licensed under the Apache License, Version 2.0 (the "License");
// you may not use this file except in compliance with the License.
// You may obtain a copy of the License at
//
//     http://www.apache.org/licenses/LICENSE-2.0
//
// Unless required by applicable law or agreed to in writing, software
// distributed under the License is distributed on an "AS IS" BASIS,
// WITHOUT WARRANTIES OR CONDITIONS OF ANY KIND, either express or implied.
// See the License for the specific language governing permissions and
// limitations under the License.

//! Broker configuration: parsing, validation, persistence, and the typed
//! configuration model.
//!
//! This module owns the pipeline that turns raw configuration (files and Java
//! `.properties`) into a validated, in-memory [`BrokerConfig`] that every
//! Broker subsystem reads, along with the errors that pipeline can produce and
//! the managers that persist configuration state. The submodules below are the
//! public entry points into that pipeline.
//!
//! [`BrokerConfig`]: broker_config::BrokerConfig

/// The aggregate [`BrokerConfig`](broker_config::BrokerConfig) type and its
/// defaults — the configuration read by every Broker subsystem.
pub mod broker_config;
/// Persistence and lifecycle management for Broker configuration state
/// (topics, consumer offsets, subscription groups).
pub mod config_manager;
/// Typed configuration failures ([`BrokerConfigError`](error::BrokerConfigError)
/// and [`ConfigSection`](error::ConfigSection)).
pub mod error;
/// Compatibility layer for reading Apache RocketMQ Java `.properties`
/// configuration into this crate's model.
pub mod java_properties;
/// The raw, unvalidated configuration as parsed from files and properties,
/// before section validation.
pub mod raw;
/// The ordered configuration sections and their per-section validation.
pub mod sections;
/// Transaction-related Broker configuration.
pub mod transaction;
/// [`ValidatedBrokerConfig`](validated::ValidatedBrokerConfig): configuration
/// that has passed validation and is safe to apply to the runtime.
pub mod validated;

/// RocksDB-backed persistence for Broker configuration, enabled by the
/// `rocksdb_store` feature.
#[cfg(feature = "rocksdb_store")]
pub(crate) mod rocksdb_manager;

#[cfg(all(test, feature = "rocksdb_store"))]
mod tests {
    use std::fs;
    use std::path::PathBuf;
    use std::time::SystemTime;
    use std::time::UNIX_EPOCH;

    use rocketmq_protocol::protocol::data_version_facade::DataVersionExt;
    use rocketmq_protocol::protocol::DataVersion;
    use rocketmq_store::RocksDbWalRecoveryMode;

    use super::rocksdb_manager::RocksDbBrokerConfigManager;
    use super::rocksdb_manager::RocksDbBrokerConfigManagerConfig;
    use super::rocksdb_manager::RocksDbBrokerConfigStorageLayout;

    const MB: usize = 1024 * 1024;
    const MB_U64: u64 = 1024 * 1024;

    #[test]
    fn rocksdb_config_storage_paths_match_java_single_and_separate_layouts() {
        let root = PathBuf::from("store-root");

        assert_eq!(
            RocksDbBrokerConfigStorageLayout::topic_path(&root, true),
            root.join("config").join("metadata")
        );
        assert_eq!(
            RocksDbBrokerConfigStorageLayout::topic_path(&root, false),
            root.join("config").join("topics")
        );
        assert_eq!(
            RocksDbBrokerConfigStorageLayout::consumer_offset_path(&root, true),
            root.join("config").join("metadata")
        );
        assert_eq!(
            RocksDbBrokerConfigStorageLayout::consumer_offset_path(&root, false),
            root.join("config").join("consumerOffsets")
        );
        assert_eq!(
            RocksDbBrokerConfigStorageLayout::subscription_group_path(&root, true),
            root.join("config").join("metadata")
        );
        assert_eq!(
            RocksDbBrokerConfigStorageLayout::subscription_group_path(&root, false),
            root.join("config").join("subscriptionGroups")
        );
    }

    #[test]
    fn rocksdb_config_manager_writes_utf8_default_cf_and_version_cf_with_wal() {
        let path = unique_temp_path("broker-config");
        let manager = RocksDbBrokerConfigManager::open(RocksDbBrokerConfigManagerConfig::topic(path.clone()))
            .expect("config manager should open");

        assert!(manager.rocksdb_config().wal_enabled);
        assert!(!manager.rocksdb_config().sync_write);
        assert_eq!(manager.rocksdb_config().db_write_buffer_size, Some(128 * MB));
        assert_eq!(manager.rocksdb_config().wal_bytes_per_sync, Some(MB_U64));
        assert_eq!(
            manager.rocksdb_config().wal_recovery_mode,
            RocksDbWalRecoveryMode::SkipAnyCorruptedRecord
        );
        assert_eq!(manager.rocksdb_config().stats_dump_period_sec, 600);
        assert_eq!(manager.rocksdb_config().max_subcompactions, 4);
        assert!(manager.rocksdb_config().use_direct_io_for_flush_and_compaction);
        assert!(manager.rocksdb_config().use_direct_reads);
        assert_eq!(manager.default_cf(), "topic");
        assert_eq!(manager.version_cf(), "topicVersion");

        manager
            .put_string("TopicA", r#"{"topicName":"TopicA"}"#)
            .expect("topic config should write");
        manager
            .put_cf_string("forbidden", "GroupA", r#"{"TopicA":1}"#)
            .expect("dynamic forbidden cf should write");
        manager.update_kv_data_version().expect("data version should write");
        manager.flush_wal().expect("wal flush should succeed");
        manager.close();
        drop(manager);

        let reopened = RocksDbBrokerConfigManager::open(RocksDbBrokerConfigManagerConfig::topic(path.clone()))
            .expect("config manager should reopen dynamic cf");
        let data_version = reopened
            .load_data_version()
            .expect("data version should load")
            .expect("data version should exist");

        assert_eq!(
            reopened
                .get_string("TopicA")
                .expect("topic config should read")
                .expect("topic config should exist"),
            r#"{"topicName":"TopicA"}"#
        );
        assert_eq!(
            reopened
                .get_cf_string("forbidden", "GroupA")
                .expect("forbidden config should read")
                .expect("forbidden config should exist"),
            r#"{"TopicA":1}"#
        );
        assert_eq!(data_version.counter(), 1);

        reopened.close();
        let _ = fs::remove_dir_all(path);
    }

    #[test]
    fn rocksdb_config_manager_atomically_replaces_rows_and_version() {
        let path = unique_temp_path("broker-config-snapshot");
        let manager = RocksDbBrokerConfigManager::open(RocksDbBrokerConfigManagerConfig::topic(path.clone()))
            .expect("config manager should open");
        manager
            .put_string("StaleTopic", r#"{"topicName":"StaleTopic"}"#)
            .expect("stale row should write");
        let mut data_version = DataVersion::default();
        data_version.next_version();

        manager
            .replace_snapshot_with_version(
                &[(b"CurrentTopic".to_vec(), br#"{"topicName":"CurrentTopic"}"#.to_vec())],
                &data_version,
            )
            .expect("snapshot should replace atomically");

        assert!(manager
            .get_string("StaleTopic")
            .expect("stale lookup should work")
            .is_none());
        assert!(manager
            .get_string("CurrentTopic")
            .expect("current lookup should work")
            .is_some());
        assert_eq!(
            manager
                .load_data_version()
                .expect("version lookup should work")
                .expect("version should exist"),
            data_version
        );

        manager.close();
        let _ = fs::remove_dir_all(path);
    }

    fn unique_temp_path(name: &str) -> PathBuf {
        let nanos = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .expect("system clock should be after epoch")
            .as_nanos();
        std::env::temp_dir().join(format!("rocketmq-rust-{name}-{nanos}"))
    }
}
