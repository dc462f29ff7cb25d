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

use std::collections::HashSet;
use std::sync::Arc;

use crate::out_api::pull::build_pull_message_request;
use crate::out_api::pull::decode_pull_response;
use crate::out_api::pull::process_pull_response;
use crate::out_api::send::build_send_message_request;
use crate::out_api::send::process_send_response;
use bytes::Bytes;
use cheetah_string::CheetahString;
use dns_lookup::lookup_host;
use rocketmq_error::fields;
use rocketmq_error::ErrorContext;
use rocketmq_error::SharedError;
use rocketmq_model::common::broker::broker_identity::BrokerIdentity;
use rocketmq_model::common::config::TopicConfig;
use rocketmq_model::common::message::message_client_id_setter::MessageClientIDSetter;
use rocketmq_model::common::message::message_ext::MessageExt;
use rocketmq_model::common::message::message_queue::MessageQueue;
use rocketmq_model::common::mix_all;
use rocketmq_model::common::topic::TopicValidator;
use rocketmq_model::result::PullOutcome;
use rocketmq_model::result::SendResult;
use rocketmq_model::utils::crc32_utils;
use rocketmq_model::utils::serde_json_utils::SerdeJsonUtils;
use rocketmq_protocol::code::request_code::RequestCode;
use rocketmq_protocol::code::response_code::ResponseCode;
use rocketmq_protocol::protocol::admin::topic_stats_table::TopicStatsTable;
use rocketmq_protocol::protocol::body::broker_body::broker_member_group::BrokerMemberGroup;
use rocketmq_protocol::protocol::body::broker_body::broker_member_group::GetBrokerMemberGroupResponseBody;
use rocketmq_protocol::protocol::body::broker_body::register_broker_body::RegisterBrokerBody;
use rocketmq_protocol::protocol::body::consumer_offset_serialize_wrapper::ConsumerOffsetSerializeWrapper;
use rocketmq_protocol::protocol::body::controller_write_lease::ControllerWriteLeaseGrant;
use rocketmq_protocol::protocol::body::elect_master_response_body::ElectMasterResponseBody;
use rocketmq_protocol::protocol::body::kv_table::KVTable;
use rocketmq_protocol::protocol::body::message_request_mode_serialize_wrapper::MessageRequestModeSerializeWrapper;
use rocketmq_protocol::protocol::body::response::lock_batch_response_body::LockBatchResponseBody;
use rocketmq_protocol::protocol::body::subscription_group_wrapper::SubscriptionGroupWrapper;
use rocketmq_protocol::protocol::body::sync_state_set_body::SyncStateSet;
use rocketmq_protocol::protocol::body::topic_info_wrapper::topic_config_wrapper::TopicConfigAndMappingSerializeWrapper;
use rocketmq_protocol::protocol::broker_sync_info::BrokerSyncInfo;
use rocketmq_protocol::protocol::header::client_request_header::GetRouteInfoRequestHeader;
use rocketmq_protocol::protocol::header::controller::alter_sync_state_set_request_header::AlterSyncStateSetRequestHeader;
use rocketmq_protocol::protocol::header::controller::apply_broker_id_request_header::ApplyBrokerIdRequestHeader;
use rocketmq_protocol::protocol::header::controller::apply_broker_id_response_header::ApplyBrokerIdResponseHeader;
use rocketmq_protocol::protocol::header::controller::elect_master_request_header::ElectMasterRequestHeader;
use rocketmq_protocol::protocol::header::controller::get_next_broker_id_request_header::GetNextBrokerIdRequestHeader;
use rocketmq_protocol::protocol::header::controller::get_next_broker_id_response_header::GetNextBrokerIdResponseHeader;
use rocketmq_protocol::protocol::header::controller::get_replica_info_request_header::GetReplicaInfoRequestHeader;
use rocketmq_protocol::protocol::header::controller::get_replica_info_response_header::GetReplicaInfoResponseHeader;
use rocketmq_protocol::protocol::header::controller::register_broker_to_controller_request_header::RegisterBrokerToControllerRequestHeader;
use rocketmq_protocol::protocol::header::controller::register_broker_to_controller_response_header::RegisterBrokerToControllerResponseHeader;
use rocketmq_protocol::protocol::header::elect_master_response_header::ElectMasterResponseHeader;
use rocketmq_protocol::protocol::header::exchange_ha_info_request_header::ExchangeHAInfoRequestHeader;
use rocketmq_protocol::protocol::header::exchange_ha_info_response_header::ExchangeHaInfoResponseHeader;
use rocketmq_protocol::protocol::header::get_max_offset_request_header::GetMaxOffsetRequestHeader;
use rocketmq_protocol::protocol::header::get_max_offset_response_header::GetMaxOffsetResponseHeader;
use rocketmq_protocol::protocol::header::get_meta_data_response_header::GetMetaDataResponseHeader;
use rocketmq_protocol::protocol::header::get_min_offset_request_header::GetMinOffsetRequestHeader;
use rocketmq_protocol::protocol::header::get_min_offset_response_header::GetMinOffsetResponseHeader;
use rocketmq_protocol::protocol::header::get_topic_config_request_header::GetTopicConfigRequestHeader;
use rocketmq_protocol::protocol::header::get_topic_stats_info_request_header::GetTopicStatsInfoRequestHeader;
use rocketmq_protocol::protocol::header::lock_batch_mq_request_header::LockBatchMqRequestHeader;
use rocketmq_protocol::protocol::header::namesrv::broker_request::BrokerHeartbeatRequestHeader;
use rocketmq_protocol::protocol::header::namesrv::broker_request::GetBrokerMemberGroupRequestHeader;
use rocketmq_protocol::protocol::header::namesrv::broker_request::UnRegisterBrokerRequestHeader;
use rocketmq_protocol::protocol::header::namesrv::query_data_version_header::QueryDataVersionRequestHeader;
use rocketmq_protocol::protocol::header::namesrv::query_data_version_header::QueryDataVersionResponseHeader;
use rocketmq_protocol::protocol::header::namesrv::register_broker_header::RegisterBrokerRequestHeader;
use rocketmq_protocol::protocol::header::namesrv::register_broker_header::RegisterBrokerResponseHeader;
use rocketmq_protocol::protocol::header::namesrv::topic_operation_header::RegisterTopicRequestHeader;
use rocketmq_protocol::protocol::header::namesrv::topic_operation_header::TopicRequestHeader;
use rocketmq_protocol::protocol::header::unlock_batch_mq_request_header::UnlockBatchMqRequestHeader;
use rocketmq_protocol::protocol::namesrv::RegisterBrokerResult;
use rocketmq_protocol::protocol::remoting_command::RemotingCommand;
use rocketmq_protocol::protocol::remoting_command_defaults::application_remoting_command_factory;
use rocketmq_protocol::protocol::remoting_command_defaults::RemotingCommandFactory;
use rocketmq_protocol::protocol::route::route_data_view::QueueData;
use rocketmq_protocol::protocol::route::topic_route_data::TopicRouteData;
use rocketmq_protocol::protocol::static_topic::topic_config_and_queue_mapping::TopicConfigAndQueueMapping;
use rocketmq_protocol::protocol::DataVersion;
use rocketmq_protocol::protocol::RemotingDeserializable;
use rocketmq_protocol::protocol::RemotingSerializable;
use rocketmq_runtime::ChildServiceContext;
use rocketmq_store::TimerCheckpointSnapshot;
use rocketmq_store::TimerMetricsSerializeWrapper;
use rocketmq_transport::api::ClientMetadata;
use rocketmq_transport::api::ClientShutdownReport;
use rocketmq_transport::api::DefaultRequestProcessor;
use rocketmq_transport::api::OutboundRequestContract;
use rocketmq_transport::api::OutboundRequestContractReason;
use rocketmq_transport::api::OutboundRequestOutcome;
use rocketmq_transport::api::OutboundRequestRejection;
use rocketmq_transport::api::OutboundRequestRejectionReason;
use rocketmq_transport::api::RPCHook;
use rocketmq_transport::api::RemotingClient;
use rocketmq_transport::api::RpcClient;
use rocketmq_transport::api::RpcClientImpl;
use rocketmq_transport::api::RpcRequest;
use rocketmq_transport::api::RpcRequestHeader;
use rocketmq_transport::api::TopicRequestHeader as RpcTopicRequestHeader;
use rocketmq_transport::api::TransportClientConfig;
use rocketmq_transport::api::TransportTelemetry;
use tracing::debug;
use tracing::error;
use tracing::info;
use tracing::warn;

#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct OnewayBroadcastReport {
    pub attempted: usize,
    pub succeeded: usize,
    pub failures: Vec<OnewayTargetFailure>,
}

impl OnewayBroadcastReport {
    #[must_use]
    pub fn is_healthy(&self) -> bool {
        self.failures.is_empty()
    }

