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

#![allow(unused_variables)]

use std::any::Any;
use std::collections::HashMap;
use std::fs;
use std::path::Path;
use std::str::FromStr;
use std::sync::Arc;
use std::sync::Weak;
use std::time::Instant;

use crate::config::store_runtime_config::StoreRuntimeConfig;
use bytes::BufMut;
use bytes::Bytes;
use bytes::BytesMut;
use cheetah_string::CheetahString;
use dashmap::DashMap;
use futures_util::future::join_all;
use parking_lot::RwLock;
use rocketmq_model::common::attribute::cq_type::CQType;
use rocketmq_model::common::boundary_type::BoundaryType;
use rocketmq_model::common::config::TopicConfig;
use rocketmq_model::common::message::message_ext_broker_inner::MessageExtBrokerInner;
use rocketmq_model::common::topic::TopicValidator;
use rocketmq_model::utils::queue_type_utils::QueueTypeUtils;
use rocketmq_store_local::consume_queue::root::clamp_consume_queue_offset;
use rocketmq_store_local::consume_queue::root::find_or_create_consume_queue as drive_find_or_create_consume_queue;
use rocketmq_store_local::consume_queue::root::ConsumeQueueStoreRoot;
use rocketmq_store_local::mapped_file::ManagedLifecycleRuntime;
use rocketmq_store_local::mapped_file::ManagedMappedFileQueueGeneration;
use tokio::sync::Semaphore;
use tracing::error;
use tracing::info;

use crate::base::allocate_mapped_file_service::AllocateMappedFileService;
use crate::base::dispatch_request::DispatchRequest;
use crate::base::store_checkpoint::StoreCheckpoint;
use crate::config::message_store_config::MessageStoreConfig;
use crate::log_file::commit_log::CommitLogReadHandle;
use crate::log_file::mapped_file::default_mapped_file_impl::DefaultMappedFile;
use crate::queue::batch_consume_queue::BatchConsumeQueue;
use crate::queue::consume_queue::ConsumeQueueTrait;
use crate::queue::consume_queue_store::ConsumeQueueStoreTrait;
use crate::queue::queue_offset_operator::QueueOffsetOperator;
use crate::queue::single_consume_queue::ConsumeQueue;
use crate::queue::single_consume_queue::CQ_STORE_UNIT_SIZE;
use crate::queue::ArcConsumeQueue;
use crate::queue::ConsumeQueueTable;
use crate::queue::CqUnit;
use crate::store::running_flags::RunningFlags;
use crate::store_path_config_helper::get_store_path_batch_consume_queue;
use crate::store_path_config_helper::get_store_path_consume_queue;

#[derive(Clone)]
pub struct ConsumeQueueStore {
    inner: ConsumeQueueStoreRoot<Arc<Inner>>,
}

struct ConsumeQueueRecoveryResult {
    topic: CheetahString,
    queue_id: i32,
    cq_type: CQType,
    elapsed_ms: u128,
    mapped_file_count_before: usize,
    mapped_file_count_after: usize,
    min_logic_offset_before: i64,
    min_logic_offset_after: i64,
    max_logic_offset_before: i64,
    max_logic_offset_after: i64,
    max_physic_offset_before: i64,
    max_physic_offset_after: i64,
    success: bool,
    error: Option<String>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct ConsumeQueueRecoveryFailure {
    pub topic: CheetahString,
    pub queue_id: i32,
    pub cq_type: CQType,
    pub error: String,
}

#[derive(Debug, Clone, PartialEq)]
pub struct ConsumeQueueRecoverySummary {
    pub queue_count: usize,
    pub success_count: usize,
    pub failure_count: usize,
    pub total_elapsed_ms: u128,
    pub failures: Vec<ConsumeQueueRecoveryFailure>,
}

impl ConsumeQueueRecoverySummary {
    fn from_results(queue_count: usize, total_elapsed_ms: u128, results: &[ConsumeQueueRecoveryResult]) -> Self {
        let failures = results
            .iter()
            .filter(|result| !result.success)
            .map(|result| ConsumeQueueRecoveryFailure {
                topic: result.topic.clone(),
                queue_id: result.queue_id,
                cq_type: result.cq_type,
                error: result.error.clone().unwrap_or_else(|| "unknown".to_string()),
            })
            .collect::<Vec<_>>();
        Self {
            queue_count,
            success_count: results.len().saturating_sub(failures.len()),
            failure_count: failures.len(),
            total_elapsed_ms,
            failures,
        }
    }

    pub fn success(queue_count: usize, total_elapsed_ms: u128) -> Self {
        Self {
            queue_count,
            success_count: queue_count,
            failure_count: 0,
            total_elapsed_ms,
            failures: Vec::new(),
        }
    }

    pub fn is_success(&self) -> bool {
        self.failure_count == 0
    }

    pub fn failure_description(&self) -> String {
        if self.failures.is_empty() {
            return "none".to_string();
        }
        self.failures
            .iter()
            .map(|failure| {
                format!(
                    "{}:{}:{:?}:{}",
                    failure.topic, failure.queue_id, failure.cq_type, failure.error
                )
            })
            .collect::<Vec<_>>()
            .join("; ")
    }
}

struct Inner {
    pub(crate) runtime_scope: crate::runtime::StoreRuntimeScope,
    pub(crate) context: RwLock<Option<ConsumeQueueStoreContext>>,
    pub(crate) message_store_config: Arc<MessageStoreConfig>,
    pub(crate) broker_config: Arc<StoreRuntimeConfig>,
    pub(crate) queue_offset_operator: QueueOffsetOperator,
    pub(crate) consume_queue_table: Arc<ConsumeQueueTable>,
    managed_lifecycle_runtime: RwLock<Option<ManagedLifecycleRuntime>>,
    /// Serializes queue admission with destructive work for the same topic.
    topic_lifecycle_locks: parking_lot::Mutex<HashMap<CheetahString, Arc<RwLock<()>>>>,
}

#[derive(Clone)]
pub(crate) struct ConsumeQueueStoreContext {
    message_store_config: Arc<MessageStoreConfig>,
    topic_config_table: Arc<DashMap<CheetahString, Arc<TopicConfig>>>,
    commit_log: CommitLogReadHandle,
    running_flags: Arc<RunningFlags>,
    store_checkpoint: Arc<StoreCheckpoint>,
    allocate_mapped_file_service: AllocateMappedFileService,
}

impl ConsumeQueueStoreContext {
    pub(crate) fn new(
        message_store_config: Arc<MessageStoreConfig>,
        topic_config_table: Arc<DashMap<CheetahString, Arc<TopicConfig>>>,
        commit_log: CommitLogReadHandle,
        running_flags: Arc<RunningFlags>,
        store_checkpoint: Arc<StoreCheckpoint>,
        allocate_mapped_file_service: AllocateMappedFileService,
    ) -> Self {
        Self {
            message_store_config,
            topic_config_table,
            commit_log,
            running_flags,
            store_checkpoint,
            allocate_mapped_file_service,
        }
    }

    pub(crate) fn message_store_config(&self) -> &MessageStoreConfig {
        self.message_store_config.as_ref()
    }

    pub(crate) fn get_topic_config(&self, topic: &CheetahString) -> Option<Arc<TopicConfig>> {
        self.topic_config_table.get(topic).as_deref().cloned()
    }

    pub(crate) fn commit_log(&self) -> &CommitLogReadHandle {
        &self.commit_log
    }

    pub(crate) fn running_flags(&self) -> &RunningFlags {
        self.running_flags.as_ref()
    }

    pub(crate) fn store_checkpoint(&self) -> &StoreCheckpoint {
        self.store_checkpoint.as_ref()
    }

    pub(crate) fn allocate_mapped_file_service(&self) -> AllocateMappedFileService {
        self.allocate_mapped_file_service.clone()
    }
}

#[derive(Clone)]
pub(crate) struct ConsumeQueueLookupHandle {
    inner: Weak<Inner>,
}

impl ConsumeQueueLookupHandle {
    pub(crate) fn find_or_create_consume_queue(&self, topic: &CheetahString, queue_id: i32) -> Option<ArcConsumeQueue> {
        let inner = self.inner.upgrade()?;
        let store = ConsumeQueueStore {
            inner: ConsumeQueueStoreRoot::new(inner),
        };
        Some(ConsumeQueueStoreTrait::find_or_create_consume_queue(
            &store, topic, queue_id,
        ))
    }

    pub(crate) fn put_message_position_info_wrapper(&self, request: &DispatchRequest) -> bool {
        let Some(inner) = self.inner.upgrade() else {
            return false;
        };
        let store = ConsumeQueueStore {
            inner: ConsumeQueueStoreRoot::new(inner),
        };
        ConsumeQueueStoreTrait::put_message_position_info_wrapper(&store, request);
        true
    }
}

impl Inner {
    fn put_message_position_info_wrapper(&self, consume_queue: &mut dyn ConsumeQueueTrait, request: &DispatchRequest) {
        consume_queue.put_message_position_info_wrapper(request)
    }
}

impl ConsumeQueueStore {
    pub(crate) fn bind_managed_lifecycle_runtime(&self, runtime: ManagedLifecycleRuntime) -> bool {
        let mut installed = self.inner.managed_lifecycle_runtime.write();
        if installed.is_some() {
            return false;
        }
        *installed = Some(runtime);
        true
    }

    pub(crate) fn accepts_reconciled_queue_type(&self, topic: &str, cq_type: CQType) -> bool {
        self.queue_type_should_be(&CheetahString::from_string(topic.to_owned()), cq_type)
    }

    pub(crate) fn install_reconciled_simple_queue(
        &self,
        topic: &str,
        queue_id: i32,
        queue: ManagedMappedFileQueueGeneration<DefaultMappedFile>,
        extension: Option<ManagedMappedFileQueueGeneration<DefaultMappedFile>>,
        runtime: ManagedLifecycleRuntime,
    ) -> bool {
        let topic = CheetahString::from_string(topic.to_owned());
        if !self.queue_type_should_be(&topic, CQType::SimpleCQ)
            || self
                .inner
                .consume_queue_table
                .lock()
                .get(&topic)
                .is_some_and(|queues| queues.contains_key(&queue_id))
        {
            return false;
        }
        let Some(context) = self.inner.context.read().clone() else {
            return false;
        };
        let consume_queue = ConsumeQueue::new(
            topic.clone(),
            queue_id,
            get_store_path_consume_queue(self.inner.message_store_config.store_path_root_dir.as_str()).into(),
            self.inner.message_store_config.get_mapped_file_size_consume_queue(),
            context,
            self.lookup_handle(),
        );
        if !consume_queue.install_reconciled_generations(queue, extension, runtime) {
            return false;
        }
        self.put_consume_queue(topic, queue_id, ArcConsumeQueue::new(Box::new(consume_queue)));
        true
    }

    pub(crate) fn install_reconciled_batch_queue(
        &self,
        topic: &str,
        queue_id: i32,
        generation: ManagedMappedFileQueueGeneration<DefaultMappedFile>,
        runtime: ManagedLifecycleRuntime,
    ) -> bool {
        let topic = CheetahString::from_string(topic.to_owned());
        if !self.queue_type_should_be(&topic, CQType::BatchCQ)
            || self
                .inner
                .consume_queue_table
                .lock()
                .get(&topic)
                .is_some_and(|queues| queues.contains_key(&queue_id))
        {
            return false;
        }
        let consume_queue = BatchConsumeQueue::new(
            topic.clone(),
            queue_id,
            get_store_path_batch_consume_queue(self.inner.message_store_config.store_path_root_dir.as_str()).into(),
            self.inner.message_store_config.mapper_file_size_batch_consume_queue,
            None,
            Arc::clone(&self.inner.message_store_config),
        );
        if !consume_queue.install_reconciled_generation(generation, runtime) {
            return false;
        }
        self.put_consume_queue(topic, queue_id, ArcConsumeQueue::new(Box::new(consume_queue)));
        true
    }

