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

//! Canonical capability projections for the composed message store.
//!
//! Broker request paths depend on the smallest capability that serves their
//! use case. The broad backend adapter remains crate-internal implementation
//! glue and is not part of the Broker-facing API.

mod read;

pub use read::BrokerReadStore;
pub use read::ConsumeQueueStatistics;

use crate::base::backend_read_ops::BackendReadOps;
use std::any::Any;
use std::collections::HashMap;
use std::collections::HashSet;
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use bytes::BytesMut;
use cheetah_string::CheetahString;
use rocketmq_model::common::boundary_type::BoundaryType;
use rocketmq_model::common::broker::broker_role::BrokerRole;
use rocketmq_model::common::message::message_batch::MessageExtBatch;
use rocketmq_model::common::message::message_ext::MessageExt;
use rocketmq_model::common::message::message_ext_broker_inner::MessageExtBrokerInner;
use rocketmq_protocol::protocol::body::ha_runtime_info::HARuntimeInfo;
use rocketmq_store_api::AppendReceipt;
use rocketmq_store_api::AppendStatus;
use rocketmq_store_api::Durability;
use rocketmq_store_api::GetResult;
use rocketmq_store_api::GetStatus;
use rocketmq_store_api::LeasedBytes;
use rocketmq_store_api::MessageReader;
use rocketmq_store_api::QueryResult;
use rocketmq_store_api::ReadCacheState;
use rocketmq_store_api::SelectResult;
use rocketmq_store_api::StoreContractViolation;
use rocketmq_store_api::StoreError;
use rocketmq_store_api::StoreHealth;
use rocketmq_store_api::StoreHealthSnapshot;
use rocketmq_store_api::TimerRecallRequest;
use rocketmq_store_api::TimerRecallStatus;
use rocketmq_store_api::WriteLeaseToken;

use crate::base::backend_ops::BackendOps;
use crate::base::backend_ops::MessageStoreShutdownReport;
use crate::base::backend_ops::PutMessagePreflight;
use crate::base::backend_ops::StateMachineVersionView;
use crate::base::commit_log_dispatcher::CommitLogDispatcher;
use crate::base::commit_log_dispatcher::MessageIndexRuntimeSnapshot;
use crate::base::commit_log_dispatcher::MessageIndexRuntimeSource;
use crate::base::get_message_result::GetMessageResult;
use crate::base::message_result::PutMessageResult;
use crate::base::message_status_enum::GetMessageStatus;
use crate::base::message_status_enum::PutMessageStatus;
use crate::base::query_message_request::QueryMessageRequest;
use crate::base::query_message_result::QueryMessageResult;
use crate::base::select_result::SelectMappedBufferCacheState;
use crate::base::select_result::SelectMappedBufferResult;
use crate::base::store_checkpoint::StoreCheckpoint;
use crate::config::message_store_config::MessageStoreConfig;
use crate::consume_queue::mapped_file_queue::FlushProgress;
use crate::filter::ArcMessageFilter;
use crate::ha::general_ha_service::GeneralHAService;
use crate::hook::put_message_hook::BoxedPutMessageHook;
use crate::log_file::commit_log::CommitLog;
use crate::queue::ArcConsumeQueue;
use crate::stats::broker_stats_manager::BrokerStatsManager;
use crate::store::running_flags::RunningFlags;
use crate::timer::timer_message_store::TimerMessageStore;

fn aggregate_message_index_safe_offset(dispatchers: &[Arc<dyn CommitLogDispatcher>]) -> Option<i64> {
    let mut observed = None;
    for dispatcher in dispatchers
        .iter()
        .filter(|dispatcher| dispatcher.message_index_runtime_snapshot().is_some())
    {
        let safe_offset = dispatcher.message_index_safe_offset()?;
        observed = Some(observed.map_or(safe_offset, |current: i64| current.min(safe_offset)));
    }
    observed
}