    fn record(&mut self, address: CheetahString, result: crate::broker_error::BrokerResult<()>) {
        self.attempted = self.attempted.saturating_add(1);
        match result {
            Ok(()) => self.succeeded = self.succeeded.saturating_add(1),
            Err(error) => self.failures.push(OnewayTargetFailure {
                address,
                error: error.to_string(),
            }),
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OnewayTargetFailure {
    pub address: CheetahString,
    pub error: String,
}

#[derive(Clone)]
pub struct BrokerOuterAPI {
    remoting_client: Arc<RemotingClient<DefaultRequestProcessor>>,
    name_server_address: Option<String>,
    rpc_client: RpcClientImpl,
    client_metadata: Arc<ClientMetadata>,
    command_factory: RemotingCommandFactory,
}

fn broker_request_rejection_error(operation: &'static str, rejection: OutboundRequestRejection) -> SharedError {
    match rejection.reason() {
        OutboundRequestRejectionReason::DeadlineExpired => {
            let context = ErrorContext::new()
                .with_text(fields::OPERATION_DIAGNOSTIC, operation)
                .with_u64(fields::TIMEOUT_MS, rejection.timeout_millis().unwrap_or_default());
            crate::broker_error::from_shared(Arc::new(
                rocketmq_error::Error::new(&rocketmq_error::CORE_OPERATION_TIMED_OUT).with_context(context),
            ))
        }
        OutboundRequestRejectionReason::ClientStopping => crate::broker_error::client_not_started(),
        OutboundRequestRejectionReason::QueueSaturated => crate::broker_error::from_shared(Arc::new(
            rocketmq_error::Error::new(&rocketmq_error::TRANSPORT_ADMISSION_QUEUE_SATURATED),
        )),
        OutboundRequestRejectionReason::Cancelled
        | OutboundRequestRejectionReason::SessionClosed
        | OutboundRequestRejectionReason::EndpointUnavailable => {
            let mut context = ErrorContext::new();
            if rejection.remote_addr_present() {
                context = context.with_secret_presence(fields::REMOTE_ADDR_PRESENT);
            }
            crate::broker_error::from_shared(Arc::new(
                rocketmq_error::Error::new(&rocketmq_error::TRANSPORT_CONNECTION_FAILED).with_context(context),
            ))
        }
    }
}

fn broker_request_contract_error(contract: OutboundRequestContract) -> SharedError {
    match contract.reason() {
        OutboundRequestContractReason::NameServerEndpointMissing => crate::broker_error::from_shared(Arc::new(
            rocketmq_error::Error::new(&rocketmq_error::TRANSPORT_CONNECTION_FAILED),
        )),
    }
}

impl BrokerOuterAPI {
    pub fn new(
        tokio_client_config: Arc<TransportClientConfig>,
        service_context: ChildServiceContext,
        telemetry: TransportTelemetry,
    ) -> Self {
        Self::new_with_remoting_command_factory(
            tokio_client_config,
            service_context,
            telemetry,
            application_remoting_command_factory(),
        )
    }

    pub fn new_with_remoting_command_factory(
        tokio_client_config: Arc<TransportClientConfig>,
        service_context: ChildServiceContext,
        telemetry: TransportTelemetry,
        command_factory: RemotingCommandFactory,
    ) -> Self {
        Self::new_with_hook_and_remoting_command_factory(
            tokio_client_config,
            None,
            service_context,
            telemetry,
            command_factory,
        )
    }

    pub fn new_with_hook(
        tokio_client_config: Arc<TransportClientConfig>,
        rpc_hook: Option<Arc<dyn RPCHook>>,
        service_context: ChildServiceContext,
        telemetry: TransportTelemetry,
    ) -> Self {
        Self::new_with_hook_and_remoting_command_factory(
            tokio_client_config,
            rpc_hook,
            service_context,
            telemetry,
            application_remoting_command_factory(),
        )
    }

    pub fn new_with_hook_and_remoting_command_factory(
        tokio_client_config: Arc<TransportClientConfig>,
        rpc_hook: Option<Arc<dyn RPCHook>>,
        service_context: ChildServiceContext,
        telemetry: TransportTelemetry,
        command_factory: RemotingCommandFactory,
    ) -> Self {
        let client = Arc::new(
            RemotingClient::builder(tokio_client_config, DefaultRequestProcessor, service_context)
                .telemetry(telemetry)
                .build()
                .expect("clamped broker remoting client budgets must be valid"),
        );
        let client_metadata = Arc::new(ClientMetadata::new());
        if let Some(rpc_hook) = rpc_hook {
            client.register_rpc_hook(rpc_hook);
        }
        Self {
            remoting_client: client.clone(),
            name_server_address: None,
            rpc_client: RpcClientImpl::new(Arc::clone(&client_metadata), client.transport_client()),
            client_metadata,
            command_factory,
        }
    }

    pub fn register_rpc_hook(&mut self, rpc_hook: Arc<dyn RPCHook>) {
        self.remoting_client.register_rpc_hook(rpc_hook);
    }

    fn create_request(&self, broker_name: CheetahString, topic_config: &TopicConfig) -> RemotingCommand {
        let request_header = RegisterTopicRequestHeader::new(topic_config.topic_name.as_ref().cloned().unwrap());
        let queue_data = QueueData::new(
            broker_name,
            topic_config.read_queue_nums,
            topic_config.write_queue_nums,
            topic_config.perm,
            topic_config.topic_sys_flag,
        );
        let topic_route_data = TopicRouteData {
            queue_datas: vec![queue_data],
            ..Default::default()
        };
        let topic_route_body = topic_route_data.encode().expect("encode topic route data failed");

        self.command_factory
            .create_request_command(RequestCode::RegisterTopicInNamesrv, request_header)
            .set_body(topic_route_body)
    }
}

impl BrokerOuterAPI {
    pub async fn start(&self) {
        if let Err(error) = self.remoting_client.start().await {
            error!(?error, "failed to start broker remoting client");
        }
    }

    pub async fn update_name_server_address_list(&self, addrs: CheetahString) {
        let addr_vec = addrs
            .split_str(";")
            .map(CheetahString::from_slice)
            .collect::<Vec<CheetahString>>();
        self.remoting_client.update_name_server_address_list(addr_vec).await
    }

    pub async fn update_name_server_address_list_by_dns_lookup(&self, domain: CheetahString) {
        let address_list = dns_lookup_address_by_domain(domain.as_str());
        self.remoting_client.update_name_server_address_list(address_list).await;
    }

    #[allow(
        clippy::too_many_arguments,
        reason = "existing broker registration wire composition is tracked by the lint debt registry"
    )]
    pub async fn register_broker_all(
        &self,
        cluster_name: CheetahString,
        broker_addr: CheetahString,
        broker_name: CheetahString,
        broker_id: u64,
        ha_server_addr: CheetahString,
        topic_config_wrapper: TopicConfigAndMappingSerializeWrapper,
        filter_server_list: Vec<CheetahString>,
        oneway: bool,
        timeout_mills: u64,
        enable_acting_master: bool,
        compressed: bool,
        heartbeat_timeout_millis: Option<i64>,
        _broker_identity: BrokerIdentity,
    ) -> Vec<RegisterBrokerResult> {
        let mut name_server_address_list = self.remoting_client.get_available_name_srv_list();
        if name_server_address_list.is_empty() {
            name_server_address_list = self.remoting_client.get_name_server_address_list().to_vec();
        }
        let mut register_broker_result_list = Vec::new();
        if !name_server_address_list.is_empty() {
            let request_header = RegisterBrokerRequestHeader {
                broker_addr,
                broker_id,
                broker_name,
                cluster_name,
                ha_server_addr,
                enable_acting_master: Some(enable_acting_master),
                compressed: false,
                heartbeat_timeout_millis,
                body_crc32: 0,
            };

            let register_request = build_register_broker_request_parts(
                request_header,
                topic_config_wrapper,
                filter_server_list,
                compressed,
            );

            let broker_outer_api = self;
            let futures = name_server_address_list.iter().map(|namesrv_addr| {
                let cloned_body = register_request.body.clone();
                let cloned_header = register_request.header.clone();
                let addr = namesrv_addr.clone();
                async move {
                    broker_outer_api
                        .register_broker(&addr, oneway, timeout_mills, cloned_header, cloned_body)
                        .await
                }
            });
            for value in futures::future::join_all(futures).await {
                match value {
                    Ok(Some(result)) => register_broker_result_list.push(result),
                    Ok(None) => {}
                    Err(error) => error!(%error, "Register broker to name remoting_server failed"),
                }
            }
        }

        register_broker_result_list
    }

    async fn register_broker(
        &self,
        namesrv_addr: &CheetahString,
        oneway: bool,
        timeout_mills: u64,
        request_header: RegisterBrokerRequestHeader,
        body: Vec<u8>,
    ) -> crate::broker_error::BrokerResult<Option<RegisterBrokerResult>> {
        debug!(
            "Register broker to name remoting_server, namesrv_addr={},request_code={:?}, request_header={:?}, \
             body_len={}",
            namesrv_addr,
            RequestCode::RegisterBroker,
            request_header,
            body.len()
        );
        let request = self
            .command_factory
            .create_request_command(RequestCode::RegisterBroker, request_header)
            .set_body(body.clone());
        if oneway {
            self.remoting_client
                .invoke_request_oneway(namesrv_addr, request, timeout_mills)
                .await?;
            return Ok(None);
        }
        match self
            .remoting_client
            .invoke_request(Some(namesrv_addr), request, timeout_mills)
            .await
        {
            Ok(OutboundRequestOutcome::Response(response)) => match From::from(response.code()) {
                ResponseCode::Success => {
                    info!(
                        "Register broker to name remoting_server success, namesrv_addr={} response_body_len={}",
                        namesrv_addr,
                        response.body().map_or(0, bytes::Bytes::len)
                    );
                    let register_broker_result =
                        response.decode_command_custom_header::<RegisterBrokerResponseHeader>();
                    let mut result = RegisterBrokerResult::default();
                    if let Ok(header) = register_broker_result {
                        result.ha_server_addr = header.ha_server_addr.clone().unwrap_or(CheetahString::empty());
                        result.master_addr = header.master_addr.unwrap_or(CheetahString::empty());
                    }
                    if let Some(body) = response.body() {
                        result.kv_table = SerdeJsonUtils::from_json_bytes::<KVTable>(body.as_ref()).unwrap();
                    }
                    Ok(Some(result))
                }
                _ => Ok(None),
            },
            Ok(OutboundRequestOutcome::Rejected(rejection)) => {
                Err(broker_request_rejection_error("register_broker", rejection))
            }
            Ok(OutboundRequestOutcome::Contract(contract)) => Err(broker_request_contract_error(contract)),
            Err(error) => Err(crate::broker_error::from_shared(error.into_shared_error())),
        }
    }

    /// Register the topic route info of single topic to all name remoting_server nodes.
    /// This method is used to replace incremental broker registration feature.
    pub async fn register_single_topic_all(
        &self,
        broker_name: CheetahString,
        topic_config: TopicConfig,
        timeout_mills: u64,
    ) {
        let request = self.create_request(broker_name, &topic_config);
        let name_server_address_list = self.remoting_client.get_available_name_srv_list();
        let futures = name_server_address_list.iter().map(|namesrv_addr| {
            let cloned_request = request.clone();
            let addr = namesrv_addr.clone();
            let client = self.remoting_client.clone();
            async move {
                match client.invoke_request(Some(&addr), cloned_request, timeout_mills).await {
                    Ok(OutboundRequestOutcome::Response(_)) => Ok(()),
                    Ok(OutboundRequestOutcome::Rejected(rejection)) => {
                        Err(broker_request_rejection_error("register_single_topic_all", rejection))
                    }
                    Ok(OutboundRequestOutcome::Contract(contract)) => Err(broker_request_contract_error(contract)),
                    Err(error) => Err(crate::broker_error::from_shared(error.into_shared_error())),
                }
            }
        });
        let _ = futures::future::join_all(futures).await;
    }

    pub fn shutdown(&mut self) {
        self.remoting_client.shutdown();
    }

    pub async fn shutdown_with_report(&mut self, timeout: std::time::Duration) -> ClientShutdownReport {
        self.remoting_client.shutdown_with_report(timeout).await
    }

    pub fn refresh_metadata(&self) {}

    /// Send heartbeat to name servers
    ///
    /// # Arguments
    /// * `cluster_name` - Cluster name
    /// * `broker_addr` - Broker address
    /// * `broker_name` - Broker name
    /// * `broker_id` - Broker ID
    /// * `timeout_millis` - Request timeout in milliseconds
    /// * `is_in_broker_container` - Whether broker is in container
    pub async fn send_heartbeat(
        &self,
        cluster_name: CheetahString,
        broker_addr: CheetahString,
        broker_name: CheetahString,
        broker_id: i64,
        timeout_millis: u64,
        _is_in_broker_container: bool,
    ) -> OnewayBroadcastReport {
        let name_server_address_list = self.remoting_client.get_available_name_srv_list();
        if name_server_address_list.is_empty() {
            warn!("No available name server for sending heartbeat");
            return OnewayBroadcastReport::default();
        }

        let request_header = BrokerHeartbeatRequestHeader {
            cluster_name,
            broker_addr,
            broker_name,
            broker_id: Some(broker_id),
            epoch: None,
            max_offset: None,
            confirm_offset: None,
            store_ready: None,
            heartbeat_timeout_mills: None,
            election_priority: None,
        };

        // Parallel heartbeat to all NameServers
        let futures = name_server_address_list.iter().map(|namesrv_addr| {
            let addr = namesrv_addr.clone();
            let header = request_header.clone();
            let client = self.remoting_client.clone();

            async move {
                let request = self
                    .command_factory
                    .create_request_command(RequestCode::BrokerHeartbeat, header);
                let result = client.invoke_request_oneway(&addr, request, timeout_millis).await;
                (addr, result)
            }
        });
        let mut report = OnewayBroadcastReport::default();
        for (addr, result) in futures::future::join_all(futures).await {
            if let Err(error) = &result {
                warn!(remote_addr = %addr, error_code = %error.descriptor().code(), "name server heartbeat failed");
            }
            report.record(addr, result);
        }
        report
    }

    /// Send heartbeat with data version to name servers
    ///
    /// This method sends data version along with heartbeat to allow
    /// name server to determine if broker metadata has changed.
    pub async fn send_heartbeat_via_data_version(
        &self,
        cluster_name: CheetahString,
        broker_addr: CheetahString,
        broker_name: CheetahString,
        broker_id: u64,
        timeout_millis: u64,
        data_version: &DataVersion,
        _is_in_broker_container: bool,
    ) -> OnewayBroadcastReport {
        let name_server_address_list = self.remoting_client.get_available_name_srv_list();
        if name_server_address_list.is_empty() {
            return OnewayBroadcastReport::default();
        }

        let request_header = QueryDataVersionRequestHeader {
            broker_addr,
            broker_name,
            broker_id,
            cluster_name,
        };

        let body = match data_version.encode() {
            Ok(body) => body,
            Err(error) => {
                let error = error.to_string();
                return OnewayBroadcastReport {
                    attempted: name_server_address_list.len(),
                    succeeded: 0,
                    failures: name_server_address_list
                        .into_iter()
                        .map(|address| OnewayTargetFailure {
                            address,
                            error: error.clone(),
                        })
                        .collect(),
                };
            }
        };

        let futures = name_server_address_list.iter().map(|namesrv_addr| {
            let addr = namesrv_addr.clone();
            let header = request_header.clone();
            let body_clone = body.clone();
            let client = self.remoting_client.clone();

            async move {
                let mut request = self
                    .command_factory
                    .create_request_command(RequestCode::QueryDataVersion, header);
                request.set_body_mut_ref(bytes::Bytes::from(body_clone));

                let result = client.invoke_request_oneway(&addr, request, timeout_millis).await;
                (addr, result)
            }
        });
        let mut report = OnewayBroadcastReport::default();
        for (addr, result) in futures::future::join_all(futures).await {
            if let Err(error) = &result {
                warn!(remote_addr = %addr, error_code = %error.descriptor().code(), "data-version heartbeat failed");
            }
            report.record(addr, result);
        }
        report
    }

    /// Check if broker needs to register to name servers
    ///
    /// This method queries all name servers to determine if broker
    /// metadata has changed and needs re-registration.
    ///
    /// # Returns
    /// Vector of booleans indicating if each name server needs registration
    pub async fn need_register(
        &self,
        cluster_name: CheetahString,
        broker_addr: CheetahString,
        broker_name: CheetahString,
        broker_id: u64,
        topic_config_wrapper: &TopicConfigAndMappingSerializeWrapper,
        timeout_millis: u64,
        _is_in_broker_container: bool,
    ) -> Vec<bool> {
        let name_server_address_list = self.remoting_client.get_name_server_address_list();
        if name_server_address_list.is_empty() {
            return vec![];
        }

        let data_version_body = match topic_config_wrapper
            .topic_config_serialize_wrapper
            .data_version()
            .encode()
        {
            Ok(body) => body,
            Err(e) => {
                error!("Failed to encode data version: {}", e);
                return vec![true; name_server_address_list.len()];
            }
        };

        let local_data_version = topic_config_wrapper
            .topic_config_serialize_wrapper
            .data_version()
            .clone();

        let futures = name_server_address_list.iter().map(|namesrv_addr| {
            let addr = namesrv_addr.clone();
            let header = QueryDataVersionRequestHeader {
                cluster_name: cluster_name.clone(),
                broker_addr: broker_addr.clone(),
                broker_name: broker_name.clone(),
                broker_id,
            };
            let body = data_version_body.clone();
            let client = self.remoting_client.clone();
            let local_version = local_data_version.clone();

            async move {
                let mut request = self
                    .command_factory
                    .create_request_command(RequestCode::QueryDataVersion, header);
                request.set_body_mut_ref(bytes::Bytes::from(body));

                match client.invoke_request(Some(&addr), request, timeout_millis).await {
                    Ok(OutboundRequestOutcome::Response(response)) => match ResponseCode::from(response.code()) {
                        ResponseCode::Success => {
                            if let Ok(response_header) =
                                response.decode_command_custom_header::<QueryDataVersionResponseHeader>()
                            {
                                // If name server explicitly indicates changed
                                if response_header.changed() {
                                    return Some(true);
                                }

                                // Compare data versions
                                if let Some(body) = response.body() {
                                    if let Ok(ns_data_version) = DataVersion::decode(body.as_ref()) {
                                        return Some(local_version != ns_data_version);
                                    }
                                }

                                Some(false)
                            } else {
                                Some(true)
                            }
                        }
                        _ => {
                            warn!("Query data version from {} failed: {:?}", addr, response.code());
                            Some(true)
                        }
                    },
                    Ok(OutboundRequestOutcome::Rejected(rejection)) => {
                        warn!(
                            address = %addr,
                            reason = ?rejection.reason(),
                            stage = ?rejection.stage(),
                            "Query data version was rejected"
                        );
                        Some(true)
                    }
                    Ok(OutboundRequestOutcome::Contract(contract)) => {
                        warn!(
                            address = %addr,
                            reason = ?contract.reason(),
                            stage = ?contract.stage(),
                            "Query data version contract was not satisfied"
                        );
                        Some(true)
                    }
                    Err(e) => {
                        error!("Query data version from {} error: {}", addr, e);
                        Some(true)
                    }
                }
            }
        });

        let results = futures::future::join_all(futures).await;
        results.into_iter().flatten().collect()
    }

    /// Get maximum offset of a message queue
    ///
    /// # Arguments
    /// * `addr` - Broker address
    /// * `topic` - Topic name
    /// * `queue_id` - Queue ID
    /// * `committed` - Whether to get committed offset
    ///
    /// # Returns
    /// Maximum offset or error
    pub async fn get_max_offset(
        &self,
        addr: &CheetahString,
        topic: CheetahString,
        queue_id: i32,
        committed: bool,
    ) -> crate::broker_error::BrokerResult<i64> {
        let request_header = GetMaxOffsetRequestHeader {
            topic,
            queue_id,
            committed,
            topic_request_header: None,
        };

        let request = self
            .command_factory
            .create_request_command(RequestCode::GetMaxOffset, request_header);

        let response = match self.remoting_client.invoke_request(Some(addr), request, 3000).await {
            Ok(OutboundRequestOutcome::Response(response)) => response,
            Ok(OutboundRequestOutcome::Rejected(rejection)) => {
                return Err(broker_request_rejection_error("get_max_offset", rejection));
            }
            Ok(OutboundRequestOutcome::Contract(contract)) => return Err(broker_request_contract_error(contract)),
            Err(error) => return Err(crate::broker_error::from_shared(error.into_shared_error())),
        };

        match ResponseCode::from(response.code()) {
            ResponseCode::Success => {
                let response_header = response.decode_command_custom_header::<GetMaxOffsetResponseHeader>()?;
                Ok(response_header.offset)
            }
            _ => Err(crate::broker_error::broker_operation_failed_with_address(
                "get_max_offset",
                response.code(),
                response.remark().map_or("".to_string(), |s| s.to_string()),
                Some(addr.to_string()),
            )),
        }
    }

    /// Get minimum offset of a message queue
    ///
    /// # Arguments
    /// * `addr` - Broker address
    /// * `topic` - Topic name
    /// * `queue_id` - Queue ID
    ///
    /// # Returns
    /// Minimum offset or error
    pub async fn get_min_offset(
        &self,
        addr: &CheetahString,
        topic: CheetahString,
        queue_id: i32,
    ) -> crate::broker_error::BrokerResult<i64> {
        let request_header = GetMinOffsetRequestHeader {
            topic,
            queue_id,
            topic_request_header: None,
        };

        let request = self
            .command_factory
            .create_request_command(RequestCode::GetMinOffset, request_header);

        let response = match self.remoting_client.invoke_request(Some(addr), request, 3000).await {
            Ok(OutboundRequestOutcome::Response(response)) => response,
            Ok(OutboundRequestOutcome::Rejected(rejection)) => {
                return Err(broker_request_rejection_error("get_min_offset", rejection));
            }
            Ok(OutboundRequestOutcome::Contract(contract)) => return Err(broker_request_contract_error(contract)),
            Err(error) => return Err(crate::broker_error::from_shared(error.into_shared_error())),
        };

        match ResponseCode::from(response.code()) {
            ResponseCode::Success => {
                let response_header = response.decode_command_custom_header::<GetMinOffsetResponseHeader>()?;
                Ok(response_header.offset)
            }
            _ => Err(crate::broker_error::broker_operation_failed_with_address(
                "get_min_offset",
                response.code(),
                response.remark().map_or("".to_string(), |s| s.to_string()),
                Some(addr.to_string()),
            )),
        }
    }

    pub fn rpc_client(&self) -> &RpcClientImpl {
        &self.rpc_client
    }

    pub async fn lock_batch_mq_async(
        &self,
        addr: &CheetahString,
        request_body: bytes::Bytes,
        timeout_millis: u64,
    ) -> crate::broker_error::BrokerResult<HashSet<MessageQueue>> {
        let mut request = self
            .command_factory
            .create_request_command(RequestCode::LockBatchMq, LockBatchMqRequestHeader::default());
        request.set_body_mut_ref(request_body);
        let result = self
            .remoting_client
            .invoke_request(Some(addr), request, timeout_millis)
            .await;
        match result {
            Ok(OutboundRequestOutcome::Response(response)) => {
                if ResponseCode::from(response.code()) == ResponseCode::Success {
                    let lock_batch_response_body = LockBatchResponseBody::decode(response.get_body().unwrap()).unwrap();
                    Ok(lock_batch_response_body.lock_ok_mq_set)
                } else {
                    Err(crate::broker_error::broker_operation_failed_with_address(
                        "lock_batch_mq",
                        response.code(),
                        response
                            .remark()
                            .cloned()
                            .unwrap_or(CheetahString::empty())
                            .serialize_json()
                            .expect("to json failed"),
                        Some("".to_string()),
                    ))
                }
            }
            Ok(OutboundRequestOutcome::Rejected(rejection)) => {
                Err(broker_request_rejection_error("lock_batch_mq", rejection))
            }
            Ok(OutboundRequestOutcome::Contract(contract)) => Err(broker_request_contract_error(contract)),
            Err(error) => Err(crate::broker_error::from_shared(error.into_shared_error())),
        }
    }

    pub async fn unlock_batch_mq_async(
        &self,
        addr: &CheetahString,
        request_body: bytes::Bytes,
        timeout_millis: u64,
    ) -> crate::broker_error::BrokerResult<()> {
        let mut request = self
            .command_factory
            .create_request_command(RequestCode::UnlockBatchMq, UnlockBatchMqRequestHeader::default());
        request.set_body_mut_ref(request_body);
        let result = self
            .remoting_client
            .invoke_request(Some(addr), request, timeout_millis)
            .await;
        match result {
            Ok(OutboundRequestOutcome::Response(response)) => {
                if ResponseCode::from(response.code()) == ResponseCode::Success {
                    Ok(())
                } else {
                    Err(crate::broker_error::broker_operation_failed_with_address(
                        "unlock_batch_mq",
                        response.code(),
                        response.remark().cloned().unwrap_or(CheetahString::empty()).to_string(),
                        Some("".to_string()),
                    ))
                }
            }
            Ok(OutboundRequestOutcome::Rejected(rejection)) => {
                Err(broker_request_rejection_error("unlock_batch_mq", rejection))
            }
            Ok(OutboundRequestOutcome::Contract(contract)) => Err(broker_request_contract_error(contract)),
            Err(error) => Err(crate::broker_error::from_shared(error.into_shared_error())),
        }
    }

    pub async fn get_topic_route_info_from_name_server(
        &self,
        topic: &CheetahString,
        timeout_millis: u64,
        allow_topic_not_exist: bool,
    ) -> crate::broker_error::BrokerResult<TopicRouteData> {
        let header = GetRouteInfoRequestHeader {
            topic: topic.clone(),
            ..Default::default()
        };
        let request = self
            .command_factory
            .create_request_command(RequestCode::GetRouteinfoByTopic, header);
        let response = self.remoting_client.invoke_request(None, request, timeout_millis).await;
        let response = match response {
            Ok(OutboundRequestOutcome::Response(response)) => response,
            Ok(OutboundRequestOutcome::Rejected(rejection)) => {
                return Err(broker_request_rejection_error(
                    "get_topic_route_info_from_name_server",
                    rejection,
                ));
            }
            Ok(OutboundRequestOutcome::Contract(contract)) => return Err(broker_request_contract_error(contract)),
            Err(error) => return Err(crate::broker_error::from_shared(error.into_shared_error())),
        };
        match ResponseCode::from(response.code()) {
            ResponseCode::TopicNotExist if allow_topic_not_exist => {
                warn!("get Topic [{}] RouteInfoFromNameServer is not exist value", topic);
            }
            ResponseCode::TopicNotExist => {}
            ResponseCode::Success => {
                if let Some(body) = response.body() {
                    let topic_route_data = TopicRouteData::decode(body)?;
                    self.client_metadata
                        .fresh_topic_route(topic, Some(topic_route_data.clone()));
                    return Ok(topic_route_data);
                }
            }
            _ => {}
        }
        Err(crate::broker_error::broker_operation_failed_with_address(
            "notify_min_broker_id_changed",
            response.code(),
            response.remark().cloned().unwrap_or(CheetahString::empty()).to_string(),
            Some("".to_string()),
        ))
    }

    pub(crate) async fn get_topic_stats_info_from_broker(
        &self,
        broker_name: &CheetahString,
        topic: &CheetahString,
        timeout_millis: u64,
    ) -> crate::broker_error::BrokerResult<TopicStatsTable> {
        let header = GetTopicStatsInfoRequestHeader {
            topic: topic.clone(),
            topic_request_header: Some(TopicRequestHeader {
                lo: Some(false),
                rpc: Some(RpcRequestHeader {
                    broker_name: Some(broker_name.clone()),
                    ..Default::default()
                }),
            }),
        };
        let request = RpcRequest::new(RequestCode::GetTopicStatsInfo as i32, header, None);
        let response = self.rpc_client.invoke(request, timeout_millis).await?;
        let body = Self::rpc_response_body_as_bytes(response, "get_topic_stats_info")?;
        TopicStatsTable::decode(body.as_ref()).map_err(crate::broker_error::from_canonical)
    }

    pub(crate) async fn get_topic_config_from_broker(
        &self,
        broker_name: &CheetahString,
        topic: &CheetahString,
        lo: bool,
        timeout_millis: u64,
    ) -> crate::broker_error::BrokerResult<TopicConfigAndQueueMapping> {
        let header = GetTopicConfigRequestHeader {
            topic: topic.clone(),
            topic_request_header: Some(RpcTopicRequestHeader {
                lo: Some(lo),
                rpc_request_header: Some(RpcRequestHeader {
                    broker_name: Some(broker_name.clone()),
                    ..Default::default()
                }),
            }),
        };
        let request = RpcRequest::new(RequestCode::GetTopicConfig as i32, header, None);
        let response = self.rpc_client.invoke(request, timeout_millis).await?;
        let body = Self::rpc_response_body_as_bytes(response, "get_topic_config")?;
        TopicConfigAndQueueMapping::decode(body.as_ref()).map_err(crate::broker_error::from_canonical)
    }

    fn rpc_response_body_as_bytes(
        response: rocketmq_transport::api::RpcResponse,
        operation: &'static str,
    ) -> crate::broker_error::BrokerResult<Bytes> {
        if let Some(exception) = response.exception {
            return Err(crate::broker_error::response_process_source(operation, exception));
        }

        let Some(body) = response.body else {
            return Err(crate::broker_error::response_process_failed(
                operation,
                "missing response body",
            ));
        };

        body.downcast::<Bytes>()
            .map(|bytes| *bytes)
            .map_err(|_| crate::broker_error::response_process_failed(operation, "response body is not bytes"))
    }

    pub async fn send_message_to_specific_broker(
        &self,
        broker_addr: &CheetahString,
        broker_name: &CheetahString,
        msg: MessageExt,
        group: CheetahString,
        timeout_millis: u64,
    ) -> crate::broker_error::BrokerResult<SendResult> {
        let uniq_msg_id = MessageClientIDSetter::get_uniq_id(&msg);
        let queue_id = msg.queue_id;
        let topic = msg.topic().clone();
        let request = build_send_message_request(&self.command_factory, msg, group);
        let response = self
            .remoting_client
            .invoke_request(Some(broker_addr), request, timeout_millis)
            .await;
        let response = match response {
            Ok(OutboundRequestOutcome::Response(response)) => response,
            Ok(OutboundRequestOutcome::Rejected(rejection)) => {
                return Err(broker_request_rejection_error(
                    "send_message_to_specific_broker",
                    rejection,
                ));
            }
            Ok(OutboundRequestOutcome::Contract(contract)) => return Err(broker_request_contract_error(contract)),
            Err(error) => return Err(crate::broker_error::from_shared(error.into_shared_error())),
        };

        process_send_response(broker_name, uniq_msg_id.unwrap_or_default(), queue_id, topic, &response)
    }

    pub async fn pull_message_from_specific_broker_async(
        &self,
        broker_name: &CheetahString,
        broker_addr: &CheetahString,
        consumer_group: &CheetahString,
        topic: &CheetahString,
        queue_id: i32,
        offset: i64,
        max_nums: i32,
        timeout_millis: u64,
    ) -> crate::broker_error::BrokerResult<(Option<PullOutcome<MessageExt>>, String, bool)> {
        let request_command = build_pull_message_request(
            &self.command_factory,
            broker_name,
            consumer_group,
            topic,
            queue_id,
            offset,
            max_nums,
        );
        match self
            .remoting_client
            .invoke_request(Some(broker_addr), request_command, timeout_millis)
            .await
        {
            Ok(OutboundRequestOutcome::Response(response)) => {
                let code = response.code();
                let pull_response = match process_pull_response(response, broker_addr) {
                    Ok(value) => value,
                    Err(_) => return Ok((None, format!("Response Code:{code}"), true)),
                };
                let outcome = decode_pull_response(pull_response, broker_name, queue_id);
                let name = outcome.pull_status().to_string();
                Ok((Some(outcome), name, false))
            }
            Ok(OutboundRequestOutcome::Rejected(rejection)) => {
                Ok((None, format!("request rejected: {:?}", rejection.reason()), true))
            }
            Ok(OutboundRequestOutcome::Contract(contract)) => {
                Ok((None, format!("request contract failed: {:?}", contract.reason()), true))
            }
            Err(error) => Ok((None, error.to_string(), true)),
        }
    }

    pub async fn unregister_broker_all(
        &self,
        cluster_name: &CheetahString,
        broker_name: &CheetahString,
        broker_addr: &CheetahString,
        broker_id: u64,
    ) {
        let name_server_address_list = self.remoting_client.get_name_server_address_list();
        for namesrv_addr in name_server_address_list.iter() {
            match self
                .unregister_broker(namesrv_addr, cluster_name, broker_addr, broker_name, broker_id)
                .await
            {
                Ok(_) => {
                    info!(
                        "Unregister broker from name remoting_server success, namesrv_addr={}",
                        namesrv_addr
                    );
                }
                Err(e) => {
                    error!(
                        "Unregister broker from name remoting_server error, namesrv_addr={}, error={}",
                        namesrv_addr, e
                    );
                }
            }
        }
    }
    pub async fn unregister_broker(
        &self,
        namesrv_addr: &CheetahString,
        cluster_name: &CheetahString,
        broker_addr: &CheetahString,
        broker_name: &CheetahString,
        broker_id: u64,
    ) -> crate::broker_error::BrokerResult<()> {
        let request_header = UnRegisterBrokerRequestHeader {
            broker_name: broker_name.clone(),
            broker_addr: broker_addr.clone(),
            cluster_name: cluster_name.clone(),
            broker_id,
        };
        let request = self
            .command_factory
            .create_request_command(RequestCode::UnregisterBroker, request_header);
        let response = self
            .remoting_client
            .invoke_request(Some(namesrv_addr), request, 3000)
            .await;
        let response = match response {
            Ok(OutboundRequestOutcome::Response(response)) => response,
            Ok(OutboundRequestOutcome::Rejected(rejection)) => {
                return Err(broker_request_rejection_error("unregister_broker", rejection));
            }
            Ok(OutboundRequestOutcome::Contract(contract)) => return Err(broker_request_contract_error(contract)),
            Err(error) => return Err(crate::broker_error::from_shared(error.into_shared_error())),
        };
        if ResponseCode::from(response.code()) == ResponseCode::Success {
            Ok(())
        } else {
            Err(crate::broker_error::broker_operation_failed_with_address(
                "sync_consumer_offset_all",
                response.code(),
                response.remark().map_or("".to_string(), |s| s.to_string()),
                Some(broker_addr.to_string()),
            ))
        }
    }

    pub async fn get_all_topic_config(
        &self,
        addr: &CheetahString,
    ) -> crate::broker_error::BrokerResult<Option<TopicConfigAndMappingSerializeWrapper>> {
        let request = self
            .command_factory
            .create_remoting_command(RequestCode::GetAllTopicConfig);
        let response = self
            .remoting_client
            .invoke_request(Some(mix_all::broker_vip_channel(true, addr).as_ref()), request, 3000)
            .await;
        let response = match response {
            Ok(OutboundRequestOutcome::Response(response)) => response,
            Ok(OutboundRequestOutcome::Rejected(rejection)) => {
                return Err(broker_request_rejection_error("get_all_topic_config", rejection));
            }
            Ok(OutboundRequestOutcome::Contract(contract)) => return Err(broker_request_contract_error(contract)),
            Err(error) => return Err(crate::broker_error::from_shared(error.into_shared_error())),
        };
        if ResponseCode::from(response.code()) == ResponseCode::Success {
            if let Some(body) = response.body() {
                let topic_configs = TopicConfigAndMappingSerializeWrapper::decode(body)?;
                return Ok(Some(topic_configs));
            }
            Ok(None)
        } else {
            Err(crate::broker_error::broker_operation_failed_with_address(
                "get_all_topic_config",
                response.code(),
                response.remark().map_or("".to_string(), |s| s.to_string()),
                Some(addr.to_string()),
            ))
        }
    }

    pub async fn get_all_consumer_offset(
        &self,
        addr: &CheetahString,
    ) -> crate::broker_error::BrokerResult<Option<ConsumerOffsetSerializeWrapper>> {
        let request = self
            .command_factory
            .create_remoting_command(RequestCode::GetAllConsumerOffset);
        // let addr_ = mix_all::broker_vip_channel(true, addr);
        let response = match self.remoting_client.invoke_request(Some(addr), request, 3000).await {
            Ok(OutboundRequestOutcome::Response(response)) => response,
            Ok(OutboundRequestOutcome::Rejected(rejection)) => {
                return Err(broker_request_rejection_error("get_all_consumer_offset", rejection));
            }
            Ok(OutboundRequestOutcome::Contract(contract)) => return Err(broker_request_contract_error(contract)),
            Err(error) => return Err(crate::broker_error::from_shared(error.into_shared_error())),
        };
        if ResponseCode::from(response.code()) == ResponseCode::Success {
            if let Some(body) = response.body() {
                let topic_configs = ConsumerOffsetSerializeWrapper::decode(body)?;
                return Ok(Some(topic_configs));
            }
            Ok(None)
        } else {
            Err(crate::broker_error::broker_operation_failed_with_address(
                "get_all_consumer_offset",
                response.code(),
                response.remark().map_or("".to_string(), |s| s.to_string()),
                Some(addr.to_string()),
            ))
        }
    }

    pub async fn get_delay_offset(&self, addr: &CheetahString) -> crate::broker_error::BrokerResult<Option<String>> {
        let request = self
            .command_factory
            .create_remoting_command(RequestCode::GetAllDelayOffset);
        let mut response = match self.remoting_client.invoke_request(Some(addr), request, 3000).await {
            Ok(OutboundRequestOutcome::Response(response)) => response,
            Ok(OutboundRequestOutcome::Rejected(rejection)) => {
                return Err(broker_request_rejection_error("get_delay_offset", rejection));
            }
            Ok(OutboundRequestOutcome::Contract(contract)) => return Err(broker_request_contract_error(contract)),
            Err(error) => return Err(crate::broker_error::from_shared(error.into_shared_error())),
        };
        if ResponseCode::from(response.code()) == ResponseCode::Success {
            if let Some(body) = response.take_body() {
                return Ok(Some(String::from_utf8_lossy(body.as_ref()).to_string()));
            }
            Ok(None)
        } else {
            Err(crate::broker_error::broker_operation_failed_with_address(
                "get_delay_offset",
                response.code(),
                response.remark().map_or("".to_string(), |s| s.to_string()),
                Some(addr.to_string()),
            ))
        }
    }

    pub async fn get_all_subscription_group_config(
        &self,
        addr: &CheetahString,
    ) -> crate::broker_error::BrokerResult<Option<SubscriptionGroupWrapper>> {
        let request = self
            .command_factory
            .create_remoting_command(RequestCode::GetAllSubscriptionGroupConfig);
        let mut response = match self.remoting_client.invoke_request(Some(addr), request, 3000).await {
            Ok(OutboundRequestOutcome::Response(response)) => response,
            Ok(OutboundRequestOutcome::Rejected(rejection)) => {
                return Err(broker_request_rejection_error(
                    "get_all_subscription_group_config",
                    rejection,
                ));
            }
            Ok(OutboundRequestOutcome::Contract(contract)) => return Err(broker_request_contract_error(contract)),
            Err(error) => return Err(crate::broker_error::from_shared(error.into_shared_error())),
        };
        if ResponseCode::from(response.code()) == ResponseCode::Success {
            if let Some(body) = response.take_body() {
                return Ok(Some(SubscriptionGroupWrapper::decode(body.as_ref())?));
            }
            Ok(None)
        } else {
            Err(crate::broker_error::broker_operation_failed_with_address(
                "get_all_subscription_group_config",
                response.code(),
                response.remark().map_or("".to_string(), |s| s.to_string()),
                Some(addr.to_string()),
            ))
        }
    }

    pub async fn get_message_request_mode(
        &self,
        addr: &CheetahString,
    ) -> crate::broker_error::BrokerResult<Option<MessageRequestModeSerializeWrapper>> {
        let request = self
            .command_factory
            .create_remoting_command(RequestCode::GetAllMessageRequestMode);
        let mut response = match self.remoting_client.invoke_request(Some(addr), request, 3000).await {
            Ok(OutboundRequestOutcome::Response(response)) => response,
            Ok(OutboundRequestOutcome::Rejected(rejection)) => {
                return Err(broker_request_rejection_error("get_message_request_mode", rejection));
            }
            Ok(OutboundRequestOutcome::Contract(contract)) => return Err(broker_request_contract_error(contract)),
            Err(error) => return Err(crate::broker_error::from_shared(error.into_shared_error())),
        };
        if ResponseCode::from(response.code()) == ResponseCode::Success {
            if let Some(body) = response.take_body() {
                return Ok(Some(MessageRequestModeSerializeWrapper::decode(body.as_ref())?));
            }
            Ok(None)
        } else {
            Err(crate::broker_error::broker_operation_failed_with_address(
                "get_message_request_mode",
                response.code(),
                response.remark().map_or("".to_string(), |s| s.to_string()),
                Some(addr.to_string()),
            ))
        }
    }

    pub async fn get_timer_metrics(
        &self,
        addr: &CheetahString,
    ) -> crate::broker_error::BrokerResult<Option<TimerMetricsSerializeWrapper>> {
        let request = self
            .command_factory
            .create_remoting_command(RequestCode::GetTimerMetrics);
        let mut response = match self.remoting_client.invoke_request(Some(addr), request, 3000).await {
            Ok(OutboundRequestOutcome::Response(response)) => response,
            Ok(OutboundRequestOutcome::Rejected(rejection)) => {
                return Err(broker_request_rejection_error("get_timer_metrics", rejection));
            }
            Ok(OutboundRequestOutcome::Contract(contract)) => return Err(broker_request_contract_error(contract)),
            Err(error) => return Err(crate::broker_error::from_shared(error.into_shared_error())),
        };
        if ResponseCode::from(response.code()) == ResponseCode::Success {
            if let Some(body) = response.take_body() {
                return serde_json::from_slice(body.as_ref())
                    .map(Some)
                    .map_err(|error| crate::broker_error::serialization_failed("deserialize", "JSON", error));
            }
            Ok(None)
        } else {
            Err(crate::broker_error::broker_operation_failed_with_address(
                "get_timer_metrics",
                response.code(),
                response.remark().map_or("".to_string(), |s| s.to_string()),
                Some(addr.to_string()),
            ))
        }
    }

    pub async fn get_timer_check_point(
        &self,
        addr: &CheetahString,
    ) -> crate::broker_error::BrokerResult<Option<TimerCheckpointSnapshot>> {
        let request = self
            .command_factory
            .create_remoting_command(RequestCode::GetTimerCheckPoint);
        let mut response = match self.remoting_client.invoke_request(Some(addr), request, 3000).await {
            Ok(OutboundRequestOutcome::Response(response)) => response,
            Ok(OutboundRequestOutcome::Rejected(rejection)) => {
                return Err(broker_request_rejection_error("get_timer_check_point", rejection));
            }
            Ok(OutboundRequestOutcome::Contract(contract)) => return Err(broker_request_contract_error(contract)),
            Err(error) => return Err(crate::broker_error::from_shared(error.into_shared_error())),
        };
        if ResponseCode::from(response.code()) == ResponseCode::Success {
            if let Some(body) = response.take_body() {
                return TimerCheckpointSnapshot::decode(body.as_ref())
                    .map(Some)
                    .map_err(crate::broker_error::io);
            }
            Ok(None)
        } else {
            Err(crate::broker_error::broker_operation_failed_with_address(
                "get_timer_check_point",
                response.code(),
                response.remark().map_or("".to_string(), |s| s.to_string()),
                Some(addr.to_string()),
            ))
        }
    }

    pub async fn sync_broker_member_group(
        &self,
        cluster_name: &CheetahString,
        broker_name: &CheetahString,
        is_compatible_with_old_name_srv: bool,
    ) -> crate::broker_error::BrokerResult<Option<BrokerMemberGroup>> {
        if is_compatible_with_old_name_srv {
            self.get_broker_member_group_compatible(cluster_name, broker_name).await
        } else {
            self.get_broker_member_group(cluster_name, broker_name).await
        }
    }

    async fn get_broker_member_group(
        &self,
        cluster_name: &CheetahString,
        broker_name: &CheetahString,
    ) -> crate::broker_error::BrokerResult<Option<BrokerMemberGroup>> {
        let request_header = GetBrokerMemberGroupRequestHeader::new(cluster_name.clone(), broker_name.clone());
        let request = self
            .command_factory
            .create_request_command(RequestCode::GetBrokerMemberGroup, request_header);
        let mut response = match self.remoting_client.invoke_request(None, request, 3000).await {
            Ok(OutboundRequestOutcome::Response(response)) => response,
            Ok(OutboundRequestOutcome::Rejected(rejection)) => {
                return Err(broker_request_rejection_error("get_broker_member_group", rejection));
            }
            Ok(OutboundRequestOutcome::Contract(contract)) => return Err(broker_request_contract_error(contract)),
            Err(error) => return Err(crate::broker_error::from_shared(error.into_shared_error())),
        };
        if ResponseCode::from(response.code()) == ResponseCode::Success {
            if let Some(body) = response.take_body() {
                let response_body = GetBrokerMemberGroupResponseBody::decode(body.as_ref())?;
                return Ok(Some(
                    response_body
                        .broker_member_group
                        .unwrap_or_else(|| empty_broker_member_group(cluster_name, broker_name)),
                ));
            }
        }
        Ok(Some(empty_broker_member_group(cluster_name, broker_name)))
    }

    async fn get_broker_member_group_compatible(
        &self,
        cluster_name: &CheetahString,
        broker_name: &CheetahString,
    ) -> crate::broker_error::BrokerResult<Option<BrokerMemberGroup>> {
        let request_header = GetRouteInfoRequestHeader {
            topic: CheetahString::from_string(format!(
                "{}{}",
                TopicValidator::SYNC_BROKER_MEMBER_GROUP_PREFIX,
                broker_name
            )),
            ..Default::default()
        };
        let request = self
            .command_factory
            .create_request_command(RequestCode::GetRouteinfoByTopic, request_header);
        let mut response = match self.remoting_client.invoke_request(None, request, 3000).await {
            Ok(OutboundRequestOutcome::Response(response)) => response,
            Ok(OutboundRequestOutcome::Rejected(rejection)) => {
                return Err(broker_request_rejection_error(
                    "get_broker_member_group_compatible",
                    rejection,
                ));
            }
            Ok(OutboundRequestOutcome::Contract(contract)) => return Err(broker_request_contract_error(contract)),
            Err(error) => return Err(crate::broker_error::from_shared(error.into_shared_error())),
        };
        if ResponseCode::from(response.code()) == ResponseCode::Success {
            if let Some(body) = response.take_body() {
                let topic_route_data = TopicRouteData::decode(body.as_ref())?;
                return Ok(Some(broker_member_group_from_route_data(
                    cluster_name,
                    broker_name,
                    &topic_route_data,
                )));
            }
        }
        Ok(Some(empty_broker_member_group(cluster_name, broker_name)))
    }

    /// Get controller metadata information
    pub async fn get_controller_metadata(
        &self,
        controller_address: &CheetahString,
    ) -> crate::broker_error::BrokerResult<GetMetaDataResponseHeader> {
        let request = self
            .command_factory
            .create_remoting_command(RequestCode::ControllerGetMetadataInfo);
        let response = self
            .remoting_client
            .invoke_request(Some(controller_address), request, 3000)
            .await;
        let response = match response {
            Ok(OutboundRequestOutcome::Response(response)) => response,
            Ok(OutboundRequestOutcome::Rejected(rejection)) => {
                return Err(broker_request_rejection_error("get_controller_metadata", rejection));
            }
            Ok(OutboundRequestOutcome::Contract(contract)) => return Err(broker_request_contract_error(contract)),
            Err(error) => return Err(crate::broker_error::from_shared(error.into_shared_error())),
        };
        match ResponseCode::from(response.code()) {
            ResponseCode::Success => Ok(response.decode_command_custom_header::<GetMetaDataResponseHeader>()?),
            _ => Err(crate::broker_error::broker_operation_failed_with_address(
                "get_controller_metadata",
                response.code(),
                response.remark().map_or("".to_string(), |s| s.to_string()),
                Some(controller_address.to_string()),
            )),
        }
    }

    /// Send heartbeat to controller
    pub async fn send_heartbeat_to_controller(
        &self,
        controller_address: CheetahString,
        timeout_millis: u64,
        request_header: BrokerHeartbeatRequestHeader,
    ) -> crate::broker_error::BrokerResult<Option<ControllerWriteLeaseGrant>> {
        if controller_address.is_empty() {
            return Ok(None);
        }
        let request = self
            .command_factory
            .create_request_command(RequestCode::BrokerHeartbeat, request_header);
        let response = self
            .remoting_client
            .invoke_request(Some(&controller_address), request, timeout_millis)
            .await;
        let response = match response {
            Ok(OutboundRequestOutcome::Response(response)) => response,
            Ok(OutboundRequestOutcome::Rejected(rejection)) => {
                return Err(broker_request_rejection_error(
                    "send_heartbeat_to_controller",
                    rejection,
                ));
            }
            Ok(OutboundRequestOutcome::Contract(contract)) => return Err(broker_request_contract_error(contract)),
            Err(error) => return Err(crate::broker_error::from_shared(error.into_shared_error())),
        };
        match ResponseCode::from(response.code()) {
            ResponseCode::Success => response
                .body()
                .map(|body| serde_json::from_slice(body.as_ref()))
                .transpose()
                .map_err(|error| crate::broker_error::serialization_failed("deserialize", "JSON", error)),
            _ => Err(crate::broker_error::broker_operation_failed_with_address(
                "send_heartbeat_to_controller",
                response.code(),
                response.remark().map_or_else(String::new, ToString::to_string),
                Some(controller_address.to_string()),
            )),
        }
    }

    pub async fn send_heartbeat_to_controller_sync(
        &self,
        controller_address: &CheetahString,
        timeout_millis: u64,
        request_header: BrokerHeartbeatRequestHeader,
    ) -> crate::broker_error::BrokerResult<Option<ControllerWriteLeaseGrant>> {
        let request = self
            .command_factory
            .create_request_command(RequestCode::BrokerHeartbeat, request_header);
        let response = self
            .remoting_client
            .invoke_request(Some(controller_address), request, timeout_millis)
            .await;
        let response = match response {
            Ok(OutboundRequestOutcome::Response(response)) => response,
            Ok(OutboundRequestOutcome::Rejected(rejection)) => {
                return Err(broker_request_rejection_error(
                    "send_heartbeat_to_controller_sync",
                    rejection,
                ));
            }
            Ok(OutboundRequestOutcome::Contract(contract)) => return Err(broker_request_contract_error(contract)),
            Err(error) => return Err(crate::broker_error::from_shared(error.into_shared_error())),
        };

        match ResponseCode::from(response.code()) {
            ResponseCode::Success => response
                .body()
                .map(|body| serde_json::from_slice(body.as_ref()))
                .transpose()
                .map_err(|error| crate::broker_error::serialization_failed("deserialize", "JSON", error)),
            _ => Err(crate::broker_error::broker_operation_failed_with_address(
                "send_heartbeat_to_controller_sync",
                response.code(),
                response
                    .remark()
                    .map_or("send_heartbeat_to_controller_sync failed".to_string(), |s| {
                        s.to_string()
                    }),
                Some(controller_address.to_string()),
            )),
        }
    }

    /// Alter sync state set in controller
    pub async fn alter_sync_state_set(
        &self,
        controller_address: &CheetahString,
        broker_name: CheetahString,
        master_broker_id: i64,
        master_epoch: i32,
        new_sync_state_set: HashSet<i64>,
        sync_state_set_epoch: i32,
    ) -> crate::broker_error::BrokerResult<SyncStateSet> {
        let request_header = AlterSyncStateSetRequestHeader {
            broker_name,
            master_broker_id,
            master_epoch,
            invoke_time: rocketmq_model::time::current_millis(),
        };
        let mut request = self
            .command_factory
            .create_request_command(RequestCode::ControllerAlterSyncStateSet, request_header);
        request.set_body_mut_ref(SyncStateSet::with_values(new_sync_state_set, sync_state_set_epoch).encode()?);

        let response = self
            .remoting_client
            .invoke_request(Some(controller_address), request, 3000)
            .await;
        let response = match response {
            Ok(OutboundRequestOutcome::Response(response)) => response,
            Ok(OutboundRequestOutcome::Rejected(rejection)) => {
                return Err(broker_request_rejection_error("alter_sync_state_set", rejection));
            }
            Ok(OutboundRequestOutcome::Contract(contract)) => return Err(broker_request_contract_error(contract)),
            Err(error) => return Err(crate::broker_error::from_shared(error.into_shared_error())),
        };

        if ResponseCode::from(response.code()) != ResponseCode::Success {
            return Err(crate::broker_error::broker_operation_failed_with_address(
                "alter_sync_state_set",
                response.code(),
                response
                    .remark()
                    .map_or("alter_sync_state_set failed".to_string(), |s| s.to_string()),
                Some(controller_address.to_string()),
            ));
        }

        if response.body().is_none() {
            return Err(crate::broker_error::broker_operation_failed_with_address(
                "alter_sync_state_set",
                -1,
                "No body in alter_sync_state_set response".to_string(),
                Some(controller_address.to_string()),
            ));
        }
        let body = response.body().unwrap();
        let sync_state_set: SyncStateSet = SyncStateSet::decode(body.as_ref())?;
        Ok(sync_state_set)
    }

    /// Broker elect itself as master
    pub async fn broker_elect(
        &self,
        controller_address: &CheetahString,
        cluster_name: CheetahString,
        broker_name: CheetahString,
        broker_id: i64,
    ) -> crate::broker_error::BrokerResult<(ElectMasterResponseHeader, HashSet<i64>)> {
        let request_header = ElectMasterRequestHeader {
            cluster_name,
            broker_name,
            broker_id,
            ..Default::default()
        };
        let request = self
            .command_factory
            .create_request_command(RequestCode::ControllerElectMaster, request_header);

        let response = self
            .remoting_client
            .invoke_request(Some(controller_address), request, 3000)
            .await;
        let response = match response {
            Ok(OutboundRequestOutcome::Response(response)) => response,
            Ok(OutboundRequestOutcome::Rejected(rejection)) => {
                return Err(broker_request_rejection_error("broker_elect", rejection));
            }
            Ok(OutboundRequestOutcome::Contract(contract)) => return Err(broker_request_contract_error(contract)),
            Err(error) => return Err(crate::broker_error::from_shared(error.into_shared_error())),
        };

        match ResponseCode::from(response.code()) {
            ResponseCode::Success | ResponseCode::ControllerMasterStillExist => {
                let response_header = response
                    .decode_command_custom_header::<ElectMasterResponseHeader>()
                    .map_err(|error| {
                        crate::broker_error::broker_operation_source("broker_elect", -1, controller_address, error)
                    })?;
                if response.body().is_none() {
                    return Err(crate::broker_error::broker_operation_failed_with_address(
                        "broker_elect",
                        -1,
                        "No body in broker_elect response".to_string(),
                        Some(controller_address.to_string()),
                    ));
                }
                let body = response.body().unwrap();
                let elect_master_response_body = ElectMasterResponseBody::decode(body.as_ref())?;
                Ok((response_header, elect_master_response_body.sync_state_set))
            }
            _ => Err(crate::broker_error::broker_operation_failed_with_address(
                "broker_elect",
                response.code(),
                response
                    .remark()
                    .map_or("broker_elect failed".to_string(), |s| s.to_string()),
                Some(controller_address.to_string()),
            )),
        }
    }

    /// Get next broker ID from controller
    pub async fn get_next_broker_id(
        &self,
        cluster_name: CheetahString,
        broker_name: CheetahString,
        controller_address: &CheetahString,
    ) -> crate::broker_error::BrokerResult<GetNextBrokerIdResponseHeader> {
        let request_header = GetNextBrokerIdRequestHeader {
            cluster_name,
            broker_name,
        };
        let request = self
            .command_factory
            .create_request_command(RequestCode::ControllerGetNextBrokerId, request_header);

        let response = self
            .remoting_client
            .invoke_request(Some(controller_address), request, 3000)
            .await;
        let response = match response {
            Ok(OutboundRequestOutcome::Response(response)) => response,
            Ok(OutboundRequestOutcome::Rejected(rejection)) => {
                return Err(broker_request_rejection_error("get_next_broker_id", rejection));
            }
            Ok(OutboundRequestOutcome::Contract(contract)) => return Err(broker_request_contract_error(contract)),
            Err(error) => return Err(crate::broker_error::from_shared(error.into_shared_error())),
        };

        if ResponseCode::from(response.code()) != ResponseCode::Success {
            return Err(crate::broker_error::broker_operation_failed_with_address(
                "get_next_broker_id",
                response.code(),
                response
                    .remark()
                    .map_or("get_next_broker_id failed".to_string(), |s| s.to_string()),
                Some(controller_address.to_string()),
            ));
        }

        response
            .decode_command_custom_header::<GetNextBrokerIdResponseHeader>()
            .map_err(|error| {
                crate::broker_error::broker_operation_source("get_next_broker_id", -1, controller_address, error)
            })
    }

    /// Apply broker ID from controller
    pub async fn apply_broker_id(
        &self,
        cluster_name: CheetahString,
        broker_name: CheetahString,
        broker_id: i64,
        register_check_code: CheetahString,
        controller_address: &CheetahString,
    ) -> crate::broker_error::BrokerResult<ApplyBrokerIdResponseHeader> {
        let request_header = ApplyBrokerIdRequestHeader {
            cluster_name,
            broker_name,
            applied_broker_id: broker_id,
            register_check_code,
        };
        let request = self
            .command_factory
            .create_request_command(RequestCode::ControllerApplyBrokerId, request_header);

        let response = self
            .remoting_client
            .invoke_request(Some(controller_address), request, 3000)
            .await;
        let response = match response {
            Ok(OutboundRequestOutcome::Response(response)) => response,
            Ok(OutboundRequestOutcome::Rejected(rejection)) => {
                return Err(broker_request_rejection_error("apply_broker_id", rejection));
            }
            Ok(OutboundRequestOutcome::Contract(contract)) => return Err(broker_request_contract_error(contract)),
            Err(error) => return Err(crate::broker_error::from_shared(error.into_shared_error())),
        };

        if ResponseCode::from(response.code()) != ResponseCode::Success {
            return Err(crate::broker_error::broker_operation_failed_with_address(
                "apply_broker_id",
                response.code(),
                response
                    .remark()
                    .map_or("apply_broker_id failed".to_string(), |s| s.to_string()),
                Some(controller_address.to_string()),
            ));
        }

        let response_header = response
            .decode_command_custom_header::<ApplyBrokerIdResponseHeader>()
            .map_err(|error| {
                crate::broker_error::broker_operation_source("apply_broker_id", -1, controller_address, error)
            })?;
        Ok(response_header)
    }

    /// Register broker to controller
    pub async fn register_broker_to_controller(
        &self,
        cluster_name: CheetahString,
        broker_name: CheetahString,
        broker_id: i64,
        broker_address: CheetahString,
        controller_address: &CheetahString,
    ) -> crate::broker_error::BrokerResult<(RegisterBrokerToControllerResponseHeader, Option<HashSet<i64>>)> {
        let request_header = RegisterBrokerToControllerRequestHeader {
            cluster_name: Some(cluster_name),
            broker_name: Some(broker_name),
            broker_id: Some(broker_id),
            broker_address: Some(broker_address),
            ..Default::default()
        };
        let request = self
            .command_factory
            .create_request_command(RequestCode::ControllerRegisterBroker, request_header);

        let response = self
            .remoting_client
            .invoke_request(Some(controller_address), request, 3000)
            .await;
        let response = match response {
            Ok(OutboundRequestOutcome::Response(response)) => response,
            Ok(OutboundRequestOutcome::Rejected(rejection)) => {
                return Err(broker_request_rejection_error(
                    "register_broker_to_controller",
                    rejection,
                ));
            }
            Ok(OutboundRequestOutcome::Contract(contract)) => return Err(broker_request_contract_error(contract)),
            Err(error) => return Err(crate::broker_error::from_shared(error.into_shared_error())),
        };

        if ResponseCode::from(response.code()) != ResponseCode::Success {
            return Err(crate::broker_error::broker_operation_failed_with_address(
                "register_broker_to_controller",
                response.code(),
                response
                    .remark()
                    .map_or("register_broker_to_controller failed".to_string(), |s| s.to_string()),
                Some(controller_address.to_string()),
            ));
        }

        let response_header = response
            .decode_command_custom_header::<RegisterBrokerToControllerResponseHeader>()
            .map_err(|error| {
                crate::broker_error::broker_operation_source(
                    "register_broker_to_controller",
                    -1,
                    controller_address,
                    error,
                )
            })?;

        if response.body().is_none() {
            return Err(crate::broker_error::broker_operation_failed_with_address(
                "register_broker_to_controller",
                -1,
                "No body in register_broker_to_controller response".to_string(),
                Some(controller_address.to_string()),
            ));
        }
        let body = response.body().unwrap();
        let mut sync_state_set = SyncStateSet::decode(body.as_ref())?;

        Ok((response_header, sync_state_set.take_sync_state_set()))
    }

    /// Get replica info from controller
    /// Returns: (header, SyncStateSet)
    pub async fn get_replica_info(
        &self,
        controller_address: &CheetahString,
        broker_name: CheetahString,
    ) -> crate::broker_error::BrokerResult<(GetReplicaInfoResponseHeader, SyncStateSet)> {
        let request_header = GetReplicaInfoRequestHeader { broker_name };
        let request = self
            .command_factory
            .create_request_command(RequestCode::ControllerGetReplicaInfo, request_header);

        let response = self
            .remoting_client
            .invoke_request(Some(controller_address), request, 3000)
            .await;
        let response = match response {
            Ok(OutboundRequestOutcome::Response(response)) => response,
            Ok(OutboundRequestOutcome::Rejected(rejection)) => {
                return Err(broker_request_rejection_error("get_replica_info", rejection));
            }
            Ok(OutboundRequestOutcome::Contract(contract)) => return Err(broker_request_contract_error(contract)),
            Err(error) => return Err(crate::broker_error::from_shared(error.into_shared_error())),
        };

        if ResponseCode::from(response.code()) != ResponseCode::Success {
            return Err(crate::broker_error::broker_operation_failed_with_address(
                "get_replica_info",
                response.code(),
                response
                    .remark()
                    .map_or("get_replica_info failed".to_string(), |s| s.to_string()),
                Some(controller_address.to_string()),
            ));
        }

        let response_header = response
            .decode_command_custom_header::<GetReplicaInfoResponseHeader>()
            .map_err(|error| {
                crate::broker_error::broker_operation_source("get_replica_info", -1, controller_address, error)
            })?;

        if response.body().is_none() {
            return Err(crate::broker_error::broker_operation_failed_with_address(
                "get_replica_info",
                -1,
                "No body in get_replica_info response".to_string(),
                Some(controller_address.to_string()),
            ));
        }
        let body = response.body().unwrap();
        let sync_state_set = SyncStateSet::decode(body.as_ref())?;

        Ok((response_header, sync_state_set))
    }

    pub async fn send_broker_ha_info(
        &self,
        broker_addr: &CheetahString,
        master_ha_addr: &CheetahString,
        broker_init_max_offset: i64,
        master_addr: &CheetahString,
    ) -> crate::broker_error::BrokerResult<()> {
        let request_header = ExchangeHAInfoRequestHeader {
            master_ha_address: Some(master_ha_addr.clone()),
            master_flush_offset: Some(broker_init_max_offset),
            master_address: Some(master_addr.clone()),
        };
        let request = self
            .command_factory
            .create_request_command(RequestCode::ExchangeBrokerHaInfo, request_header);
        let response = self
            .remoting_client
            .invoke_request(Some(broker_addr), request, 3000)
            .await;
        let response = match response {
            Ok(OutboundRequestOutcome::Response(response)) => response,
            Ok(OutboundRequestOutcome::Rejected(rejection)) => {
                return Err(broker_request_rejection_error("send_broker_ha_info", rejection));
            }
            Ok(OutboundRequestOutcome::Contract(contract)) => return Err(broker_request_contract_error(contract)),
            Err(error) => return Err(crate::broker_error::from_shared(error.into_shared_error())),
        };
        if ResponseCode::from(response.code()) == ResponseCode::Success {
            Ok(())
        } else {
            Err(crate::broker_error::broker_operation_failed_with_address(
                "sync_broker_member_group",
                response.code(),
                response.remark().map_or("".to_string(), |s| s.to_string()),
                Some(broker_addr.to_string()),
            ))
        }
    }

    pub async fn retrieve_broker_ha_info(
        &self,
        master_broker_addr: Option<&CheetahString>,
    ) -> crate::broker_error::BrokerResult<BrokerSyncInfo> {
        let request_header = ExchangeHAInfoRequestHeader::default();
        let request = self
            .command_factory
            .create_request_command(RequestCode::ExchangeBrokerHaInfo, request_header);
        let response = self
            .remoting_client
            .invoke_request(master_broker_addr, request, 3000)
            .await;
        let response = match response {
            Ok(OutboundRequestOutcome::Response(response)) => response,
            Ok(OutboundRequestOutcome::Rejected(rejection)) => {
                return Err(broker_request_rejection_error("retrieve_broker_ha_info", rejection));
            }
            Ok(OutboundRequestOutcome::Contract(contract)) => return Err(broker_request_contract_error(contract)),
            Err(error) => return Err(crate::broker_error::from_shared(error.into_shared_error())),
        };

        if ResponseCode::from(response.code()) == ResponseCode::Success {
            let header = response.decode_command_custom_header::<ExchangeHaInfoResponseHeader>()?;
            return Ok(BrokerSyncInfo {
                master_address: header.master_address,
                master_ha_address: header.master_ha_address,
                master_flush_offset: header.master_flush_offset.unwrap_or(0),
            });
        }

        Err(crate::broker_error::broker_operation_failed_with_address(
            "retrieve_broker_ha_info",
            response.code(),
            response.remark().map_or("".to_string(), |s| s.to_string()),
            master_broker_addr.map(|s| s.to_string()),
        ))
    }

    pub fn close_channel(&self, addr_list: Vec<String>) {
        self.remoting_client.close_clients(addr_list);
    }
}

struct RegisterBrokerRequestParts {
    header: RegisterBrokerRequestHeader,
    body: Vec<u8>,
}

fn build_register_broker_request_parts(
    mut header: RegisterBrokerRequestHeader,
    topic_config_wrapper: TopicConfigAndMappingSerializeWrapper,
    filter_server_list: Vec<CheetahString>,
    compressed: bool,
) -> RegisterBrokerRequestParts {
    let request_body = RegisterBrokerBody {
        topic_config_serialize_wrapper: topic_config_wrapper.clone(),
        filter_server_list,
    };
    let body = request_body.encode(compressed);
    header.compressed = compressed;
    header.body_crc32 = crc32_utils::crc32(body.as_ref());
    RegisterBrokerRequestParts { header, body }
}

fn dns_lookup_address_by_domain(domain: &str) -> Vec<CheetahString> {
    let mut address_list = Vec::new();
    // Ensure logging is initialized

    match domain.find(':') {
        Some(index) => {
            let (domain_str, port_str) = domain.split_at(index);
            match lookup_host(domain_str) {
                Ok(addresses) => {
                    for address in addresses {
                        address_list.push(format!("{address}{port_str}").into());
                    }
                    info!(
                        "DNS lookup address by domain success, domain={}, result={:?}",
                        domain, address_list
                    );
                }
                Err(e) => {
                    error!("DNS lookup address by domain error, domain={}, error={}", domain, e);
                }
            }
        }
        None => {
            error!("Invalid domain format, missing port: {}", domain);
        }
    }

    address_list
}

fn empty_broker_member_group(cluster_name: &CheetahString, broker_name: &CheetahString) -> BrokerMemberGroup {
    BrokerMemberGroup::new(cluster_name.clone(), broker_name.clone())
}

fn broker_member_group_from_route_data(
    cluster_name: &CheetahString,
    broker_name: &CheetahString,
    topic_route_data: &TopicRouteData,
) -> BrokerMemberGroup {
    let mut broker_member_group = empty_broker_member_group(cluster_name, broker_name);
    for broker_data in &topic_route_data.broker_datas {
        if broker_data.broker_name() == broker_name && broker_data.cluster() == cluster_name.as_str() {
            broker_member_group
                .broker_addrs
                .extend(broker_data.broker_addrs().clone());
            break;
        }
    }
    broker_member_group
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;

    use rocketmq_protocol::protocol::remoting_command_defaults::RemotingCommandDefaults;
    use rocketmq_protocol::protocol::remoting_command_defaults::RemotingCommandFactory;
    use rocketmq_protocol::protocol::route::route_data_view::BrokerData;
    use rocketmq_protocol::protocol::SerializeType;

    use super::*;

    #[test]
    fn cloned_outer_api_shares_the_remoting_client() {
        let runtime = rocketmq_runtime::RuntimeOwner::new().expect("test runtime");
        let api = BrokerOuterAPI::new(
            Arc::new(TransportClientConfig::default()),
            runtime.root_context().component("broker-outer-api-test"),
            TransportTelemetry::noop(),
        );
        let cloned = api.clone();

        assert!(Arc::ptr_eq(&api.remoting_client, &cloned.remoting_client));
        assert!(Arc::ptr_eq(&api.client_metadata, &cloned.client_metadata));
        assert_eq!(api.command_factory, cloned.command_factory);
    }

    #[test]
    fn control_plane_requests_keep_independent_owner_defaults() {
        let runtime = rocketmq_runtime::RuntimeOwner::new().expect("test runtime");
        let json_api = BrokerOuterAPI::new_with_remoting_command_factory(
            Arc::new(TransportClientConfig::default()),
            runtime.root_context().component("broker-outer-api-json-factory-test"),
            TransportTelemetry::noop(),
            RemotingCommandFactory::new(RemotingCommandDefaults::new(640, SerializeType::JSON)),
        );
        let binary_api = BrokerOuterAPI::new_with_remoting_command_factory(
            Arc::new(TransportClientConfig::default()),
            runtime.root_context().component("broker-outer-api-binary-factory-test"),
            TransportTelemetry::noop(),
            RemotingCommandFactory::new(RemotingCommandDefaults::new(641, SerializeType::ROCKETMQ)),
        );
        let topic_config = TopicConfig {
            topic_name: Some(CheetahString::from_static_str("factory-topic")),
            ..Default::default()
        };

        let json_request = json_api.create_request(CheetahString::from_static_str("broker-a"), &topic_config);
        let binary_request = binary_api.create_request(CheetahString::from_static_str("broker-a"), &topic_config);

        assert_eq!(json_request.version(), 640);
        assert_eq!(json_request.serialize_type(), SerializeType::JSON);
        assert_eq!(binary_request.version(), 641);
        assert_eq!(binary_request.serialize_type(), SerializeType::ROCKETMQ);
    }

    #[test]
    fn broker_registration_api_does_not_accept_runtime_ownership() {
        let source = include_str!("broker_outer_api.rs");
        let signature_start = source
            .find("pub async fn register_broker_all(")
            .expect("register_broker_all signature should exist");
        let signature_end = source[signature_start..]
            .find("    ) -> Vec<RegisterBrokerResult>")
            .map(|offset| signature_start + offset)
            .expect("register_broker_all signature should have the expected return type");
        let signature = &source[signature_start..signature_end];

        assert!(!signature.contains("BrokerRuntimeState"));
        assert!(!signature.contains("ArcMut"));
        assert!(!signature.contains("BrokerReplicationStore"));
    }

    #[test]
    fn dns_lookup_address_by_domain_returns_correct_addresses() {
        let domain = "localhost:8080";
        let addresses = dns_lookup_address_by_domain(domain);
        assert!(addresses.contains(&"127.0.0.1:8080".into()));
    }

    #[test]
    fn dns_lookup_address_by_domain_handles_invalid_domain() {
        let domain = "invalid_domain";
        let addresses = dns_lookup_address_by_domain(domain);
        assert!(addresses.is_empty());
    }

    #[test]
    fn dns_lookup_address_by_domain_handles_domain_without_port() {
        let domain = "localhost";
        let addresses = dns_lookup_address_by_domain(domain);
        assert!(addresses.is_empty());
    }

    #[test]
    fn broker_member_group_from_route_data_extracts_matching_broker() {
        let cluster_name = CheetahString::from("cluster-a");
        let broker_name = CheetahString::from("broker-a");
        let mut broker_addrs = HashMap::new();
        broker_addrs.insert(0, CheetahString::from("127.0.0.1:10911"));
        let topic_route_data = TopicRouteData {
            broker_datas: vec![BrokerData::new(
                cluster_name.clone(),
                broker_name.clone(),
                broker_addrs.clone(),
                None,
            )],
            ..Default::default()
        };

        let broker_member_group = broker_member_group_from_route_data(&cluster_name, &broker_name, &topic_route_data);

        assert_eq!(broker_member_group.cluster, cluster_name);
        assert_eq!(broker_member_group.broker_name, broker_name);
        assert_eq!(broker_member_group.broker_addrs, broker_addrs);
    }

    #[test]
    fn broker_member_group_from_route_data_ignores_non_matching_brokers() {
        let topic_route_data = TopicRouteData {
            broker_datas: vec![BrokerData::new(
                CheetahString::from("other-cluster"),
                CheetahString::from("other-broker"),
                HashMap::from([(1, CheetahString::from("127.0.0.1:10912"))]),
                None,
            )],
            ..Default::default()
        };

        let broker_member_group = broker_member_group_from_route_data(
            &CheetahString::from("cluster-a"),
            &CheetahString::from("broker-a"),
            &topic_route_data,
        );

        assert!(broker_member_group.broker_addrs.is_empty());
    }

    #[test]
    fn register_broker_request_parts_preserves_compression_header_and_body() {
        for compressed in [false, true] {
            let parts = build_register_broker_request_parts(
                register_broker_header_fixture(),
                topic_config_wrapper_fixture(),
                vec![CheetahString::from_static_str("filter-server-a")],
                compressed,
            );

            assert_eq!(parts.header.compressed, compressed);
            assert_eq!(parts.header.body_crc32, crc32_utils::crc32(parts.body.as_ref()));

            let decoded = RegisterBrokerBody::decode(
                &Bytes::from(parts.body),
                parts.header.compressed,
                rocketmq_model::common::mq_version::RocketMqVersion::V5_0_0,
            )
            .expect("register broker body should decode with matching compression header");

            assert!(decoded
                .topic_config_serialize_wrapper
                .topic_config_serialize_wrapper
                .topic_config_table
                .contains_key(&CheetahString::from_static_str("TestTopic")));
            assert_eq!(
                decoded.filter_server_list,
                vec![CheetahString::from_static_str("filter-server-a")]
            );
        }
    }

    fn register_broker_header_fixture() -> RegisterBrokerRequestHeader {
        RegisterBrokerRequestHeader {
            broker_name: CheetahString::from_static_str("broker-a"),
            broker_addr: CheetahString::from_static_str("127.0.0.1:10911"),
            cluster_name: CheetahString::from_static_str("cluster-a"),
            ha_server_addr: CheetahString::from_static_str("127.0.0.1:10912"),
            broker_id: 0,
            heartbeat_timeout_millis: Some(120_000),
            enable_acting_master: Some(false),
            compressed: false,
            body_crc32: 0,
        }
    }

    fn topic_config_wrapper_fixture() -> TopicConfigAndMappingSerializeWrapper {
        let mut wrapper = TopicConfigAndMappingSerializeWrapper::default();
        wrapper.topic_config_serialize_wrapper.topic_config_table.insert(
            CheetahString::from_static_str("TestTopic"),
            TopicConfig::with_queues("TestTopic", 4, 4),
        );
        wrapper
    }
}
