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
use std::collections::HashSet;
use std::sync::atomic::AtomicBool;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use cheetah_string::CheetahString;
use dashmap::DashMap;
use parking_lot::Mutex;
use rocketmq_model::common::message::message_queue::MessageQueue;
use rocketmq_model::common::mix_all;
use rocketmq_protocol::code::response_code::ResponseCode;
use rocketmq_protocol::protocol::namespace_util::NamespaceUtil;
use rocketmq_protocol::protocol::route::topic_route_data::TopicRouteData;
use rocketmq_runtime::ChildServiceContext;
use rocketmq_runtime::TaskGroup;
use tracing::info;
use tracing::warn;

use crate::broker_runtime::broker_component_task_group;
use crate::out_api::broker_outer_api::BrokerOuterAPI;
use crate::topic::route::topic_route_to_subscribe_queues;
use crate::topic::route::BrokerPublishRoute;

const GET_TOPIC_ROUTE_TIMEOUT: u64 = 3000;
const LOCK_TIMEOUT_MILLIS: u64 = 3000;
const SHUTDOWN_TIMEOUT: Duration = Duration::from_secs(5);

pub(crate) struct TopicRouteInfoManager {
    pub(crate) lock: Arc<tokio::sync::Mutex<()>>,
    pub(crate) topic_route_table: Arc<DashMap<CheetahString /* Topic */, TopicRouteData>>,
    pub(crate) broker_addr_table:
        Arc<DashMap<CheetahString /* Broker Name */, HashMap<u64 /* brokerId */, CheetahString /* address */>>>,
    pub(crate) topic_publish_info_table: Arc<DashMap<CheetahString /* topic */, BrokerPublishRoute>>,
    pub(crate) topic_subscribe_info_table: Arc<DashMap<CheetahString /* topic */, HashSet<MessageQueue>>>,
    broker_outer_api: BrokerOuterAPI,
    load_balance_poll_name_server_interval: u64,
    service_context: ChildServiceContext,
    running: Arc<AtomicBool>,
    task_group: Arc<Mutex<Option<TaskGroup>>>,
}

impl Clone for TopicRouteInfoManager {
    fn clone(&self) -> Self {
        Self {
            lock: self.lock.clone(),
            topic_route_table: self.topic_route_table.clone(),
            broker_addr_table: self.broker_addr_table.clone(),
            topic_publish_info_table: self.topic_publish_info_table.clone(),
            topic_subscribe_info_table: self.topic_subscribe_info_table.clone(),
            broker_outer_api: self.broker_outer_api.clone(),
            load_balance_poll_name_server_interval: self.load_balance_poll_name_server_interval,
            service_context: self.service_context.clone(),
            running: self.running.clone(),
            task_group: self.task_group.clone(),
        }
    }
}

impl TopicRouteInfoManager {
    pub fn new(
        broker_outer_api: BrokerOuterAPI,
        load_balance_poll_name_server_interval: u64,
        service_context: ChildServiceContext,
    ) -> Self {
        TopicRouteInfoManager {
            lock: Arc::new(tokio::sync::Mutex::new(())),
            topic_route_table: Arc::new(DashMap::new()),
            broker_addr_table: Arc::new(DashMap::new()),
            topic_publish_info_table: Arc::new(DashMap::new()),
            topic_subscribe_info_table: Arc::new(DashMap::new()),
            broker_outer_api,
            load_balance_poll_name_server_interval,
            service_context,
            running: Arc::new(AtomicBool::new(false)),
            task_group: Arc::new(Mutex::new(None)),
        }
    }