/// Supported CommitLog access patterns exposed through the Store administration capability.
///
/// Numeric values remain only at the remoting protocol boundary. Store callers use this enum so
/// arbitrary platform memory-advice integers cannot cross the safe capability API.
#[derive(Clone, Copy, Debug, Eq, PartialEq)]
#[non_exhaustive]
pub enum CommitLogReadMode {
    /// Use the platform's normal access heuristic and enable sequential read-ahead.
    Normal,
    /// Prefer random-access behavior and disable sequential read-ahead.
    Random,
}

impl CommitLogReadMode {
    const NORMAL_WIRE_VALUE: i32 = 0;
    const RANDOM_WIRE_VALUE: i32 = 1;

    /// Converts the legacy administration request value into a supported mode.
    pub const fn from_wire_value(value: i32) -> Option<Self> {
        match value {
            Self::NORMAL_WIRE_VALUE => Some(Self::Normal),
            Self::RANDOM_WIRE_VALUE => Some(Self::Random),
            _ => None,
        }
    }

    /// Returns the stable value used by the existing administration protocol.
    pub const fn wire_value(self) -> i32 {
        match self {
            Self::Normal => Self::NORMAL_WIRE_VALUE,
            Self::Random => Self::RANDOM_WIRE_VALUE,
        }
    }
}

/// Sealed adapter from public Broker capabilities to the private backend implementation contract.
///
/// The trait is intentionally not re-exported. Capability users can call only the operations
/// declared by their bound, while Store implementations retain one internal forwarding surface.
#[doc(hidden)]
pub trait BackendAccess: Send + Sync + 'static {
    type Backend: BackendOps;

    fn backend(&self) -> &Self::Backend;

    fn backend_mut(&mut self) -> &mut Self::Backend;
}

impl<T> BackendAccess for T
where
    T: BackendOps,
{
    type Backend = T;

    fn backend(&self) -> &Self::Backend {
        self
    }

    fn backend_mut(&mut self) -> &mut Self::Backend {
        self
    }
}

/// Broker composition and lifecycle ownership boundary.
///
/// Request paths should prefer one of the narrower use-case markers below.
pub trait BrokerStorePort: BrokerAdminStore + BrokerReplicationStore {
    fn load(&mut self) -> impl Future<Output = bool> + Send {
        BackendOps::load(self.backend_mut())
    }

    fn start(&mut self) -> impl Future<Output = Result<(), crate::store_error::StoreError>> + Send {
        BackendOps::start(self.backend_mut())
    }

    fn init(&mut self) -> impl Future<Output = Result<(), crate::store_error::StoreError>> + Send {
        BackendOps::init(self.backend_mut())
    }

    fn shutdown_gracefully(
        &mut self,
    ) -> impl Future<Output = Result<MessageStoreShutdownReport, crate::store_error::StoreError>> + Send {
        BackendOps::shutdown_gracefully(self.backend_mut())
    }

    fn shutdown(&mut self) -> impl Future<Output = ()> + Send {
        BackendOps::shutdown(self.backend_mut())
    }

    fn destroy(&mut self) {
        BackendOps::destroy(self.backend_mut());
    }

    fn set_timer_message_store(&mut self, timer_message_store: Arc<TimerMessageStore>) {
        BackendOps::set_timer_message_store(self.backend_mut(), timer_message_store);
    }

    fn get_commit_log_mut(&mut self) -> &mut CommitLog {
        BackendOps::get_commit_log_mut(self.backend_mut())
    }

    fn recover_topic_queue_table(&mut self) {
        BackendOps::recover_topic_queue_table(self.backend_mut());
    }

    fn add_first_dispatcher(&mut self, dispatcher: Arc<dyn CommitLogDispatcher>) {
        BackendOps::add_first_dispatcher(self.backend_mut(), dispatcher);
    }

