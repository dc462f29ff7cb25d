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

use std::collections::HashMap;
#[cfg(feature = "rocksdb_store")]
use std::path::Path;
use std::sync::atomic::AtomicBool;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;
use std::time::Instant;

use crate::config::broker_config::BrokerConfig;
use crate::config::config_manager::ConfigManager;
use cheetah_string::CheetahString;
use dashmap::DashMap;
use rocketmq_model::common::attribute::attribute_util::AttributeUtil;
use rocketmq_model::common::attribute::subscription_group_attributes::SubscriptionGroupAttributes;
use rocketmq_model::common::mix_all::is_sys_consumer_group;
use rocketmq_model::common::topic::TopicValidator;
use rocketmq_protocol::protocol::body::supervised_mutation::ExpectedState;
use rocketmq_protocol::protocol::data_version_facade::DataVersionExt;
use rocketmq_protocol::protocol::subscription::subscription_group_config::validate_subscription_group_configs;
use rocketmq_protocol::protocol::subscription::subscription_group_config::validate_subscription_group_name;
use rocketmq_protocol::protocol::subscription::subscription_group_config::SubscriptionGroupConfig;
use rocketmq_protocol::protocol::subscription::subscription_group_config::SUBSCRIPTION_GROUP_NAME_MAX_LENGTH;
use rocketmq_protocol::protocol::DataVersion;
use rocketmq_protocol::protocol::RemotingSerializable;
use rocketmq_runtime::common::file_utils;
use rocketmq_runtime::MetadataDeadline;
use rocketmq_runtime::MetadataIoActor;
use rocketmq_runtime::MetadataIoAdmissionOutcome;
use rocketmq_store::MessageStoreConfig;
use rocketmq_store::StateMachineVersionView;
use serde::Deserialize;
use serde::Serialize;
use tracing::error;
use tracing::info;
use tracing::warn;

use crate::broker::broker_runtime_config_state::BrokerPermissionState;
use crate::broker_path_config_helper::get_subscription_group_path;
#[cfg(feature = "rocksdb_store")]
use crate::config::rocksdb_manager::RocksDbBrokerConfigManager;
use crate::metrics::broker_metrics_manager::BrokerMetricsManager;

pub const CHARACTER_MAX_LENGTH: usize = SUBSCRIPTION_GROUP_NAME_MAX_LENGTH;
pub const TOPIC_MAX_LENGTH: usize = 127;

#[derive(Clone, Debug)]
pub(crate) struct SubscriptionGroupConfigUpdate {
    pub(crate) config: Arc<SubscriptionGroupConfig>,
    pub(crate) data_version: DataVersion,
    pub(crate) changed: bool,
}

#[derive(Clone, Debug, Eq, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct SlowConsumerDisableMarker {
    pub(crate) observed_lag_bytes: i64,
    pub(crate) threshold_bytes: i64,
    pub(crate) reason: CheetahString,
    pub(crate) generation: u64,
}

#[derive(Clone, Copy, Debug, Eq, PartialEq)]
pub(crate) enum SubscriptionGroupConfigCasError {
    InvalidGroupName,
    VersionUnavailable,
    VersionExhausted,
    ValueOutOfRange,
    PersistenceDirty { actual_version: u64 },
}

#[derive(Clone, Debug)]
pub(crate) enum SubscriptionGroupConfigCasOutcome {
    Applied(SubscriptionGroupConfigUpdate),
    GroupNotFound,
    VersionConflict { expected_version: u64, actual_version: u64 },
    NoChange,
    StateConflict { actual_version: Option<u64> },
}

#[derive(Clone)]
pub(crate) struct SubscriptionGroupManagerConfig {
    store_path_root_dir: CheetahString,
    auto_create_subscription_group: Arc<AtomicBool>,
    runtime_config: Option<BrokerPermissionState>,
    #[cfg(feature = "rocksdb_store")]
    real_time_persist_rocksdb_config: bool,
}

impl SubscriptionGroupManagerConfig {
    pub(crate) fn from_configs(broker_config: &BrokerConfig, message_store_config: &MessageStoreConfig) -> Self {
        #[cfg(not(feature = "rocksdb_store"))]
        let _ = message_store_config;

        Self {
            store_path_root_dir: broker_config.store_path_root_dir.clone(),
            auto_create_subscription_group: Arc::new(AtomicBool::new(broker_config.auto_create_subscription_group)),
            runtime_config: None,
            #[cfg(feature = "rocksdb_store")]
            real_time_persist_rocksdb_config: message_store_config.real_time_persist_rocksdb_config,
        }
    }

    pub(crate) fn with_runtime_config(mut self, runtime_config: BrokerPermissionState) -> Self {
        self.runtime_config = Some(runtime_config);
        self
    }
}

#[derive(Clone)]
pub(crate) struct SubscriptionGroupManager {
    /// Subscription group configuration table (group_name -> config)
    subscription_group_table: Arc<DashMap<CheetahString, Arc<SubscriptionGroupConfig>>>,

    /// Forbidden table (group -> topic -> forbidden_bitmap)
    forbidden_table: Arc<DashMap<CheetahString, DashMap<CheetahString, i32>>>,

    slow_consumer_markers: Arc<DashMap<CheetahString, SlowConsumerDisableMarker>>,

    /// Data version for tracking configuration changes
    data_version: Arc<parking_lot::RwLock<DataVersion>>,

    /// Serializes configuration state and version transitions.
    metadata_transition: Arc<parking_lot::Mutex<()>>,
    supervised_dirty_groups: Arc<DashMap<CheetahString, u64>>,

    config: SubscriptionGroupManagerConfig,
    state_machine_version: StateMachineVersionView,
    broker_metrics_manager: Option<Arc<BrokerMetricsManager>>,
    #[cfg(feature = "rocksdb_store")]
    rocksdb_config_manager: Option<Arc<RocksDbBrokerConfigManager>>,
    metadata_io: Option<MetadataIoActor>,
}

#[derive(Clone)]
pub(crate) struct SubscriptionGroupConfigLookup {
    manager: SubscriptionGroupManager,
}

impl SubscriptionGroupConfigLookup {
    pub(crate) fn find_subscription_group_config(&self, group: &CheetahString) -> Option<Arc<SubscriptionGroupConfig>> {
        self.manager.find_subscription_group_config(group)
    }

    pub(crate) fn contains_subscription_group(&self, group: &CheetahString) -> bool {
        self.manager.contains_subscription_group(group)
    }

    pub(crate) fn get_forbidden(&self, group: &CheetahString, topic: &CheetahString, forbidden_index: i32) -> bool {
        self.manager.get_forbidden(group, topic, forbidden_index)
    }
}

impl SubscriptionGroupManager {
    #[inline]
    fn record_consumer_group_create_latency(&self, start_time: Instant) {
        if let Some(metrics) = self.broker_metrics_manager.as_ref() {
            metrics.record_consumer_group_create_time(start_time.elapsed().as_millis().min(u64::MAX as u128) as u64);
        }
    }

    pub fn new(
        config: SubscriptionGroupManagerConfig,
        state_machine_version: StateMachineVersionView,
        broker_metrics_manager: Option<Arc<BrokerMetricsManager>>,
    ) -> Self {
        let mut manager = Self {
            subscription_group_table: Arc::new(DashMap::new()),
            forbidden_table: Arc::new(DashMap::new()),
            slow_consumer_markers: Arc::new(DashMap::new()),
            data_version: Arc::new(parking_lot::RwLock::new(
                rocketmq_protocol::protocol::data_version_facade::new_data_version(),
            )),
            metadata_transition: Arc::new(parking_lot::Mutex::new(())),
            supervised_dirty_groups: Arc::new(DashMap::new()),
            config,
            state_machine_version,
            broker_metrics_manager,
            #[cfg(feature = "rocksdb_store")]
            rocksdb_config_manager: None,
            metadata_io: None,
        };
        manager.init();
        manager
    }

    pub(crate) fn set_metadata_io_actor(&mut self, metadata_io: MetadataIoActor) {
        self.metadata_io = Some(metadata_io);
    }

    fn persist_after_mutation(&self, operation: &'static str) {
        let Some(metadata_io) = self.metadata_io.as_ref() else {
            if let Err(error) = self.persist() {
                error!(%error, operation, "Failed to persist subscription group mutation");
            }
            return;
        };
        if !self.supports_metadata_io_actor() {
            return;
        }

        let content = self.encode_pretty(true);
        if content.is_empty() {
            return;
        }
        match metadata_io.submit_next(
            "broker.subscription-group",
            self.config_file_path(),
            content.into_bytes(),
            MetadataDeadline::after(Duration::from_secs(5)),
        ) {
            Ok(MetadataIoAdmissionOutcome::Accepted(_)) => {}
            Ok(MetadataIoAdmissionOutcome::TargetConflict(_request)) => {
                warn!(
                    operation,
                    "Metadata target conflict rejected subscription group snapshot"
                );
            }
            Err(error) => {
                error!(%error, operation, "Failed to admit subscription group metadata snapshot");
            }
        }
    }

    /// Persists a supervised mutation durably so its wire outcome can report applied truth.
    ///
    /// The caller receives the real conclusion, because a supervised compare
    /// and set has to keep its per-key marker when the replacement is
    /// unconfirmed. The legacy `persist` path reports the same conclusion
    /// shape so both paths agree.
    pub(crate) async fn persist_supervised_snapshot(
        &self,
    ) -> crate::broker_error::BrokerResult<crate::broker::metadata_reconciliation::MetadataWriteConclusion> {
        // The blocking paths complete before they return, so they are
        // persisted; they carry no generation identity.
        let Some(metadata_io) = self.metadata_io.as_ref() else {
            self.persist()?;
            return Ok(crate::broker::metadata_reconciliation::MetadataWriteConclusion::BlockingPersisted);
        };
        if !self.supports_metadata_io_actor() {
            self.persist()?;
            return Ok(crate::broker::metadata_reconciliation::MetadataWriteConclusion::BlockingPersisted);
        }
        let content = self.encode_pretty(true);
        if content.is_empty() {
            return Err(crate::broker_error::storage_write_failed(
                "subscription-group",
                "encoded supervised snapshot is empty",
            ));
        }
        let observation = metadata_io
            .submit_next_observed(
                "broker.subscription-group",
                self.config_file_path(),
                content.into_bytes(),
                MetadataDeadline::after(Duration::from_secs(5)),
            )
            .await
            .map_err(crate::runtime_to_rocketmq_error)?;
        crate::require_metadata_conclusion("broker.subscription-group", observation)
    }

    #[cfg(feature = "rocksdb_store")]
    pub(crate) fn new_with_rocksdb_config_manager(
        config: SubscriptionGroupManagerConfig,
        state_machine_version: StateMachineVersionView,
        rocksdb_config_manager: Arc<RocksDbBrokerConfigManager>,
        broker_metrics_manager: Option<Arc<BrokerMetricsManager>>,
    ) -> Self {
        let mut manager = Self::new(config, state_machine_version, broker_metrics_manager);
        manager.rocksdb_config_manager = Some(rocksdb_config_manager);
        manager
    }

    #[cfg(feature = "rocksdb_store")]
    pub(crate) fn is_rocksdb_config_enabled(&self) -> bool {
        self.rocksdb_config_manager.is_some()
    }

    #[cfg(feature = "rocksdb_store")]
    pub(crate) fn rocksdb_config_path(&self) -> Option<&Path> {
        self.rocksdb_config_manager.as_ref().map(|manager| manager.path())
    }

    #[cfg(feature = "rocksdb_store")]
    pub(crate) fn export_to_json(&self) -> crate::broker_error::BrokerResult<()> {
        let json = self.encode_pretty(true);
        if json.is_empty() {
            return Ok(());
        }
        file_utils::string_to_file(json.as_str(), self.config_file_path().as_str())
            .map_err(crate::broker_error::storage_write_source)
    }

    /// Initialize system default consumer groups
    fn init(&mut self) {
        use rocketmq_model::common::mix_all;

        let system_groups = [
            (mix_all::TOOLS_CONSUMER_GROUP, false),
            (mix_all::FILTERSRV_CONSUMER_GROUP, false),
            (mix_all::SELF_TEST_CONSUMER_GROUP, false),
            (mix_all::ONS_HTTP_PROXY_GROUP, true),
            (mix_all::CID_ONSAPI_PULL_GROUP, true),
            (mix_all::CID_ONSAPI_PERMISSION_GROUP, true),
            (mix_all::CID_ONSAPI_OWNER_GROUP, true),
            (mix_all::CID_SYS_RMQ_TRANS, true),
        ];

        for (group_name, broadcast_enable) in system_groups {
            let mut config = SubscriptionGroupConfig::new(CheetahString::from_static_str(group_name));
            if broadcast_enable {
                config.set_consume_broadcast_enable(true);
            }
            self.subscription_group_table
                .insert(CheetahString::from_static_str(group_name), Arc::new(config));
        }

        info!("Initialized {} system consumer groups", system_groups.len());
    }