    fn topic_lifecycle_lock(&self, topic: &CheetahString) -> Arc<RwLock<()>> {
        self.inner
            .topic_lifecycle_locks
            .lock()
            .entry(topic.clone())
            .or_insert_with(|| Arc::new(RwLock::new(())))
            .clone()
    }

    fn find_or_create_consume_queue_unfenced(&self, topic: &CheetahString, queue_id: i32) -> ArcConsumeQueue {
        let managed_runtime = self.inner.managed_lifecycle_runtime.read().clone();
        drive_find_or_create_consume_queue(
            || {
                self.inner
                    .consume_queue_table
                    .lock()
                    .get(topic)
                    .and_then(|topic_map| topic_map.get(&queue_id).cloned())
            },
            || {
                let context = self
                    .inner
                    .context
                    .read()
                    .clone()
                    .expect("consume queue context must be set before creating consume queues");
                let topic_config = context.get_topic_config(topic);
                let cq_type = QueueTypeUtils::get_cq_type_arc_mut(topic_config.as_ref());
                match cq_type {
                    CQType::SimpleCQ | CQType::RocksDBCQ => {
                        let store_path = CheetahString::from_string(get_store_path_consume_queue(
                            self.inner.message_store_config.store_path_root_dir.as_str(),
                        ));
                        let consume_queue = match managed_runtime.as_ref() {
                            Some(runtime) => ConsumeQueue::new_managed(
                                topic.clone(),
                                queue_id,
                                store_path,
                                self.inner.message_store_config.get_mapped_file_size_consume_queue(),
                                context,
                                self.lookup_handle(),
                                runtime.clone(),
                            ),
                            None => ConsumeQueue::new(
                                topic.clone(),
                                queue_id,
                                store_path,
                                self.inner.message_store_config.get_mapped_file_size_consume_queue(),
                                context,
                                self.lookup_handle(),
                            ),
                        };
                        ArcConsumeQueue::new(Box::new(consume_queue))
                    }
                    CQType::BatchCQ => {
                        let store_path = CheetahString::from_string(get_store_path_batch_consume_queue(
                            self.inner.message_store_config.store_path_root_dir.as_str(),
                        ));
                        let consume_queue = match managed_runtime.as_ref() {
                            Some(runtime) => BatchConsumeQueue::new_managed(
                                topic.clone(),
                                queue_id,
                                store_path,
                                self.inner.message_store_config.mapper_file_size_batch_consume_queue,
                                None,
                                self.inner.message_store_config.clone(),
                                context.allocate_mapped_file_service(),
                                runtime.clone(),
                            ),
                            None => BatchConsumeQueue::new(
                                topic.clone(),
                                queue_id,
                                store_path,
                                self.inner.message_store_config.mapper_file_size_batch_consume_queue,
                                None,
                                self.inner.message_store_config.clone(),
                            ),
                        };
                        ArcConsumeQueue::new(Box::new(consume_queue))
                    }
                }
            },
            |new_queue| {
                self.inner
                    .consume_queue_table
                    .lock()
                    .entry(topic.clone())
                    .or_default()
                    .entry(queue_id)
                    .or_insert(new_queue)
                    .clone()
            },
        )
    }

    fn with_topic_queue_for_append<R>(
        &self,
        topic: &CheetahString,
        queue_id: i32,
        operation: impl FnOnce(&mut dyn ConsumeQueueTrait) -> R,
    ) -> R {
        let lifecycle = self.topic_lifecycle_lock(topic);
        let _active = lifecycle.read();
        let consume_queue = self.find_or_create_consume_queue_unfenced(topic, queue_id);
        let mut consume_queue = consume_queue.write();
        operation(consume_queue.as_mut())
    }

    /// Runs topic retirement while excluding queue lookup-and-publication for that topic.
    pub(crate) fn with_topic_closing<R>(&mut self, topic: &CheetahString, operation: impl FnOnce(&mut Self) -> R) -> R {
        let lifecycle = self.topic_lifecycle_lock(topic);
        let _closing = lifecycle.write();
        operation(self)
    }

    /// Untracks one successfully destroyed queue without removing a replacement generation.
    pub(crate) fn remove_destroyed_topic_queue(
        &self,
        topic: &CheetahString,
        queue_id: i32,
        expected: &ArcConsumeQueue,
    ) -> bool {
        let mut table = self.inner.consume_queue_table.lock();
        let Some(queues) = table.get_mut(topic) else {
            return true;
        };
        match queues.get(&queue_id) {
            Some(current) if current.ptr_eq(expected) => {
                queues.remove(&queue_id);
                true
            }
            None => true,
            Some(_) => false,
        }
    }

    /// Removes the topic entry only after every queue identity has been retired.
    pub(crate) fn remove_topic_if_empty(&self, topic: &CheetahString) -> bool {
        let mut table = self.inner.consume_queue_table.lock();
        let empty = table.get(topic).is_none_or(HashMap::is_empty);
        if empty {
            table.remove(topic);
        }
        empty
    }

    /// Retires one topic snapshot, immediately untracking each successful queue.
    ///
    /// The caller must hold this topic's closing fence for the complete operation.
    pub(crate) fn retire_topic_queue_snapshot(
        &mut self,
        topic: &CheetahString,
        queues: &HashMap<i32, ArcConsumeQueue>,
    ) -> Vec<i32> {
        let mut failures = Vec::new();
        for (queue_id, queue) in queues {
            if queue.write().destroy_with_outcome() && self.remove_destroyed_topic_queue(topic, *queue_id, queue) {
                self.remove_topic_queue_table(topic, *queue_id);
            } else {
                failures.push(*queue_id);
            }
        }
        failures
    }

    pub(crate) fn advance_topic_queue_offset(&self, topic: &str, queue_id: i32, next_offset: i64) {
        self.inner
            .queue_offset_operator
            .advance_queue_offset(CheetahString::from_string(format!("{topic}-{queue_id}")), next_offset);
    }

    pub(crate) fn replace_topic_queue_table(&self, topic_queue_table: HashMap<CheetahString, i64>) {
        self.inner
            .queue_offset_operator
            .set_topic_queue_table(topic_queue_table.clone());
        self.inner
            .queue_offset_operator
            .set_lmq_topic_queue_table(topic_queue_table);
    }

    fn snapshot_consume_queues(&self) -> Vec<ArcConsumeQueue> {
        self.inner
            .consume_queue_table
            .lock()
            .values()
            .flat_map(|queues| queues.values().cloned())
            .collect()
    }

    pub(crate) fn lookup_handle(&self) -> ConsumeQueueLookupHandle {
        ConsumeQueueLookupHandle {
            inner: Arc::downgrade(self.inner.adapter()),
        }
    }

    async fn recover_one_consume_queue(
        runtime_scope: crate::runtime::StoreRuntimeScope,
        consume_queue: ArcConsumeQueue,
    ) -> ConsumeQueueRecoveryResult {
        let (topic, queue_id, cq_type) = {
            let consume_queue = consume_queue.read();
            (
                consume_queue.get_topic().clone(),
                consume_queue.get_queue_id(),
                consume_queue.get_cq_type(),
            )
        };
        match crate::runtime::spawn_io(&runtime_scope, "local-file-cq-recover", move || {
            Self::recover_one_consume_queue_blocking(consume_queue)
        })
        .await
        {
            Ok(result) => result,
            Err(error) => ConsumeQueueRecoveryResult {
                topic,
                queue_id,
                cq_type,
                elapsed_ms: 0,
                mapped_file_count_before: 0,
                mapped_file_count_after: 0,
                min_logic_offset_before: 0,
                min_logic_offset_after: 0,
                max_logic_offset_before: 0,
                max_logic_offset_after: 0,
                max_physic_offset_before: 0,
                max_physic_offset_after: 0,
                success: false,
                error: Some(error.to_string()),
            },
        }
    }

    fn recover_one_consume_queue_blocking(consume_queue: ArcConsumeQueue) -> ConsumeQueueRecoveryResult {
        let mut consume_queue = consume_queue.write();
        let topic = consume_queue.get_topic().clone();
        let queue_id = consume_queue.get_queue_id();
        let cq_type = consume_queue.get_cq_type();
        let mapped_file_count_before = consume_queue.get_mapped_file_count();
        let min_logic_offset_before = consume_queue.get_min_logic_offset();
        let max_logic_offset_before = consume_queue.get_max_offset_in_queue();
        let max_physic_offset_before = consume_queue.get_max_physic_offset();

        let started = Instant::now();
        let recover_result =
            std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| consume_queue.recover_with_outcome()));
        let elapsed_ms = started.elapsed().as_millis();

        let mapped_file_count_after = consume_queue.get_mapped_file_count();
        let min_logic_offset_after = consume_queue.get_min_logic_offset();
        let max_logic_offset_after = consume_queue.get_max_offset_in_queue();
        let max_physic_offset_after = consume_queue.get_max_physic_offset();
        let (success, error) = match recover_result {
            Ok(true) => (true, None),
            Ok(false) => (
                false,
                Some("consume-queue recovery retained a pending cleanup identity".to_string()),
            ),
            Err(payload) => (false, Some(Self::panic_payload_to_string(payload))),
        };