    fn set_put_message_hook(&mut self, put_message_hook: BoxedPutMessageHook) {
        BackendOps::set_put_message_hook(self.backend_mut(), put_message_hook);
    }
}

/// Broker primary append capability set.
pub trait BrokerWriteStore: BrokerReadStore {
    fn put_message(&mut self, message: MessageExtBrokerInner) -> impl Future<Output = PutMessageResult> + Send {
        BackendOps::put_message(self.backend_mut(), message)
    }

    fn put_messages(&mut self, batch: MessageExtBatch) -> impl Future<Output = PutMessageResult> + Send {
        BackendOps::put_messages(self.backend_mut(), batch)
    }

    fn assign_offset(&self, message: &mut MessageExtBrokerInner) -> Result<(), crate::store_error::StoreError> {
        BackendOps::assign_offset(self.backend(), message)
    }

    fn increase_offset(&self, message: &MessageExtBrokerInner, message_num: i16) {
        BackendOps::increase_offset(self.backend(), message, message_num);
    }

    fn recall_extended_timer(
        &self,
        request: &TimerRecallRequest,
    ) -> Result<TimerRecallStatus, crate::store_error::StoreError> {
        BackendOps::recall_extended_timer(self.backend(), request)
    }
}

/// Broker paths that atomically combine reads, offsets, and writes.
pub trait BrokerReadWriteStore: BrokerReadStore + BrokerWriteStore {
    /// Confirms that the value is admitted to combined read/write paths.
    fn broker_read_write_store(&self) {}
}

/// Broker capability for updating both HA and logical master addresses.
pub trait BrokerMasterAddressStore: BrokerReadStore {
    fn update_logical_master_address(&self, new_addr: &CheetahString) {
        BackendOps::update_master_address(self.backend(), new_addr);
    }

    fn update_master_address(&self, new_addr: &CheetahString) -> impl Future<Output = ()> + Send {
        self.update_master_addresses(new_addr.as_str(), new_addr)
    }

    fn update_master_addresses(
        &self,
        ha_address: &str,
        logical_address: &CheetahString,
    ) -> impl Future<Output = ()> + Send {
        async move {
            BackendOps::update_ha_master_address(self.backend(), ha_address).await;
            self.update_logical_master_address(logical_address);
        }
    }
}

/// Broker administrative and configuration capability set.
pub trait BrokerAdminStore: BrokerReplicationStore {
    fn get_running_data_info(&self) -> String {
        BackendOps::get_running_data_info(self.backend())
    }

    fn get_runtime_info(&self) -> HashMap<String, String> {
        BackendOps::get_runtime_info(self.backend())
    }

    fn get_message_store_config(&self) -> &MessageStoreConfig {
        BackendOps::get_message_store_config(self.backend())
    }

    fn get_queue_store(&self) -> &dyn Any {
        BackendOps::get_queue_store(self.backend())
    }

    /// Returns queue counts without exposing the backend's queue table or lock.
    fn consume_queue_statistics(&self) -> ConsumeQueueStatistics {
        BackendReadOps::consume_queue_statistics(self.backend())
    }

    fn delete_topics(&self, delete_topics: Vec<&CheetahString>) -> i32 {
        BackendOps::delete_topics(self.backend(), delete_topics)
    }

    fn clean_unused_topic(&self, retain_topics: &HashSet<String>) -> i32 {
        BackendOps::clean_unused_topic(self.backend(), retain_topics)
    }

    fn clean_expired_consumer_queue(&self) {
        BackendOps::clean_expired_consumer_queue(self.backend());
    }

    fn execute_delete_files_manually(&self) {
        BackendOps::execute_delete_files_manually(self.backend());
    }

    fn set_commitlog_read_mode(
        &self,
        read_ahead_mode: CommitLogReadMode,
    ) -> Result<(), crate::store_error::StoreError> {
        BackendOps::set_commitlog_read_mode(self.backend(), read_ahead_mode)
    }

