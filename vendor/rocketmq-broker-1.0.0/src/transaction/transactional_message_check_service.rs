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

use std::sync::Arc;
use std::time::Duration;
use std::time::Instant;

use crate::config::broker_config::BrokerConfig;
use rocketmq_runtime::task::service_task::ServiceTask;
use rocketmq_runtime::task::service_task::ServiceTaskContext;
use rocketmq_runtime::task::ServiceManager;
use rocketmq_runtime::TaskGroup;
use rocketmq_store::BrokerMasterAddressStore;
use rocketmq_store::BrokerWriteStore;
use tracing::info;
use tracing::warn;

use crate::transaction::queue::default_transactional_message_check_listener::DefaultTransactionalMessageCheckListener;
use crate::transaction::queue::default_transactional_message_service::DefaultTransactionalMessageService;
use crate::transaction::transactional_message_service::TransactionalMessageService;

pub struct TransactionalMessageCheckService<MS: BrokerWriteStore + BrokerMasterAddressStore> {
    task_impl: ServiceManager<TransactionalMessageCheckServiceInner<MS>>,
}

struct TransactionalMessageCheckServiceInner<MS: BrokerWriteStore + BrokerMasterAddressStore> {
    cancellation: tokio_util::sync::CancellationToken,
    broker_config: Arc<BrokerConfig>,
    transactional_message_service: Arc<DefaultTransactionalMessageService<MS>>,
    transactional_message_check_listener: DefaultTransactionalMessageCheckListener,
}

impl<MS: BrokerWriteStore + BrokerMasterAddressStore> ServiceTask for TransactionalMessageCheckServiceInner<MS> {
    fn get_service_name(&self) -> String {
        "TransactionalMessageCheckService".into()
    }

    async fn run(&self, context: &ServiceTaskContext) {
        info!("Starting transactional check service");

        while !context.is_stopped() && !self.cancellation.is_cancelled() {
            let transaction_check_interval = self.broker_config.transaction_check_interval;
            tokio::select! {
                biased;
                _ = self.cancellation.cancelled() => break,
                _ = context.wait_for_running(Duration::from_millis(transaction_check_interval)) => {}
            }
            if context.is_stopped() || self.cancellation.is_cancelled() {
                break;
            }
            self.on_wait_end().await;
        }
        info!("Transactional check service stopped");
    }

    #[inline]
    async fn on_wait_end(&self) {
        let transaction_timeout = self.broker_config.transaction_timeout;
        let transaction_check_max = self.broker_config.transaction_check_max;
        let begin = Instant::now();
        info!(
            "Transactional check service is running, waiting for {} ms",
            transaction_timeout
        );
        self.transactional_message_service
            .check(
                transaction_timeout,
                transaction_check_max as i32,
                self.transactional_message_check_listener.clone(),
            )
            .await;
        info!(
            "End to check prepare message, consumed time:{}",
            begin.elapsed().as_millis()
        );
    }
}

impl<MS: BrokerWriteStore + BrokerMasterAddressStore> TransactionalMessageCheckService<MS> {
    /// Owns transaction checks under the supplied broker task group.
    ///
    /// Parent cancellation prevents another scan and allows an active scan to
    /// finish until the parent's shutdown deadline forces cancellation.
    pub fn new_with_task_group(
        broker_config: Arc<BrokerConfig>,
        transactional_message_service: Arc<DefaultTransactionalMessageService<MS>>,
        transactional_message_check_listener: DefaultTransactionalMessageCheckListener,
        parent: TaskGroup,
    ) -> Self {
        let inner = TransactionalMessageCheckServiceInner {
            cancellation: parent.cancellation_token(),
            broker_config,
            transactional_message_service,
            transactional_message_check_listener,
        };
        TransactionalMessageCheckService {
            task_impl: ServiceManager::new_with_task_group(inner, parent),
        }
    }
}

impl<MS: BrokerWriteStore + BrokerMasterAddressStore> TransactionalMessageCheckService<MS> {
    pub async fn start(&self) -> crate::broker_error::BrokerResult<()> {
        self.task_impl
            .start()
            .await
            .map_err(|source| crate::broker_error::broker_task_failed("TransactionalMessageCheckService", source))
    }

    /// Stops checking, waiting no later than `deadline`, and returns the
    /// report of the owned task group.
    pub(crate) async fn shutdown_with_report_until(
        &self,
        deadline: rocketmq_runtime::ShutdownDeadline,
    ) -> Option<rocketmq_runtime::ShutdownReport> {
        if let Err(error) = self.task_impl.shutdown_until(deadline).await {
            warn!(error = %error, "TransactionalMessageCheckService shutdown failed");
        }
        self.task_impl.last_task_group_shutdown_report()
    }

    pub async fn shutdown_interrupt(&self, interrupt: bool) {
        if let Err(error) = self.task_impl.shutdown_with_interrupt(interrupt).await {
            warn!(error = %error, "TransactionalMessageCheckService interrupt shutdown failed");
        }
    }
}