        ConsumeQueueRecoveryResult {
            topic,
            queue_id,
            cq_type,
            elapsed_ms,
            mapped_file_count_before,
            mapped_file_count_after,
            min_logic_offset_before,
            min_logic_offset_after,
            max_logic_offset_before,
            max_logic_offset_after,
            max_physic_offset_before,
            max_physic_offset_after,
            success,
            error,
        }
    }

    fn panic_payload_to_string(payload: Box<dyn Any + Send>) -> String {
        if let Some(message) = payload.downcast_ref::<&str>() {
            (*message).to_string()
        } else if let Some(message) = payload.downcast_ref::<String>() {
            message.clone()
        } else {
            "panic while recovering consume queue".to_string()
        }
    }

    pub(crate) async fn recover_result_with_parallelism(
        &self,
        parallelism: usize,
    ) -> Result<(), crate::store_error::StoreError> {
        use crate::store_error::{StoreComponent, StoreError, StoreOperation};
        use futures_util::StreamExt;
        let runtime = self.inner.runtime_scope.clone();
        let results = futures_util::stream::iter(self.snapshot_consume_queues())
            .map(|queue| {
                let runtime = runtime.clone();
                async move {
                    let complete = crate::runtime::spawn_io(&runtime, "local-file-cq-recover-result", move || {
                        queue.write().recover_with_outcome()
                    })
                    .await
                    .map_err(|source| {
                        StoreError::new(&rocketmq_error::STORAGE_INTERNAL_FAILURE, StoreOperation::Load)
                            .in_component(StoreComponent::Store)
                            .with_detail("consume queue recovery executor failed")
                            .with_source(source)
                    })?;
                    if complete {
                        Ok(())
                    } else {
                        Err(
                            StoreError::new(&rocketmq_error::STORAGE_INTERNAL_FAILURE, StoreOperation::Load)
                                .in_component(StoreComponent::Store)
                                .with_detail(
                                    "consume queue cleanup remains pending; legacy helper supplied no underlying cause",
                                ),
                        )
                    }
                }
            })
            .buffer_unordered(parallelism.max(1))
            .collect::<Vec<_>>()
            .await;
        // Await every owned worker before returning the first failure to the next phase.
        results.into_iter().collect()
    }

    pub async fn recover_concurrently_with_summary(&self, parallelism: usize) -> ConsumeQueueRecoverySummary {
        let total_started = Instant::now();
        let queues = self.snapshot_consume_queues();
        if queues.is_empty() {
            info!("recover local file consume queue concurrently skipped, no consume queues loaded");
            return ConsumeQueueRecoverySummary::success(0, total_started.elapsed().as_millis());
        }

        let queue_count = queues.len();
        let parallelism = parallelism.max(1).min(queue_count);
        info!(
            "recover local file consume queue concurrently start, queues={}, parallelism={}",
            queue_count, parallelism
        );
        let semaphore = Arc::new(Semaphore::new(parallelism));
        let futures = queues.into_iter().map(|consume_queue| {
            let semaphore = semaphore.clone();
            let runtime_scope = self.inner.runtime_scope.clone();
            async move {
                let (topic, queue_id, cq_type) = {
                    let consume_queue = consume_queue.read();
                    (
                        consume_queue.get_topic().clone(),
                        consume_queue.get_queue_id(),
                        consume_queue.get_cq_type(),
                    )
                };
                match semaphore.acquire_owned().await {
                    Ok(_permit) => Self::recover_one_consume_queue(runtime_scope, consume_queue).await,
                    Err(error) => ConsumeQueueRecoveryResult {
                        topic,
                        queue_id,
                        cq_type,
                        elapsed_ms: 0,
                        mapped_file_count_before: 0,
                        mapped_file_count_after: 0,
                        min_logic_offset_before: 0,
                        min_logic_offset_after: 0,
                        max_logic_offset_before: 0,
                        max_logic_offset_after: 0,
                        max_physic_offset_before: 0,
                        max_physic_offset_after: 0,
                        success: false,
                        error: Some(format!("failed to acquire recovery permit: {error}")),
                    },
                }
            }
        });

        let results = join_all(futures).await;
        Self::log_recovery_results(&results);
        let summary =
            ConsumeQueueRecoverySummary::from_results(queue_count, total_started.elapsed().as_millis(), &results);
        if summary.is_success() {
            info!(
                "recover local file consume queue concurrently summary OK, queues={}, success={}, cost={}ms",
                summary.queue_count, summary.success_count, summary.total_elapsed_ms
            );
        } else {
            error!(
                "recover local file consume queue concurrently summary failed, queues={}, success={}, failed={}, \
                 cost={}ms, failures={}",
                summary.queue_count,
                summary.success_count,
                summary.failure_count,
                summary.total_elapsed_ms,
                summary.failure_description()
            );
        }
        summary
    }

    fn log_recovery_results(results: &[ConsumeQueueRecoveryResult]) {
        for result in results {
            if result.success {
                info!(
                    "recover local file consume queue concurrently OK, topic={}, queueId={}, cqType={:?}, cost={}ms, \
                     mappedFiles={} -> {}, minLogicOffset={} -> {}, maxLogicOffset={} -> {}, maxPhysicOffset={} -> {}",
                    result.topic,
                    result.queue_id,
                    result.cq_type,
                    result.elapsed_ms,
                    result.mapped_file_count_before,
                    result.mapped_file_count_after,
                    result.min_logic_offset_before,
                    result.min_logic_offset_after,
                    result.max_logic_offset_before,
                    result.max_logic_offset_after,
                    result.max_physic_offset_before,
                    result.max_physic_offset_after
                );
            } else {
                error!(
                    "recover local file consume queue concurrently failed, topic={}, queueId={}, cqType={:?}, \
                     cost={}ms, mappedFiles={} -> {}, minLogicOffset={} -> {}, maxLogicOffset={} -> {}, \
                     maxPhysicOffset={} -> {}, error={}",
                    result.topic,
                    result.queue_id,
                    result.cq_type,
                    result.elapsed_ms,
                    result.mapped_file_count_before,
                    result.mapped_file_count_after,
                    result.min_logic_offset_before,
                    result.min_logic_offset_after,
                    result.max_logic_offset_before,
                    result.max_logic_offset_after,
                    result.max_physic_offset_before,
                    result.max_physic_offset_after,
                    result.error.as_deref().unwrap_or("unknown")
                );
            }
        }
    }

    pub fn clean_expired_sync(&self, min_commit_log_offset: i64) {
        self.clean_expired_sync_after_candidates(min_commit_log_offset, || {});
    }

    fn clean_expired_sync_after_candidates(&self, min_commit_log_offset: i64, after_candidates: impl FnOnce()) {
        // Collect candidates without dropping their active-table retry identity.
        let mut queues_to_destroy = Vec::new();

        // Sluice patch store-cq-lock-order: each queue is locked after the
        // table's mutex is released (tracked_queues says why).
        for (topic, queue_id, consume_queue_handle) in self.tracked_queues() {
            // Skip system topics
            if TopicValidator::is_system_topic(&topic) {
                continue;
            }

            let consume_queue = consume_queue_handle.read();
            let max_cl_offset_in_queue = consume_queue.get_max_physic_offset();
            let message_total_in_queue = consume_queue.get_message_total_in_queue();
            let queue_trimmed_to_empty = message_total_in_queue <= 0 && consume_queue.get_min_offset_in_queue() > 0;

            if max_cl_offset_in_queue == -1 {
                tracing::warn!(
                    "maybe ConsumeQueue was created just now. topic={} queueId={} maxPhysicOffset={} \
                     minLogicOffset={}.",
                    consume_queue.get_topic(),
                    consume_queue.get_queue_id(),
                    consume_queue.get_max_physic_offset(),
                    consume_queue.get_min_logic_offset()
                );
            } else if max_cl_offset_in_queue < min_commit_log_offset || queue_trimmed_to_empty {
                tracing::info!(
                    "cleanExpiredConsumerQueue: {} {} consumer queue eligible for destruction, minCommitLogOffset: {} \
                     maxCLOffsetInConsumeQueue: {} messageTotalInQueue: {} minOffsetInQueue: {}",
                    topic,
                    queue_id,
                    min_commit_log_offset,
                    max_cl_offset_in_queue,
                    message_total_in_queue,
                    consume_queue.get_min_offset_in_queue()
                );

                drop(consume_queue);
                queues_to_destroy.push((topic, queue_id, consume_queue_handle));
            }
        }

        after_candidates();

        // The topic closing fence waits for active appends before eligibility is rechecked.
        for (topic, queue_id, consume_queue) in queues_to_destroy {
            let lifecycle = self.topic_lifecycle_lock(&topic);
            let _closing = lifecycle.write();
            let still_tracked = self
                .inner
                .consume_queue_table
                .lock()
                .get(&topic)
                .and_then(|queues| queues.get(&queue_id))
                .is_some_and(|current| current.ptr_eq(&consume_queue));
            if !still_tracked {
                continue;
            }

            let mut consume_queue_guard = consume_queue.write();
            let max_cl_offset_in_queue = consume_queue_guard.get_max_physic_offset();
            let message_total_in_queue = consume_queue_guard.get_message_total_in_queue();
            let queue_trimmed_to_empty =
                message_total_in_queue <= 0 && consume_queue_guard.get_min_offset_in_queue() > 0;
            if max_cl_offset_in_queue == -1
                || (max_cl_offset_in_queue >= min_commit_log_offset && !queue_trimmed_to_empty)
            {
                tracing::info!(
                    "cleanExpiredConsumerQueue: {} {} eligibility changed before closing; skipping destruction",
                    topic,
                    queue_id
                );
                continue;
            }
            if !consume_queue_guard.destroy_with_outcome() {
                tracing::warn!(
                    "cleanExpiredConsumerQueue: {} {} cleanup deferred; retaining queue identity for retry",
                    topic,
                    queue_id
                );
                continue;
            }
            drop(consume_queue_guard);

            let removed = {
                let mut consume_queue_table = self.inner.consume_queue_table.lock();
                let mut removed = false;
                let mut remove_topic = false;
                if let Some(queue_table) = consume_queue_table.get_mut(&topic) {
                    if queue_table
                        .get(&queue_id)
                        .is_some_and(|current| current.ptr_eq(&consume_queue))
                    {
                        queue_table.remove(&queue_id);
                        removed = true;
                        remove_topic = queue_table.is_empty();
                    }
                }
                if remove_topic {
                    consume_queue_table.remove(&topic);
                }
                removed
            };

            if removed {
                self.inner.queue_offset_operator.remove(&topic, queue_id);
                tracing::info!(
                    "cleanExpiredConsumerQueue: {} {} consumer queue destroyed",
                    topic,
                    queue_id
                );
            }
        }
    }

    /// Sluice patch store-cq-lock-order: every tracked queue, cloned out of the
    /// table so the caller locks queues after the table's mutex is released.
    /// The send path locks a queue, then the table (a LiteTopic's multi-dispatch
    /// finds or creates its LMQ queue while holding the base queue's write
    /// lock); a table-wide reader locking queues under the table's mutex
    /// deadlocks against it.
    fn tracked_queues(&self) -> Vec<(CheetahString, i32, ArcConsumeQueue)> {
        let table = self.inner.consume_queue_table.lock();
        table
            .iter()
            .flat_map(|(topic, queues)| {
                queues
                    .iter()
                    .map(move |(queue_id, consume_queue)| (topic.clone(), *queue_id, consume_queue.clone()))
            })
            .collect()
    }

    fn find_consume_queue(&self, topic: &CheetahString, queue_id: i32) -> Option<ArcConsumeQueue> {
        let table = self.inner.consume_queue_table.lock();
        let queue_table = table.get(topic)?;
        queue_table.get(&queue_id).cloned()
    }

    fn encode_cq_unit(cq_unit: &CqUnit) -> Bytes {
        if !cq_unit.native_buffer.is_empty() {
            return Bytes::copy_from_slice(&cq_unit.native_buffer);
        }
        let mut bytes = BytesMut::with_capacity(CQ_STORE_UNIT_SIZE as usize);
        bytes.put_i64(cq_unit.pos);
        bytes.put_i32(cq_unit.size);
        bytes.put_i64(cq_unit.tags_code);
        bytes.freeze()
    }

    #[inline]
    pub(crate) fn new(
        runtime_scope: crate::runtime::StoreRuntimeScope,
        message_store_config: Arc<MessageStoreConfig>,
        broker_config: Arc<StoreRuntimeConfig>,
    ) -> Self {
        Self {
            inner: ConsumeQueueStoreRoot::new(Arc::new(Inner {
                runtime_scope,
                context: RwLock::new(None),
                message_store_config,
                broker_config,
                queue_offset_operator: Default::default(),
                consume_queue_table: Arc::new(Default::default()),
                managed_lifecycle_runtime: RwLock::new(None),
                topic_lifecycle_locks: parking_lot::Mutex::new(HashMap::new()),
            })),
        }
    }

    pub(crate) fn set_context(&self, context: ConsumeQueueStoreContext) {
        *self.inner.context.write() = Some(context);
    }

    pub fn check_self(&self, consume_queue: &dyn ConsumeQueueTrait) {
        consume_queue.check_self();
    }
}

#[allow(unused_variables)]
impl ConsumeQueueStoreTrait for ConsumeQueueStore {
    fn start(&self) {
        //nothing to do
        info!("consume queue store start");
    }

    fn load(&mut self) -> bool {
        self.load_consume_queues(
            get_store_path_consume_queue(self.inner.message_store_config.store_path_root_dir.as_str()).as_str(),
            CQType::SimpleCQ,
        ) & self.load_consume_queues(
            get_store_path_batch_consume_queue(self.inner.message_store_config.store_path_root_dir.as_str()).as_str(),
            CQType::BatchCQ,
        )
    }

    fn load_after_destroy(&self) -> bool {
        true
    }

    async fn recover(&self) {
        let _ = self.recover_with_outcome().await;
    }