    /// Get the subscription group table
    pub fn subscription_group_table(&self) -> &Arc<DashMap<CheetahString, Arc<SubscriptionGroupConfig>>> {
        &self.subscription_group_table
    }

    pub(crate) fn config_lookup(&self) -> SubscriptionGroupConfigLookup {
        SubscriptionGroupConfigLookup { manager: self.clone() }
    }

    /// Get the forbidden table
    pub fn forbidden_table(&self) -> &Arc<DashMap<CheetahString, DashMap<CheetahString, i32>>> {
        &self.forbidden_table
    }

    /// Validate topic name
    ///
    /// # Arguments
    /// * `topic` - The topic name to validate
    ///
    /// # Returns
    /// `true` if valid, `false` otherwise
    fn validate_topic_name(topic: &str) -> bool {
        if topic.is_empty() {
            warn!("Topic name validation failed: empty name");
            return false;
        }

        if topic.len() > TOPIC_MAX_LENGTH {
            warn!(
                "Topic name validation failed: name too long ({} > {}): {}",
                topic.len(),
                TOPIC_MAX_LENGTH,
                topic
            );
            return false;
        }

        if TopicValidator::is_topic_or_group_illegal(topic) {
            warn!("Topic name validation failed: contains illegal characters: {}", topic);
            return false;
        }

        true
    }

    /// Validate forbidden index range
    ///
    /// # Arguments
    /// * `forbidden_index` - Index to validate (must be in [0, 32))
    ///
    /// # Returns
    /// `true` if valid, `false` otherwise
    fn validate_forbidden_index(forbidden_index: i32) -> bool {
        if !(0..32).contains(&forbidden_index) {
            warn!(
                "Forbidden index validation failed: index {} out of range [0, 32)",
                forbidden_index
            );
            return false;
        }
        true
    }

    pub(crate) fn update_subscription_group_config(&self, config: &mut SubscriptionGroupConfig) -> bool {
        if !self.update_subscription_group_config_without_persist(config) {
            return false;
        }
        self.persist_after_mutation("update");
        true
    }

    fn update_subscription_group_config_without_persist(&self, config: &mut SubscriptionGroupConfig) -> bool {
        if let Err(error) = validate_subscription_group_name(config.group_name().as_str()) {
            warn!(group = %config.group_name(), %error, "Rejected invalid subscription group configuration");
            return false;
        }
        let _transition = self.metadata_transition.lock();
        let start_time = Instant::now();
        let new_attributes = self.request(config);
        let current_attributes = self.current(config.group_name());
        let final_attributes = match AttributeUtil::alter_current_attributes(
            self.subscription_group_table.contains_key(config.group_name()),
            SubscriptionGroupAttributes::all(),
            &current_attributes,
            &new_attributes,
        ) {
            Ok(final_attributes) => final_attributes,
            Err(err) => {
                tracing::error!(
                    "Failed to alter subscription group attributes for group {}: {:?}",
                    config.group_name(),
                    err
                );
                // Return current attributes to maintain consistency
                // Rather than panic, we log the error and use current attributes
                current_attributes
            }
        };
        config.set_attributes(final_attributes);

        let old = self
            .subscription_group_table
            .insert(config.group_name().clone(), Arc::new(config.clone()));
        if config.consume_enable() {
            self.slow_consumer_markers.remove(config.group_name());
        }

        match old {
            Some(old_config) => {
                info!(
                    "update subscription group config, old: {:?} new: {:?}",
                    old_config, config,
                );
            }
            None => {
                info!("create new subscription group, {:?}", config);
                self.record_consumer_group_create_latency(start_time);
            }
        }

        self.data_version
            .write()
            .next_version_with(self.state_machine_version.get());
        true
    }
    fn request(&self, subscription_group_config: &SubscriptionGroupConfig) -> HashMap<CheetahString, CheetahString> {
        subscription_group_config.attributes().clone()
    }

    fn current(&self, group_name: &str) -> HashMap<CheetahString, CheetahString> {
        self.subscription_group_table
            .get(group_name)
            .map(|entry| entry.value().attributes().clone())
            .unwrap_or_default()
    }

    pub fn data_version(&self) -> Arc<parking_lot::RwLock<DataVersion>> {
        self.data_version.clone()
    }

    #[cfg(feature = "rocksdb_store")]
    fn load_from_rocksdb_or_migrate_from_file(&self) -> bool {
        let Some(rocksdb_config_manager) = &self.rocksdb_config_manager else {
            return false;
        };
        match rocksdb_config_manager.default_cf_is_empty() {
            Ok(false) => self.load_from_rocksdb(),
            Ok(true) => self.migrate_config_file_to_rocksdb(),
            Err(error) => {
                error!("check subscription group rocksdb config records failed: {}", error);
                false
            }
        }
    }

    #[cfg(feature = "rocksdb_store")]
    fn migrate_config_file_to_rocksdb(&self) -> bool {
        if !self.config_file_or_backup_exists() {
            return true;
        }
        if !self.load_from_config_file() {
            return false;
        }
        if let Err(error) = self.persist_to_rocksdb() {
            error!("migrate subscription group config file to rocksdb failed: {}", error);
            return false;
        }
        true
    }

    #[cfg(feature = "rocksdb_store")]
    fn config_file_or_backup_exists(&self) -> bool {
        let file_name = self.config_file_path();
        Path::new(&file_name).exists() || Path::new(format!("{file_name}.bak").as_str()).exists()
    }

    #[cfg(feature = "rocksdb_store")]
    fn load_from_rocksdb(&self) -> bool {
        let Some(rocksdb_config_manager) = &self.rocksdb_config_manager else {
            return false;
        };

        match rocksdb_config_manager.load_data_version() {
            Ok(Some(data_version)) => self.data_version.write().assign_new_one(&data_version),
            Ok(None) => {}
            Err(error) => {
                error!("load subscription group rocksdb dataVersion failed: {}", error);
                return false;
            }
        }

        if !self.load_subscription_groups_from_rocksdb(rocksdb_config_manager) {
            return false;
        }
        self.load_forbidden_from_rocksdb(rocksdb_config_manager)
    }

    #[cfg(feature = "rocksdb_store")]
    fn load_subscription_groups_from_rocksdb(&self, rocksdb_config_manager: &RocksDbBrokerConfigManager) -> bool {
        let records = match rocksdb_config_manager.load_data() {
            Ok(records) => records,
            Err(error) => {
                error!("load subscription groups from rocksdb failed: {}", error);
                return false;
            }
        };
        for (key, body) in records {
            let group_name = match String::from_utf8(key) {
                Ok(value) => CheetahString::from_string(value),
                Err(error) => {
                    error!("decode subscription group key from rocksdb failed: {}", error);
                    return false;
                }
            };
            let mut config = match serde_json::from_slice::<SubscriptionGroupConfig>(&body) {
                Ok(config) => config,
                Err(error) => {
                    error!("decode subscription group value from rocksdb failed: {}", error);
                    return false;
                }
            };
            if config.group_name().is_empty() {
                config.set_group_name(group_name.clone());
            }
            self.subscription_group_table.insert(group_name, Arc::new(config));
        }
        true
    }

    #[cfg(feature = "rocksdb_store")]
    fn load_forbidden_from_rocksdb(&self, rocksdb_config_manager: &RocksDbBrokerConfigManager) -> bool {
        let records = match rocksdb_config_manager.load_cf_data("forbidden") {
            Ok(records) => records,
            Err(error) => {
                error!("load subscription forbidden table from rocksdb failed: {}", error);
                return false;
            }
        };
        for (key, body) in records {
            let group_name = match String::from_utf8(key) {
                Ok(value) => CheetahString::from_string(value),
                Err(error) => {
                    error!("decode subscription forbidden key from rocksdb failed: {}", error);
                    return false;
                }
            };
            let topics = match serde_json::from_slice::<HashMap<CheetahString, i32>>(&body) {
                Ok(topics) => topics,
                Err(error) => {
                    error!("decode subscription forbidden value from rocksdb failed: {}", error);
                    return false;
                }
            };
            let topic_map = DashMap::new();
            for (topic, value) in topics {
                topic_map.insert(topic, value);
            }
            self.forbidden_table.insert(group_name, topic_map);
        }
        true
    }

    #[cfg(feature = "rocksdb_store")]
    fn persist_to_rocksdb(&self) -> crate::broker_error::BrokerResult<()> {
        let Some(rocksdb_config_manager) = &self.rocksdb_config_manager else {
            return Ok(());
        };
        let records = self
            .subscription_group_table
            .iter()
            .map(|entry| serde_json::to_vec(entry.value().as_ref()).map(|body| (entry.key().as_bytes().to_vec(), body)))
            .collect::<Result<Vec<_>, _>>()
            .map_err(crate::broker_error::storage_write_source)?;
        rocksdb_config_manager.batch_put_with_wal(&records)?;
        self.persist_forbidden_to_rocksdb(rocksdb_config_manager)?;
        rocksdb_config_manager.set_kv_data_version(self.data_version.read().clone())?;
        self.flush_rocksdb_config_if_needed(rocksdb_config_manager)
    }

    #[cfg(feature = "rocksdb_store")]
    fn persist_forbidden_to_rocksdb(
        &self,
        rocksdb_config_manager: &RocksDbBrokerConfigManager,
    ) -> crate::broker_error::BrokerResult<()> {
        for entry in self.forbidden_table.iter() {
            let topics = entry
                .value()
                .iter()
                .map(|topic_entry| (topic_entry.key().clone(), *topic_entry.value()))
                .collect::<HashMap<_, _>>();
            let body = serde_json::to_string(&topics).map_err(crate::broker_error::storage_write_source)?;
            rocksdb_config_manager.put_cf_string("forbidden", entry.key().as_str(), &body)?;
        }
        Ok(())
    }

    #[cfg(feature = "rocksdb_store")]
    fn flush_rocksdb_config_if_needed(
        &self,
        rocksdb_config_manager: &RocksDbBrokerConfigManager,
    ) -> crate::broker_error::BrokerResult<()> {
        if self.config.real_time_persist_rocksdb_config {
            rocksdb_config_manager.flush_wal()?;
        }
        Ok(())
    }

    #[cfg(feature = "rocksdb_store")]
    fn delete_group_from_rocksdb(&self, group_name: &str) -> crate::broker_error::BrokerResult<()> {
        let Some(rocksdb_config_manager) = &self.rocksdb_config_manager else {
            return Ok(());
        };
        rocksdb_config_manager.delete(group_name)?;
        rocksdb_config_manager.delete_cf("forbidden", group_name)?;
        rocksdb_config_manager.set_kv_data_version(self.data_version.read().clone())?;
        self.flush_rocksdb_config_if_needed(rocksdb_config_manager)
    }

    fn load_from_config_file(&self) -> bool {
        let file_name = self.config_file_path();
        match file_utils::file_to_string(file_name.as_str()) {
            Ok(content) if content.is_empty() => self.load_from_backup_config_file(file_name.as_str()),
            Ok(content) => {
                self.decode(&content);
                info!("load Config file: {} -----OK", file_name);
                true
            }
            Err(_) => self.load_from_backup_config_file(file_name.as_str()),
        }
    }

    fn load_from_backup_config_file(&self, file_name: &str) -> bool {
        let backup_file_name = format!("{file_name}.bak");
        match file_utils::file_to_string(backup_file_name.as_str()) {
            Ok(content) if !content.is_empty() => {
                self.decode(&content);
                info!("load Config file: {} -----OK", backup_file_name);
                true
            }
            Ok(_) => true,
            Err(error) => {
                error!("load Config file: {} -----Failed: {:?}", backup_file_name, error);
                false
            }
        }
    }
}

impl ConfigManager for SubscriptionGroupManager {
    fn supports_metadata_io_actor(&self) -> bool {
        #[cfg(feature = "rocksdb_store")]
        {
            self.rocksdb_config_manager.is_none()
        }
        #[cfg(not(feature = "rocksdb_store"))]
        true
    }

    fn load(&self) -> bool {
        #[cfg(feature = "rocksdb_store")]
        if self.rocksdb_config_manager.is_some() {
            return self.load_from_rocksdb_or_migrate_from_file();
        }
        self.load_from_config_file()
    }