    fn flush(&self) -> i64 {
        BackendOps::flush(self.backend())
    }

    fn try_flush(&self) -> Result<FlushProgress, crate::store_error::StoreError> {
        BackendOps::try_flush(self.backend())
    }

    fn get_dispatcher_list(&self) -> &[Arc<dyn CommitLogDispatcher>] {
        BackendOps::get_dispatcher_list(self.backend())
    }

    fn install_message_index_runtime(&self, source: Arc<dyn MessageIndexRuntimeSource>) -> bool {
        let mut found = false;
        for dispatcher in self.get_dispatcher_list() {
            if dispatcher.install_message_index_runtime(Arc::clone(&source)) {
                found = true;
            }
        }
        found
    }

    fn message_index_runtime_snapshot(&self) -> Option<MessageIndexRuntimeSnapshot> {
        let mut observed = None;
        for snapshot in self
            .get_dispatcher_list()
            .iter()
            .filter_map(|dispatcher| dispatcher.message_index_runtime_snapshot())
        {
            if observed.is_some_and(|current| current != snapshot) {
                return None;
            }
            observed = Some(snapshot);
        }
        observed
    }

    fn message_index_safe_offset(&self) -> Option<i64> {
        aggregate_message_index_safe_offset(self.get_dispatcher_list())
    }

    fn truncate_dirty_logic_files(&self, phy_offset: i64) {
        BackendOps::truncate_dirty_logic_files(self.backend(), phy_offset);
    }
}

/// Broker HA and replication-control capability set.
pub trait BrokerReplicationStore: BrokerReadWriteStore + BrokerMasterAddressStore {
    fn get_commit_log(&self) -> &CommitLog {
        BackendOps::get_commit_log(self.backend())
    }

    fn get_commit_log_data(&self, offset: i64) -> Option<SelectMappedBufferResult> {
        BackendOps::get_commit_log_data(self.backend(), offset)
    }

    fn get_bulk_commit_log_data(&self, offset: i64, size: i32) -> Option<Vec<SelectMappedBufferResult>> {
        BackendOps::get_bulk_commit_log_data(self.backend(), offset, size)
    }

    fn append_to_commit_log(
        &mut self,
        start_offset: i64,
        data: &[u8],
        data_start: i32,
        data_length: i32,
    ) -> impl Future<Output = Result<bool, crate::store_error::StoreError>> + Send {
        BackendOps::append_to_commit_log(self.backend_mut(), start_offset, data, data_start, data_length)
    }

    fn update_ha_master_address(&self, new_addr: &str) -> impl Future<Output = ()> + Send {
        BackendOps::update_ha_master_address(self.backend(), new_addr)
    }

    fn set_confirm_offset(&mut self, phy_offset: i64) {
        BackendOps::set_confirm_offset(self.backend_mut(), phy_offset);
    }

    fn set_alive_replica_num_in_group(&self, alive_replica_nums: i32) {
        BackendOps::set_alive_replica_num_in_group(self.backend(), alive_replica_nums);
    }

    fn get_alive_replica_num_in_group(&self) -> i32 {
        BackendOps::get_alive_replica_num_in_group(self.backend())
    }

    fn sync_controller_sync_state_set(&self, local_broker_id: i64, sync_state_set: &HashSet<i64>) {
        BackendOps::sync_controller_sync_state_set(self.backend(), local_broker_id, sync_state_set);
    }

    fn wakeup_ha_client(&self) {
        BackendOps::wakeup_ha_client(self.backend());
    }

    fn set_master_flushed_offset(&self, master_flushed_offset: i64) {
        BackendOps::set_master_flushed_offset(self.backend(), master_flushed_offset);
    }

    fn sync_broker_role(&self, broker_role: BrokerRole) {
        BackendOps::sync_broker_role(self.backend(), broker_role);
    }