    async fn recover_with_outcome(&self) -> bool {
        let mutex = self.inner.consume_queue_table.lock().clone();
        let mut complete = true;
        for consume_queue_table in mutex.values() {
            for consume_queue in consume_queue_table.values() {
                if !consume_queue.write().recover_with_outcome() {
                    complete = false;
                }
            }
        }
        complete
    }

    async fn recover_concurrently(&self) -> bool {
        self.recover_concurrently_with_parallelism(
            self.inner
                .message_store_config
                .effective_local_file_consume_queue_recovery_parallelism(),
        )
        .await
    }

    async fn recover_concurrently_with_parallelism(&self, parallelism: usize) -> bool {
        self.recover_concurrently_with_summary(parallelism).await.is_success()
    }

    fn shutdown(&self) -> bool {
        true
    }

    fn destroy(&self) {
        let _ = self.destroy_with_outcome();
    }

    fn destroy_with_outcome(&self) -> bool {
        let topics = self
            .inner
            .consume_queue_table
            .lock()
            .keys()
            .cloned()
            .collect::<Vec<_>>();
        let mut retiring_store = self.clone();
        for topic in topics {
            let failed_queue_ids = retiring_store.with_topic_closing(&topic, |store| {
                let Some(queues) = store.find_consume_queue_map(&topic) else {
                    return Vec::new();
                };
                let failures = store.retire_topic_queue_snapshot(&topic, &queues);
                if failures.is_empty() {
                    let _ = store.remove_topic_if_empty(&topic);
                }
                failures
            });
            for queue_id in failed_queue_ids {
                tracing::warn!(
                    topic = %topic,
                    queue_id,
                    "consume-queue cleanup remains pending; retaining active-table identity for retry"
                );
            }
        }
        self.inner.consume_queue_table.lock().is_empty()
    }

    fn destroy_queue(&self, consume_queue: &dyn ConsumeQueueTrait) {
        let _ = self.destroy_queue_with_outcome(consume_queue);
    }

    fn destroy_queue_with_outcome(&self, consume_queue: &dyn ConsumeQueueTrait) -> bool {
        let file_queue_life_cycle = self.get_life_cycle(consume_queue.get_topic(), consume_queue.get_queue_id());
        let destroyed = file_queue_life_cycle.write().destroy_with_outcome();
        if !destroyed {
            tracing::warn!(
                topic = %consume_queue.get_topic(),
                queue_id = consume_queue.get_queue_id(),
                "consume-queue cleanup remains pending; retaining active-table identity for retry"
            );
        }
        destroyed
    }

    fn flush(&self, consume_queue: &dyn ConsumeQueueTrait, flush_least_pages: i32) -> bool {
        consume_queue.flush(flush_least_pages)
    }

    async fn clean_expired(&self, min_commit_log_offset: i64) {
        self.clean_expired_sync(min_commit_log_offset);
    }

    fn check_self(&self) {
        let consume_queue_table = self.inner.consume_queue_table.lock().clone();
        for consume_queue_table in consume_queue_table.values() {
            for consume_queue in consume_queue_table.values() {
                let consume_queue = consume_queue.read();
                ConsumeQueueStore::check_self(self, consume_queue.as_ref());
            }
        }
    }

    fn delete_expired_file(&self, consume_queue: &dyn ConsumeQueueTrait, min_commit_log_pos: i64) -> i32 {
        consume_queue.delete_expired_file(min_commit_log_pos)
    }

    fn is_first_file_available(&self, consume_queue: &dyn ConsumeQueueTrait) -> bool {
        consume_queue.is_first_file_available()
    }

    fn is_first_file_exist(&self, consume_queue: &dyn ConsumeQueueTrait) -> bool {
        consume_queue.is_first_file_exist()
    }

    fn roll_next_file(&self, consume_queue: &dyn ConsumeQueueTrait, offset: i64) -> i64 {
        consume_queue.roll_next_file(offset)
    }

    fn truncate_dirty(&self, offset_to_truncate: i64) {
        let _ = self.truncate_dirty_with_outcome(offset_to_truncate);
    }

    fn truncate_dirty_with_outcome(&self, offset_to_truncate: i64) -> bool {
        let cloned = self.inner.consume_queue_table.lock().clone();
        let mut complete = true;
        for consume_queue_table in cloned.values() {
            for logic in consume_queue_table.values() {
                let (topic, queue_id) = {
                    let logic = logic.read();
                    (logic.get_topic().clone(), logic.get_queue_id())
                };
                if !self.truncate_dirty_logic_files_with_outcome(&topic, queue_id, offset_to_truncate) {
                    complete = false;
                }
            }
        }
        complete
    }

    fn put_message_position_info_wrapper_with_cq(
        &self,
        consume_queue: &mut dyn ConsumeQueueTrait,
        request: &DispatchRequest,
    ) {
        self.inner.put_message_position_info_wrapper(consume_queue, request);
    }

    fn put_message_position_info_wrapper(&self, request: &DispatchRequest) {
        self.with_topic_queue_for_append(request.topic.as_ref(), request.queue_id, |consume_queue| {
            self.put_message_position_info_wrapper_with_cq(consume_queue, request);
        });
    }

    async fn range_query(&self, topic: &CheetahString, queue_id: i32, start_index: i64, num: i32) -> Vec<Bytes> {
        let Some(consume_queue) = self.find_consume_queue(topic, queue_id) else {
            return Vec::new();
        };
        let consume_queue = consume_queue.read();
        let Some(iter) = consume_queue.iterate_from_with_count(start_index, num) else {
            return Vec::new();
        };

        iter.take(num.max(0) as usize)
            .map(|cq_unit| Self::encode_cq_unit(&cq_unit))
            .collect()
    }

    async fn get(&self, topic: &CheetahString, queue_id: i32, start_index: i64) -> Bytes {
        self.find_consume_queue(topic, queue_id)
            .and_then(|consume_queue| consume_queue.read().get(start_index))
            .map(|cq_unit| Self::encode_cq_unit(&cq_unit))
            .unwrap_or_default()
    }

    fn get_consume_queue_table(&self) -> Arc<ConsumeQueueTable> {
        self.inner.consume_queue_table.clone()
    }

    fn assign_queue_offset(&self, msg: &mut MessageExtBrokerInner) {
        let consume_queue = self.find_or_create_consume_queue(msg.get_topic(), msg.queue_id());
        consume_queue
            .read()
            .assign_queue_offset(&self.inner.queue_offset_operator, msg);
    }

    fn increase_queue_offset(&self, msg: &MessageExtBrokerInner, message_num: i16) {
        let consume_queue = self.find_or_create_consume_queue(msg.get_topic(), msg.queue_id());
        consume_queue
            .read()
            .increase_queue_offset(&self.inner.queue_offset_operator, msg, message_num);
    }

    fn increase_lmq_offset(&self, queue_key: &str, message_num: i16) {
        let queue_key = CheetahString::from(queue_key);
        self.inner
            .queue_offset_operator
            .increase_queue_offset(queue_key.clone(), message_num);
        self.inner
            .queue_offset_operator
            .increase_lmq_offset(&queue_key, message_num);
    }

    fn get_lmq_queue_offset(&self, queue_key: &str) -> i64 {
        let queue_key = CheetahString::from(queue_key);
        let lmq_offset = self.inner.queue_offset_operator.get_lmq_offset(&queue_key);
        if lmq_offset > 0 {
            lmq_offset
        } else {
            self.inner.queue_offset_operator.current_queue_offset(&queue_key)
        }
    }

    fn get_lmq_num(&self) -> i32 {
        self.inner.queue_offset_operator.get_lmq_num()
    }

    fn get_lmq_topic_names(&self) -> Vec<CheetahString> {
        self.inner.queue_offset_operator.get_lmq_topic_names()
    }

    fn is_lmq_exist(&self, lmq_topic: &str) -> bool {
        self.inner.queue_offset_operator.is_lmq_exist(lmq_topic)
    }

    fn recover_offset_table(&mut self, min_phy_offset: i64) {
        let mut cq_offset_table = HashMap::with_capacity(1024);
        let mut bcq_offset_table = HashMap::with_capacity(1024);
        for (topic, consume_queue_table) in self.inner.consume_queue_table.lock().iter_mut() {
            for (queue_id, consume_queue) in consume_queue_table.iter() {
                let consume_queue = consume_queue.read();
                let key = CheetahString::from_string(format!(
                    "{}-{}",
                    consume_queue.get_topic(),
                    consume_queue.get_queue_id()
                ));
                let max_offset_in_queue = consume_queue.get_max_offset_in_queue();
                if consume_queue.get_cq_type() == CQType::SimpleCQ {
                    cq_offset_table.insert(key, max_offset_in_queue);
                } else {
                    bcq_offset_table.insert(key, max_offset_in_queue);
                }
                self.correct_min_offset(consume_queue.as_ref(), min_phy_offset)
            }
        }
        if self.inner.message_store_config.duplication_enable || self.inner.broker_config.enable_controller_mode {
            // In duplication/controller mode, use LMQ offset table
            self.inner
                .queue_offset_operator
                .set_lmq_topic_queue_table(cq_offset_table);
        } else {
            self.set_topic_queue_table(cq_offset_table);
            self.set_batch_topic_queue_table(bcq_offset_table);
        }
    }

    fn set_topic_queue_table(&mut self, topic_queue_table: HashMap<CheetahString, i64>) {
        self.inner
            .queue_offset_operator
            .set_topic_queue_table(topic_queue_table.clone());
        self.inner
            .queue_offset_operator
            .set_lmq_topic_queue_table(topic_queue_table);
    }

    fn remove_topic_queue_table(&mut self, topic: &CheetahString, queue_id: i32) {
        self.inner.queue_offset_operator.remove(topic, queue_id);
    }

    fn get_topic_queue_table(&self) -> HashMap<CheetahString, i64> {
        self.inner.queue_offset_operator.get_topic_queue_table()
    }

    fn get_max_phy_offset_in_consume_queue(&self, topic: &CheetahString, queue_id: i32) -> Option<i64> {
        // Sluice patch store-cq-lock-order: no queue lock under the table's mutex.
        let max_physic_offset = self
            .tracked_queues()
            .iter()
            .map(|(_, _, consume_queue)| consume_queue.read().get_max_physic_offset())
            .fold(-1i64, i64::max);
        Some(max_physic_offset)
    }

    fn get_max_offset(&self, topic: &CheetahString, queue_id: i32) -> Option<i64> {
        Some(
            self.inner
                .queue_offset_operator
                .current_queue_offset(&format!("{topic}-{queue_id}").into()),
        )
    }

    fn get_max_phy_offset_in_consume_queue_global(&self) -> i64 {
        // Sluice patch store-cq-lock-order: no queue lock under the table's mutex.
        self.tracked_queues()
            .iter()
            .map(|(_, _, consume_queue)| consume_queue.read().get_max_physic_offset())
            .fold(-1i64, i64::max)
    }

    fn get_min_offset_in_queue(&self, topic: &CheetahString, queue_id: i32) -> i64 {
        let queue = self.find_or_create_consume_queue(topic, queue_id);
        let queue = queue.read();
        queue.get_min_offset_in_queue()
    }

    fn get_max_offset_in_queue(&self, topic: &CheetahString, queue_id: i32) -> i64 {
        let queue = self.find_or_create_consume_queue(topic, queue_id);
        let queue = queue.read();
        queue.get_max_offset_in_queue()
    }

    fn get_offset_in_queue_by_time(
        &self,
        topic: &CheetahString,
        queue_id: i32,
        timestamp: i64,
        boundary_type: BoundaryType,
    ) -> i64 {
        let logic = self.find_or_create_consume_queue(topic, queue_id);
        let logic = logic.read();
        let result_offset = logic.get_offset_in_queue_by_time_with_boundary(timestamp, boundary_type);
        clamp_consume_queue_offset(
            result_offset,
            logic.get_min_offset_in_queue(),
            logic.get_max_offset_in_queue(),
        )
    }