    fn persist(&self) -> crate::broker_error::BrokerResult<()> {
        #[cfg(feature = "rocksdb_store")]
        if self.rocksdb_config_manager.is_some() {
            return self.persist_to_rocksdb();
        }

        let json = self.encode_pretty(true);
        if !json.is_empty() {
            let file_name = self.config_file_path();
            file_utils::string_to_file(json.as_str(), file_name.as_str()).map_err(crate::runtime_to_rocketmq_error)?;
        }
        Ok(())
    }

    fn stop(&mut self) -> bool {
        true
    }

    fn config_file_path(&self) -> String {
        get_subscription_group_path(self.config.store_path_root_dir.as_str())
    }

    fn encode_pretty(&self, pretty_format: bool) -> String {
        // Convert DashMap to HashMap for serialization
        let wrapper = SubscriptionGroupWrapperInner {
            subscription_group_table: self
                .subscription_group_table
                .iter()
                .map(|entry| (entry.key().clone(), (**entry.value()).clone()))
                .collect(),
            forbidden_table: self
                .forbidden_table
                .iter()
                .map(|entry| {
                    let inner: HashMap<_, _> = entry.value().iter().map(|e| (e.key().clone(), *e.value())).collect();
                    (entry.key().clone(), inner)
                })
                .collect(),
            slow_consumer_markers: self
                .slow_consumer_markers
                .iter()
                .map(|entry| (entry.key().clone(), entry.value().clone()))
                .collect(),
            data_version: self.data_version.read().clone(),
        };

        if pretty_format {
            wrapper.serialize_json_pretty()
        } else {
            wrapper.serialize_json()
        }
        .expect("Failed to serialize subscription group config")
    }

    fn decode(&self, json_string: &str) {
        if json_string.is_empty() {
            return;
        }

        let wrapper = serde_json::from_str::<SubscriptionGroupWrapperInner>(json_string).unwrap_or_default();

        // Load subscription group table
        for (key, config) in wrapper.subscription_group_table {
            if key.as_str() != config.group_name().as_str()
                || validate_subscription_group_name(config.group_name().as_str()).is_err()
            {
                warn!(key = %key, group = %config.group_name(), "Ignoring invalid persisted subscription group");
                continue;
            }
            self.subscription_group_table.insert(key, Arc::new(config));
        }

        // Load forbidden table
        for (group, topics) in wrapper.forbidden_table {
            if validate_subscription_group_name(group.as_str()).is_err() {
                warn!(group = %group, "Ignoring forbidden entries for invalid subscription group");
                continue;
            }
            let topic_map = DashMap::new();
            for (topic, value) in topics {
                topic_map.insert(topic, value);
            }
            self.forbidden_table.insert(group, topic_map);
        }

        for (group, marker) in wrapper.slow_consumer_markers {
            if validate_subscription_group_name(group.as_str()).is_err() {
                warn!(group = %group, "Ignoring slow-consumer marker for invalid subscription group");
                continue;
            }
            self.slow_consumer_markers.insert(group, marker);
        }

        // Update data version
        self.data_version.write().assign_new_one(&wrapper.data_version);
    }
}

impl SubscriptionGroupManager {
    #[cfg(test)]
    pub(crate) fn update_auto_create_subscription_group(&self, enabled: bool) {
        self.config
            .auto_create_subscription_group
            .store(enabled, Ordering::Release);
    }

    pub(crate) fn auto_create_subscription_group_enabled(&self) -> bool {
        self.config
            .runtime_config
            .as_ref()
            .and_then(BrokerPermissionState::auto_create_subscription_group)
            .unwrap_or_else(|| self.config.auto_create_subscription_group.load(Ordering::Acquire))
    }

    pub fn contains_subscription_group(&self, group: &CheetahString) -> bool {
        if group.is_empty() {
            return false;
        }
        self.subscription_group_table.contains_key(group)
    }

    pub fn find_subscription_group_config(&self, group: &CheetahString) -> Option<Arc<SubscriptionGroupConfig>> {
        let mut subscription_group_config = self.find_subscription_group_config_inner(group);
        if subscription_group_config.is_none()
            && (self.auto_create_subscription_group_enabled() || is_sys_consumer_group(group))
        {
            let start_time = Instant::now();
            if validate_subscription_group_name(group.as_str()).is_err() {
                return None;
            }
            let mut subscription_group_config_new = SubscriptionGroupConfig::default();
            subscription_group_config_new.set_group_name(group.clone());
            let arc_config = Arc::new(subscription_group_config_new.clone());
            let created = {
                let _transition = self.metadata_transition.lock();
                if let Some(existing) = self.find_subscription_group_config_inner(group) {
                    subscription_group_config = Some(existing);
                    false
                } else {
                    self.subscription_group_table
                        .insert(group.clone(), Arc::clone(&arc_config));
                    self.data_version
                        .write()
                        .next_version_with(self.state_machine_version.get());
                    subscription_group_config = Some(arc_config);
                    true
                }
            };
            if created {
                info!("auto create a subscription group, {:?}", subscription_group_config_new);
                self.record_consumer_group_create_latency(start_time);
                self.persist_after_mutation("auto-create");
            }
        }
        subscription_group_config
    }

    fn find_subscription_group_config_inner(&self, group: &CheetahString) -> Option<Arc<SubscriptionGroupConfig>> {
        self.subscription_group_table
            .get(group)
            .map(|entry| Arc::clone(entry.value()))
    }

    pub(crate) fn select_subscription_group_config_with_version(
        &self,
        group: &CheetahString,
    ) -> Result<Option<(Arc<SubscriptionGroupConfig>, u64)>, SubscriptionGroupConfigCasError> {
        let _transition = self.metadata_transition.lock();
        let Some(config) = self.find_subscription_group_config_inner(group) else {
            return Ok(None);
        };
        let version = u64::try_from(self.data_version.read().counter())
            .map_err(|_| SubscriptionGroupConfigCasError::VersionUnavailable)?;
        Ok(Some((config, version)))
    }

    pub(crate) fn update_subscription_group_config_if_version(
        &self,
        group: &CheetahString,
        expected_version: u64,
        retry_max_times: Option<u32>,
        retry_queue_nums: Option<u32>,
        consume_timeout_minutes: Option<u32>,
    ) -> Result<SubscriptionGroupConfigCasOutcome, SubscriptionGroupConfigCasError> {
        validate_subscription_group_name(group.as_str())
            .map_err(|_| SubscriptionGroupConfigCasError::InvalidGroupName)?;
        if retry_max_times.is_none() && retry_queue_nums.is_none() && consume_timeout_minutes.is_none() {
            return Ok(SubscriptionGroupConfigCasOutcome::NoChange);
        }
        if retry_max_times.is_some_and(|value| !(1..=16).contains(&value))
            || retry_queue_nums.is_some_and(|value| !(1..=8).contains(&value))
            || consume_timeout_minutes.is_some_and(|value| !(1..=1_440).contains(&value))
        {
            return Err(SubscriptionGroupConfigCasError::ValueOutOfRange);
        }

        let _transition = self.metadata_transition.lock();
        let Some(current) = self.find_subscription_group_config_inner(group) else {
            return Ok(SubscriptionGroupConfigCasOutcome::GroupNotFound);
        };
        let mut data_version = self.data_version.write();
        let counter = data_version.counter();
        let actual_version = u64::try_from(counter).map_err(|_| SubscriptionGroupConfigCasError::VersionUnavailable)?;
        if actual_version != expected_version {
            return Ok(SubscriptionGroupConfigCasOutcome::VersionConflict {
                expected_version,
                actual_version,
            });
        }
        if counter == i64::MAX {
            return Err(SubscriptionGroupConfigCasError::VersionExhausted);
        }

        let retry_max_times = retry_max_times
            .map(|value| i32::try_from(value).map_err(|_| SubscriptionGroupConfigCasError::ValueOutOfRange))
            .transpose()?;
        let retry_queue_nums = retry_queue_nums
            .map(|value| i32::try_from(value).map_err(|_| SubscriptionGroupConfigCasError::ValueOutOfRange))
            .transpose()?;
        let consume_timeout_minutes = consume_timeout_minutes
            .map(|value| i32::try_from(value).map_err(|_| SubscriptionGroupConfigCasError::ValueOutOfRange))
            .transpose()?;
        let changes_retry_max_times = retry_max_times.is_some_and(|value| value != current.retry_max_times());
        let changes_retry_queue_nums = retry_queue_nums.is_some_and(|value| value != current.retry_queue_nums());
        let changes_consume_timeout =
            consume_timeout_minutes.is_some_and(|value| value != current.consume_timeout_minute());
        if !changes_retry_max_times && !changes_retry_queue_nums && !changes_consume_timeout {
            return Ok(SubscriptionGroupConfigCasOutcome::NoChange);
        }

        let mut replacement = current.as_ref().clone();
        if let Some(value) = retry_max_times {
            replacement.set_retry_max_times(value);
        }
        if let Some(value) = retry_queue_nums {
            replacement.set_retry_queue_nums(value);
        }
        if let Some(value) = consume_timeout_minutes {
            replacement.set_consume_timeout_minute(value);
        }

        let config = Arc::new(replacement);
        self.subscription_group_table.insert(group.clone(), Arc::clone(&config));
        data_version.next_version_with(self.state_machine_version.get());
        let update = SubscriptionGroupConfigUpdate {
            config,
            data_version: data_version.clone(),
            changed: true,
        };
        drop(data_version);
        drop(_transition);
        self.persist_after_mutation("cas-update");
        Ok(SubscriptionGroupConfigCasOutcome::Applied(update))
    }

    /// Atomically creates or fully replaces one supervised Subscription Group state.
    pub(crate) fn replace_subscription_group_config_if_state(
        &self,
        group: &CheetahString,
        expected_state: ExpectedState,
        mut replacement: SubscriptionGroupConfig,
    ) -> Result<SubscriptionGroupConfigCasOutcome, SubscriptionGroupConfigCasError> {
        validate_subscription_group_name(group.as_str())
            .map_err(|_| SubscriptionGroupConfigCasError::InvalidGroupName)?;
        replacement.set_group_name(group.clone());

        let transition = self.metadata_transition.lock();
        let current = self.find_subscription_group_config_inner(group);
        let mut data_version = self.data_version.write();
        let counter = data_version.counter();
        let actual_version = u64::try_from(counter).map_err(|_| SubscriptionGroupConfigCasError::VersionUnavailable)?;
        let matches = match expected_state {
            ExpectedState::Absent => current.is_none(),
            ExpectedState::Present { version } => current.is_some() && version == actual_version,
        };
        if !matches {
            return Ok(SubscriptionGroupConfigCasOutcome::StateConflict {
                actual_version: current.as_ref().map(|_| actual_version),
            });
        }
        if let Some(version) = self.supervised_dirty_groups.get(group).map(|entry| *entry.value()) {
            return Err(SubscriptionGroupConfigCasError::PersistenceDirty {
                actual_version: version,
            });
        }
        if counter == i64::MAX {
            return Err(SubscriptionGroupConfigCasError::VersionExhausted);
        }
        if let Some(current) = current.as_ref() {
            replacement.set_group_retry_policy(current.group_retry_policy().clone());
            replacement.set_subscription_data_set(current.subscription_data_set().cloned());
            replacement.set_attributes(current.attributes().clone());
        }
        if current
            .as_deref()
            .is_some_and(|current| supervised_group_configs_equal(current, &replacement))
        {
            return Ok(SubscriptionGroupConfigCasOutcome::Applied(
                SubscriptionGroupConfigUpdate {
                    config: Arc::new(replacement),
                    data_version: data_version.clone(),
                    changed: false,
                },
            ));
        }
        let config = Arc::new(replacement);
        self.subscription_group_table.insert(group.clone(), Arc::clone(&config));
        data_version.next_version_with(self.state_machine_version.get());
        let version =
            u64::try_from(data_version.counter()).map_err(|_| SubscriptionGroupConfigCasError::VersionUnavailable)?;
        self.supervised_dirty_groups.insert(group.clone(), version);
        let update = SubscriptionGroupConfigUpdate {
            config,
            data_version: data_version.clone(),
            changed: true,
        };
        drop(data_version);
        drop(transition);
        Ok(SubscriptionGroupConfigCasOutcome::Applied(update))
    }