    pub fn start(&self) {
        if self
            .running
            .compare_exchange(false, true, Ordering::AcqRel, Ordering::Acquire)
            .is_err()
        {
            return;
        }

        let group = broker_component_task_group(&self.service_context, "rocketmq-broker.topic-route-info");
        let mut task_group = self.task_group.lock();
        let cancellation_token = group.cancellation_token();
        let manager = self.clone();
        let load_balance_poll_name_server_interval = self.load_balance_poll_name_server_interval;

        if let Err(error) = group.spawn_service("broker.topic-route-info.poll-namesrv", async move {
            tokio::select! {
                _ = cancellation_token.cancelled() => {
                    manager.running.store(false, Ordering::Release);
                    return;
                }
                _ = tokio::time::sleep(tokio::time::Duration::from_secs(1)) => {}
            }

            loop {
                manager.update_topic_route_info_from_name_server().await;
                tokio::select! {
                    _ = cancellation_token.cancelled() => {
                        manager.running.store(false, Ordering::Release);
                        return;
                    }
                    _ = tokio::time::sleep(tokio::time::Duration::from_millis(
                        load_balance_poll_name_server_interval,
                    )) => {}
                }
            }
        }) {
            self.running.store(false, Ordering::Release);
            warn!(?error, "failed to spawn TopicRouteInfoManager namesrv polling task");
            return;
        }

        *task_group = Some(group);
    }

    pub async fn shutdown(&mut self) {
        self.running.store(false, Ordering::Release);
        let task_group = { self.task_group.lock().take() };
        if let Some(task_group) = task_group {
            let report = task_group.shutdown(SHUTDOWN_TIMEOUT).await;
            if !report.is_healthy() {
                warn!(
                    report = %report.to_json(),
                    "TopicRouteInfoManager shutdown report is unhealthy"
                );
            }
        }
    }

    pub(crate) fn is_running(&self) -> bool {
        self.running.load(Ordering::Acquire)
    }

    async fn update_topic_route_info_from_name_server(&self) {
        let topic_set_for_pop_assignment = self
            .topic_subscribe_info_table
            .iter()
            .map(|entry| entry.key().clone())
            .collect::<HashSet<CheetahString>>();
        let topic_set_for_escape_bridge = self
            .topic_route_table
            .iter()
            .map(|entry| entry.key().clone())
            .collect::<HashSet<CheetahString>>();
        let topics_all = topic_set_for_pop_assignment
            .union(&topic_set_for_escape_bridge)
            .cloned()
            .collect::<HashSet<CheetahString>>();
        for topic in topics_all {
            let is_need_update_subscribe_info = topic_set_for_pop_assignment.contains(&topic);
            let is_need_update_publish_info = topic_set_for_escape_bridge.contains(&topic);
            self.update_topic_route_info_from_name_server_ext(
                &topic,
                is_need_update_publish_info,
                is_need_update_subscribe_info,
            )
            .await;
        }
    }
    pub async fn update_topic_route_info_from_name_server_ext(
        &self,
        topic: &CheetahString,
        is_need_update_publish_info: bool,
        is_need_update_subscribe_info: bool,
    ) {
        if let Ok(_lock) = tokio::time::timeout(Duration::from_millis(LOCK_TIMEOUT_MILLIS), self.lock.lock()).await {
            let topic_route_data = self
                .broker_outer_api
                .get_topic_route_info_from_name_server(topic, GET_TOPIC_ROUTE_TIMEOUT, true)
                .await;
            let mut topic_route_data = match topic_route_data {
                Ok(route) => route,
                Err(e) => {
                    if !NamespaceUtil::is_retry_topic(topic)
                        && crate::broker_error::broker_response_code(e.as_ref())
                            == Some(ResponseCode::TopicNotExist as i32)
                    {
                        self.clean_none_route_topic(topic);
                        return;
                    }

                    warn!(
                        "TopicRouteInfoManager: updateTopicRouteInfoFromNameServer, getTopicRouteInfoFromNameServer \
                     return null, Topic: {}.",
                        topic
                    );
                    return;
                }
            };
            if is_need_update_subscribe_info {
                self.update_subscribe_info_table(topic.clone(), &topic_route_data);
            }

            if is_need_update_publish_info {
                self.update_topic_route_table(&mut topic_route_data, topic.clone());
            }
        } else {
            warn!("try to lock timeout");
        }
    }

    #[inline]
    fn clean_none_route_topic(&self, topic: &CheetahString) {
        self.topic_subscribe_info_table.remove(topic);
    }