    fn find_or_create_consume_queue(&self, topic: &CheetahString, queue_id: i32) -> ArcConsumeQueue {
        let lifecycle = self.topic_lifecycle_lock(topic);
        let _admission = lifecycle.read();
        self.find_or_create_consume_queue_unfenced(topic, queue_id)
    }

    fn find_consume_queue_map(&self, topic: &CheetahString) -> Option<HashMap<i32, ArcConsumeQueue>> {
        self.inner.consume_queue_table.lock().get(topic).cloned()
    }

    fn get_total_size(&self) -> i64 {
        // Sluice patch store-cq-lock-order: no queue lock under the table's mutex.
        self.tracked_queues()
            .iter()
            .map(|(_, _, consume_queue)| consume_queue.read().get_total_size())
            .sum()
    }

    fn get_store_time(&self, cq_unit: &CqUnit) -> i64 {
        let context = self.inner.context.read().clone();
        match context.as_ref() {
            Some(context) => context.commit_log().pickup_store_timestamp(cq_unit.pos, cq_unit.size),
            None => {
                error!("Consume queue context is not set in ConsumeQueueStore");
                -1
            }
        }
    }

    fn as_any(&self) -> &dyn Any {
        self
    }

    fn as_any_mut(&mut self) -> &mut dyn Any {
        self
    }
}

impl ConsumeQueueStore {
    #[inline]
    pub fn correct_min_offset(&self, consume_queue: &dyn ConsumeQueueTrait, min_commit_log_offset: i64) {
        consume_queue.correct_min_offset(min_commit_log_offset)
    }

    #[inline]
    pub fn set_batch_topic_queue_table(&self, batch_topic_queue_table: HashMap<CheetahString, i64>) {
        self.inner
            .queue_offset_operator
            .set_batch_topic_queue_table(batch_topic_queue_table)
    }

    /// Load consume queues from the given directory path for a specific queue type
    ///
    /// # Arguments
    ///
    /// * `store_path` - Base path where queue directories are stored
    /// * `cq_type` - Type of consume queue to load (SimpleCQ or BatchCQ)
    ///
    /// # Returns
    ///
    /// Returns true if loading was successful, false otherwise
    fn load_consume_queues(&mut self, store_path: &str, cq_type: CQType) -> bool {
        let dir_logic = Path::new(store_path);

        let root_metadata = match fs::metadata(dir_logic) {
            Ok(metadata) => metadata,
            Err(error) if error.kind() == std::io::ErrorKind::NotFound => {
                info!("Consume queue directory {store_path} does not exist");
                return true;
            }
            Err(error) => {
                error!("Failed to inspect consume queue directory {store_path}: {error}");
                return false;
            }
        };
        if !root_metadata.is_dir() {
            error!("Consume queue path {store_path} is not a directory");
            return false;
        }

        let topic_entries = match fs::read_dir(dir_logic) {
            Ok(entries) => entries,
            Err(error) => {
                error!("Failed to read topic directories: {error}");
                return false;
            }
        };
        let mut queue_identities = Vec::new();
        for topic_entry in topic_entries {
            let topic_dir = match topic_entry {
                Ok(entry) => entry,
                Err(error) => {
                    error!("Failed to enumerate a topic directory in {store_path}: {error}");
                    return false;
                }
            };
            let topic_path = topic_dir.path();
            let topic_metadata = match fs::symlink_metadata(&topic_path) {
                Ok(metadata) => metadata,
                Err(error) => {
                    error!("Failed to inspect topic path {}: {error}", topic_path.display());
                    return false;
                }
            };
            if !topic_metadata.file_type().is_dir() {
                error!(
                    "Unknown non-directory topic entry {} blocks consume queue loading and was retained",
                    topic_path.display()
                );
                return false;
            }

            let topic = match topic_dir.file_name().into_string() {
                Ok(name) => CheetahString::from_string(name),
                Err(name) => {
                    error!("Consume queue topic directory name is not valid UTF-8: {name:?}");
                    return false;
                }
            };
            let queue_id_entries = match fs::read_dir(&topic_path) {
                Ok(entries) => entries,
                Err(error) => {
                    error!("Failed to read queue ID directories for topic {topic}: {error}");
                    return false;
                }
            };
            for queue_id_entry in queue_id_entries {
                let queue_id_dir = match queue_id_entry {
                    Ok(entry) => entry,
                    Err(error) => {
                        error!("Failed to enumerate a queue ID directory for topic {topic}: {error}");
                        return false;
                    }
                };
                let queue_id_path = queue_id_dir.path();
                let queue_id_metadata = match fs::symlink_metadata(&queue_id_path) {
                    Ok(metadata) => metadata,
                    Err(error) => {
                        error!("Failed to inspect queue ID path {}: {error}", queue_id_path.display());
                        return false;
                    }
                };
                if !queue_id_metadata.file_type().is_dir() {
                    error!(
                        "Unknown non-directory queue ID entry {} blocks consume queue loading and was retained",
                        queue_id_path.display()
                    );
                    return false;
                }

                let queue_id_name = match queue_id_dir.file_name().into_string() {
                    Ok(name) => name,
                    Err(name) => {
                        error!("Queue ID directory name for topic {topic} is not valid UTF-8: {name:?}");
                        return false;
                    }
                };
                let queue_id = match i32::from_str(queue_id_name.as_str()) {
                    Ok(id) => id,
                    Err(error) => {
                        error!("Invalid queue ID directory {queue_id_name:?} for topic {topic}: {error}");
                        return false;
                    }
                };

                queue_identities.push((topic.clone(), queue_id));
            }
        }

        for (topic, _) in &queue_identities {
            if !self.queue_type_should_be(topic, cq_type) {
                return false;
            }
        }
        for (topic, queue_id) in queue_identities {
            let logic = self.create_consume_queue_by_type(&topic, queue_id, cq_type, store_path.into());
            self.put_consume_queue(topic.clone(), queue_id, logic);
            if !self.load_logic(&topic, queue_id) {
                return false;
            }
        }

        info!("load {cq_type} all over, OK");
        true
    }

    #[inline]
    fn load_logic(&mut self, topic: &CheetahString, queue_id: i32) -> bool {
        let file_queue_life_cycle = self.get_life_cycle(topic, queue_id);
        let mut file_queue_life_cycle = file_queue_life_cycle.write();
        file_queue_life_cycle.load()
    }

    #[inline]
    fn put_consume_queue(&self, topic: CheetahString, queue_id: i32, consume_queue: ArcConsumeQueue) {
        let mut consume_queue_table = self.inner.consume_queue_table.lock();
        let topic_table = consume_queue_table.entry(topic).or_default();
        topic_table.insert(queue_id, consume_queue);
    }

    #[inline]
    fn queue_type_should_be(&self, topic: &CheetahString, cq_type: CQType) -> bool {
        let context = self.inner.context.read().clone();
        let Some(context) = context.as_ref() else {
            error!("Consume queue context must be set before loading consume queues for topic {topic}");
            return false;
        };

        let topic_config = context.get_topic_config(topic);
        let act = QueueTypeUtils::get_cq_type_arc_mut(topic_config.as_ref());
        if self.is_rocksdb_cq_compat(act, cq_type) {
            return true;
        }
        if act != cq_type {
            error!("The queue type of topic: {topic} should be {cq_type:?}, but is {act:?}");
            return false;
        }

        true
    }

    #[inline]
    fn is_rocksdb_cq_compat(&self, actual: CQType, expected: CQType) -> bool {
        self.inner.message_store_config.is_enable_rocksdb_store()
            && actual == CQType::RocksDBCQ
            && expected == CQType::SimpleCQ
    }

    #[inline]
    fn truncate_dirty_logic_files(&self, topic: &CheetahString, queue_id: i32, phy_offset: i64) {
        let _ = self.truncate_dirty_logic_files_with_outcome(topic, queue_id, phy_offset);
    }

    fn truncate_dirty_logic_files_with_outcome(&self, topic: &CheetahString, queue_id: i32, phy_offset: i64) -> bool {
        let file_queue_life_cycle = self.get_life_cycle(topic, queue_id);
        let complete = file_queue_life_cycle
            .write()
            .truncate_dirty_logic_files_with_outcome(phy_offset);
        complete
    }
    #[inline]
    fn create_consume_queue_by_type(
        &self,
        topic: &CheetahString,
        queue_id: i32,
        cq_type: CQType,
        store_path: CheetahString,
    ) -> ArcConsumeQueue {
        let context = self
            .inner
            .context
            .read()
            .clone()
            .expect("consume queue context must be set before creating consume queues");
        match cq_type {
            CQType::SimpleCQ | CQType::RocksDBCQ => {
                let consume_queue = ConsumeQueue::new(
                    topic.clone(),
                    queue_id,
                    store_path,
                    self.inner.message_store_config.get_mapped_file_size_consume_queue(),
                    context,
                    self.lookup_handle(),
                );
                ArcConsumeQueue::new(Box::new(consume_queue))
            }
            CQType::BatchCQ => {
                let consume_queue = BatchConsumeQueue::new(
                    topic.clone(),
                    queue_id,
                    store_path,
                    self.inner.message_store_config.mapper_file_size_batch_consume_queue,
                    None,
                    self.inner.message_store_config.clone(),
                );
                ArcConsumeQueue::new(Box::new(consume_queue))
            }
        }
    }