    /// Releases the per-group marker only for a conclusion known to be durable.
    ///
    /// A supervised compare and set must not build a newer state on one whose
    /// durability is unknown, so every other conclusion keeps the marker. That
    /// includes an unconfirmed replacement, which the caller now receives as
    /// such instead of as an undifferentiated failure.
    pub(crate) fn complete_supervised_persistence(
        &self,
        group: &CheetahString,
        version: u64,
        conclusion: &crate::broker::metadata_reconciliation::MetadataWriteConclusion,
    ) {
        if conclusion.retains_dirty_marker() {
            return;
        }
        if self
            .supervised_dirty_groups
            .get(group)
            .is_some_and(|current| *current.value() == version)
        {
            self.supervised_dirty_groups.remove(group);
        }
    }

    #[cfg(test)]
    pub(crate) fn supervised_dirty_version(&self, group: &CheetahString) -> Option<u64> {
        self.supervised_dirty_groups.get(group).map(|entry| *entry.value())
    }

    pub fn get_forbidden(&self, group: &CheetahString, topic: &CheetahString, forbidden_index: i32) -> bool {
        if !Self::validate_forbidden_index(forbidden_index) {
            return false;
        }
        let topic_forbidden = self.get_forbidden_internal(group, topic);
        let bit_forbidden = 1 << forbidden_index;
        (topic_forbidden & bit_forbidden) == bit_forbidden
    }
    pub fn get_forbidden_internal(&self, group: &CheetahString, topic: &CheetahString) -> i32 {
        self.forbidden_table
            .get(group)
            .and_then(|topics| topics.get(topic).map(|v| *v))
            .map(|v| if v < 0 { 0 } else { v })
            .unwrap_or(0)
    }

    /// Disable consume capability for a specific consumer group
    ///
    /// # Arguments
    /// * `group_name` - The name of the consumer group to disable
    ///
    /// # Returns
    /// Returns the updated config if the group exists, None otherwise
    pub fn disable_consume(&self, group_name: &CheetahString) -> Option<Arc<SubscriptionGroupConfig>> {
        let result = {
            let _transition = self.metadata_transition.lock();
            let result = self.subscription_group_table.get_mut(group_name).map(|mut entry| {
                let mut new_config = (**entry.value()).clone();
                new_config.set_consume_enable(false);
                let arc_config = Arc::new(new_config);
                *entry.value_mut() = Arc::clone(&arc_config);
                arc_config
            });
            if result.is_some() {
                self.data_version
                    .write()
                    .next_version_with(self.state_machine_version.get());
            }
            result
        };

        if result.is_some() {
            self.persist_after_mutation("disable-consume");
            info!("Disabled consume for group: {}", group_name);
        } else {
            warn!("Cannot disable consume, group not found: {}", group_name);
        }

        result
    }

    pub(crate) fn disable_consume_for_lag(
        &self,
        group_name: &CheetahString,
        observed_lag_bytes: i64,
        threshold_bytes: i64,
    ) -> Option<SlowConsumerDisableMarker> {
        let marker = {
            let _transition = self.metadata_transition.lock();
            let mut entry = self.subscription_group_table.get_mut(group_name)?;
            let mut new_config = (**entry.value()).clone();
            new_config.set_consume_enable(false);
            *entry.value_mut() = Arc::new(new_config);

            let mut data_version = self.data_version.write();
            data_version.next_version_with(self.state_machine_version.get());
            let generation = u64::try_from(data_version.counter()).ok()?;
            let marker = SlowConsumerDisableMarker {
                observed_lag_bytes,
                threshold_bytes,
                reason: CheetahString::from_static_str("consumer_fallbehind_threshold"),
                generation,
            };
            self.slow_consumer_markers.insert(group_name.clone(), marker.clone());
            marker
        };
        self.persist_after_mutation("slow-consumer-disable");
        info!(
            group = %group_name,
            observed_lag_bytes,
            threshold_bytes,
            generation = marker.generation,
            "Disabled slow consumer group"
        );
        Some(marker)
    }

    pub(crate) fn slow_consumer_marker(&self, group_name: &CheetahString) -> Option<SlowConsumerDisableMarker> {
        self.slow_consumer_markers.get(group_name).map(|marker| marker.clone())
    }

    /// Enable consume capability for a specific consumer group
    ///
    /// # Arguments
    /// * `group_name` - The name of the consumer group to enable
    ///
    /// # Returns
    /// Returns the updated config if the group exists, None otherwise
    pub fn enable_consume(&self, group_name: &str) -> Option<Arc<SubscriptionGroupConfig>> {
        let result = {
            let _transition = self.metadata_transition.lock();
            let result = self.subscription_group_table.get_mut(group_name).map(|mut entry| {
                let mut new_config = (**entry.value()).clone();
                new_config.set_consume_enable(true);
                let arc_config = Arc::new(new_config);
                *entry.value_mut() = Arc::clone(&arc_config);
                arc_config
            });
            if result.is_some() {
                self.slow_consumer_markers.remove(group_name);
                self.data_version
                    .write()
                    .next_version_with(self.state_machine_version.get());
            }
            result
        };

        if result.is_some() {
            self.persist_after_mutation("enable-consume");
            info!("Enabled consume for group: {}", group_name);
        } else {
            warn!("Cannot enable consume, group not found: {}", group_name);
        }

        result
    }

    /// Check if consume is enabled for a specific consumer group
    ///
    /// # Arguments
    /// * `group_name` - The name of the consumer group to check
    ///
    /// # Returns
    /// Returns true if consume is enabled, false otherwise (including when group doesn't exist)
    pub fn is_consume_enable(&self, group_name: &str) -> bool {
        self.subscription_group_table
            .get(group_name)
            .map(|config| config.consume_enable())
            .unwrap_or(false)
    }

    /// Delete a subscription group configuration
    ///
    /// # Arguments
    /// * `group_name` - The name of the consumer group to delete
    ///
    /// # Returns
    /// Returns the deleted config if it existed, None otherwise
    pub fn delete_subscription_group_config(&self, group_name: &str) -> Option<Arc<SubscriptionGroupConfig>> {
        let old = self.delete_subscription_group_config_without_persist(group_name);
        if old.is_some() {
            #[cfg(feature = "rocksdb_store")]
            if let Err(error) = self.delete_group_from_rocksdb(group_name) {
                error!(
                    "delete subscription group from rocksdb failed, group={}, error={}",
                    group_name, error
                );
            }
            self.persist_after_mutation("delete");
        }
        old
    }

    fn delete_subscription_group_config_without_persist(
        &self,
        group_name: &str,
    ) -> Option<Arc<SubscriptionGroupConfig>> {
        let old = {
            let _transition = self.metadata_transition.lock();
            let old = self.subscription_group_table.remove(group_name).map(|(_, v)| v);
            self.forbidden_table.remove(group_name);
            if old.is_some() {
                self.data_version
                    .write()
                    .next_version_with(self.state_machine_version.get());
            }
            old
        };

        if old.is_some() {
            info!("Deleted subscription group: {}", group_name);
        } else {
            warn!("Delete failed, subscription group not found: {}", group_name);
        }

        old
    }

    /// Delete multiple subscription groups and persist the resulting snapshot once.
    pub fn delete_subscription_group_config_list(&self, group_names: &[CheetahString]) -> usize {
        let mut deleted = Vec::new();
        for group_name in group_names {
            if self
                .delete_subscription_group_config_without_persist(group_name.as_str())
                .is_some()
            {
                deleted.push(group_name);
            }
        }
        if deleted.is_empty() {
            return 0;
        }
        #[cfg(feature = "rocksdb_store")]
        for group_name in &deleted {
            if let Err(error) = self.delete_group_from_rocksdb(group_name.as_str()) {
                error!(
                    "delete subscription group from rocksdb failed, group={}, error={}",
                    group_name, error
                );
            }
        }
        self.persist_after_mutation("batch-delete");
        deleted.len()
    }

    /// Batch update subscription group configurations
    ///
    /// # Arguments
    /// * `config_list` - List of subscription group configs to update
    ///
    /// This method updates multiple subscription groups in a single persist operation
    pub fn update_subscription_group_config_list(&self, config_list: Vec<SubscriptionGroupConfig>) -> bool {
        if config_list.is_empty() {
            return true;
        }

        if let Err(error) = validate_subscription_group_configs(&config_list) {
            warn!(%error, "Rejected invalid subscription group configuration list");
            return false;
        }

        for mut config in config_list {
            let updated = self.update_subscription_group_config_without_persist(&mut config);
            debug_assert!(updated);
            if !updated {
                return false;
            }
        }

        self.persist_after_mutation("batch-update");
        info!("Batch updated subscription groups");
        true
    }

    /// Set forbidden flag for a specific consumer group and topic
    ///
    /// # Arguments
    /// * `group` - Consumer group name
    /// * `topic` - Topic name
    /// * `forbidden_index` - Forbidden flag bit index (0-31)
    ///
    /// Uses bitwise OR to set the forbidden flag at the specified index
    pub fn set_forbidden(&self, group: &CheetahString, topic: &CheetahString, forbidden_index: i32) {
        let topic_forbidden = self.get_forbidden_internal(group, topic);
        let new_forbidden = topic_forbidden | (1 << forbidden_index);
        self.update_forbidden_value(group, topic, new_forbidden);
    }

    /// Clear forbidden flag for a specific consumer group and topic
    ///
    /// # Arguments
    /// * `group` - Consumer group name
    /// * `topic` - Topic name
    /// * `forbidden_index` - Forbidden flag bit index (0-31)
    ///
    /// Uses bitwise AND with complement to clear the forbidden flag at the specified index
    pub fn clear_forbidden(&self, group: &CheetahString, topic: &CheetahString, forbidden_index: i32) {
        if !Self::validate_forbidden_index(forbidden_index) {
            warn!("Invalid forbidden index: {}", forbidden_index);
            return;
        }
        let topic_forbidden = self.get_forbidden_internal(group, topic);
        let new_forbidden = topic_forbidden & !(1 << forbidden_index);
        self.update_forbidden_value(group, topic, new_forbidden);
    }

    /// Update forbidden value directly for a specific consumer group and topic
    ///
    /// # Arguments
    /// * `group` - Consumer group name
    /// * `topic` - Topic name
    /// * `forbidden_value` - The complete forbidden bitmask value
    ///
    /// Directly sets the forbidden value, replacing any existing value.
    /// If forbidden_value <= 0, removes the group from the forbidden table.
    pub fn update_forbidden_value(&self, group: &CheetahString, topic: &CheetahString, forbidden_value: i32) {
        {
            let _transition = self.metadata_transition.lock();
            if forbidden_value <= 0 {
                self.forbidden_table.remove(group);
                info!("Cleared group forbidden, {}@{}", group, topic);
            } else {
                let old = self
                    .forbidden_table
                    .entry(group.clone())
                    .or_default()
                    .insert(topic.clone(), forbidden_value);

                if let Some(old_value) = old {
                    info!(
                        "Set group forbidden, {}@{} old: {} new: {}",
                        group, topic, old_value, forbidden_value
                    );
                } else {
                    info!(
                        "Set group forbidden, {}@{} old: 0 new: {}",
                        group, topic, forbidden_value
                    );
                }
            }
            self.data_version
                .write()
                .next_version_with(self.state_machine_version.get());
        }

        self.persist_after_mutation("forbidden-state");
    }

    /// Check if a specific forbidden flag is set
    ///
    /// # Arguments
    /// * `group` - Consumer group name
    /// * `topic` - Topic name
    /// * `forbidden_index` - Forbidden flag bit index (0-31)
    ///
    /// # Returns
    /// `true` if the forbidden flag at the specified index is set, `false` otherwise
    pub fn is_forbidden(&self, group: &str, topic: &str, forbidden_index: i32) -> bool {
        if !Self::validate_forbidden_index(forbidden_index) {
            return false;
        }

        self.forbidden_table
            .get(group)
            .and_then(|topic_map| topic_map.get(topic).map(|v| (*v & (1 << forbidden_index)) != 0))
            .unwrap_or(false)
    }

    /// Get all forbidden topics for a consumer group
    ///
    /// # Arguments
    /// * `group` - Consumer group name
    ///
    /// # Returns
    /// A vector of tuples (topic, forbidden_value) for all topics with forbidden flags set
    pub fn get_forbidden_topics(&self, group: &str) -> Vec<(CheetahString, i32)> {
        self.forbidden_table
            .get(group)
            .map(|topic_map| {
                topic_map
                    .iter()
                    .map(|entry| (entry.key().clone(), *entry.value()))
                    .collect()
            })
            .unwrap_or_default()
    }

    /// Remove all forbidden flags for a consumer group
    ///
    /// # Arguments
    /// * `group` - Consumer group name
    pub fn remove_forbidden_group(&self, group: &str) {
        if self.forbidden_table.remove(group).is_some() {
            info!("Removed all forbidden flags for group: {}", group);
        }
    }