    fn sync_broker_role_with_term(
        &self,
        broker_role: BrokerRole,
        external_term: u64,
    ) -> Result<bool, crate::store_error::StoreError> {
        BackendOps::sync_broker_role_with_term(self.backend(), broker_role, external_term)
    }

    fn install_controller_write_lease(&self, token: WriteLeaseToken, valid_for: Duration) -> bool {
        BackendOps::install_controller_write_lease(self.backend(), token, valid_for)
    }

    fn fence_controller_writes(&self) {
        BackendOps::fence_controller_writes(self.backend());
    }

    fn get_ha_service(&self) -> Option<&GeneralHAService> {
        BackendOps::get_ha_service(self.backend())
    }

    fn get_ha_runtime_info(&self) -> Option<HARuntimeInfo> {
        BackendOps::get_ha_runtime_info(self.backend())
    }
}

impl<T> BrokerStorePort for T where T: BackendOps {}
impl<T> BrokerReadStore for T where T: BackendOps {}
impl<T> BrokerWriteStore for T where T: BackendOps {}
impl<T> BrokerReadWriteStore for T where T: BrokerReadStore + BrokerWriteStore {}
impl<T> BrokerMasterAddressStore for T where T: BackendOps {}
impl<T> BrokerAdminStore for T where T: BackendOps {}
impl<T> BrokerReplicationStore for T where T: BackendOps {}

/// Backend append output plus independent append and durable progress.
#[derive(Clone)]
pub struct StoreAppendReceipt {
    result: PutMessageResult,
    canonical: Result<AppendReceipt, StoreContractViolation>,
    appended_watermark: i64,
    durable_watermark: i64,
    execution_evidence: crate::base::message_result::AppendExecutionEvidence,
}

impl StoreAppendReceipt {
    /// Returns physical append evidence supplied by the write stage.
    ///
    /// An `Appended` result can accompany a rejected canonical receipt after a
    /// lease fence or durability timeout. It does not authorize a success reply.
    pub const fn execution_evidence(&self) -> &crate::base::message_result::AppendExecutionEvidence {
        &self.execution_evidence
    }

    /// Returns the backend append result.
    pub const fn result(&self) -> &PutMessageResult {
        &self.result
    }

    /// Returns the canonical backend-neutral receipt projection.
    pub fn canonical(&self) -> Result<&AppendReceipt, &StoreContractViolation> {
        self.canonical.as_ref()
    }

    /// Returns the exclusive primary-log append watermark observed after the operation.
    pub const fn appended_watermark(&self) -> i64 {
        self.appended_watermark
    }

    /// Returns the exclusive durable watermark observed after the operation.
    pub const fn durable_watermark(&self) -> i64 {
        self.durable_watermark
    }
}

/// Builds the canonical receipt without interpreting or rewriting backend status fields.
pub fn store_append_receipt(
    result: PutMessageResult,
    appended_watermark: i64,
    durable_watermark: i64,
) -> StoreAppendReceipt {
    let status = put_status_to_append_status(result.put_message_status());
    let canonical = if status.is_accepted() {
        match result.append_message_result() {
            Some(append) => {
                let start = append.wrote_offset;
                let end = start.saturating_add(i64::from(append.wrote_bytes));
                let durability = if durable_watermark >= end {
                    Durability::Local
                } else {
                    Durability::Memory
                };
                AppendReceipt::try_new(status, start..end, appended_watermark, durable_watermark, durability)
            }
            None => AppendReceipt::try_rejected(status, appended_watermark, durable_watermark),
        }
    } else {
        AppendReceipt::try_rejected(status, appended_watermark, durable_watermark)
    };
    StoreAppendReceipt {
        execution_evidence: result.execution_evidence().clone(),
        result,
        canonical,
        appended_watermark,
        durable_watermark,
    }
}

