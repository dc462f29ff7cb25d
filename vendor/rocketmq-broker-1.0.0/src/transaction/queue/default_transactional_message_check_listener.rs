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

use std::any::Any;
use std::sync::Arc;
use std::time::Duration;

use cheetah_string::CheetahString;
use rocketmq_model::common::message::message_ext::MessageExt;
use rocketmq_model::common::message::MessageConst;
use rocketmq_model::common::message::MessageTrait;
use rocketmq_protocol::protocol::header::check_transaction_state_request_header::CheckTransactionStateRequestHeader;
use rocketmq_runtime::ShutdownReport;
use rocketmq_runtime::TaskGroup;
use rocketmq_runtime::TaskKind;
use rocketmq_transport::api::RpcRequestHeader;
use tracing::error;
use tracing::warn;

use crate::client::manager::producer_manager::ProducerSessionRegistry;
use crate::client::net::broker_to_client::Broker2Client;
use crate::transaction::transactional_message_check_listener::TransactionalMessageCheckListener;

struct TransactionCheckTaskOwner {
    group: TaskGroup,
}

impl TransactionCheckTaskOwner {
    fn new(group: TaskGroup) -> Self {
        Self { group }
    }
}

#[derive(Clone)]
pub struct DefaultTransactionalMessageCheckListener {
    broker_name: CheetahString,
    producer_sessions: ProducerSessionRegistry,
    broker_client: Arc<Broker2Client>,
    task_owner: Arc<TransactionCheckTaskOwner>,
}

impl DefaultTransactionalMessageCheckListener {
    pub(crate) fn new(
        broker_name: CheetahString,
        producer_sessions: ProducerSessionRegistry,
        broker_client: Arc<Broker2Client>,
        task_group: TaskGroup,
    ) -> Self {
        Self {
            broker_name,
            producer_sessions,
            broker_client,
            task_owner: Arc::new(TransactionCheckTaskOwner::new(task_group)),
        }
    }

    pub async fn shutdown(&self, timeout: Duration) -> ShutdownReport {
        self.task_owner.group.shutdown(timeout).await
    }
}

impl TransactionalMessageCheckListener for DefaultTransactionalMessageCheckListener {
    async fn send_check_message(&self, mut msg_ext: MessageExt) -> crate::broker_error::BrokerResult<()> {
        let msg_id = msg_ext.user_property(&CheetahString::from_static_str(
            MessageConst::PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX,
        ));
        let header = CheckTransactionStateRequestHeader {
            topic: Some(msg_ext.message.topic().clone()),
            commit_log_offset: msg_ext.commit_log_offset,
            offset_msg_id: Some(msg_ext.msg_id().clone()),
            msg_id: msg_id.clone(),
            transaction_id: msg_id,
            tran_state_table_offset: msg_ext.queue_offset,
            rpc_request_header: Some(RpcRequestHeader {
                broker_name: Some(self.broker_name.clone()),
                ..Default::default()
            }),
        };
        let topic = msg_ext.user_property(&CheetahString::from_static_str(MessageConst::PROPERTY_REAL_TOPIC));
        if let Some(topic) = topic {
            msg_ext.set_topic(topic);
        }
        let queue_id = msg_ext.user_property(&CheetahString::from_static_str(MessageConst::PROPERTY_REAL_QUEUE_ID));
        if let Some(queue_id) = queue_id {
            msg_ext.set_queue_id(queue_id.as_str().parse::<i32>().unwrap_or_default());
        }
        msg_ext.store_size = 0;
        let group_id = msg_ext.user_property(&CheetahString::from_static_str(MessageConst::PROPERTY_PRODUCER_GROUP));
        let transport = self.producer_sessions.get_available_session(group_id.as_ref());
        if let Some(transport) = transport {
            self.broker_client
                .check_producer_transaction_state(group_id.as_ref().unwrap(), &transport.push_sender(), header, msg_ext)
                .await;
        } else {
            warn!(
                "Check transaction failed, producer session is unavailable. groupId={:?}",
                group_id
            );
        }
        Ok(())
    }

    async fn resolve_half_msg(&self, msg_ext: MessageExt) -> crate::broker_error::BrokerResult<()> {
        let this = self.clone();
        self.task_owner
            .group
            .spawn(
                "broker.transaction-check.send-check-message",
                TaskKind::Worker,
                async move {
                    this.send_check_message(msg_ext).await.unwrap_or_else(|e| {
                        error!("Failed to send check message: {}", e);
                    });
                },
            )
            .map_err(|error| crate::broker_error::broker_task_failed("transaction_check_message", error))?;
        Ok(())
    }

    fn as_any(&self) -> &dyn Any {
        self
    }

    fn as_any_mut(&mut self) -> &mut dyn Any {
        self
    }
}