    /// Remove forbidden flags for a specific topic in a consumer group
    ///
    /// # Arguments
    /// * `group` - Consumer group name
    /// * `topic` - Topic name
    pub fn remove_forbidden_topic(&self, group: &str, topic: &str) {
        if let Some(topic_map) = self.forbidden_table.get(group) {
            if topic_map.remove(topic).is_some() {
                info!("Removed forbidden flags for group: {}, topic: {}", group, topic);
            }
        }
    }

    /// Get a subset of subscription group configurations for pagination
    ///
    /// # Arguments
    /// * `data_version` - Expected data version for consistency check
    /// * `group_seq` - Starting sequence number for pagination (0-based)
    /// * `max_group_num` - Maximum number of groups to return
    ///
    /// # Returns
    /// A HashMap containing subscription group configurations for the requested page.
    /// Returns empty map if data version doesn't match or no groups in range.
    ///
    /// # Use Case
    /// Large-scale clusters can use this for incremental synchronization to avoid
    /// transferring all group configs at once.
    pub fn sub_group_table(
        &self,
        data_version: &DataVersion,
        group_seq: usize,
        max_group_num: usize,
    ) -> HashMap<CheetahString, Arc<SubscriptionGroupConfig>> {
        // Check data version consistency
        let current_version = self.data_version.read();
        let mut begin_index = group_seq;

        if data_version != &*current_version {
            begin_index = 0;
            info!(
                "Get sub subscription group table from {} due to DataVersion Changed",
                begin_index
            );
        }
        drop(current_version);

        let mut result = HashMap::new();
        let total_size = self.subscription_group_table.len();

        if begin_index < total_size {
            // Sort keys to ensure consistent pagination (like Java's ImmutableSortedMap)
            let mut sorted_keys: Vec<CheetahString> = self
                .subscription_group_table
                .iter()
                .map(|entry| entry.key().clone())
                .collect();
            sorted_keys.sort();

            let end_index = std::cmp::min(begin_index + max_group_num, total_size);

            for key in sorted_keys.iter().skip(begin_index).take(end_index - begin_index) {
                if let Some(config) = self.subscription_group_table.get(key) {
                    result.insert(key.clone(), Arc::clone(config.value()));
                }
            }
        }

        info!(
            "Retrieved {} subscription groups (seq: {}-{})",
            result.len(),
            begin_index,
            begin_index + result.len()
        );

        result
    }

    /// Get forbidden tables for specified consumer groups
    ///
    /// # Arguments
    /// * `group_set` - Set of consumer group names to query
    ///
    /// # Returns
    /// A nested HashMap: group -> (topic -> forbidden_bitmap)
    /// Only includes groups that exist in group_set and have forbidden entries.
    ///
    /// # Use Case
    /// Batch query optimization for checking forbidden status of multiple groups
    pub fn sub_forbidden_table(
        &self,
        group_set: &std::collections::HashSet<CheetahString>,
    ) -> HashMap<CheetahString, HashMap<CheetahString, i32>> {
        let mut result = HashMap::new();

        for group in group_set {
            if let Some(topic_map) = self.forbidden_table.get(group) {
                let topics: HashMap<_, _> = topic_map
                    .iter()
                    .map(|entry| (entry.key().clone(), *entry.value()))
                    .collect();

                if !topics.is_empty() {
                    result.insert(group.clone(), topics);
                }
            }
        }

        info!(
            "Retrieved forbidden tables for {} groups (out of {} requested)",
            result.len(),
            group_set.len()
        );

        result
    }

    /// Load only the data version from configuration file without loading full config
    ///
    /// # Returns
    /// `true` if data version was successfully loaded, `false` otherwise
    ///
    /// # Use Case
    /// Fast configuration change detection without the overhead of loading
    /// all subscription group configurations. Useful for master-slave synchronization.
    pub fn load_data_version(&mut self) -> bool {
        let config_file_path = self.config_file_path();

        if !std::path::Path::new(&config_file_path).exists() {
            warn!("Config file does not exist: {}", config_file_path);
            return false;
        }

        match std::fs::read_to_string(&config_file_path) {
            Ok(json_string) => match serde_json::from_str::<serde_json::Value>(&json_string) {
                Ok(json_obj) => {
                    if let Some(data_version_obj) = json_obj.get("dataVersion") {
                        match serde_json::from_value::<DataVersion>(data_version_obj.clone()) {
                            Ok(loaded_version) => {
                                *self.data_version.write() = loaded_version;
                                info!("Successfully loaded data version from {}", config_file_path);
                                return true;
                            }
                            Err(e) => {
                                warn!("Failed to deserialize data version: {:?}", e);
                            }
                        }
                    } else {
                        warn!("No dataVersion field found in config file");
                    }
                }
                Err(e) => {
                    warn!("Failed to parse config file as JSON: {:?}", e);
                }
            },
            Err(e) => {
                warn!("Failed to read config file {}: {:?}", config_file_path, e);
            }
        }

        false
    }

    /// Get the total count of subscription groups
    pub fn group_count(&self) -> usize {
        self.subscription_group_table.len()
    }

    /// Get all subscription group names
    pub fn get_all_group_names(&self) -> Vec<CheetahString> {
        self.subscription_group_table
            .iter()
            .map(|entry| entry.key().clone())
            .collect()
    }

    /// Get statistics about subscription groups
    ///
    /// # Returns
    /// A tuple of (total_groups, enabled_groups, disabled_groups)
    pub fn get_statistics(&self) -> (usize, usize, usize) {
        let total = self.subscription_group_table.len();
        let mut enabled = 0;
        let mut disabled = 0;

        for entry in self.subscription_group_table.iter() {
            if entry.value().consume_enable() {
                enabled += 1;
            } else {
                disabled += 1;
            }
        }

        (total, enabled, disabled)
    }

    /// Get detailed statistics about forbidden table
    ///
    /// # Returns
    /// A tuple of (groups_with_forbidden, total_forbidden_topics, total_forbidden_flags)
    pub fn get_forbidden_statistics(&self) -> (usize, usize, usize) {
        let groups_with_forbidden = self.forbidden_table.len();
        let mut total_topics = 0;
        let mut total_flags = 0;

        for entry in self.forbidden_table.iter() {
            let topic_map = entry.value();
            total_topics += topic_map.len();

            for topic_entry in topic_map.iter() {
                // Count number of set bits in the forbidden value
                let forbidden_value = *topic_entry.value();
                total_flags += forbidden_value.count_ones() as usize;
            }
        }

        (groups_with_forbidden, total_topics, total_flags)
    }

    /// Print comprehensive statistics to log
    pub fn log_statistics(&self) {
        let (total_groups, enabled, disabled) = self.get_statistics();
        let (forbidden_groups, forbidden_topics, forbidden_flags) = self.get_forbidden_statistics();

        info!(
            "SubscriptionGroupManager Statistics: Total Groups: {}, Enabled: {}, Disabled: {}, Forbidden Groups: {}, \
             Forbidden Topics: {}, Active Forbidden Flags: {}",
            total_groups, enabled, disabled, forbidden_groups, forbidden_topics, forbidden_flags
        );
    }

    /// Check if a group exists
    pub fn group_exists(&self, group_name: &str) -> bool {
        self.subscription_group_table.contains_key(group_name)
    }

    /// Get configuration for a specific group (read-only)
    pub fn get_group_config(&self, group_name: &str) -> Option<Arc<SubscriptionGroupConfig>> {
        self.subscription_group_table
            .get(group_name)
            .map(|entry| Arc::clone(entry.value()))
    }
}

fn supervised_group_configs_equal(left: &SubscriptionGroupConfig, right: &SubscriptionGroupConfig) -> bool {
    left.group_name() == right.group_name()
        && left.consume_enable() == right.consume_enable()
        && left.consume_from_min_enable() == right.consume_from_min_enable()
        && left.consume_broadcast_enable() == right.consume_broadcast_enable()
        && left.consume_message_orderly() == right.consume_message_orderly()
        && left.retry_queue_nums() == right.retry_queue_nums()
        && left.retry_max_times() == right.retry_max_times()
        && left.broker_id() == right.broker_id()
        && left.which_broker_when_consume_slowly() == right.which_broker_when_consume_slowly()
        && left.notify_consumer_ids_changed_enable() == right.notify_consumer_ids_changed_enable()
        && left.group_sys_flag() == right.group_sys_flag()
        && left.consume_timeout_minute() == right.consume_timeout_minute()
}

#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct SubscriptionGroupWrapperInner {
    //todo dashmap to concurrent safe
    subscription_group_table: HashMap<CheetahString, SubscriptionGroupConfig>,
    forbidden_table: HashMap<CheetahString, HashMap<CheetahString, i32>>,
    #[serde(default)]
    slow_consumer_markers: HashMap<CheetahString, SlowConsumerDisableMarker>,
    data_version: DataVersion,
}

impl SubscriptionGroupWrapperInner {
    pub fn subscription_group_table(&self) -> &HashMap<CheetahString, SubscriptionGroupConfig> {
        &self.subscription_group_table
    }

    pub fn subscription_group_table_mut(&mut self) -> &mut HashMap<CheetahString, SubscriptionGroupConfig> {
        &mut self.subscription_group_table
    }