    #[inline]
    fn get_life_cycle(&self, topic: &CheetahString, queue_id: i32) -> ArcConsumeQueue {
        self.find_or_create_consume_queue(topic, queue_id)
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::AtomicBool;
    use std::sync::atomic::AtomicI64;
    use std::sync::atomic::AtomicUsize;
    use std::sync::atomic::Ordering;
    use std::sync::Arc;
    use std::time::Duration;

    use crate::config::store_runtime_config::StoreRuntimeConfig;
    use bytes::Buf;
    use cheetah_string::CheetahString;
    use dashmap::DashMap;
    use rocketmq_model::common::attribute::topic_attributes::TopicAttributes;
    use rocketmq_model::common::attribute::Attribute;
    use rocketmq_model::common::config::TopicConfig;
    use tempfile::tempdir;

    use super::*;
    use crate::base::store_enum::StoreType;
    use crate::base::swappable::Swappable;
    use crate::filter::MessageFilter;
    use crate::message_store::local_file_message_store::LocalFileMessageStore;
    use crate::queue::batch_consume_queue;
    use crate::queue::FileQueueLifeCycle;

    #[test]
    fn consume_queue_store_root_uses_standard_arc_and_narrow_context() {
        let source = include_str!("local_file_consume_queue_store.rs").replace("\r\n", "\n");
        let production = source
            .split_once("#[cfg(test)]\nmod tests")
            .map(|(source, _)| source)
            .expect("ConsumeQueueStore production section");

        assert!(production.contains("inner: ConsumeQueueStoreRoot<Arc<Inner>>"));
        assert!(!production.contains("inner: ConsumeQueueStoreRoot<ArcMut<Inner>>"));
        assert!(production.contains("inner: ConsumeQueueStoreRoot::new(Arc::new(Inner {"));
        assert!(!production.contains("ConsumeQueueStoreRoot::new(ArcMut::new(Inner {"));
        assert!(production.contains("context: RwLock<Option<ConsumeQueueStoreContext>>"));
        assert!(production.contains("inner: Weak<Inner>"));
        assert!(production.contains("*self.inner.context.write() = Some(context);"));
        assert!(!production.contains("ArcMut<LocalFileMessageStore>"));
    }

    struct TrackingQueueState {
        recover_count: AtomicUsize,
        active_recoveries: Arc<AtomicUsize>,
        max_active_recoveries: Arc<AtomicUsize>,
        delay: Duration,
        panic_on_recover: bool,
        recovered_max_physic_offset: i64,
        recovered_max_offset_in_queue: i64,
        recovered_min_logic_offset: i64,
        visible_max_physic_offset: AtomicI64,
        destroy_attempts: AtomicUsize,
        destroy_succeeds: AtomicBool,
    }

    impl TrackingQueueState {
        fn new(
            queue_id: i32,
            delay: Duration,
            panic_on_recover: bool,
            active_recoveries: Arc<AtomicUsize>,
            max_active_recoveries: Arc<AtomicUsize>,
        ) -> Self {
            Self {
                recover_count: AtomicUsize::new(0),
                active_recoveries,
                max_active_recoveries,
                delay,
                panic_on_recover,
                recovered_max_physic_offset: 1_000 + i64::from(queue_id),
                recovered_max_offset_in_queue: 100 + i64::from(queue_id),
                recovered_min_logic_offset: i64::from(queue_id),
                visible_max_physic_offset: AtomicI64::new(-1),
                destroy_attempts: AtomicUsize::new(0),
                destroy_succeeds: AtomicBool::new(true),
            }
        }
    }

    struct ActiveRecoveryGuard {
        state: Arc<TrackingQueueState>,
    }

    impl ActiveRecoveryGuard {
        fn enter(state: Arc<TrackingQueueState>) -> Self {
            let active = state.active_recoveries.fetch_add(1, Ordering::SeqCst) + 1;
            state.max_active_recoveries.fetch_max(active, Ordering::SeqCst);
            Self { state }
        }
    }

    impl Drop for ActiveRecoveryGuard {
        fn drop(&mut self) {
            self.state.active_recoveries.fetch_sub(1, Ordering::SeqCst);
        }
    }

    struct TrackingConsumeQueue {
        topic: CheetahString,
        queue_id: i32,
        mapped_file_count: usize,
        max_physic_offset: i64,
        max_offset_in_queue: i64,
        min_logic_offset: i64,
        state: Arc<TrackingQueueState>,
    }

    impl TrackingConsumeQueue {
        fn new(topic: CheetahString, queue_id: i32, state: Arc<TrackingQueueState>) -> Self {
            Self {
                topic,
                queue_id,
                mapped_file_count: (queue_id as usize) + 1,
                max_physic_offset: -1,
                max_offset_in_queue: 0,
                min_logic_offset: 0,
                state,
            }
        }
    }

    impl Swappable for TrackingConsumeQueue {
        fn swap_map(&self, _reserve_num: i32, _force_swap_interval_ms: i64, _normal_swap_interval_ms: i64) {}

        fn clean_swapped_map(&self, _force_clean_swap_interval_ms: i64) {}
    }

    impl FileQueueLifeCycle for TrackingConsumeQueue {
        fn load(&mut self) -> bool {
            true
        }

        fn recover(&mut self) {
            let _guard = ActiveRecoveryGuard::enter(self.state.clone());
            if !self.state.delay.is_zero() {
                std::thread::sleep(self.state.delay);
            }
            self.state.recover_count.fetch_add(1, Ordering::SeqCst);
            if self.state.panic_on_recover {
                panic!("tracking queue recovery failed");
            }
            self.max_physic_offset = self.state.recovered_max_physic_offset;
            self.state
                .visible_max_physic_offset
                .store(self.max_physic_offset, Ordering::SeqCst);
            self.max_offset_in_queue = self.state.recovered_max_offset_in_queue;
            self.min_logic_offset = self.state.recovered_min_logic_offset;
        }

        fn recover_with_outcome(&mut self) -> bool {
            self.recover();
            true
        }

        fn check_self(&self) {}

        fn flush(&self, _flush_least_pages: i32) -> bool {
            true
        }

        fn destroy(&mut self) {
            let _ = self.destroy_with_outcome();
        }

        fn destroy_with_outcome(&mut self) -> bool {
            self.state.destroy_attempts.fetch_add(1, Ordering::SeqCst);
            self.state.destroy_succeeds.load(Ordering::SeqCst)
        }

        fn truncate_dirty_logic_files(&mut self, _max_commit_log_pos: i64) {}

        fn truncate_dirty_logic_files_with_outcome(&mut self, _max_commit_log_pos: i64) -> bool {
            true
        }

        fn delete_expired_file(&self, _min_commit_log_pos: i64) -> i32 {
            0
        }

        fn roll_next_file(&self, next_begin_offset: i64) -> i64 {
            next_begin_offset
        }

        fn is_first_file_available(&self) -> bool {
            true
        }

        fn is_first_file_exist(&self) -> bool {
            true
        }
    }

    impl ConsumeQueueTrait for TrackingConsumeQueue {
        fn get_topic(&self) -> &CheetahString {
            &self.topic
        }

        fn get_queue_id(&self) -> i32 {
            self.queue_id
        }

        fn iterate_from(&self, _start_index: i64) -> Option<Box<dyn Iterator<Item = CqUnit> + Send + '_>> {
            None
        }

        fn iterate_from_with_count(
            &self,
            _start_index: i64,
            _count: i32,
        ) -> Option<Box<dyn Iterator<Item = CqUnit> + Send + '_>> {
            None
        }

        fn get(&self, _index: i64) -> Option<CqUnit> {
            None
        }

        fn get_cq_unit_and_store_time(&self, _index: i64) -> Option<(CqUnit, i64)> {
            None
        }

        fn get_earliest_unit_and_store_time(&self) -> Option<(CqUnit, i64)> {
            None
        }

        fn get_earliest_unit(&self) -> Option<CqUnit> {
            None
        }

        fn get_latest_unit(&self) -> Option<CqUnit> {
            None
        }

        fn get_last_offset(&self) -> i64 {
            self.max_physic_offset
        }

        fn get_min_offset_in_queue(&self) -> i64 {
            self.min_logic_offset
        }

        fn get_max_offset_in_queue(&self) -> i64 {
            self.max_offset_in_queue
        }

        fn get_message_total_in_queue(&self) -> i64 {
            self.max_offset_in_queue.saturating_sub(self.min_logic_offset)
        }

        fn get_offset_in_queue_by_time(&self, _timestamp: i64) -> i64 {
            0
        }

        fn get_offset_in_queue_by_time_with_boundary(&self, _timestamp: i64, _boundary_type: BoundaryType) -> i64 {
            0
        }

        fn get_max_physic_offset(&self) -> i64 {
            self.state.visible_max_physic_offset.load(Ordering::SeqCst)
        }

        fn get_min_logic_offset(&self) -> i64 {
            self.min_logic_offset
        }

        fn get_cq_type(&self) -> CQType {
            CQType::SimpleCQ
        }

        fn get_total_size(&self) -> i64 {
            (self.mapped_file_count * 1024) as i64
        }

        fn get_mapped_file_count(&self) -> usize {
            self.mapped_file_count
        }

        fn get_unit_size(&self) -> i32 {
            CQ_STORE_UNIT_SIZE
        }

        fn correct_min_offset(&self, _min_commit_log_offset: i64) {}

        fn put_message_position_info_wrapper(&mut self, _request: &DispatchRequest) {}

        fn assign_queue_offset(&self, _queue_offset_assigner: &QueueOffsetOperator, _msg: &mut MessageExtBrokerInner) {}

        fn increase_queue_offset(
            &self,
            _queue_offset_assigner: &QueueOffsetOperator,
            _msg: &MessageExtBrokerInner,
            _message_num: i16,
        ) {
        }