/// Maps every backend append outcome to a distinct neutral status.
pub const fn put_status_to_append_status(status: PutMessageStatus) -> AppendStatus {
    match status {
        PutMessageStatus::PutOk => AppendStatus::PutOk,
        PutMessageStatus::FlushDiskTimeout => AppendStatus::FlushDiskTimeout,
        PutMessageStatus::FlushSlaveTimeout => AppendStatus::FlushReplicaTimeout,
        PutMessageStatus::SlaveNotAvailable => AppendStatus::ReplicaUnavailable,
        PutMessageStatus::ServiceNotAvailable => AppendStatus::ServiceUnavailable,
        PutMessageStatus::CreateMappedFileFailed => AppendStatus::StorageUnavailable,
        PutMessageStatus::MessageIllegal => AppendStatus::InvalidMessage,
        PutMessageStatus::PropertiesSizeExceeded => AppendStatus::PropertiesTooLarge,
        PutMessageStatus::OsPageCacheBusy => AppendStatus::PageCacheBusy,
        PutMessageStatus::UnknownError => AppendStatus::Unknown,
        PutMessageStatus::InSyncReplicasNotEnough => AppendStatus::InsufficientReplicas,
        PutMessageStatus::PutToRemoteBrokerFail => AppendStatus::RemoteAppendFailed,
        PutMessageStatus::LmqConsumeQueueNumExceeded => AppendStatus::QueueLimitExceeded,
        PutMessageStatus::WheelTimerFlowControl => AppendStatus::ScheduleFlowControl,
        PutMessageStatus::WheelTimerMsgIllegal => AppendStatus::ScheduleMessageIllegal,
        PutMessageStatus::WheelTimerNotEnable => AppendStatus::ScheduleDisabled,
    }
}

/// Maps every backend get outcome without changing its semantics.
pub const fn get_status_to_api(status: GetMessageStatus) -> GetStatus {
    match status {
        GetMessageStatus::Found => GetStatus::Found,
        GetMessageStatus::NoMatchedMessage => GetStatus::NoMatchedMessage,
        GetMessageStatus::MessageWasRemoving => GetStatus::MessageWasRemoving,
        GetMessageStatus::OffsetFoundNull => GetStatus::OffsetFoundNull,
        GetMessageStatus::OffsetOverflowBadly => GetStatus::OffsetOverflowBadly,
        GetMessageStatus::OffsetOverflowOne => GetStatus::OffsetOverflowOne,
        GetMessageStatus::OffsetTooSmall => GetStatus::OffsetTooSmall,
        GetMessageStatus::NoMatchedLogicQueue => GetStatus::NoMatchedLogicQueue,
        GetMessageStatus::NoMessageInQueue => GetStatus::NoMessageInQueue,
        GetMessageStatus::OffsetReset => GetStatus::OffsetReset,
    }
}

/// Read-only capability for admission paths that only need store health.
pub struct MessageStoreHealthCapability<'a, MS> {
    store: &'a MS,
}

impl<'a, MS> MessageStoreHealthCapability<'a, MS> {
    /// Wraps an immutable store view without changing ownership.
    pub fn new(store: &'a MS) -> Self {
        Self { store }
    }
}

/// Narrow port for message-store read methods used by [`MessageReader`].
///
/// Filtered reads remain on the backend trait. This canonical read port intentionally
/// forwards only unfiltered reads, so its hot request path has no dynamic filter allocation.
/// Test doubles can implement these four operations without copying `BackendOps`.
pub(crate) trait MessageStoreReadPort: Sync {
    fn get_message(
        &self,
        group: &CheetahString,
        topic: &CheetahString,
        queue_id: i32,
        offset: i64,
        max_messages: i32,
    ) -> impl Future<Output = Option<GetMessageResult>> + Send;

    fn get_message_with_size_limit(
        &self,
        group: &CheetahString,
        topic: &CheetahString,
        queue_id: i32,
        offset: i64,
        max_messages: i32,
        max_total_size: i32,
    ) -> impl Future<Output = Option<GetMessageResult>> + Send;