    fn update_subscribe_info_table(&self, topic: CheetahString, topic_route_data: &TopicRouteData) -> bool {
        let mut tmp = TopicRouteData::from_existing(topic_route_data);
        tmp.topic_queue_mapping_by_broker = None;
        let new_subscribe_info = topic_route_to_subscribe_queues(topic.as_str(), &tmp);
        let old_subscribe_info = self
            .topic_subscribe_info_table
            .get(&topic)
            .map(|entry| entry.value().clone())
            .unwrap_or_default();
        if new_subscribe_info == old_subscribe_info {
            return false;
        }
        info!(
            "the topic[{}] subscribe message queue changed, old[{:?}] ,new[{:?}]",
            topic, old_subscribe_info, new_subscribe_info,
        );
        self.topic_subscribe_info_table.insert(topic, new_subscribe_info);
        true
    }

    fn update_topic_route_table(&self, topic_route_data: &mut TopicRouteData, topic: CheetahString) -> bool {
        let old = self.topic_route_table.get(&topic).map(|entry| entry.value().clone());
        let changed = topic_route_data.topic_route_data_changed(old.as_ref());
        if !changed {
            if !self.is_need_update_topic_route_info(&topic) {
                return false;
            }
        } else {
            info!(
                "the topic[{}] route info changed, old[{:?}] ,new[{:?}]",
                topic, old, topic_route_data,
            )
        };
        for bd in &topic_route_data.broker_datas {
            self.broker_addr_table
                .insert(bd.broker_name().clone(), bd.broker_addrs().clone());
        }
        let publish_info = BrokerPublishRoute::from_topic_route_data(topic.as_str(), topic_route_data);
        self.update_topic_publish_info(&topic, publish_info);

        let clone_topic_route_data = TopicRouteData::from_existing(topic_route_data);
        info!(
            "topicRouteTable.put. Topic = {}, TopicRouteData[{:?}]",
            topic, clone_topic_route_data
        );
        self.topic_route_table.insert(topic, clone_topic_route_data);
        true
    }

    #[inline]
    fn update_topic_publish_info(&self, topic: &CheetahString, info: BrokerPublishRoute) {
        self.topic_publish_info_table.insert(topic.clone(), info);
    }

    #[inline]
    fn is_need_update_topic_route_info(&self, topic: &CheetahString) -> bool {
        let prev = self.topic_publish_info_table.get(topic);
        if let Some(prev) = prev {
            !prev.is_usable()
        } else {
            true
        }
    }

    pub async fn try_to_find_topic_publish_info(&self, topic: &CheetahString) -> Option<BrokerPublishRoute> {
        let mut topic_publish_info = self
            .topic_publish_info_table
            .get(topic)
            .map(|entry| entry.value().clone());
        if !topic_publish_info.as_ref().is_some_and(BrokerPublishRoute::is_usable) {
            self.update_topic_route_info_from_name_server_ext(topic, true, false)
                .await;
            topic_publish_info = self
                .topic_publish_info_table
                .get(topic)
                .map(|entry| entry.value().clone());
        }
        topic_publish_info
    }

    pub fn find_broker_address_in_publish(&self, broker_name: Option<&CheetahString>) -> Option<CheetahString> {
        let broker_name = broker_name?;
        let map = self.broker_addr_table.get(broker_name);
        if let Some(map) = map {
            if !map.is_empty() {
                return map.get(&mix_all::MASTER_ID).cloned();
            }
        }
        None
    }

    pub fn find_broker_address_in_subscribe(
        &self,
        broker_name: Option<&CheetahString>,
        broker_id: u64,
        only_this_broker: bool,
    ) -> Option<CheetahString> {
        let broker_name = broker_name?;
        let mut broker_addr: Option<CheetahString> = None;
        let mut found;

        if let Some(map) = self.broker_addr_table.get(broker_name) {
            if !map.is_empty() {
                broker_addr = map.get(&broker_id).cloned();
                let slave = broker_id != mix_all::MASTER_ID;
                found = broker_addr.is_some();

                if !found && slave {
                    broker_addr = map.get(&(broker_id + 1)).cloned();
                    found = broker_addr.is_some();
                }

                if !found && !only_this_broker {
                    if let Some((_, addr)) = map.iter().next() {
                        broker_addr = Some(addr.clone());
                    }
                }
            }
        }

        broker_addr
    }