        fn estimate_message_count(&self, _from: i64, _to: i64, _filter: &dyn MessageFilter) -> i64 {
            0
        }
    }

    fn tracking_store(
        queue_count: i32,
        delay: Duration,
        panic_queue_id: Option<i32>,
    ) -> (ConsumeQueueStore, Vec<Arc<TrackingQueueState>>) {
        let store = ConsumeQueueStore::new(
            crate::runtime::test_scope("consume-queue-recovery-test"),
            Arc::new(MessageStoreConfig::default()),
            Arc::new(StoreRuntimeConfig::default()),
        );
        let mut states = Vec::new();
        let active_recoveries = Arc::new(AtomicUsize::new(0));
        let max_active_recoveries = Arc::new(AtomicUsize::new(0));
        for queue_id in 0..queue_count {
            let topic = CheetahString::from_string(format!("TrackingTopic{}", queue_id % 2));
            let state = Arc::new(TrackingQueueState::new(
                queue_id,
                delay,
                panic_queue_id == Some(queue_id),
                active_recoveries.clone(),
                max_active_recoveries.clone(),
            ));
            let queue: Box<dyn ConsumeQueueTrait> =
                Box::new(TrackingConsumeQueue::new(topic.clone(), queue_id, state.clone()));
            store.put_consume_queue(topic, queue_id, ArcConsumeQueue::new(queue));
            states.push(state);
        }
        (store, states)
    }

    /// Sluice patch store-cq-lock-order. The send path holds a queue's write
    /// lock while it looks up another queue in the table (a LiteTopic's
    /// multi-dispatch to its LMQ queue); `reader` runs meanwhile. Unpatched,
    /// the reader holds the table's mutex while it waits for the queue and
    /// neither finishes: the test fails after its timeout instead of hanging.
    fn assert_reader_lets_the_send_path_finish(name: &str, reader: fn(&ConsumeQueueStore)) {
        let (store, _) = tracking_store(2, Duration::ZERO, None);
        let store = Arc::new(store);
        let appended = CheetahString::from_static_str("TrackingTopic0");
        let dispatched = CheetahString::from_static_str("TrackingTopic1");
        let (held_tx, held_rx) = std::sync::mpsc::channel();
        let (go_tx, go_rx) = std::sync::mpsc::channel::<()>();
        let (sent_tx, sent_rx) = std::sync::mpsc::channel();
        let send_store = store.clone();
        std::thread::spawn(move || {
            let queue = send_store.find_consume_queue(&appended, 0).expect("tracked queue");
            let _append = queue.write();
            held_tx.send(()).expect("test alive");
            go_rx.recv().expect("test alive");
            send_store.find_or_create_consume_queue(&dispatched, 1);
            sent_tx.send(()).expect("test alive");
        });
        held_rx.recv().expect("send path started");
        let (read_tx, read_rx) = std::sync::mpsc::channel();
        let read_store = store.clone();
        std::thread::spawn(move || {
            reader(&read_store);
            read_tx.send(()).expect("test alive");
        });
        // Long enough for the reader to reach the held queue's lock.
        std::thread::sleep(Duration::from_millis(300));
        go_tx.send(()).expect("send path alive");
        let deadline = Duration::from_secs(5);
        assert!(
            sent_rx.recv_timeout(deadline).is_ok(),
            "{name}: the send path is stuck behind the table's mutex (lock-order deadlock)"
        );
        assert!(read_rx.recv_timeout(deadline).is_ok(), "{name}: the reader never finished");
    }

    #[test]
    fn table_wide_readers_do_not_deadlock_the_send_path() {
        assert_reader_lets_the_send_path_finish("clean_expired_sync", |store| store.clean_expired_sync(0));
        assert_reader_lets_the_send_path_finish("get_total_size", |store| {
            store.get_total_size();
        });
        assert_reader_lets_the_send_path_finish("get_max_phy_offset_in_consume_queue_global", |store| {
            store.get_max_phy_offset_in_consume_queue_global();
        });
        assert_reader_lets_the_send_path_finish("get_max_phy_offset_in_consume_queue", |store| {
            store.get_max_phy_offset_in_consume_queue(&CheetahString::from_static_str("TrackingTopic0"), 0);
        });
    }

    fn recovery_offsets(store: &ConsumeQueueStore) -> Vec<(String, i32, i64, i64, i64)> {
        let mut offsets = store
            .inner
            .consume_queue_table
            .lock()
            .iter()
            .flat_map(|(topic, queues)| {
                queues.values().map(|queue| {
                    let queue = queue.read();
                    (
                        topic.to_string(),
                        queue.get_queue_id(),
                        queue.get_min_logic_offset(),
                        queue.get_max_offset_in_queue(),
                        queue.get_max_physic_offset(),
                    )
                })
            })
            .collect::<Vec<_>>();
        offsets.sort();
        offsets
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn recover_concurrently_with_parallelism_bounds_topic_queue_recovery() {
        let (store, states) = tracking_store(4, Duration::from_millis(30), None);

        assert!(store.recover_concurrently_with_parallelism(2).await);

        let recovered = states
            .iter()
            .map(|state| state.recover_count.load(Ordering::SeqCst))
            .sum::<usize>();
        let max_active = states
            .iter()
            .map(|state| state.max_active_recoveries.load(Ordering::SeqCst))
            .max()
            .unwrap_or_default();
        assert_eq!(recovered, 4);
        assert!(
            max_active <= 2,
            "max active recoveries should be bounded by parallelism"
        );
        assert!(max_active > 1, "recovery should run more than one queue concurrently");
    }

    #[tokio::test]
    async fn expired_queue_remains_tracked_until_destroy_retry_succeeds() {
        let (store, states) = tracking_store(1, Duration::ZERO, None);
        store.recover().await;
        let topic = CheetahString::from_static_str("TrackingTopic0");
        states[0].destroy_succeeds.store(false, Ordering::SeqCst);

        store.clean_expired_sync(2_000);

        assert!(store.find_consume_queue(&topic, 0).is_some());
        assert_eq!(states[0].destroy_attempts.load(Ordering::SeqCst), 1);

        states[0].destroy_succeeds.store(true, Ordering::SeqCst);
        store.clean_expired_sync(2_000);

        assert!(store.find_consume_queue(&topic, 0).is_none());
        assert_eq!(states[0].destroy_attempts.load(Ordering::SeqCst), 2);
    }

    #[test]
    fn destroy_outcome_reports_partial_failure_and_retries_only_failed_identity() {
        let (store, states) = tracking_store(2, Duration::ZERO, None);
        states[1].destroy_succeeds.store(false, Ordering::SeqCst);
        let successful_topic = CheetahString::from_static_str("TrackingTopic0");
        let failed_topic = CheetahString::from_static_str("TrackingTopic1");

        assert!(!store.destroy_with_outcome());
        assert_eq!(states[0].destroy_attempts.load(Ordering::SeqCst), 1);
        assert_eq!(states[1].destroy_attempts.load(Ordering::SeqCst), 1);
        assert!(store.find_consume_queue_map(&successful_topic).is_none());
        assert!(store.find_consume_queue_map(&failed_topic).is_some());

        states[1].destroy_succeeds.store(true, Ordering::SeqCst);
        assert!(store.destroy_with_outcome());
        assert_eq!(states[0].destroy_attempts.load(Ordering::SeqCst), 1);
        assert_eq!(states[1].destroy_attempts.load(Ordering::SeqCst), 2);
        assert!(store.find_consume_queue_map(&failed_topic).is_none());
    }

    #[tokio::test]
    async fn expired_queue_is_revalidated_before_closing() {
        let (store, states) = tracking_store(1, Duration::ZERO, None);
        store.recover().await;
        let topic = CheetahString::from_static_str("TrackingTopic0");

        store.clean_expired_sync_after_candidates(2_000, || {
            states[0].visible_max_physic_offset.store(3_000, Ordering::SeqCst);
        });

        assert!(store.find_consume_queue(&topic, 0).is_some());
        assert_eq!(states[0].destroy_attempts.load(Ordering::SeqCst), 0);
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn in_flight_append_finishes_before_expired_cleanup_revalidates() {
        let (store, states) = tracking_store(1, Duration::ZERO, None);
        store.recover().await;
        let topic = CheetahString::from_static_str("TrackingTopic0");
        let cleanup_store = store.clone();
        let (candidate_ready_tx, candidate_ready_rx) = std::sync::mpsc::sync_channel(0);
        let (release_cleanup_tx, release_cleanup_rx) = std::sync::mpsc::sync_channel(0);
        let cleanup = std::thread::spawn(move || {
            cleanup_store.clean_expired_sync_after_candidates(2_000, || {
                candidate_ready_tx.send(()).expect("report expired candidate");
                release_cleanup_rx
                    .recv()
                    .expect("release cleanup after append admission");
            });
        });

        candidate_ready_rx.recv().expect("cleanup collected expired candidate");
        let append_topic = topic.clone();
        let append_store = store.clone();
        let append_state = states[0].clone();
        let (append_entered_tx, append_entered_rx) = std::sync::mpsc::sync_channel(0);
        let (release_append_tx, release_append_rx) = std::sync::mpsc::sync_channel(0);
        let append = std::thread::spawn(move || {
            append_store.with_topic_queue_for_append(&append_topic, 0, |_| {
                let lifecycle = append_store.topic_lifecycle_lock(&append_topic);
                assert!(
                    lifecycle.try_write().is_none(),
                    "the topic read guard must remain held while the queue append executes"
                );
                append_entered_tx.send(()).expect("report append admission");
                release_append_rx.recv().expect("release append");
                append_state.visible_max_physic_offset.store(3_000, Ordering::SeqCst);
            });
        });

        append_entered_rx.recv().expect("append reached queue operation");
        release_cleanup_tx
            .send(())
            .expect("allow cleanup to wait on the topic closing fence");
        assert_eq!(states[0].destroy_attempts.load(Ordering::SeqCst), 0);
        release_append_tx.send(()).expect("finish append");
        append.join().expect("append thread");
        cleanup.join().expect("cleanup thread");

        assert_eq!(states[0].destroy_attempts.load(Ordering::SeqCst), 0);
        assert!(store.find_consume_queue(&topic, 0).is_some());
    }

    #[test]
    fn topic_removal_requires_an_empty_queue_table() {
        let (store, _) = tracking_store(1, Duration::ZERO, None);
        let topic = CheetahString::from_static_str("TrackingTopic0");
        let expected = store.find_consume_queue_map(&topic).expect("tracked topic");
        let unexpected = expected.get(&0).expect("tracked queue").clone();
        store
            .inner
            .consume_queue_table
            .lock()
            .get_mut(&topic)
            .expect("tracked topic")
            .insert(1, unexpected);

        assert!(!store.remove_topic_if_empty(&topic));
        assert_eq!(store.find_consume_queue_map(&topic).expect("topic retained").len(), 2);
    }

    #[test]
    fn topic_partial_success_retry_does_not_destroy_a_removed_identity_twice() {
        let (mut store, states) = tracking_store(3, Duration::ZERO, None);
        let topic = CheetahString::from_static_str("TrackingTopic0");
        states[2].destroy_succeeds.store(false, Ordering::SeqCst);

        store.with_topic_closing(&topic, |store| {
            let first_generation = store.find_consume_queue_map(&topic).expect("tracked topic");
            assert_eq!(store.retire_topic_queue_snapshot(&topic, &first_generation), vec![2]);
        });
        let retained = store.find_consume_queue_map(&topic).expect("failed queue retained");
        assert_eq!(retained.len(), 1);
        assert!(retained.contains_key(&2));
        assert_eq!(states[0].destroy_attempts.load(Ordering::SeqCst), 1);
        assert_eq!(states[2].destroy_attempts.load(Ordering::SeqCst), 1);

        states[2].destroy_succeeds.store(true, Ordering::SeqCst);
        store.with_topic_closing(&topic, |store| {
            let retry_generation = store.find_consume_queue_map(&topic).expect("retry identity");
            assert!(store.retire_topic_queue_snapshot(&topic, &retry_generation).is_empty());
            assert!(store.remove_topic_if_empty(&topic));
        });

        assert!(store.find_consume_queue_map(&topic).is_none());
        assert_eq!(states[0].destroy_attempts.load(Ordering::SeqCst), 1);
        assert_eq!(states[2].destroy_attempts.load(Ordering::SeqCst), 2);
    }

    #[test]
    fn topic_closing_excludes_queue_admission() {
        let (mut store, _) = tracking_store(1, Duration::ZERO, None);
        let topic = CheetahString::from_static_str("TrackingTopic0");

        store.with_topic_closing(&topic, |store| {
            let lifecycle = store.topic_lifecycle_lock(&topic);
            assert!(lifecycle.try_read().is_none());
        });
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn recover_concurrently_with_summary_reports_successes() {
        let (store, _) = tracking_store(3, Duration::ZERO, None);

        let summary = store.recover_concurrently_with_summary(2).await;

        assert!(summary.is_success());
        assert_eq!(summary.queue_count, 3);
        assert_eq!(summary.success_count, 3);
        assert_eq!(summary.failure_count, 0);
        assert!(summary.failures.is_empty());
        assert_eq!(summary.failure_description(), "none");
    }

    #[tokio::test]
    async fn recovery_result_preserves_executor_failure_and_awaits_other_queues() {
        let (store, states) = tracking_store(3, Duration::ZERO, Some(1));
        let error = store.recover_result_with_parallelism(2).await.unwrap_err();
        assert!(std::error::Error::source(&error).is_some());
        assert_eq!(error.descriptor(), &rocketmq_error::STORAGE_INTERNAL_FAILURE);
        assert!(states
            .iter()
            .all(|state| state.recover_count.load(Ordering::SeqCst) == 1));
        assert_eq!(states[1].visible_max_physic_offset.load(Ordering::SeqCst), -1);
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn recover_concurrently_with_summary_reports_failed_queue_identity() {
        let (store, states) = tracking_store(3, Duration::ZERO, Some(1));

        let summary = store.recover_concurrently_with_summary(2).await;

        assert!(!summary.is_success());
        assert_eq!(summary.queue_count, 3);
        assert_eq!(summary.success_count, 2);
        assert_eq!(summary.failure_count, 1);
        assert_eq!(states[1].recover_count.load(Ordering::SeqCst), 1);
        let failure = summary.failures.first().expect("failed queue");
        assert_eq!(failure.topic, CheetahString::from_static_str("TrackingTopic1"));
        assert_eq!(failure.queue_id, 1);
        assert_eq!(failure.cq_type, CQType::SimpleCQ);
        assert!(failure.error.contains("tracking queue recovery failed"));
        assert!(summary.failure_description().contains("TrackingTopic1:1"));
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn recover_concurrently_matches_serial_queue_offsets() {
        let (serial_store, _) = tracking_store(3, Duration::ZERO, None);
        let (concurrent_store, _) = tracking_store(3, Duration::ZERO, None);

        serial_store.recover().await;
        assert!(concurrent_store.recover_concurrently_with_parallelism(2).await);

        assert_eq!(recovery_offsets(&serial_store), recovery_offsets(&concurrent_store));
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn recover_concurrently_returns_false_when_queue_recovery_panics() {
        let (store, states) = tracking_store(3, Duration::ZERO, Some(1));

        assert!(!store.recover_concurrently_with_parallelism(2).await);
        assert_eq!(states[1].recover_count.load(Ordering::SeqCst), 1);
    }

    fn consume_queue_load_store(root: &Path, topic: &CheetahString) -> (ConsumeQueueStore, String) {
        let message_store_config = Arc::new(MessageStoreConfig {
            store_path_root_dir: root.to_string_lossy().to_string().into(),
            ..MessageStoreConfig::default()
        });
        let broker_config = Arc::new(StoreRuntimeConfig::default());
        let topic_config_table = Arc::new(DashMap::<CheetahString, Arc<TopicConfig>>::new());
        topic_config_table.insert(topic.clone(), Arc::new(TopicConfig::new(topic.clone())));
        let message_store = LocalFileMessageStore::new(
            message_store_config.clone(),
            rocketmq_store_local::commit_log::append::micro_batch::MicroBatchPolicy::disabled(1)
                .expect("valid test policy"),
            broker_config.clone(),
            topic_config_table,
            None,
            false,
            crate::runtime::test_service_context("consume-queue-namespace-load-test"),
        )
        .expect("create consume queue namespace test Store")
        .expect("test Timer Store configuration is valid");
        let simple_store_path = get_store_path_consume_queue(message_store_config.store_path_root_dir.as_str());
        let store = ConsumeQueueStore::new(
            crate::runtime::test_scope("consume-queue-namespace-load-test"),
            message_store_config,
            broker_config,
        );
        store.set_context(message_store.consume_queue_context());
        (store, simple_store_path)
    }

    #[test]
    fn load_consume_queues_rejects_a_root_that_is_a_file() {
        let root = tempdir().expect("tempdir");
        let store_path = root.path().join("consumequeue");
        fs::write(&store_path, b"not a directory").expect("root file");
        let mut store = ConsumeQueueStore::new(
            crate::runtime::test_scope("consume-queue-root-file-load-test"),
            Arc::new(MessageStoreConfig::default()),
            Arc::new(StoreRuntimeConfig::default()),
        );

        assert!(!store.load_consume_queues(store_path.to_string_lossy().as_ref(), CQType::SimpleCQ));
        assert!(store_path.is_file());
        assert!(store.inner.consume_queue_table.lock().is_empty());
    }

    #[test]
    fn load_consume_queues_retains_and_rejects_a_topic_level_unknown_file() {
        let root = tempdir().expect("tempdir");
        let topic = CheetahString::from_static_str("KnownTopic");
        let (mut store, store_path) = consume_queue_load_store(root.path(), &topic);
        fs::create_dir_all(Path::new(&store_path).join(topic.as_str()).join("0")).expect("known queue directory");
        let unknown = Path::new(&store_path).join("unknown-topic-entry");
        fs::write(&unknown, b"retained").expect("unknown topic entry");

        assert!(!store.load_consume_queues(&store_path, CQType::SimpleCQ));
        assert!(unknown.is_file());
        assert!(store.find_consume_queue_map(&topic).is_none());
    }

    #[test]
    fn load_consume_queues_retains_and_rejects_a_queue_level_unknown_file() {
        let root = tempdir().expect("tempdir");
        let topic = CheetahString::from_static_str("KnownTopic");
        let (mut store, store_path) = consume_queue_load_store(root.path(), &topic);
        let topic_path = Path::new(&store_path).join(topic.as_str());
        fs::create_dir_all(topic_path.join("0")).expect("known queue directory");
        let unknown = topic_path.join("unknown-queue-entry");
        fs::write(&unknown, b"retained").expect("unknown queue entry");

        assert!(!store.load_consume_queues(&store_path, CQType::SimpleCQ));
        assert!(unknown.is_file());
        assert!(store.find_consume_queue_map(&topic).is_none());
    }

    #[test]
    fn load_consume_queues_returns_false_when_topic_queue_type_mismatches_directory() {
        let root = tempdir().expect("tempdir");
        let topic = CheetahString::from_static_str("MismatchTopic");
        let message_store_config = Arc::new(MessageStoreConfig {
            store_path_root_dir: root.path().to_string_lossy().to_string().into(),
            ..MessageStoreConfig::default()
        });
        let broker_config = Arc::new(StoreRuntimeConfig::default());
        let topic_config_table = Arc::new(DashMap::<CheetahString, Arc<TopicConfig>>::new());
        topic_config_table.insert(topic.clone(), Arc::new(TopicConfig::new(topic.clone())));
        let message_store = LocalFileMessageStore::new(
            message_store_config.clone(),
            rocketmq_store_local::commit_log::append::micro_batch::MicroBatchPolicy::disabled(1)
                .expect("valid test policy"),
            broker_config.clone(),
            topic_config_table,
            None,
            false,
            crate::runtime::test_service_context("consume-queue-load-test"),
        )
        .expect("create consume queue load test Store")
        .expect("test Timer Store configuration is valid");

        let batch_store_path = get_store_path_batch_consume_queue(message_store_config.store_path_root_dir.as_str());
        fs::create_dir_all(Path::new(&batch_store_path).join(topic.as_str()).join("0"))
            .expect("batch consume queue directory");
        let mut store = ConsumeQueueStore::new(
            crate::runtime::test_scope("consume-queue-load-test"),
            message_store_config,
            broker_config,
        );
        store.set_context(message_store.consume_queue_context());

        assert!(!store.load_consume_queues(&batch_store_path, CQType::BatchCQ));
    }

    #[test]
    fn load_consume_queues_returns_false_for_invalid_persisted_queue_id() {
        let root = tempdir().expect("tempdir");
        let topic = CheetahString::from_static_str("InvalidQueueIdTopic");
        let message_store_config = Arc::new(MessageStoreConfig {
            store_path_root_dir: root.path().to_string_lossy().to_string().into(),
            ..MessageStoreConfig::default()
        });
        let broker_config = Arc::new(StoreRuntimeConfig::default());
        let simple_store_path = get_store_path_consume_queue(message_store_config.store_path_root_dir.as_str());
        fs::create_dir_all(
            Path::new(&simple_store_path)
                .join(topic.as_str())
                .join("not-a-queue-id"),
        )
        .expect("invalid queue ID directory");
        let mut store = ConsumeQueueStore::new(
            crate::runtime::test_scope("consume-queue-invalid-id-load-test"),
            message_store_config,
            broker_config,
        );

        assert!(!store.load_consume_queues(&simple_store_path, CQType::SimpleCQ));
        assert!(store.find_consume_queue_map(&topic).is_none());
    }

    #[test]
    fn rocksdb_cq_loads_from_simple_cq_path_in_compat_mode() {
        let root = tempdir().expect("tempdir");
        let topic = CheetahString::from_static_str("RocksCompatTopic");
        let message_store_config = Arc::new(MessageStoreConfig {
            store_path_root_dir: root.path().to_string_lossy().to_string().into(),
            store_type: StoreType::RocksDB,
            ..MessageStoreConfig::default()
        });
        let broker_config = Arc::new(StoreRuntimeConfig::default());
        let topic_config_table = Arc::new(DashMap::<CheetahString, Arc<TopicConfig>>::new());
        let mut topic_config = TopicConfig::new(topic.clone());
        topic_config.attributes.insert(
            TopicAttributes::queue_type_attribute().name().clone(),
            CQType::RocksDBCQ.to_string().into(),
        );
        topic_config_table.insert(topic.clone(), Arc::new(topic_config));
        let message_store = LocalFileMessageStore::new(
            message_store_config.clone(),
            rocketmq_store_local::commit_log::append::micro_batch::MicroBatchPolicy::disabled(1)
                .expect("valid test policy"),
            broker_config.clone(),
            topic_config_table,
            None,
            false,
            crate::runtime::test_service_context("consume-queue-rocks-compat-test"),
        )
        .expect("create consume queue compatibility test Store")
        .expect("test Timer Store configuration is valid");

        let simple_store_path = get_store_path_consume_queue(message_store_config.store_path_root_dir.as_str());
        fs::create_dir_all(Path::new(&simple_store_path).join(topic.as_str()).join("0"))
            .expect("simple consume queue directory");
        let mut store = ConsumeQueueStore::new(
            crate::runtime::test_scope("consume-queue-rocks-compat-test"),
            message_store_config,
            broker_config,
        );
        store.set_context(message_store.consume_queue_context());

        assert!(store.load_consume_queues(&simple_store_path, CQType::SimpleCQ));
        let queue = store
            .find_consume_queue(&topic, 0)
            .expect("rocksdb compatibility queue should load");
        assert_eq!(queue.read().get_cq_type(), CQType::SimpleCQ);
    }

    #[test]
    fn create_consume_queue_by_type_maps_rocksdb_cq_to_simple_cq() {
        let root = tempdir().expect("tempdir");
        let topic = CheetahString::from_static_str("RocksCreateTopic");
        let message_store_config = Arc::new(MessageStoreConfig {
            store_path_root_dir: root.path().to_string_lossy().to_string().into(),
            store_type: StoreType::RocksDB,
            ..MessageStoreConfig::default()
        });
        let broker_config = Arc::new(StoreRuntimeConfig::default());
        let topic_config_table = Arc::new(DashMap::<CheetahString, Arc<TopicConfig>>::new());
        let message_store = LocalFileMessageStore::new(
            message_store_config.clone(),
            rocketmq_store_local::commit_log::append::micro_batch::MicroBatchPolicy::disabled(1)
                .expect("valid test policy"),
            broker_config.clone(),
            topic_config_table,
            None,
            false,
            crate::runtime::test_service_context("consume-queue-create-type-test"),
        )
        .expect("create consume queue type test Store")
        .expect("test Timer Store configuration is valid");
        let store = ConsumeQueueStore::new(
            crate::runtime::test_scope("consume-queue-create-type-test"),
            message_store_config,
            broker_config,
        );
        store.set_context(message_store.consume_queue_context());

        let queue = store.create_consume_queue_by_type(
            &topic,
            0,
            CQType::RocksDBCQ,
            CheetahString::from_string(root.path().join("compat-cq").to_string_lossy().to_string()),
        );

        assert_eq!(queue.read().get_cq_type(), CQType::SimpleCQ);
    }

    #[test]
    fn batch_consume_queue_store_get_returns_full_batch_unit() {
        let message_store_config = Arc::new(MessageStoreConfig::default());
        let broker_config = Arc::new(StoreRuntimeConfig::default());
        let store = ConsumeQueueStore::new(
            crate::runtime::test_scope("consume-queue-batch-get-test"),
            message_store_config.clone(),
            broker_config,
        );
        let root = tempdir().expect("tempdir");
        let store_path = CheetahString::from_string(root.path().join("batch-cq").to_string_lossy().to_string());
        let topic = CheetahString::from_static_str("BatchTopic");
        let queue_id = 1;

        let mut batch_queue = BatchConsumeQueue::new(
            topic.clone(),
            queue_id,
            store_path,
            (batch_consume_queue::CQ_STORE_UNIT_SIZE * 2) as usize,
            None,
            message_store_config,
        );
        batch_queue.put_message_position_info_wrapper(&DispatchRequest {
            topic: topic.clone(),
            queue_id,
            commit_log_offset: 100,
            msg_size: 32,
            tags_code: 7,
            store_timestamp: 1_000,
            msg_base_offset: 0,
            batch_size: 3,
            success: true,
            ..DispatchRequest::default()
        });

        store
            .inner
            .consume_queue_table
            .lock()
            .entry(topic.clone())
            .or_default()
            .insert(queue_id, ArcConsumeQueue::new(Box::new(batch_queue)));

        let bytes = crate::runtime::test_runtime_owner().block_on(store.get(&topic, queue_id, 0));

        assert_eq!(bytes.len(), batch_consume_queue::CQ_STORE_UNIT_SIZE as usize);
        let mut bytes = bytes;
        assert_eq!(bytes.get_i64(), 100);
        assert_eq!(bytes.get_i32(), 32);
        assert_eq!(bytes.get_i64(), 7);
        assert_eq!(bytes.get_i64(), 1_000);
        assert_eq!(bytes.get_i64(), 0);
        assert_eq!(bytes.get_i16(), 3);
    }
}