    fn query_message(
        &self,
        topic: &CheetahString,
        key: &CheetahString,
        max_messages: i32,
        begin: i64,
        end: i64,
    ) -> impl Future<Output = Option<QueryMessageResult>> + Send;

    fn select_message(&self, physical_offset: i64, size: Option<i32>) -> Option<SelectMappedBufferResult>;
}

impl<MS: BackendOps> MessageStoreReadPort for MS {
    async fn get_message(
        &self,
        group: &CheetahString,
        topic: &CheetahString,
        queue_id: i32,
        offset: i64,
        max_messages: i32,
    ) -> Option<GetMessageResult> {
        BackendReadOps::get_message(self, group, topic, queue_id, offset, max_messages, None).await
    }

    async fn get_message_with_size_limit(
        &self,
        group: &CheetahString,
        topic: &CheetahString,
        queue_id: i32,
        offset: i64,
        max_messages: i32,
        max_total_size: i32,
    ) -> Option<GetMessageResult> {
        BackendReadOps::get_message_with_size_limit(
            self,
            group,
            topic,
            queue_id,
            offset,
            max_messages,
            max_total_size,
            None,
        )
        .await
    }

    async fn query_message(
        &self,
        topic: &CheetahString,
        key: &CheetahString,
        max_messages: i32,
        begin: i64,
        end: i64,
    ) -> Option<QueryMessageResult> {
        BackendReadOps::query_message(self, topic, key, max_messages, begin, end).await
    }

    fn select_message(&self, physical_offset: i64, size: Option<i32>) -> Option<SelectMappedBufferResult> {
        match size {
            Some(size) => BackendReadOps::select_one_message_by_offset_with_size(self, physical_offset, size),
            None => BackendReadOps::select_one_message_by_offset(self, physical_offset),
        }
    }
}

/// Read-only capability that forwards backend reads through [`MessageReader`].
pub struct MessageStoreReadCapability<'a, MS> {
    store: &'a MS,
}

impl<'a, MS> MessageStoreReadCapability<'a, MS> {
    /// Wraps an immutable store view without changing ownership.
    pub const fn new(store: &'a MS) -> Self {
        Self { store }
    }
}

/// Message-store read calls represented as one closed request enum.
pub enum MessageReadRequest {
    Get {
        group: CheetahString,
        topic: CheetahString,
        queue_id: i32,
        offset: i64,
        max_messages: i32,
        max_total_size: Option<i32>,
    },
    Query {
        topic: CheetahString,
        key: CheetahString,
        max_messages: i32,
        begin: i64,
        end: i64,
    },
    Select {
        physical_offset: i64,
        size: Option<i32>,
    },
}

/// Neutral result variants corresponding to get, query, and selected-buffer reads.
pub enum MessageReadResult {
    Get(GetResult<MessageReadLease>),
    Query(QueryResult<MessageReadLease>),
    Select(SelectResult<MessageReadLease>),
}

/// Lease guard that keeps the backend selected result alive behind the capability boundary.
///
/// The native selected-buffer type remains private and is released by its existing `Drop`
/// implementation when the neutral result is dropped.
pub struct MessageReadLease {
    _selected: SelectMappedBufferResult,
}

/// Converts a backend selected buffer into neutral leased bytes.
pub fn selected_result(selected: SelectMappedBufferResult) -> SelectResult<MessageReadLease> {
    let start_offset = selected.start_offset();
    let cache_state = match selected.cache_state() {
        SelectMappedBufferCacheState::Unknown => ReadCacheState::Unknown,
        SelectMappedBufferCacheState::Hot => ReadCacheState::Hot,
        SelectMappedBufferCacheState::Cold => ReadCacheState::Cold,
    };
    let bytes = selected
        .get_bytes()
        .unwrap_or_else(|| Bytes::copy_from_slice(selected.get_buffer()));
    SelectResult::new(
        start_offset,
        LeasedBytes::new(bytes, MessageReadLease { _selected: selected }),
        cache_state,
    )
}