    pub async fn get_topic_subscribe_info(&self, topic: &CheetahString) -> Option<HashSet<MessageQueue>> {
        let mut queues = self
            .topic_subscribe_info_table
            .get(topic)
            .map(|entry| entry.value().clone());
        if queues.as_ref().is_none_or(|q| q.is_empty()) {
            self.update_topic_route_info_from_name_server_ext(topic, false, true)
                .await;
            queues = self
                .topic_subscribe_info_table
                .get(topic)
                .map(|entry| entry.value().clone());
        }
        queues
    }
}

#[cfg(test)]
mod tests {
    use std::collections::HashSet;
    use std::sync::Arc;
    use std::time::Duration;

    use crate::config::broker_config::BrokerConfig;
    use cheetah_string::CheetahString;
    use rocketmq_model::common::message::message_queue::MessageQueue;
    use rocketmq_protocol::protocol::route::topic_route_data::TopicRouteData;
    use rocketmq_runtime::RuntimeContext;
    use rocketmq_store::MessageStoreConfig;

    use crate::broker_runtime::BrokerRuntime;

    #[tokio::test]
    async fn start_is_idempotent_and_shutdown_stops_background_task() {
        let broker_config = Arc::new(BrokerConfig::default());
        let message_store_config = Arc::new(MessageStoreConfig::default());
        let mut broker_runtime = BrokerRuntime::new(broker_config, message_store_config);
        let mut manager = broker_runtime.runtime_state_mut().topic_route_info_manager().clone();

        manager.start();
        manager.start();
        assert!(manager.is_running());

        manager.shutdown().await;
        assert!(!manager.is_running());
    }

    #[tokio::test]
    async fn service_context_parents_task_group() {
        let context = RuntimeContext::from_current("broker-topic-route-context-test");
        let broker_service = context.service_context("broker-service");
        let broker_config = Arc::new(BrokerConfig::default());
        let message_store_config = Arc::new(MessageStoreConfig::default());
        let mut broker_runtime =
            BrokerRuntime::new_with_service_context(broker_config, message_store_config, broker_service.clone());
        let mut manager = broker_runtime.runtime_state_mut().topic_route_info_manager().clone();

        manager.start();

        let task_group = manager
            .task_group
            .lock()
            .as_ref()
            .expect("topic route task group should be installed")
            .clone();
        assert_eq!(task_group.parent_id(), Some(broker_service.task_group().id()));

        manager.shutdown().await;
        let broker_report = broker_service.task_group().shutdown(Duration::from_secs(1)).await;
        assert!(broker_report.is_healthy(), "{}", broker_report.to_json());
    }

    #[test]
    fn manager_clones_share_standard_route_tables() {
        let broker_config = Arc::new(BrokerConfig::default());
        let message_store_config = Arc::new(MessageStoreConfig::default());
        let mut broker_runtime = BrokerRuntime::new(broker_config, message_store_config);
        let manager = broker_runtime.runtime_state_mut().topic_route_info_manager().clone();
        let cloned_manager = manager.clone();
        let topic = CheetahString::from_static_str("SharedRouteTopic");

        manager
            .topic_route_table
            .insert(topic.clone(), TopicRouteData::default());
        let queues = HashSet::from([MessageQueue::from_parts(topic.clone(), "broker-a", 0)]);
        manager.topic_subscribe_info_table.insert(topic.clone(), queues);

        assert!(cloned_manager.topic_route_table.contains_key(&topic));
        assert!(cloned_manager.topic_subscribe_info_table.contains_key(&topic));

        cloned_manager.clean_none_route_topic(&topic);
        assert!(!manager.topic_subscribe_info_table.contains_key(&topic));
    }
}