    pub fn forbidden_table(&self) -> &HashMap<CheetahString, HashMap<CheetahString, i32>> {
        &self.forbidden_table
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn persisted_conclusion() -> crate::broker::metadata_reconciliation::MetadataWriteConclusion {
        crate::broker::metadata_reconciliation::MetadataWriteConclusion::BlockingPersisted
    }

    fn unconfirmed_conclusion() -> crate::broker::metadata_reconciliation::MetadataWriteConclusion {
        crate::broker::metadata_reconciliation::MetadataWriteConclusion::unconfirmed_for_test()
    }

    fn expect_applied(outcome: SubscriptionGroupConfigCasOutcome) -> SubscriptionGroupConfigUpdate {
        match outcome {
            SubscriptionGroupConfigCasOutcome::Applied(update) => update,
            other => panic!("expected applied Subscription Group CAS outcome, got {other:?}"),
        }
    }

    #[test]
    fn runtime_auto_create_policy_is_shared_by_live_manager_clones() {
        let temp_dir = tempfile::TempDir::new().expect("temp dir should be created");
        let root = CheetahString::from_string(temp_dir.path().to_string_lossy().to_string());
        let broker_config = BrokerConfig {
            store_path_root_dir: root.clone(),
            auto_create_subscription_group: false,
            ..BrokerConfig::default()
        };
        let message_store_config = MessageStoreConfig {
            store_path_root_dir: root,
            ..MessageStoreConfig::default()
        };
        let manager = SubscriptionGroupManager::new(
            SubscriptionGroupManagerConfig::from_configs(&broker_config, &message_store_config),
            StateMachineVersionView::default(),
            None,
        );
        let live_clone = manager.clone();
        let disabled_group = CheetahString::from_static_str("RUNTIME_DISABLED_GROUP");
        assert!(manager.find_subscription_group_config(&disabled_group).is_none());

        manager.update_auto_create_subscription_group(true);
        assert!(live_clone.auto_create_subscription_group_enabled());
        let enabled_group = CheetahString::from_static_str("RUNTIME_ENABLED_GROUP");
        assert!(live_clone.find_subscription_group_config(&enabled_group).is_some());

        live_clone.update_auto_create_subscription_group(false);
        assert!(!manager.auto_create_subscription_group_enabled());
        let disabled_again = CheetahString::from_static_str("RUNTIME_DISABLED_AGAIN_GROUP");
        assert!(manager.find_subscription_group_config(&disabled_again).is_none());
    }

    #[test]
    fn invalid_single_batch_and_cas_updates_do_not_mutate_state() {
        let temp_dir = tempfile::TempDir::new().expect("temp dir should be created");
        let root = CheetahString::from_string(temp_dir.path().to_string_lossy().to_string());
        let broker_config = BrokerConfig {
            store_path_root_dir: root.clone(),
            ..BrokerConfig::default()
        };
        let message_store_config = MessageStoreConfig {
            store_path_root_dir: root,
            ..MessageStoreConfig::default()
        };
        let manager = SubscriptionGroupManager::new(
            SubscriptionGroupManagerConfig::from_configs(&broker_config, &message_store_config),
            StateMachineVersionView::default(),
            None,
        );
        let before_version = manager.data_version().read().clone();
        let before_snapshot = serde_json::from_str::<serde_json::Value>(&manager.encode_pretty(false))
            .expect("manager snapshot should decode");

        let mut invalid = SubscriptionGroupConfig::new(CheetahString::from_static_str("invalid.group"));
        assert!(!manager.update_subscription_group_config(&mut invalid));

        manager.update_subscription_group_config_list(vec![
            SubscriptionGroupConfig::new(CheetahString::from_static_str("valid-group")),
            SubscriptionGroupConfig::new(CheetahString::from_static_str("invalid.group")),
        ]);
        assert!(!manager.group_exists("valid-group"));
        assert!(!manager.group_exists("invalid.group"));
        assert_eq!(*manager.data_version().read(), before_version);
        assert_eq!(
            serde_json::from_str::<serde_json::Value>(&manager.encode_pretty(false))
                .expect("manager snapshot should decode"),
            before_snapshot
        );
        assert!(!std::path::Path::new(&manager.config_file_path()).exists());

        assert!(matches!(
            manager.update_subscription_group_config_if_version(
                &CheetahString::from_static_str("invalid.group"),
                0,
                Some(8),
                None,
                None,
            ),
            Err(SubscriptionGroupConfigCasError::InvalidGroupName)
        ));
        assert_eq!(*manager.data_version().read(), before_version);
    }

    #[cfg(feature = "rocksdb_store")]
    #[tokio::test]
    async fn subscription_group_manager_persists_group_and_forbidden_to_rocksdb() {
        use crate::config::broker_config::BrokerConfig;
        use rocketmq_store::MessageStoreConfig;

        use crate::config::rocksdb_manager::RocksDbBrokerConfigManager;
        use crate::config::rocksdb_manager::RocksDbBrokerConfigManagerConfig;

        let temp_dir = tempfile::TempDir::new().expect("temp dir should be created");
        let root = CheetahString::from_string(temp_dir.path().to_string_lossy().to_string());
        let broker_config = BrokerConfig {
            store_path_root_dir: root.clone(),
            ..BrokerConfig::default()
        };
        let message_store_config = MessageStoreConfig {
            store_path_root_dir: root,
            real_time_persist_rocksdb_config: true,
            ..MessageStoreConfig::default()
        };
        let manager_config = SubscriptionGroupManagerConfig::from_configs(&broker_config, &message_store_config);
        let rocksdb_path = temp_dir.path().join("config").join("subscriptionGroups");
        let manager = SubscriptionGroupManager::new_with_rocksdb_config_manager(
            manager_config.clone(),
            StateMachineVersionView::default(),
            Arc::new(
                RocksDbBrokerConfigManager::open(RocksDbBrokerConfigManagerConfig::subscription_group(
                    rocksdb_path.clone(),
                ))
                .expect("rocksdb config manager should open"),
            ),
            None,
        );
        let group = CheetahString::from_static_str("GroupA");
        let topic = CheetahString::from_static_str("TopicA");
        let mut config = SubscriptionGroupConfig::new(group.clone());

        manager.update_subscription_group_config(&mut config);
        manager.set_forbidden(&group, &topic, 3);
        drop(manager);

        let restarted = SubscriptionGroupManager::new_with_rocksdb_config_manager(
            manager_config,
            StateMachineVersionView::default(),
            Arc::new(
                RocksDbBrokerConfigManager::open(RocksDbBrokerConfigManagerConfig::subscription_group(rocksdb_path))
                    .expect("rocksdb config manager should reopen"),
            ),
            None,
        );

        assert!(restarted.load());
        assert!(restarted.get_group_config(group.as_str()).is_some());
        assert!(restarted.get_forbidden(&group, &topic, 3));
    }

    #[cfg(feature = "rocksdb_store")]
    #[tokio::test]
    async fn subscription_group_manager_delete_removes_group_and_forbidden_from_rocksdb() {
        use crate::config::broker_config::BrokerConfig;
        use rocketmq_store::MessageStoreConfig;

        use crate::config::rocksdb_manager::RocksDbBrokerConfigManager;
        use crate::config::rocksdb_manager::RocksDbBrokerConfigManagerConfig;

        let temp_dir = tempfile::TempDir::new().expect("temp dir should be created");
        let root = CheetahString::from_string(temp_dir.path().to_string_lossy().to_string());
        let broker_config = BrokerConfig {
            store_path_root_dir: root.clone(),
            ..BrokerConfig::default()
        };
        let message_store_config = MessageStoreConfig {
            store_path_root_dir: root,
            real_time_persist_rocksdb_config: true,
            ..MessageStoreConfig::default()
        };
        let manager_config = SubscriptionGroupManagerConfig::from_configs(&broker_config, &message_store_config);
        let rocksdb_path = temp_dir.path().join("config").join("subscriptionGroups-delete");
        let manager = SubscriptionGroupManager::new_with_rocksdb_config_manager(
            manager_config.clone(),
            StateMachineVersionView::default(),
            Arc::new(
                RocksDbBrokerConfigManager::open(RocksDbBrokerConfigManagerConfig::subscription_group(
                    rocksdb_path.clone(),
                ))
                .expect("rocksdb config manager should open"),
            ),
            None,
        );
        let group = CheetahString::from_static_str("GroupDelete");
        let topic = CheetahString::from_static_str("TopicA");
        let mut config = SubscriptionGroupConfig::new(group.clone());

        manager.update_subscription_group_config(&mut config);
        manager.set_forbidden(&group, &topic, 3);
        manager.delete_subscription_group_config(group.as_str());
        drop(manager);

        let restarted = SubscriptionGroupManager::new_with_rocksdb_config_manager(
            manager_config,
            StateMachineVersionView::default(),
            Arc::new(
                RocksDbBrokerConfigManager::open(RocksDbBrokerConfigManagerConfig::subscription_group(rocksdb_path))
                    .expect("rocksdb config manager should reopen"),
            ),
            None,
        );

        assert!(restarted.load());
        assert!(restarted.get_group_config(group.as_str()).is_none());
        assert!(!restarted.get_forbidden(&group, &topic, 3));
    }

    #[test]
    fn test_consume_from_min_enable_default() {
        let config = SubscriptionGroupConfig::default();
        // Should be true after fix (aligns with Java implementation)
        assert!(config.consume_from_min_enable());
    }

    #[test]
    fn test_subscription_group_config_creation() {
        let group_name = "TEST_GROUP";
        let config = SubscriptionGroupConfig::new(CheetahString::from_string(group_name.to_string()));

        assert_eq!(config.group_name(), group_name);
        assert!(config.consume_enable());
        assert!(config.consume_from_min_enable());
        assert_eq!(config.retry_max_times(), 16);
        assert_eq!(config.retry_queue_nums(), 1);
    }

    #[test]
    fn slow_consumer_disable_marker_survives_serialization_and_explicit_enable_clears_it() {
        use crate::config::broker_config::BrokerConfig;
        use rocketmq_store::MessageStoreConfig;

        let temp_dir = tempfile::TempDir::new().expect("temp dir should be created");
        let root = CheetahString::from_string(temp_dir.path().to_string_lossy().to_string());
        let broker_config = BrokerConfig {
            store_path_root_dir: root.clone(),
            ..BrokerConfig::default()
        };
        let message_store_config = MessageStoreConfig {
            store_path_root_dir: root,
            ..MessageStoreConfig::default()
        };
        let manager_config = SubscriptionGroupManagerConfig::from_configs(&broker_config, &message_store_config);
        let manager = SubscriptionGroupManager::new(manager_config.clone(), StateMachineVersionView::default(), None);
        let group = CheetahString::from_static_str("SLOW_GROUP");
        let mut config = SubscriptionGroupConfig::new(group.clone());
        manager.update_subscription_group_config(&mut config);

        manager
            .disable_consume_for_lag(&group, 512, 256)
            .expect("known group must be disabled");
        let marker = manager.slow_consumer_marker(&group).expect("slow marker");
        assert_eq!(marker.observed_lag_bytes, 512);
        assert_eq!(marker.threshold_bytes, 256);
        assert_eq!(marker.reason, "consumer_fallbehind_threshold");
        assert!(!manager.is_consume_enable(group.as_str()));

        let encoded = manager.encode_pretty(false);
        let restored = SubscriptionGroupManager::new(manager_config, StateMachineVersionView::default(), None);
        restored.decode(&encoded);
        assert_eq!(restored.slow_consumer_marker(&group), Some(marker));

        let mut enabled = restored.get_group_config(group.as_str()).unwrap().as_ref().clone();
        enabled.set_consume_enable(true);
        restored.update_subscription_group_config(&mut enabled);
        assert!(restored.is_consume_enable(group.as_str()));
        assert!(restored.slow_consumer_marker(&group).is_none());
    }

    #[test]
    fn subscription_group_cas_changes_only_retry_fields_and_rejects_stale_versions() {
        use crate::config::broker_config::BrokerConfig;
        use rocketmq_store::MessageStoreConfig;

        let temp_dir = tempfile::TempDir::new().expect("temp dir should be created");
        let root = CheetahString::from_string(temp_dir.path().to_string_lossy().to_string());
        let broker_config = BrokerConfig {
            store_path_root_dir: root.clone(),
            ..BrokerConfig::default()
        };
        let message_store_config = MessageStoreConfig {
            store_path_root_dir: root,
            ..MessageStoreConfig::default()
        };
        let manager_config = SubscriptionGroupManagerConfig::from_configs(&broker_config, &message_store_config);
        let manager = SubscriptionGroupManager::new(manager_config, StateMachineVersionView::default(), None);
        let group = CheetahString::from_static_str("SRE_CAS_GROUP");
        let missing = CheetahString::from_static_str("MISSING_SRE_CAS_GROUP");
        assert!(manager
            .select_subscription_group_config_with_version(&missing)
            .expect("missing Subscription Group lookup should not fail")
            .is_none());
        assert!(matches!(
            manager
                .update_subscription_group_config_if_version(&missing, 0, Some(8), None, None)
                .expect("missing Subscription Group is a closed CAS outcome"),
            SubscriptionGroupConfigCasOutcome::GroupNotFound
        ));
        let mut config = SubscriptionGroupConfig::new(group.clone());
        config.set_consume_enable(false);
        config.set_consume_broadcast_enable(false);
        manager.update_subscription_group_config(&mut config);

        let (before, version) = manager
            .select_subscription_group_config_with_version(&group)
            .expect("Subscription Group version should be readable")
            .expect("versioned Subscription Group state");
        let update = expect_applied(
            manager
                .update_subscription_group_config_if_version(&group, version, Some(8), Some(4), Some(30))
                .expect("matching version must commit"),
        );
        let committed_version = u64::try_from(update.data_version.counter()).expect("non-negative version");
        assert_eq!(committed_version, version + 1);
        assert_eq!(update.config.retry_max_times(), 8);
        assert_eq!(update.config.retry_queue_nums(), 4);
        assert_eq!(update.config.consume_timeout_minute(), 30);
        assert_eq!(update.config.consume_enable(), before.consume_enable());
        assert_eq!(
            update.config.consume_broadcast_enable(),
            before.consume_broadcast_enable()
        );
        assert_eq!(update.config.group_sys_flag(), before.group_sys_flag());

        assert!(matches!(
            manager
                .update_subscription_group_config_if_version(&group, version, Some(7), None, None)
                .expect("stale version is a closed CAS outcome"),
            SubscriptionGroupConfigCasOutcome::VersionConflict {
                expected_version,
                actual_version,
            } if expected_version == version && actual_version == committed_version
        ));
        assert!(matches!(
            manager
                .update_subscription_group_config_if_version(&group, committed_version, Some(8), Some(4), Some(30),)
                .expect("no-op patch is a closed CAS outcome"),
            SubscriptionGroupConfigCasOutcome::NoChange
        ));
        assert_eq!(
            manager
                .update_subscription_group_config_if_version(&group, committed_version, Some(17), None, None,)
                .expect_err("out-of-range patch must fail"),
            SubscriptionGroupConfigCasError::ValueOutOfRange
        );
    }

    #[test]
    fn subscription_group_cas_keeps_version_exhaustion_in_the_error_channel() {
        use crate::config::broker_config::BrokerConfig;
        use rocketmq_store::MessageStoreConfig;

        let temp_dir = tempfile::TempDir::new().expect("temp dir should be created");
        let root = CheetahString::from_string(temp_dir.path().to_string_lossy().to_string());
        let broker_config = BrokerConfig {
            store_path_root_dir: root.clone(),
            ..BrokerConfig::default()
        };
        let message_store_config = MessageStoreConfig {
            store_path_root_dir: root,
            ..MessageStoreConfig::default()
        };
        let manager = SubscriptionGroupManager::new(
            SubscriptionGroupManagerConfig::from_configs(&broker_config, &message_store_config),
            StateMachineVersionView::default(),
            None,
        );
        let group = CheetahString::from_static_str("EXHAUSTED_SRE_CAS_GROUP");
        let mut config = SubscriptionGroupConfig::new(group.clone());
        manager.update_subscription_group_config(&mut config);
        manager.data_version.write().set_counter(i64::MAX);

        assert_eq!(
            manager
                .update_subscription_group_config_if_version(&group, i64::MAX as u64, Some(8), None, None)
                .expect_err("exhausted version must remain operational"),
            SubscriptionGroupConfigCasError::VersionExhausted
        );
    }

    #[test]
    fn subscription_group_state_cas_supports_create_replace_and_conflict() {
        use rocketmq_store::MessageStoreConfig;

        let temp_dir = tempfile::TempDir::new().expect("temp dir should be created");
        let root = CheetahString::from_string(temp_dir.path().to_string_lossy().to_string());
        let broker_config = BrokerConfig {
            store_path_root_dir: root.clone(),
            ..BrokerConfig::default()
        };
        let message_store_config = MessageStoreConfig {
            store_path_root_dir: root,
            ..MessageStoreConfig::default()
        };
        let manager = SubscriptionGroupManager::new(
            SubscriptionGroupManagerConfig::from_configs(&broker_config, &message_store_config),
            StateMachineVersionView::default(),
            None,
        );
        let group = CheetahString::from_static_str("STATE_CAS_GROUP");
        let mut created_config = SubscriptionGroupConfig::new(group.clone());
        created_config.set_retry_queue_nums(2);
        created_config.set_attributes(HashMap::from([(
            CheetahString::from_static_str("internal.attribute"),
            CheetahString::from_static_str("preserved"),
        )]));
        let created = expect_applied(
            manager
                .replace_subscription_group_config_if_state(&group, ExpectedState::Absent, created_config)
                .expect("absent group should be created"),
        );
        let version = u64::try_from(created.data_version.counter()).expect("non-negative version");

        assert!(matches!(
            manager
                .replace_subscription_group_config_if_state(
                    &group,
                    ExpectedState::Absent,
                    SubscriptionGroupConfig::new(group.clone()),
                )
                .expect("state conflict is a closed CAS outcome"),
            SubscriptionGroupConfigCasOutcome::StateConflict {
                actual_version: Some(actual_version),
            } if actual_version == version
        ));
        manager.complete_supervised_persistence(&group, version, &persisted_conclusion());

        let mut replacement = SubscriptionGroupConfig::new(group.clone());
        replacement.set_consume_enable(false);
        replacement.set_retry_queue_nums(4);
        let updated = expect_applied(
            manager
                .replace_subscription_group_config_if_state(&group, ExpectedState::Present { version }, replacement)
                .expect("matching group state should replace"),
        );
        assert!(!updated.config.consume_enable());
        assert_eq!(updated.config.retry_queue_nums(), 4);
        assert!(updated.changed);
        manager.complete_supervised_persistence(&group, version + 1, &persisted_conclusion());
        assert_eq!(
            updated
                .config
                .attributes()
                .get("internal.attribute")
                .map(CheetahString::as_str),
            Some("preserved")
        );
        let unchanged = expect_applied(
            manager
                .replace_subscription_group_config_if_state(
                    &group,
                    ExpectedState::Present { version: version + 1 },
                    updated.config.as_ref().clone(),
                )
                .expect("identical group replacement should be an accepted no-op"),
        );
        assert!(!unchanged.changed);
        assert_eq!(unchanged.data_version.counter(), updated.data_version.counter());
        assert!(matches!(
            manager
                .replace_subscription_group_config_if_state(
                    &group,
                    ExpectedState::Present { version },
                    SubscriptionGroupConfig::new(group.clone()),
                )
                .expect("state conflict is a closed CAS outcome"),
            SubscriptionGroupConfigCasOutcome::StateConflict {
                actual_version: Some(actual_version),
            } if actual_version == version + 1
        ));
    }

    #[test]
    fn subscription_group_state_cas_stays_fail_closed_after_persistence_failure() {
        use rocketmq_store::MessageStoreConfig;

        let temp_dir = tempfile::TempDir::new().expect("temp dir");
        let root = CheetahString::from_string(temp_dir.path().to_string_lossy().to_string());
        let broker_config = BrokerConfig {
            store_path_root_dir: root.clone(),
            ..BrokerConfig::default()
        };
        let message_store_config = MessageStoreConfig {
            store_path_root_dir: root,
            ..MessageStoreConfig::default()
        };
        let manager_config = SubscriptionGroupManagerConfig::from_configs(&broker_config, &message_store_config);
        let manager = SubscriptionGroupManager::new(manager_config.clone(), StateMachineVersionView::default(), None);
        manager.persist().expect("persist clean baseline");
        let group = CheetahString::from_static_str("DIRTY_STATE_CAS_GROUP");
        let created = expect_applied(
            manager
                .replace_subscription_group_config_if_state(
                    &group,
                    ExpectedState::Absent,
                    SubscriptionGroupConfig::new(group.clone()),
                )
                .expect("create"),
        );
        let version = u64::try_from(created.data_version.counter()).expect("version");
        manager.complete_supervised_persistence(&group, version, &unconfirmed_conclusion());
        assert_eq!(manager.supervised_dirty_version(&group), Some(version));
        let mut different = created.config.as_ref().clone();
        different.set_consume_enable(false);
        for replacement in [created.config.as_ref().clone(), different] {
            assert_eq!(
                manager
                    .replace_subscription_group_config_if_state(
                        &group,
                        ExpectedState::Present { version },
                        replacement,
                    )
                    .expect_err("dirty state must reject same and different replacements"),
                SubscriptionGroupConfigCasError::PersistenceDirty {
                    actual_version: version,
                }
            );
        }
        assert_eq!(manager.data_version.read().counter(), created.data_version.counter());

        let restarted = SubscriptionGroupManager::new(manager_config, StateMachineVersionView::default(), None);
        assert!(restarted.load());
        assert!(!restarted.group_exists(group.as_str()));
    }

    #[test]
    fn test_wrapper_serialization() {
        let mut wrapper = SubscriptionGroupWrapperInner::default();

        // Add a test config
        let config = SubscriptionGroupConfig::new(CheetahString::from_static_str("TEST_GROUP"));
        wrapper
            .subscription_group_table
            .insert(CheetahString::from_static_str("TEST_GROUP"), config);

        // Serialize
        let json = serde_json::to_string(&wrapper).expect("Failed to serialize");

        // Should contain camelCase fields
        assert!(json.contains("subscriptionGroupTable"));
        assert!(json.contains("forbiddenTable"));
        assert!(json.contains("dataVersion"));
    }

    #[test]
    fn test_forbidden_table_bitwise_operations() {
        // Test forbidden table using DashMap directly
        let forbidden_table: DashMap<CheetahString, DashMap<CheetahString, i32>> = DashMap::new();

        let group = CheetahString::from_static_str("TEST_GROUP");
        let topic = CheetahString::from_static_str("TEST_TOPIC");

        // Set bit 0
        forbidden_table
            .entry(group.clone())
            .or_default()
            .insert(topic.clone(), 1);

        // Verify bit 0 is set
        let value = forbidden_table
            .get(&group)
            .and_then(|t| t.get(&topic).map(|v| *v))
            .unwrap_or(0);
        assert_eq!(value & 1, 1);

        // Set bit 3 using OR operation
        forbidden_table
            .get(&group)
            .unwrap()
            .entry(topic.clone())
            .and_modify(|v| *v |= 1 << 3);

        let value = forbidden_table.get(&group).unwrap().get(&topic).map(|v| *v).unwrap();
        assert_eq!(value, 0b1001); // bits 0 and 3 set
    }

    #[test]
    fn test_forbidden_table_nested_dashmap() {
        // Test nested DashMap structure for forbidden table
        let forbidden_table: DashMap<CheetahString, DashMap<CheetahString, i32>> = DashMap::new();

        let group = CheetahString::from_static_str("TEST_GROUP");

        // Add multiple topics for same group
        let topic_a = CheetahString::from_static_str("TOPIC_A");
        let topic_b = CheetahString::from_static_str("TOPIC_B");

        {
            let topic_map = forbidden_table.entry(group.clone()).or_default();
            topic_map.value().insert(topic_a.clone(), 1);
            topic_map.value().insert(topic_b.clone(), 2);
            // Drop the entry lock here before reading
        }

        // Verify both topics exist (after releasing the entry lock)
        let topics = forbidden_table.get(&group).unwrap();
        assert_eq!(topics.len(), 2);
        assert_eq!(*topics.get(&topic_a).unwrap(), 1);
        assert_eq!(*topics.get(&topic_b).unwrap(), 2);
    }

    #[test]
    fn test_forbidden_value_bitwise_check() {
        // Test bitwise operations for forbidden index checking
        let value = 0b1010; // bits 1 and 3 set

        // Check individual bits
        assert_eq!(value & (1 << 0), 0); // bit 0 not set
        assert_ne!(value & (1 << 1), 0); // bit 1 set
        assert_eq!(value & (1 << 2), 0); // bit 2 not set
        assert_ne!(value & (1 << 3), 0); // bit 3 set

        // Set bit 2
        let new_value = value | (1 << 2);
        assert_eq!(new_value, 0b1110);

        // Clear bit 1
        let cleared = new_value & !(1 << 1);
        assert_eq!(cleared, 0b1100);
    }

    #[test]
    fn test_forbidden_index_range_validation() {
        // Test index validation logic
        let valid_indices = vec![0, 1, 15, 30, 31];
        for index in valid_indices {
            assert!((0..32).contains(&index), "Index {} should be valid", index);
        }

        let invalid_indices = vec![-1, -10, 32, 33, 100];
        for index in invalid_indices {
            assert!(!(0..32).contains(&index), "Index {} should be invalid", index);
        }
    }

    #[test]
    fn test_dashmap_concurrent_access_pattern() {
        // Simulate concurrent access pattern using DashMap
        let table: Arc<DashMap<CheetahString, Arc<SubscriptionGroupConfig>>> = Arc::new(DashMap::new());

        let group_name = CheetahString::from_static_str("TEST_GROUP");
        let config = SubscriptionGroupConfig::new(group_name.clone());

        // Insert
        table.insert(group_name.clone(), Arc::new(config));

        // Concurrent read (lock-free)
        let exists = table.contains_key(&group_name);
        assert!(exists);

        // Get for read
        let read_config = table.get(&group_name).map(|v| v.clone());
        assert!(read_config.is_some());

        // Get mutable for write (fine-grained lock) - using Copy-on-Write
        if let Some(mut entry) = table.get_mut(&group_name) {
            let mut new_config = (**entry.value()).clone();
            new_config.set_consume_enable(false);
            *entry.value_mut() = Arc::new(new_config);
        }

        // Verify modification
        let updated = table.get(&group_name).unwrap();
        assert!(!updated.value().consume_enable());
    }

    #[test]
    fn test_sub_group_table_pagination() {
        // Test pagination using DashMap directly
        let table: DashMap<CheetahString, Arc<SubscriptionGroupConfig>> = DashMap::new();

        // Create 10 groups
        for i in 0_usize..10 {
            let group_name = CheetahString::from_string(format!("GROUP_{}", i));
            let config = SubscriptionGroupConfig::new(group_name.clone());
            table.insert(group_name, Arc::new(config));
        }

        // Test pagination logic
        let mut collected = Vec::new();
        let mut seq = 0;

        for entry in table.iter() {
            if (3..6).contains(&seq) {
                collected.push(entry.key().clone());
            }
            seq += 1;
            if seq >= 6 {
                break;
            }
        }

        // Should collect 3 items (seq 3, 4, 5)
        assert_eq!(collected.len(), 3);
    }

    #[test]
    fn test_sub_forbidden_table_batch_query() {
        // Test batch query of forbidden table
        let forbidden_table: DashMap<CheetahString, DashMap<CheetahString, i32>> = DashMap::new();

        // Setup test data
        for i in 0..5 {
            let group = CheetahString::from_string(format!("GROUP_{}", i));
            let topics = DashMap::new();
            topics.insert(CheetahString::from_string(format!("TOPIC_{}", i)), 1 << i);
            forbidden_table.insert(group, topics);
        }

        // Query subset
        let mut query_set = std::collections::HashSet::new();
        query_set.insert(CheetahString::from_static_str("GROUP_1"));
        query_set.insert(CheetahString::from_static_str("GROUP_3"));
        query_set.insert(CheetahString::from_static_str("GROUP_9")); // Non-existent

        let mut result = HashMap::new();
        for group in &query_set {
            if let Some(topic_map) = forbidden_table.get(group) {
                let topics: HashMap<_, _> = topic_map
                    .iter()
                    .map(|entry| (entry.key().clone(), *entry.value()))
                    .collect();
                if !topics.is_empty() {
                    result.insert(group.clone(), topics);
                }
            }
        }

        // Should only have 2 results (GROUP_1 and GROUP_3)
        assert_eq!(result.len(), 2);
        assert!(result.contains_key(&CheetahString::from_static_str("GROUP_1")));
        assert!(result.contains_key(&CheetahString::from_static_str("GROUP_3")));
    }

    #[test]
    fn test_validation_functions() {
        // Test group name validation logic
        // Empty group name test omitted (const expression)

        let valid_name = "VALID_GROUP_NAME";
        assert!(valid_name.len() <= CHARACTER_MAX_LENGTH);

        let too_long = "A".repeat(CHARACTER_MAX_LENGTH + 1);
        assert!(too_long.len() > CHARACTER_MAX_LENGTH);

        // Test forbidden index validation
        let valid_indices = vec![0, 15, 31];
        for idx in valid_indices {
            assert!((0..32).contains(&idx));
        }

        let invalid_indices = vec![-1, 32, 100];
        for idx in invalid_indices {
            assert!(!(0..32).contains(&idx));
        }
    }

    #[test]
    fn test_statistics_calculation() {
        // Test statistics using DashMap
        let table: DashMap<CheetahString, Arc<SubscriptionGroupConfig>> = DashMap::new();

        // Create mixed groups
        for i in 0_usize..10 {
            let group_name = CheetahString::from_string(format!("GROUP_{}", i));
            let mut config = SubscriptionGroupConfig::new(group_name.clone());

            // Disable every other group
            if i.is_multiple_of(2) {
                config.set_consume_enable(false);
            }

            table.insert(group_name, Arc::new(config));
        }

        let total = table.len();
        let mut enabled = 0;
        let mut disabled = 0;

        for entry in table.iter() {
            if entry.value().consume_enable() {
                enabled += 1;
            } else {
                disabled += 1;
            }
        }

        assert_eq!(total, 10);
        assert_eq!(enabled, 5);
        assert_eq!(disabled, 5);
    }

    #[test]
    fn test_forbidden_statistics_bit_counting() {
        // Test counting set bits in forbidden values
        let test_values: Vec<(i32, u32)> = vec![
            (0b0000i32, 0),
            (0b0001i32, 1),
            (0b1111i32, 4),
            (0b10101010i32, 4),
            (0b11111111i32, 8),
        ];

        for (value, expected_count) in test_values {
            assert_eq!(value.count_ones(), expected_count);
        }
    }

    #[test]
    fn test_data_version_comparison() {
        // Test DataVersion equality for pagination consistency
        let version1 = rocketmq_protocol::protocol::data_version_facade::new_data_version();
        let mut version2 = rocketmq_protocol::protocol::data_version_facade::new_data_version();

        // Initially different (timestamps differ)
        // In real use, we'd set them to same values
        version2.set_timestamp(version1.timestamp());
        version2.set_counter(version1.counter());

        // Basic equality check
        assert_eq!(version1.timestamp(), version2.timestamp());
        assert_eq!(version1.counter(), version2.counter());
    }

    #[test]
    #[ignore] // Run with: cargo test -- --ignored --test-threads=1
    fn stress_test_concurrent_operations() {
        use std::sync::atomic::AtomicUsize;
        use std::sync::atomic::Ordering;
        use std::thread;
        use std::time::Instant;

        // High concurrency stress test: 10k+ operations
        let table: Arc<DashMap<CheetahString, Arc<SubscriptionGroupConfig>>> = Arc::new(DashMap::new());
        let operations = Arc::new(AtomicUsize::new(0));
        let num_threads = 20;
        let ops_per_thread = 500;

        let start = Instant::now();
        let handles: Vec<_> = (0..num_threads)
            .map(|thread_id| {
                let table = table.clone();
                let ops = operations.clone();
                thread::spawn(move || {
                    for i in 0_usize..ops_per_thread {
                        let key = CheetahString::from_string(format!("STRESS_GROUP_{}_{}", thread_id, i));

                        // Insert
                        let config = SubscriptionGroupConfig::new(key.clone());
                        table.insert(key.clone(), Arc::new(config));
                        ops.fetch_add(1, Ordering::Relaxed);

                        // Read
                        let _ = table.get(&key);
                        ops.fetch_add(1, Ordering::Relaxed);

                        // Update - using Copy-on-Write
                        if let Some(mut entry) = table.get_mut(&key) {
                            let mut new_config = (**entry.value()).clone();
                            new_config.set_consume_enable(i.is_multiple_of(2));
                            *entry.value_mut() = Arc::new(new_config);
                            ops.fetch_add(1, Ordering::Relaxed);
                        }

                        // Contains check
                        let _ = table.contains_key(&key);
                        ops.fetch_add(1, Ordering::Relaxed);
                    }
                })
            })
            .collect();

        for handle in handles {
            handle.join().unwrap();
        }

        let duration = start.elapsed();
        let total_ops = operations.load(Ordering::Relaxed);
        let qps = total_ops as f64 / duration.as_secs_f64();

        println!("\n=== Stress Test Results ===");
        println!("Total operations: {}", total_ops);
        println!("Duration: {:?}", duration);
        println!("QPS: {:.2}", qps);
        println!("Final table size: {}", table.len());

        // Verify QPS target (should be > 10k QPS)
        assert!(qps > 10000.0, "QPS {} is below target 10k", qps);
        assert_eq!(table.len(), num_threads * ops_per_thread);
    }

    #[test]
    fn test_concurrent_forbidden_table_operations() {
        use std::thread;

        // Test concurrent access to nested DashMap
        let forbidden_table: Arc<DashMap<CheetahString, DashMap<CheetahString, i32>>> = Arc::new(DashMap::new());

        let handles: Vec<_> = (0..10)
            .map(|thread_id| {
                let table = forbidden_table.clone();
                thread::spawn(move || {
                    for i in 0..100 {
                        let group = CheetahString::from_string(format!("GROUP_{}", thread_id));
                        let topic = CheetahString::from_string(format!("TOPIC_{}", i));

                        // Create or get inner map and set forbidden flag
                        {
                            let inner = table.entry(group.clone()).or_default();
                            inner.value().insert(topic.clone(), 1 << (i % 32));
                            // Drop the entry lock here before reading
                        }

                        // Read forbidden flag (after releasing the entry lock)
                        if let Some(inner_map) = table.get(&group) {
                            let _ = inner_map.get(&topic);
                        }
                    }
                })
            })
            .collect();

        for handle in handles {
            handle.join().unwrap();
        }

        // Verify structure
        assert_eq!(forbidden_table.len(), 10); // 10 groups
        for entry in forbidden_table.iter() {
            assert_eq!(entry.value().len(), 100); // 100 topics per group
        }
    }

    #[test]
    fn test_memory_stability_large_dataset() {
        // Test with large dataset to detect memory leaks
        let table: DashMap<CheetahString, Arc<SubscriptionGroupConfig>> = DashMap::new();

        // Insert 10k entries
        for i in 0..10000 {
            let key = CheetahString::from_string(format!("MEM_TEST_GROUP_{}", i));
            let config = SubscriptionGroupConfig::new(key.clone());
            table.insert(key, Arc::new(config));
        }

        assert_eq!(table.len(), 10000);

        // Clear half
        for i in 0..5000 {
            let key = format!("MEM_TEST_GROUP_{}", i);
            table.remove(key.as_str());
        }

        assert_eq!(table.len(), 5000);

        // Re-insert
        for i in 0..5000 {
            let key = CheetahString::from_string(format!("MEM_TEST_GROUP_NEW_{}", i));
            let config = SubscriptionGroupConfig::new(key.clone());
            table.insert(key, Arc::new(config));
        }

        assert_eq!(table.len(), 10000);
    }

    #[test]
    fn test_fault_injection_invalid_inputs() {
        // Test robustness against invalid inputs
        let table: DashMap<CheetahString, Arc<SubscriptionGroupConfig>> = DashMap::new();

        // Empty key
        let empty_key = CheetahString::from_static_str("");
        let config = SubscriptionGroupConfig::new(empty_key.clone());
        table.insert(empty_key.clone(), Arc::new(config));
        assert!(table.contains_key(""));

        // Very long key
        let long_key = CheetahString::from_string("A".repeat(300));
        let config = SubscriptionGroupConfig::new(long_key.clone());
        table.insert(long_key.clone(), Arc::new(config));
        let long_key_str = "A".repeat(300);
        assert!(table.contains_key(long_key_str.as_str()));

        // Special characters
        let special_key = CheetahString::from_static_str("GROUP_!@#$%^&*()");
        let config = SubscriptionGroupConfig::new(special_key.clone());
        table.insert(special_key.clone(), Arc::new(config));
        assert!(table.contains_key("GROUP_!@#$%^&*()"));
    }

    #[test]
    fn test_forbidden_index_boundary_conditions() {
        // Test boundary conditions for forbidden index
        let test_cases = vec![
            (-1, false),  // Below range
            (0, true),    // Lower bound
            (15, true),   // Middle
            (31, true),   // Upper bound
            (32, false),  // Above range
            (100, false), // Far above range
        ];

        for (index, expected_valid) in test_cases {
            let is_valid = (0..32).contains(&index);
            assert_eq!(is_valid, expected_valid, "Index {} validity mismatch", index);
        }
    }

    #[test]
    fn test_data_race_detection() {
        use std::sync::Arc;
        use std::thread;

        // Test for potential data races with concurrent read/write
        let table: Arc<DashMap<CheetahString, Arc<SubscriptionGroupConfig>>> = Arc::new(DashMap::new());

        // Pre-populate
        for i in 0..100 {
            let key = CheetahString::from_string(format!("RACE_GROUP_{}", i));
            let config = SubscriptionGroupConfig::new(key.clone());
            table.insert(key, Arc::new(config));
        }

        // Concurrent readers and writers
        let mut handles = vec![];

        // Writers
        for thread_id in 0_usize..5 {
            let table = table.clone();
            handles.push(thread::spawn(move || {
                for i in 0..100 {
                    let key = format!("RACE_GROUP_{}", i);
                    if let Some(mut entry) = table.get_mut(key.as_str()) {
                        let mut new_config = (**entry.value()).clone();
                        new_config.set_consume_enable(thread_id.is_multiple_of(2));
                        *entry.value_mut() = Arc::new(new_config);
                    }
                }
            }));
        }

        // Readers
        for _ in 0..5 {
            let table = table.clone();
            handles.push(thread::spawn(move || {
                for i in 0..100 {
                    let key = format!("RACE_GROUP_{}", i);
                    let _ = table.get(key.as_str()).map(|e| e.consume_enable());
                }
            }));
        }

        for handle in handles {
            handle.join().unwrap();
        }

        // Verify integrity
        assert_eq!(table.len(), 100);
        for i in 0..100 {
            let key = format!("RACE_GROUP_{}", i);
            assert!(table.contains_key(key.as_str()));
        }
    }

    #[test]
    fn test_pagination_consistency_under_concurrent_modifications() {
        use std::thread;

        let table: Arc<DashMap<CheetahString, Arc<SubscriptionGroupConfig>>> = Arc::new(DashMap::new());

        // Initial data
        for i in 0..1000 {
            let key = CheetahString::from_string(format!("PAGE_GROUP_{}", i));
            let config = SubscriptionGroupConfig::new(key.clone());
            table.insert(key, Arc::new(config));
        }

        let table_clone = table.clone();

        // Concurrent modifier
        let modifier = thread::spawn(move || {
            for i in 1000..1100 {
                let key = CheetahString::from_string(format!("PAGE_GROUP_{}", i));
                let config = SubscriptionGroupConfig::new(key.clone());
                table_clone.insert(key, Arc::new(config));
            }
        });

        // Paginate while modifications happen
        let mut page_start = 0;
        let page_size = 100;
        let mut pages_collected = 0;

        while page_start < 1000 {
            let mut current_seq = 0;
            let mut _page_items = 0;

            for entry in table.iter() {
                if current_seq >= page_start && current_seq < page_start + page_size {
                    _page_items += 1;
                    let _ = entry.key();
                }
                current_seq += 1;
                if current_seq >= page_start + page_size {
                    break;
                }
            }

            pages_collected += 1;
            page_start += page_size;
        }

        modifier.join().unwrap();

        assert!(pages_collected >= 10); // At least 10 pages
        assert!(table.len() >= 1000); // At least original data
    }
}