/// Converts a backend logical get result without changing navigation or accounting fields.
pub fn get_result(result: GetMessageResult) -> GetResult<MessageReadLease> {
    let status = result.status().map(get_status_to_api);
    let queue_offsets = result.message_queue_offset().clone();
    let next_begin_offset = result.next_begin_offset();
    let min_offset = result.min_offset();
    let max_offset = result.max_offset();
    let buffer_total_size = result.buffer_total_size();
    let message_count = result.message_count();
    let suggest_pulling_from_replica = result.suggest_pulling_from_slave();
    let commercial_message_count = result.msg_count4_commercial();
    let commercial_size_per_message = result.commercial_size_per_msg();
    let cold_data_sum = result.cold_data_sum();
    let records = result.message_mapped_vec().into_iter().map(selected_result).collect();
    GetResult {
        records,
        queue_offsets,
        status,
        next_begin_offset,
        min_offset,
        max_offset,
        buffer_total_size,
        message_count,
        suggest_pulling_from_replica,
        commercial_message_count,
        commercial_size_per_message,
        cold_data_sum,
    }
}

/// Converts a backend key-query result without changing its index-safety projection.
pub fn query_result(result: QueryMessageResult) -> QueryResult<MessageReadLease> {
    let QueryMessageResult {
        message_maped_list,
        index_last_update_timestamp,
        index_last_update_phyoffset,
        buffer_total_size,
        index_query_safe,
        index_safe_phyoffset,
        index_confirm_phyoffset,
    } = result;
    QueryResult {
        records: message_maped_list.into_iter().map(selected_result).collect(),
        index_last_update_timestamp,
        index_last_update_physical_offset: index_last_update_phyoffset,
        buffer_total_size,
        index_query_safe,
        index_safe_physical_offset: index_safe_phyoffset,
        index_confirm_physical_offset: index_confirm_phyoffset,
    }
}

impl<MS> MessageReader for MessageStoreReadCapability<'_, MS>
where
    MS: MessageStoreReadPort,
{
    type Request = MessageReadRequest;
    type Output = Option<MessageReadResult>;

    async fn read(&self, request: Self::Request) -> Result<Self::Output, StoreError> {
        let result = match request {
            MessageReadRequest::Get {
                group,
                topic,
                queue_id,
                offset,
                max_messages,
                max_total_size,
            } => {
                let result = match max_total_size {
                    Some(max_total_size) => {
                        self.store
                            .get_message_with_size_limit(&group, &topic, queue_id, offset, max_messages, max_total_size)
                            .await
                    }
                    None => {
                        self.store
                            .get_message(&group, &topic, queue_id, offset, max_messages)
                            .await
                    }
                };
                result.map(get_result).map(MessageReadResult::Get)
            }
            MessageReadRequest::Query {
                topic,
                key,
                max_messages,
                begin,
                end,
            } => self
                .store
                .query_message(&topic, &key, max_messages, begin, end)
                .await
                .map(query_result)
                .map(MessageReadResult::Query),
            MessageReadRequest::Select { physical_offset, size } => self
                .store
                .select_message(physical_offset, size)
                .map(selected_result)
                .map(MessageReadResult::Select),
        };
        Ok(result)
    }
}

impl<MS: BrokerReadStore> StoreHealth for MessageStoreHealthCapability<'_, MS> {
    type Snapshot = StoreHealthSnapshot;

    fn health_snapshot(&self) -> Self::Snapshot {
        BrokerReadStore::health_snapshot(self.store)
    }
}

pub fn store_health_snapshot<MS: BrokerReadStore>(store: &MS) -> StoreHealthSnapshot {
    BrokerReadStore::health_snapshot(store)
}

#[cfg(test)]
#[path = "capability_test.rs"]
mod tests;
