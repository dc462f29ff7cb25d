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

use cheetah_string::CheetahString;
use rocketmq_model::common::attribute::attribute_parser::AttributeParser;
use rocketmq_model::common::attribute::topic_message_type::TopicMessageType;
use rocketmq_model::common::config::TopicConfig;
use rocketmq_model::common::key_builder::KeyBuilder;
use rocketmq_model::common::message::message_queue::MessageQueue;
use rocketmq_model::common::topic::TopicValidator;
use rocketmq_model::common::TopicFilterType;
use rocketmq_protocol::code::request_code::RequestCode;
use rocketmq_protocol::code::response_code::ResponseCode;
use rocketmq_protocol::protocol::admin::topic_offset::TopicOffset;
use rocketmq_protocol::protocol::admin::topic_stats_table::TopicStatsTable;
use rocketmq_protocol::protocol::body::create_topic_list_request_body::CreateTopicListRequestBody;
use rocketmq_protocol::protocol::body::delete_topic_list_request_body::DeleteTopicListRequestBody;
use rocketmq_protocol::protocol::body::group_list::GroupList;
use rocketmq_protocol::protocol::body::supervised_mutation::ExpectedState;
use rocketmq_protocol::protocol::body::supervised_mutation::MutationPersistenceState;
use rocketmq_protocol::protocol::body::supervised_mutation::StateCasResultBody;
use rocketmq_protocol::protocol::body::supervised_mutation::SupervisedTopicConfigCasRequestBody;
use rocketmq_protocol::protocol::body::topic::topic_list::TopicList;
use rocketmq_protocol::protocol::body::topic_info_wrapper::topic_config_wrapper::TopicConfigAndMappingSerializeWrapper;
use rocketmq_protocol::protocol::body::topic_info_wrapper::topic_config_wrapper::TopicConfigSerializeWrapper;
use rocketmq_protocol::protocol::header::create_topic_request_header::CreateTopicRequestHeader;
use rocketmq_protocol::protocol::header::delete_topic_request_header::DeleteTopicRequestHeader;
use rocketmq_protocol::protocol::header::get_topic_config_request_header::GetTopicConfigRequestHeader;
use rocketmq_protocol::protocol::header::get_topic_stats_request_header::GetTopicStatsRequestHeader;
use rocketmq_protocol::protocol::header::query_topic_consume_by_who_request_header::QueryTopicConsumeByWhoRequestHeader;
use rocketmq_protocol::protocol::header::query_topics_by_consumer_request_header::QueryTopicsByConsumerRequestHeader;
use rocketmq_protocol::protocol::header::update_topic_config_cas_request_header::UpdateTopicConfigCasRequestHeader;
use rocketmq_protocol::protocol::header::update_topic_config_cas_response_header::UpdateTopicConfigCasResponseHeader;
use rocketmq_protocol::protocol::remoting_command::RemotingCommand;
use rocketmq_protocol::protocol::static_topic::topic_config_and_queue_mapping::TopicConfigAndQueueMapping;
use rocketmq_protocol::protocol::static_topic::topic_queue_mapping_detail::TopicQueueMappingDetail;
use rocketmq_protocol::protocol::RemotingDeserializable;
use rocketmq_protocol::protocol::RemotingSerializable;
use rocketmq_store::BrokerAdminStore;
use std::collections::HashMap;
use std::collections::HashSet;
use tracing::info;

use crate::broker::broker_admin_runtime::BrokerAdminRuntime;
use crate::broker::metadata_reconciliation::MetadataWriteConclusion;
use crate::topic::manager::topic_config_coordinator::outcome_result;

use super::AdminRequestMetadata;
use crate::failover::escape_bridge::MessageStoreUnavailable;
use crate::processor::admin_broker_processor::broker_config_request_handler::BrokerConfigRequestHandler;
use crate::topic::manager::topic_config_manager::TopicConfigCasError;
use crate::topic::manager::topic_config_manager::TopicConfigCasOutcome;

fn decode_topic_queue_mapping_detail(body: &[u8]) -> Result<TopicQueueMappingDetail, String> {
    match serde_json::from_slice::<TopicQueueMappingDetail>(body) {
        Ok(value) => Ok(value),
        Err(error) => {
            let text = std::str::from_utf8(body).map_err(|utf8_error| {
                format!("decode TopicQueueMappingDetail failed: {error}; body is not utf8: {utf8_error}")
            })?;
            let normalized = quote_unquoted_numeric_json_keys(text);
            serde_json::from_str::<TopicQueueMappingDetail>(&normalized).map_err(|normalized_error| {
                format!("{error}; normalized Java numeric map keys failed: {normalized_error}")
            })
        }
    }
}

fn quote_unquoted_numeric_json_keys(input: &str) -> String {
    let bytes = input.as_bytes();
    let mut output = String::with_capacity(input.len());
    let mut index = 0;

    while index < bytes.len() {
        let byte = bytes[index];
        output.push(byte as char);
        index += 1;

        if byte != b'{' && byte != b',' {
            continue;
        }

        let whitespace_start = index;
        while index < bytes.len() && bytes[index].is_ascii_whitespace() {
            index += 1;
        }

        let key_start = index;
        if index < bytes.len() && bytes[index] == b'-' {
            index += 1;
        }
        let digit_start = index;
        while index < bytes.len() && bytes[index].is_ascii_digit() {
            index += 1;
        }
        let key_end = index;

        while index < bytes.len() && bytes[index].is_ascii_whitespace() {
            index += 1;
        }

        if key_end > digit_start && index < bytes.len() && bytes[index] == b':' {
            output.push_str(&input[whitespace_start..key_start]);
            output.push('"');
            output.push_str(&input[key_start..key_end]);
            output.push('"');
            output.push_str(&input[key_end..index]);
            output.push(':');
            index += 1;
        } else {
            output.push_str(&input[whitespace_start..index]);
        }
    }

    output
}

#[derive(Clone, Copy, Default)]
pub(super) struct TopicRequestHandler;

impl TopicRequestHandler {
    pub fn new() -> Self {
        Self
    }

    pub async fn update_and_create_topic<MS: BrokerAdminStore>(
        &self,
        broker_config_request_handler: &BrokerConfigRequestHandler<MS>,
        metadata: &AdminRequestMetadata,
        _request_code: RequestCode,
        request: &mut RemotingCommand,
    ) -> crate::broker_error::BrokerResult<Option<RemotingCommand>> {
        let broker_runtime_inner = broker_config_request_handler.broker_runtime_inner();
        let response = RemotingCommand::create_java_default_error_response_command();
        let request_header =
            request.decode_required_header::<CreateTopicRequestHeader>("decode create-topic request header")?;
        info!(
            "Broker receive request to update or create topic={}, caller address={}",
            request_header.topic, metadata
        );
        let topic = request_header.topic.clone();
        let result = TopicValidator::validate_topic(topic.as_str());
        if !result.valid() {
            return Ok(Some(
                response
                    .set_code(ResponseCode::SystemError)
                    .set_remark(result.remark().clone()),
            ));
        }
        if broker_runtime_inner
            .broker_config()
            .validate_system_topic_when_update_topic
            && TopicValidator::is_system_topic(topic.as_str())
        {
            return Ok(Some(response.set_code(ResponseCode::SystemError).set_remark(format!(
                "The topic[{}] is conflict with system topic.",
                topic.as_str()
            ))));
        }

        let attributes = match AttributeParser::parse_to_map(
            request_header
                .attributes
                .clone()
                .unwrap_or(CheetahString::empty())
                .as_str(),
        ) {
            Ok(value) => value.into_iter().map(|(k, v)| (k.into(), v.into())).collect(),
            Err(err) => {
                return Ok(Some(response.set_code(ResponseCode::SystemError).set_remark(err)));
            }
        };

        let topic_config = TopicConfig {
            topic_name: Some(topic.clone()),
            read_queue_nums: request_header.read_queue_nums as u32,
            write_queue_nums: request_header.write_queue_nums as u32,
            perm: request_header.perm as u32,
            topic_filter_type: TopicFilterType::from(request_header.topic_filter_type.as_str()),
            topic_sys_flag: if let Some(value) = request_header.topic_sys_flag {
                value as u32
            } else {
                0
            },
            order: request_header.order,
            attributes,
        };
        if topic_config.get_topic_message_type() == TopicMessageType::Mixed
            && !broker_runtime_inner.broker_config().enable_mixed_message_type
        {
            return Ok(Some(
                response
                    .set_code(ResponseCode::SystemError)
                    .set_remark("MIXED message type is not supported."),
            ));
        }

        let topic_config_origin = broker_runtime_inner
            .topic_config_manager()
            .get_topic_config(topic.as_str());
        if topic_config_origin.as_deref() == Some(&topic_config) {
            info!(
                "Broker receive request to update or create topic={}, but topicConfig has  no changes , so \
                 idempotent, caller address={}",
                topic.as_str(),
                metadata,
            );
            return Ok(Some(RemotingCommand::create_success_response_command()));
        }
        let update = broker_runtime_inner
            .topic_config_manager()
            .update_topic_config(topic_config, broker_runtime_inner.topic_config_state_machine_version());

        broker_config_request_handler
            .persist_and_register_topic_updates(vec![update.topic_config], update.data_version)
            .await
            .and_then(outcome_result)?;

        Ok(Some(RemotingCommand::create_success_response_command()))
    }

    pub async fn update_topic_config_cas<MS: BrokerAdminStore>(
        &self,
        broker_config_request_handler: &BrokerConfigRequestHandler<MS>,
        metadata: &AdminRequestMetadata,
        _request_code: RequestCode,
        request: &mut RemotingCommand,
    ) -> crate::broker_error::BrokerResult<Option<RemotingCommand>> {
        let broker_runtime_inner = broker_config_request_handler.broker_runtime_inner();
        let response = RemotingCommand::create_java_default_error_response_command().set_opaque(request.opaque());
        let request_header = match request.decode_command_custom_header::<UpdateTopicConfigCasRequestHeader>() {
            Ok(header) => header,
            Err(_) => {
                return Ok(Some(response.set_code(ResponseCode::InvalidParameter).set_remark(
                    "topic, expectedVersion, and a valid allowlisted patch are required",
                )));
            }
        };
        info!(
            "Broker receive version-checked Topic patch for topic={}, caller address={}",
            request_header.topic, metadata
        );

        let topic = request_header.topic;
        let validation = TopicValidator::validate_topic(topic.as_str());
        if !validation.valid() {
            return Ok(Some(
                response
                    .set_code(ResponseCode::InvalidParameter)
                    .set_remark(validation.remark().clone()),
            ));
        }
        if broker_runtime_inner
            .broker_config()
            .validate_system_topic_when_update_topic
            && TopicValidator::is_system_topic(topic.as_str())
        {
            return Ok(Some(response.set_code(ResponseCode::InvalidParameter).set_remark(
                "system Topic configuration is not eligible for supervised patching",
            )));
        }
        if broker_runtime_inner
            .topic_queue_mapping_manager()
            .get_topic_queue_mapping(topic.as_str())
            .is_some()
        {
            return Ok(Some(response.set_code(ResponseCode::InvalidParameter).set_remark(
                "static Topic configuration is not eligible for supervised patching",
            )));
        }
        if request_header.read_queue_nums.is_none()
            && request_header.write_queue_nums.is_none()
            && request_header.order.is_none()
        {
            return Ok(Some(response.set_code(ResponseCode::InvalidParameter).set_remark(
                "Topic configuration patch must contain at least one allowlisted field",
            )));
        }

        let read_queue_nums = match request_header.read_queue_nums {
            Some(value) if (1..=128).contains(&value) => Some(value as u32),
            Some(_) => {
                return Ok(Some(
                    response
                        .set_code(ResponseCode::InvalidParameter)
                        .set_remark("readQueueNums must be between 1 and 128"),
                ));
            }
            None => None,
        };
        let write_queue_nums = match request_header.write_queue_nums {
            Some(value) if (1..=128).contains(&value) => Some(value as u32),
            Some(_) => {
                return Ok(Some(
                    response
                        .set_code(ResponseCode::InvalidParameter)
                        .set_remark("writeQueueNums must be between 1 and 128"),
                ));
            }
            None => None,
        };

        let update = match broker_runtime_inner
            .topic_config_manager()
            .update_topic_config_if_version(
                &topic,
                request_header.expected_version,
                read_queue_nums,
                write_queue_nums,
                request_header.order,
                broker_runtime_inner.topic_config_state_machine_version(),
            ) {
            Ok(TopicConfigCasOutcome::Applied(update)) => update,
            Ok(TopicConfigCasOutcome::TopicNotFound) => {
                return Ok(Some(
                    response
                        .set_code(ResponseCode::TopicNotExist)
                        .set_remark("Topic configuration does not exist on this Broker"),
                ));
            }
            Ok(TopicConfigCasOutcome::VersionConflict {
                expected_version,
                actual_version,
            }) => {
                return Ok(Some(
                    response
                        .set_command_custom_header(UpdateTopicConfigCasResponseHeader {
                            topic_version: actual_version,
                        })
                        .set_code(ResponseCode::InvalidParameter)
                        .set_remark(format!(
                            "Topic configuration version conflict: expected={expected_version}, \
                             actual={actual_version}"
                        )),
                ));
            }
            Ok(TopicConfigCasOutcome::NoChange) => {
                return Ok(Some(
                    response
                        .set_code(ResponseCode::InvalidParameter)
                        .set_remark("Topic configuration patch has no effect"),
                ));
            }
            Err(TopicConfigCasError::VersionUnavailable) => {
                return Ok(Some(
                    response
                        .set_code(ResponseCode::SystemError)
                        .set_remark("Topic configuration version is unavailable"),
                ));
            }
            Err(TopicConfigCasError::VersionExhausted) => {
                return Ok(Some(
                    response
                        .set_code(ResponseCode::SystemError)
                        .set_remark("Topic configuration version is exhausted"),
                ));
            }
            Ok(TopicConfigCasOutcome::StateConflict { .. }) | Err(TopicConfigCasError::PersistenceDirty { .. }) => {
                return Ok(Some(
                    response
                        .set_code(ResponseCode::SystemError)
                        .set_remark("Topic configuration state is unavailable"),
                ));
            }
        };
        let topic_version = match u64::try_from(update.data_version.counter()) {
            Ok(version) => version,
            Err(_) => {
                broker_config_request_handler
                    .persist_and_register_topic_updates(vec![update.topic_config], update.data_version)
                    .await?;
                return Ok(Some(
                    response
                        .set_code(ResponseCode::SystemError)
                        .set_remark("Topic configuration version is unavailable"),
                ));
            }
        };
        broker_config_request_handler
            .persist_and_register_topic_updates(vec![update.topic_config], update.data_version)
            .await
            .and_then(outcome_result)?;

        Ok(Some(
            RemotingCommand::create_success_response_command_with_header(UpdateTopicConfigCasResponseHeader {
                topic_version,
            })
            .set_opaque(request.opaque())
            .set_remark(format!("Topic configuration patch committed, version={topic_version}")),
        ))
    }

    pub async fn update_topic_config_state_cas<MS: BrokerAdminStore>(
        &self,
        broker_config_request_handler: &BrokerConfigRequestHandler<MS>,
        _metadata: &AdminRequestMetadata,
        request: &mut RemotingCommand,
    ) -> crate::broker_error::BrokerResult<Option<RemotingCommand>> {
        let response = RemotingCommand::create_java_default_error_response_command().set_opaque(request.opaque());
        let header = match request.decode_command_custom_header::<GetTopicConfigRequestHeader>() {
            Ok(header) => header,
            Err(_) => {
                return Ok(Some(
                    response
                        .set_code(ResponseCode::InvalidParameter)
                        .set_remark("Topic state replacement requires a valid Topic"),
                ));
            }
        };
        let Some(body) = request.body() else {
            return Ok(Some(
                response
                    .set_code(ResponseCode::InvalidParameter)
                    .set_remark("Topic state replacement body is required"),
            ));
        };
        let body = match serde_json::from_slice::<SupervisedTopicConfigCasRequestBody>(body.as_ref()) {
            Ok(body) => body,
            Err(_) => {
                return Ok(Some(
                    response
                        .set_code(ResponseCode::InvalidParameter)
                        .set_remark("Topic state replacement body is invalid"),
                ));
            }
        };
        let runtime = broker_config_request_handler.broker_runtime_inner();
        let validation = TopicValidator::validate_topic(header.topic.as_str());
        if !validation.valid()
            || TopicValidator::is_system_topic(header.topic.as_str())
            || runtime
                .topic_queue_mapping_manager()
                .get_topic_queue_mapping(header.topic.as_str())
                .is_some()
            || !(1..=128).contains(&body.replacement.read_queue_nums)
            || !(1..=128).contains(&body.replacement.write_queue_nums)
            || !(1..=7).contains(&body.replacement.perm)
            || body.replacement.perm & 0b110 == 0
        {
            return Ok(Some(
                response
                    .set_code(ResponseCode::InvalidParameter)
                    .set_remark("Topic state replacement is not eligible"),
            ));
        }
        let message_type = match body.replacement.message_type.trim().to_ascii_uppercase().as_str() {
            "NORMAL" | "FIFO" | "DELAY" | "TRANSACTION" | "UNSPECIFIED" => {
                body.replacement.message_type.trim().to_ascii_uppercase()
            }
            _ => {
                return Ok(Some(
                    response
                        .set_code(ResponseCode::InvalidParameter)
                        .set_remark("Topic message type is invalid"),
                ));
            }
        };
        let mut attributes = HashMap::new();
        attributes.insert(
            CheetahString::from_static_str("+message.type"),
            CheetahString::from(message_type),
        );
        let replacement = TopicConfig {
            topic_name: Some(header.topic.clone()),
            read_queue_nums: body.replacement.read_queue_nums,
            write_queue_nums: body.replacement.write_queue_nums,
            perm: body.replacement.perm,
            order: body.replacement.order,
            attributes,
            ..TopicConfig::default()
        };
        let update = match runtime.topic_config_manager().replace_topic_config_if_state(
            &header.topic,
            body.expected_state,
            replacement,
            runtime.topic_config_state_machine_version(),
        ) {
            Ok(TopicConfigCasOutcome::Applied(update)) => update,
            Ok(TopicConfigCasOutcome::StateConflict { actual_version }) => {
                let state = actual_version.map_or(ExpectedState::Absent, |version| ExpectedState::Present { version });
                return Ok(Some(
                    response.set_code(ResponseCode::InvalidParameter).set_body(
                        StateCasResultBody {
                            applied: false,
                            changed: false,
                            state,
                            persistence: MutationPersistenceState::NotRequired,
                        }
                        .encode()?,
                    ),
                ));
            }
            Err(TopicConfigCasError::PersistenceDirty { actual_version }) => {
                return Ok(Some(
                    response.set_code(ResponseCode::SystemError).set_body(
                        StateCasResultBody {
                            applied: false,
                            changed: false,
                            state: ExpectedState::Present {
                                version: actual_version,
                            },
                            persistence: MutationPersistenceState::Failed,
                        }
                        .encode()?,
                    ),
                ));
            }
            Ok(TopicConfigCasOutcome::NoChange) => {
                return Ok(Some(
                    response
                        .set_code(ResponseCode::InvalidParameter)
                        .set_remark("Topic state replacement has no effect"),
                ));
            }
            Ok(TopicConfigCasOutcome::TopicNotFound | TopicConfigCasOutcome::VersionConflict { .. })
            | Err(TopicConfigCasError::VersionUnavailable | TopicConfigCasError::VersionExhausted) => {
                return Ok(Some(
                    response
                        .set_code(ResponseCode::SystemError)
                        .set_remark("Topic state replacement is unavailable"),
                ));
            }
        };
        let version = u64::try_from(update.data_version.counter())
            .map_err(|_| crate::broker_error::invariant_violated("Topic state version must remain non-negative"))?;
        if !update.changed {
            return Ok(Some(
                RemotingCommand::create_success_response_command()
                    .set_opaque(request.opaque())
                    .set_body(
                        StateCasResultBody {
                            applied: true,
                            changed: false,
                            state: ExpectedState::Present { version },
                            persistence: MutationPersistenceState::NotRequired,
                        }
                        .encode()?,
                    ),
            ));
        }
        let outcome = broker_config_request_handler
            .persist_and_register_topic_updates(vec![update.topic_config], update.data_version)
            .await;
        let (conclusion, succeeded) = match outcome {
            Ok(outcome) => {
                let succeeded = outcome.is_ok();
                (outcome.conclusion, succeeded)
            }
            // A command that was never admitted, or that failed before the
            // target was replaced, is a definite pre-commit failure.
            Err(error) => (MetadataWriteConclusion::FailedBeforeCommit(error), false),
        };
        runtime
            .topic_config_manager()
            .complete_supervised_persistence(&header.topic, version, &conclusion);
        let (code, persistence) = if !conclusion.is_durable() {
            // An unconfirmed replacement is reported as unconfirmed rather
            // than as a definite failure: the target file may already hold
            // the change. The per-topic marker still keeps the next compare
            // and set from building on a state whose durability is unknown.
            (
                ResponseCode::SystemError,
                crate::broker::metadata_reconciliation::persistence_state(&conclusion),
            )
        } else if !succeeded {
            // The write is durable, so a registration callback failure is
            // reported as itself rather than as a persistence failure.
            (ResponseCode::SystemError, MutationPersistenceState::Persisted)
        } else {
            (ResponseCode::Success, MutationPersistenceState::Persisted)
        };
        Ok(Some(
            RemotingCommand::create_success_response_command()
                .set_code(code)
                .set_opaque(request.opaque())
                .set_body(
                    StateCasResultBody {
                        applied: true,
                        changed: true,
                        state: ExpectedState::Present { version },
                        persistence,
                    }
                    .encode()?,
                ),
        ))
    }

    pub async fn update_and_create_static_topic<MS: BrokerAdminStore>(
        &self,
        broker_config_request_handler: &BrokerConfigRequestHandler<MS>,
        metadata: &AdminRequestMetadata,
        _request_code: RequestCode,
        request: &mut RemotingCommand,
    ) -> crate::broker_error::BrokerResult<Option<RemotingCommand>> {
        let broker_runtime_inner = broker_config_request_handler.broker_runtime_inner();
        let response = RemotingCommand::create_java_default_error_response_command();
        let request_header = request.decode_command_custom_header::<CreateTopicRequestHeader>()?;
        info!(
            "Broker receive request to update or create static topic={}, caller address={}",
            request_header.topic, metadata
        );

        let Some(body) = request.body() else {
            return Ok(Some(
                response
                    .set_code(ResponseCode::SystemError)
                    .set_remark("topic queue mapping detail is missing"),
            ));
        };
        let mut topic_queue_mapping_detail = match decode_topic_queue_mapping_detail(body.as_ref()) {
            Ok(value) => value,
            Err(error) => {
                return Ok(Some(
                    response
                        .set_code(ResponseCode::SystemError)
                        .set_remark(format!("decode TopicQueueMappingDetail failed: {error}")),
                ));
            }
        };

        let topic = request_header.topic.clone();
        let result = TopicValidator::validate_topic(topic.as_str());
        if !result.valid() {
            return Ok(Some(
                response
                    .set_code(ResponseCode::InvalidParameter)
                    .set_remark(result.remark().clone()),
            ));
        }
        if broker_runtime_inner
            .broker_config()
            .validate_system_topic_when_update_topic
            && TopicValidator::is_system_topic(topic.as_str())
        {
            return Ok(Some(response.set_code(ResponseCode::InvalidParameter).set_remark(
                format!("The topic[{}] is conflict with system topic.", topic.as_str()),
            )));
        }

        let attributes = match AttributeParser::parse_to_map(
            request_header
                .attributes
                .clone()
                .unwrap_or(CheetahString::empty())
                .as_str(),
        ) {
            Ok(value) => value.into_iter().map(|(k, v)| (k.into(), v.into())).collect(),
            Err(err) => {
                return Ok(Some(response.set_code(ResponseCode::SystemError).set_remark(err)));
            }
        };

        let topic_config = TopicConfig {
            topic_name: Some(topic.clone()),
            read_queue_nums: request_header.read_queue_nums as u32,
            write_queue_nums: request_header.write_queue_nums as u32,
            perm: request_header.perm as u32,
            topic_filter_type: TopicFilterType::from(request_header.topic_filter_type.as_str()),
            topic_sys_flag: request_header.topic_sys_flag.unwrap_or_default() as u32,
            order: request_header.order,
            attributes,
        };
        let update = broker_runtime_inner
            .topic_config_manager()
            .update_topic_config(topic_config, broker_runtime_inner.topic_config_state_machine_version());

        topic_queue_mapping_detail.topic_queue_mapping_info.topic = Some(topic.clone());
        if topic_queue_mapping_detail.topic_queue_mapping_info.total_queues <= 0 {
            topic_queue_mapping_detail.topic_queue_mapping_info.total_queues = request_header.write_queue_nums;
        }
        if topic_queue_mapping_detail.topic_queue_mapping_info.bname.is_none() {
            topic_queue_mapping_detail.topic_queue_mapping_info.bname =
                Some(broker_runtime_inner.broker_config().broker_name().clone());
        }
        broker_runtime_inner
            .topic_queue_mapping_manager()
            .update_topic_queue_mapping(topic_queue_mapping_detail);

        broker_config_request_handler
            .persist_and_register_topic_updates(vec![update.topic_config], update.data_version)
            .await
            .and_then(outcome_result)?;

        Ok(Some(RemotingCommand::create_success_response_command()))
    }

    pub async fn update_and_create_topic_list<MS: BrokerAdminStore>(
        &self,
        broker_config_request_handler: &BrokerConfigRequestHandler<MS>,
        metadata: &AdminRequestMetadata,
        _request_code: RequestCode,
        request: &mut RemotingCommand,
    ) -> crate::broker_error::BrokerResult<Option<RemotingCommand>> {
        let broker_runtime_inner = broker_config_request_handler.broker_runtime_inner();
        let request_body = CreateTopicListRequestBody::decode(request.body().as_ref().unwrap().as_ref()).unwrap();
        let mut topic_names = String::new();
        for topic_config in request_body.topic_config_list.iter() {
            topic_names.push_str(topic_config.topic_name.as_ref().unwrap().as_str());
            topic_names.push(';');
        }
        info!(
            "AdminBrokerProcessor#updateAndCreateTopicList: topicNames: {}, called by {}",
            topic_names, metadata
        );
        let response = RemotingCommand::create_java_default_error_response_command();
        for topic_config in request_body.topic_config_list.iter() {
            let topic = topic_config.topic_name.as_ref().unwrap().as_str();
            let result = TopicValidator::validate_topic(topic);
            if !result.valid() {
                return Ok(Some(
                    response
                        .set_code(ResponseCode::SystemError)
                        .set_remark(result.remark().clone()),
                ));
            }
            if broker_runtime_inner
                .broker_config()
                .validate_system_topic_when_update_topic
                && TopicValidator::is_system_topic(topic)
            {
                return Ok(Some(
                    response
                        .set_code(ResponseCode::SystemError)
                        .set_remark(format!("The topic[{topic}] is conflict with system topic.",)),
                ));
            }
            if topic_config.get_topic_message_type() == TopicMessageType::Mixed
                && !broker_runtime_inner.broker_config().enable_mixed_message_type
            {
                return Ok(Some(
                    response
                        .set_code(ResponseCode::SystemError)
                        .set_remark("MIXED message type is not supported.".to_string()),
                ));
            }
            let topic_config_origin = broker_runtime_inner.topic_config_manager().get_topic_config(topic);
            if topic_config_origin.is_some() && topic_config.clone() == *topic_config_origin.unwrap() {
                info!(
                    "Broker receive request to update or create topic={}, but topicConfig has  no changes , so \
                     idempotent, caller address={}",
                    topic, metadata,
                );
                return Ok(Some(RemotingCommand::create_success_response_command()));
            }
        }

        let mut topic_config_list = request_body.topic_config_list;
        let (topic_config_list, data_version) = broker_runtime_inner.topic_config_manager().update_topic_config_list(
            topic_config_list.as_mut_slice(),
            broker_runtime_inner.topic_config_state_machine_version(),
        );
        broker_config_request_handler
            .persist_and_register_topic_updates(topic_config_list, data_version)
            .await?;
        Ok(Some(RemotingCommand::create_success_response_command()))
    }

    pub async fn delete_topic<MS: BrokerAdminStore>(
        &self,
        broker_runtime_inner: &BrokerAdminRuntime<MS>,
        metadata: &AdminRequestMetadata,
        _request_code: RequestCode,
        request: &mut RemotingCommand,
    ) -> crate::broker_error::BrokerResult<Option<RemotingCommand>> {
        let response = RemotingCommand::create_java_default_error_response_command();
        let request_header =
            request.decode_required_header::<DeleteTopicRequestHeader>("decode delete-topic request header")?;
        let topic = &request_header.topic;
        info!(
            "AdminBrokerProcessor#deleteTopic: broker receive request to delete topic={}, caller={}",
            topic, metadata
        );
        if topic.is_empty() {
            return Ok(Some(
                response
                    .set_code(ResponseCode::SystemError)
                    .set_remark("he specified topic is blank."),
            ));
        }
        if broker_runtime_inner
            .broker_config()
            .validate_system_topic_when_update_topic
            && TopicValidator::is_system_topic(topic)
        {
            return Ok(Some(
                response
                    .set_code(ResponseCode::SystemError)
                    .set_remark(format!("The topic[{topic}] is conflict with system topic.",)),
            ));
        }
        let groups = broker_runtime_inner
            .consumer_offset_manager()
            .which_group_by_topic(topic);
        for group in groups.iter() {
            let pop_retry_topic_v2 =
                CheetahString::from_string(KeyBuilder::build_pop_retry_topic_v2(topic, group.as_str()));
            if broker_runtime_inner
                .topic_config_manager()
                .select_topic_config(pop_retry_topic_v2.as_ref())
                .is_some()
                && self
                    .delete_topic_in_broker(broker_runtime_inner, pop_retry_topic_v2.as_ref())
                    .is_err()
            {
                return Ok(Some(
                    response
                        .set_code(ResponseCode::SystemError)
                        .set_remark("message store is unavailable"),
                ));
            }
            let pop_retry_topic_v1 =
                CheetahString::from_string(KeyBuilder::build_pop_retry_topic_v1(topic, group.as_str()));
            if broker_runtime_inner
                .topic_config_manager()
                .select_topic_config(pop_retry_topic_v1.as_ref())
                .is_some()
                && self
                    .delete_topic_in_broker(broker_runtime_inner, pop_retry_topic_v1.as_ref())
                    .is_err()
            {
                return Ok(Some(
                    response
                        .set_code(ResponseCode::SystemError)
                        .set_remark("message store is unavailable"),
                ));
            }
        }
        if self.delete_topic_in_broker(broker_runtime_inner, topic).is_err() {
            return Ok(Some(
                response
                    .set_code(ResponseCode::SystemError)
                    .set_remark("message store is unavailable"),
            ));
        }
        broker_runtime_inner
            .topic_config_coordinator()
            .persist_and_wait()
            .await?;
        Ok(Some(RemotingCommand::create_success_response_command()))
    }

    pub async fn delete_topic_list<MS: BrokerAdminStore>(
        &self,
        broker_runtime_inner: &BrokerAdminRuntime<MS>,
        metadata: &AdminRequestMetadata,
        _request_code: RequestCode,
        request: &mut RemotingCommand,
    ) -> crate::broker_error::BrokerResult<Option<RemotingCommand>> {
        let response = RemotingCommand::create_java_default_error_response_command();
        let Some(encoded) = request.body() else {
            return Ok(Some(
                response
                    .set_code(ResponseCode::InvalidParameter)
                    .set_remark("The specified topic list is blank."),
            ));
        };
        let request_body = match DeleteTopicListRequestBody::decode(encoded.as_ref()) {
            Ok(body) => body,
            Err(_) => {
                return Ok(Some(
                    response
                        .set_code(ResponseCode::InvalidParameter)
                        .set_remark("The specified topic list body is invalid."),
                ));
            }
        };
        if request_body.topic_list.is_empty() {
            return Ok(Some(
                response
                    .set_code(ResponseCode::InvalidParameter)
                    .set_remark("The specified topic list is blank."),
            ));
        }

        let mut seen = HashSet::new();
        let mut topics = Vec::with_capacity(request_body.topic_list.len());
        for topic in request_body.topic_list {
            let validation = TopicValidator::validate_topic(topic.as_str());
            if !validation.valid() {
                return Ok(Some(
                    response
                        .set_code(ResponseCode::InvalidParameter)
                        .set_remark(validation.remark().clone()),
                ));
            }
            if broker_runtime_inner
                .broker_config()
                .validate_system_topic_when_update_topic
                && TopicValidator::is_system_topic(topic.as_str())
            {
                return Ok(Some(
                    response
                        .set_code(ResponseCode::InvalidParameter)
                        .set_remark(format!("The topic[{topic}] is conflict with system topic.")),
                ));
            }
            if seen.insert(topic.clone()) {
                topics.push(topic);
            }
        }

        info!(
            "AdminBrokerProcessor#deleteTopicList: broker receive request to delete topics={:?}, caller={}",
            topics, metadata
        );
        let original_topics = topics.clone();
        for topic in &original_topics {
            for group in broker_runtime_inner
                .consumer_offset_manager()
                .which_group_by_topic(topic)
            {
                for retry_topic in [
                    CheetahString::from_string(KeyBuilder::build_pop_retry_topic_v2(topic, group.as_str())),
                    CheetahString::from_string(KeyBuilder::build_pop_retry_topic_v1(topic, group.as_str())),
                ] {
                    if broker_runtime_inner
                        .topic_config_manager()
                        .select_topic_config(&retry_topic)
                        .is_some()
                        && seen.insert(retry_topic.clone())
                    {
                        topics.push(retry_topic);
                    }
                }
            }
        }

        let mut mapping_changed = false;
        let mut store_failed = false;
        for topic in &topics {
            broker_runtime_inner
                .topic_config_manager()
                .delete_topic_config(topic, broker_runtime_inner.topic_config_state_machine_version());
            mapping_changed |= broker_runtime_inner
                .topic_queue_mapping_manager()
                .delete_without_persist(topic);
            broker_runtime_inner
                .consumer_offset_manager()
                .clean_offset_by_topic(topic);
            broker_runtime_inner
                .pop_inflight_message_counter()
                .clear_in_flight_message_num_by_topic_name(topic);
            if broker_runtime_inner.delete_topics(vec![topic]).is_err() {
                store_failed = true;
                break;
            }
        }

        let topic_persist = broker_runtime_inner.topic_config_coordinator().persist_and_wait().await;
        let mapping_persist = if mapping_changed {
            broker_runtime_inner
                .topic_queue_mapping_manager()
                .persist_current()
                .await
        } else {
            Ok(())
        };
        if store_failed || topic_persist.is_err() || mapping_persist.is_err() {
            return Ok(Some(
                response
                    .set_code(ResponseCode::SystemError)
                    .set_remark("Failed to delete one or more topics."),
            ));
        }
        Ok(Some(RemotingCommand::create_success_response_command()))
    }

    pub async fn get_all_topic_config<MS: BrokerAdminStore>(
        &self,
        broker_runtime_inner: &BrokerAdminRuntime<MS>,
        _request_code: RequestCode,
        _request: &mut RemotingCommand,
    ) -> crate::broker_error::BrokerResult<Option<RemotingCommand>> {
        let mut response = RemotingCommand::create_success_response_command();
        let (topic_config_table, topic_config_data_version) =
            broker_runtime_inner.topic_config_manager().metadata_snapshot();
        let topic_config_and_mapping_serialize_wrapper = TopicConfigAndMappingSerializeWrapper {
            topic_queue_mapping_detail_map: broker_runtime_inner
                .topic_queue_mapping_manager()
                .topic_queue_mapping_table
                .iter()
                .map(|entry| (entry.key().clone(), (**entry.value()).clone()))
                .collect(),
            mapping_data_version: broker_runtime_inner
                .topic_queue_mapping_manager()
                .data_version
                .lock()
                .clone(),
            topic_config_serialize_wrapper: TopicConfigSerializeWrapper {
                data_version: topic_config_data_version,
                topic_config_table,
            },
            ..Default::default()
        };
        let content = topic_config_and_mapping_serialize_wrapper
            .serialize_json()
            .expect("encode failed");
        if !content.is_empty() {
            response.set_body_mut_ref(content);
        }
        Ok(Some(response))
    }

    pub async fn get_system_topic_list_from_broker(
        &self,
        _request_code: RequestCode,
        _request: &mut RemotingCommand,
    ) -> crate::broker_error::BrokerResult<Option<RemotingCommand>> {
        let mut response = RemotingCommand::create_success_response_command();
        let topics = TopicValidator::get_system_topic_set();
        let topic_list = TopicList {
            topic_list: topics,
            broker_addr: None,
        };
        response.set_body_mut_ref(topic_list.encode().expect("encode TopicList failed"));
        Ok(Some(response))
    }

    pub async fn get_topic_stats_info<MS: BrokerAdminStore>(
        &self,
        broker_runtime_inner: &BrokerAdminRuntime<MS>,
        _request_code: RequestCode,
        request: &mut RemotingCommand,
    ) -> crate::broker_error::BrokerResult<Option<RemotingCommand>> {
        let response = RemotingCommand::create_java_default_error_response_command();
        let request_header =
            request.decode_required_header::<GetTopicStatsRequestHeader>("decode get-topic-stats request header")?;
        let topic = request_header.topic.as_ref();
        let topic_config = broker_runtime_inner.topic_config_manager().select_topic_config(topic);
        if topic_config.is_none() {
            return Ok(Some(
                response
                    .set_code(ResponseCode::TopicNotExist)
                    .set_remark(format!("The topic[{topic}] not exist.")),
            ));
        }
        let topic_config = topic_config.unwrap();
        let max_queue_nums = topic_config.write_queue_nums.max(topic_config.read_queue_nums);
        let mut topic_stats_table = TopicStatsTable::new();
        let mut map = HashMap::new();
        for i in 0..max_queue_nums {
            let mut message_queue = MessageQueue::new();
            message_queue.set_topic(topic.clone());
            message_queue.set_broker_name(broker_runtime_inner.broker_config().broker_name().clone());
            message_queue.set_queue_id(i as i32);
            let mut topic_offset = TopicOffset::new();
            let min = std::cmp::max(
                broker_runtime_inner
                    .message_store()
                    .unwrap()
                    .get_min_offset_in_queue(topic, i as i32),
                0,
            );
            let max = std::cmp::max(
                broker_runtime_inner
                    .message_store()
                    .unwrap()
                    .get_max_offset_in_queue(topic, i as i32),
                0,
            );
            let mut timestamp = 0;
            if max > 0 {
                timestamp = broker_runtime_inner
                    .message_store()
                    .unwrap()
                    .get_message_store_timestamp(topic, i as i32, max - 1);
            }
            topic_offset.set_min_offset(min);
            topic_offset.set_max_offset(max);
            topic_offset.set_last_update_timestamp(timestamp);
            map.insert(message_queue, topic_offset);
        }
        topic_stats_table.set_offset_table(map);
        Ok(Some(
            RemotingCommand::create_success_response_command().set_body(topic_stats_table.encode()?),
        ))
    }

    pub async fn get_topic_config<MS: BrokerAdminStore>(
        &self,
        broker_runtime_inner: &BrokerAdminRuntime<MS>,
        _request_code: RequestCode,
        request: &mut RemotingCommand,
    ) -> crate::broker_error::BrokerResult<Option<RemotingCommand>> {
        let response = RemotingCommand::create_java_default_error_response_command();
        let request_header = request.decode_command_custom_header::<GetTopicConfigRequestHeader>()?;
        let topic = &request_header.topic;
        let (topic_config, topic_version) = match broker_runtime_inner
            .topic_config_manager()
            .select_topic_config_with_version(topic)
        {
            Ok(Some(snapshot)) => snapshot,
            Ok(None) => {
                return Ok(Some(
                    response
                        .set_code(ResponseCode::TopicNotExist)
                        .set_remark(format!("No topic in this broker. topic: {topic}")),
                ));
            }
            Err(
                TopicConfigCasError::VersionUnavailable
                | TopicConfigCasError::VersionExhausted
                | TopicConfigCasError::PersistenceDirty { .. },
            ) => {
                return Ok(Some(
                    response
                        .set_code(ResponseCode::SystemError)
                        .set_remark("Topic configuration version is unavailable"),
                ));
            }
        };
        let mut topic_queue_mapping_detail: Option<TopicQueueMappingDetail> = None;
        if let Some(value) = request_header.topic_request_header.as_ref() {
            if let Some(lo) = value.get_lo() {
                if *lo {
                    topic_queue_mapping_detail = broker_runtime_inner
                        .topic_queue_mapping_manager()
                        .topic_queue_mapping_table
                        .get(topic)
                        .map(|entry| (**entry.value()).clone());
                }
            }
        }
        let topic_config = (*topic_config).clone();
        let topic_config_and_queue_mapping = TopicConfigAndQueueMapping::new(topic_config, topic_queue_mapping_detail);
        Ok(Some(
            RemotingCommand::create_success_response_command_with_header(UpdateTopicConfigCasResponseHeader {
                topic_version,
            })
            .set_body(topic_config_and_queue_mapping.encode()?),
        ))
    }

    pub async fn query_topic_consume_by_who<MS: BrokerAdminStore>(
        &self,
        broker_runtime_inner: &BrokerAdminRuntime<MS>,
        _request_code: RequestCode,
        request: &mut RemotingCommand,
    ) -> crate::broker_error::BrokerResult<Option<RemotingCommand>> {
        let mut response = RemotingCommand::create_success_response_command();
        let request_header = request.decode_command_custom_header::<QueryTopicConsumeByWhoRequestHeader>()?;
        let topic = request_header.topic.as_ref();
        let mut groups = broker_runtime_inner
            .consumer_manager()
            .query_topic_consume_by_who(topic);
        let group_in_offset = broker_runtime_inner
            .consumer_offset_manager()
            .which_group_by_topic(topic);
        groups.extend(group_in_offset);
        let group_list = GroupList { group_list: groups };
        response.set_body_mut_ref(group_list.encode().expect("encode GroupList failed"));
        Ok(Some(response))
    }

    pub async fn query_topics_by_consumer<MS: BrokerAdminStore>(
        &self,
        broker_runtime_inner: &BrokerAdminRuntime<MS>,
        _request_code: RequestCode,
        request: &mut RemotingCommand,
    ) -> crate::broker_error::BrokerResult<Option<RemotingCommand>> {
        let mut response = RemotingCommand::create_success_response_command();
        let request_header = request.decode_required_header::<QueryTopicsByConsumerRequestHeader>(
            "decode query-topics-by-consumer request header",
        )?;
        let topics = broker_runtime_inner
            .consumer_offset_manager()
            .which_topic_by_consumer(request_header.get_group());
        let broker_addr = format!(
            "{}:{}",
            broker_runtime_inner.broker_config().broker_ip1,
            broker_runtime_inner.server_config().listen_port
        );
        let topic_list = TopicList {
            topic_list: topics.into_iter().collect(),
            broker_addr: Some(broker_addr.into()),
        };
        response.set_body_mut_ref(topic_list.encode().expect("encode TopicList failed"));
        Ok(Some(response))
    }

    pub async fn clean_unused_topic<MS: BrokerAdminStore>(
        &self,
        broker_runtime_inner: &BrokerAdminRuntime<MS>,
        _request_code: RequestCode,
        _request: &mut RemotingCommand,
    ) -> crate::broker_error::BrokerResult<Option<RemotingCommand>> {
        let retain_topics = broker_runtime_inner
            .topic_config_manager()
            .topic_config_table_hash_map()
            .keys()
            .map(|topic| topic.to_string())
            .collect();
        broker_runtime_inner
            .message_store()
            .unwrap()
            .clean_unused_topic(&retain_topics);
        Ok(Some(RemotingCommand::create_success_response_command()))
    }

    fn delete_topic_in_broker<MS: BrokerAdminStore>(
        &self,
        broker_runtime_inner: &BrokerAdminRuntime<MS>,
        topic: &CheetahString,
    ) -> Result<(), MessageStoreUnavailable> {
        broker_runtime_inner
            .topic_config_manager()
            .delete_topic_config(topic, broker_runtime_inner.topic_config_state_machine_version());
        broker_runtime_inner.topic_queue_mapping_manager().delete(topic);
        broker_runtime_inner
            .consumer_offset_manager()
            .clean_offset_by_topic(topic);
        broker_runtime_inner
            .pop_inflight_message_counter()
            .clear_in_flight_message_num_by_topic_name(topic);
        broker_runtime_inner.delete_topics(vec![topic])?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;
    use std::sync::Arc;
    use std::time::SystemTime;

    use crate::config::broker_config::BrokerConfig;
    use cheetah_string::CheetahString;
    use rocketmq_model::common::config::TopicConfig;
    use rocketmq_model::common::mix_all::METADATA_SCOPE_GLOBAL;
    use rocketmq_protocol::code::request_code::RequestCode;
    use rocketmq_protocol::code::response_code::ResponseCode;
    use rocketmq_protocol::protocol::body::supervised_mutation::{
        ExpectedState, MutationPersistenceState, StateCasResultBody, SupervisedTopicConfig,
        SupervisedTopicConfigCasRequestBody,
    };
    use rocketmq_protocol::protocol::header::create_topic_request_header::CreateTopicRequestHeader;
    use rocketmq_protocol::protocol::header::get_topic_config_request_header::GetTopicConfigRequestHeader;
    use rocketmq_protocol::protocol::header::update_topic_config_cas_request_header::UpdateTopicConfigCasRequestHeader;
    use rocketmq_protocol::protocol::header::update_topic_config_cas_response_header::UpdateTopicConfigCasResponseHeader;
    use rocketmq_protocol::protocol::remoting_command::RemotingCommand;
    use rocketmq_protocol::protocol::static_topic::topic_queue_mapping_detail::TopicQueueMappingDetail;
    use rocketmq_protocol::protocol::RemotingDeserializable;
    use rocketmq_protocol::protocol::RemotingSerializable;
    use rocketmq_store::MessageStoreConfig;

    use super::decode_topic_queue_mapping_detail;
    use super::AdminRequestMetadata;
    use super::TopicRequestHandler;
    use crate::broker_runtime::BrokerRuntime;
    use crate::config::config_manager::ConfigManager;
    use crate::processor::admin_broker_processor::broker_config_request_handler::BrokerConfigRequestHandler;

    fn temp_test_root(label: &str) -> std::path::PathBuf {
        let millis = SystemTime::now()
            .duration_since(SystemTime::UNIX_EPOCH)
            .expect("time should move forward")
            .as_millis();
        std::env::temp_dir().join(format!("rocketmq-rust-admin-topic-{label}-{millis}"))
    }

    async fn new_test_runtime(label: &str) -> BrokerRuntime {
        let temp_root = temp_test_root(label);
        let broker_config = Arc::new(BrokerConfig {
            store_path_root_dir: temp_root.to_string_lossy().into_owned().into(),
            auth_config_path: temp_root.join("auth.json").to_string_lossy().into_owned().into(),
            ..BrokerConfig::default()
        });
        let message_store_config = Arc::new(MessageStoreConfig {
            store_path_root_dir: temp_root.to_string_lossy().into_owned().into(),
            ..MessageStoreConfig::default()
        });
        let mut runtime = BrokerRuntime::new(broker_config, message_store_config);
        assert!(runtime.initialize().await.is_ok());
        runtime
    }

    #[test]
    fn topic_request_handler_is_stateless() {
        assert_eq!(std::mem::size_of::<TopicRequestHandler>(), 0);
    }

    #[test]
    fn decode_topic_queue_mapping_detail_accepts_java_fastjson_numeric_keys() {
        let body = br#"{"topic":"static-topic","scope":"__global__","totalQueues":2,"bname":"interopBroker","epoch":1,"dirty":false,"currIdMap":{0:0,1:1},"hostedQueues":{0:[{"gen":0,"queueId":0,"bname":"interopBroker","logicOffset":0,"startOffset":0,"endOffset":-1,"timeOfStart":-1,"timeOfEnd":-1}],1:[{"gen":0,"queueId":1,"bname":"interopBroker","logicOffset":0,"startOffset":0,"endOffset":-1,"timeOfStart":-1,"timeOfEnd":-1}]}}"#;

        let detail = decode_topic_queue_mapping_detail(body).expect("Java FastJSON body should decode");

        assert_eq!(detail.topic_queue_mapping_info.topic.as_deref(), Some("static-topic"));
        assert_eq!(
            detail
                .topic_queue_mapping_info
                .curr_id_map
                .as_ref()
                .and_then(|curr_id_map| curr_id_map.get(&1)),
            Some(&1)
        );
        assert_eq!(
            detail
                .hosted_queues
                .as_ref()
                .and_then(|hosted_queues| hosted_queues.get(&1))
                .and_then(|items| items.first())
                .map(|item| item.queue_id),
            Some(1)
        );
    }

    #[tokio::test]
    async fn update_and_create_static_topic_persists_mapping_detail() {
        let runtime = new_test_runtime("static-topic").await;
        let admin = runtime.admin_runtime_for_test();
        let handler = TopicRequestHandler::new();
        let broker_config_request_handler = BrokerConfigRequestHandler::new(admin.clone());
        let peer = "127.0.0.1:10911".parse().expect("test peer");

        let detail = TopicQueueMappingDetail {
            topic_queue_mapping_info:
                rocketmq_protocol::protocol::static_topic::topic_queue_mapping_info::TopicQueueMappingInfo {
                    topic: Some(CheetahString::from_static_str("static-topic")),
                    scope: Some(CheetahString::from_static_str(METADATA_SCOPE_GLOBAL)),
                    total_queues: 1,
                    bname: Some(admin.broker_config().broker_name().clone()),
                    epoch: 1,
                    dirty: false,
                    curr_id_map: None,
                },
            hosted_queues: Some(HashMap::new()),
        };

        let mut request = RemotingCommand::create_request_command(
            RequestCode::UpdateAndCreateStaticTopic,
            CreateTopicRequestHeader {
                topic: CheetahString::from_static_str("static-topic"),
                default_topic: CheetahString::from_static_str("TBW102"),
                read_queue_nums: 1,
                write_queue_nums: 1,
                perm: 6,
                topic_filter_type: CheetahString::from_static_str("SINGLE_TAG"),
                topic_sys_flag: Some(0),
                order: false,
                attributes: None,
                force: Some(true),
                topic_request_header: None,
            },
        );
        request.make_custom_header_to_net();
        request.set_body_mut_ref(detail.encode().expect("encode topic queue mapping detail"));

        let response = handler
            .update_and_create_static_topic(
                &broker_config_request_handler,
                &AdminRequestMetadata::network_for_test(peer),
                RequestCode::UpdateAndCreateStaticTopic,
                &mut request,
            )
            .await
            .expect("update and create static topic should succeed")
            .expect("update and create static topic should return response");

        assert_eq!(
            ResponseCode::from(response.code()),
            ResponseCode::Success,
            "remark={:?}",
            response.remark()
        );
        assert!(admin
            .topic_config_manager()
            .select_topic_config(&CheetahString::from_static_str("static-topic"))
            .is_some());
        let mapping = admin
            .topic_queue_mapping_manager()
            .get_topic_queue_mapping("static-topic")
            .expect("mapping detail should be persisted");
        assert_eq!(mapping.topic_queue_mapping_info.topic.as_deref(), Some("static-topic"));

        let _ = std::fs::remove_dir_all(runtime.message_store_config().store_path_root_dir.as_str());
    }

    #[tokio::test]
    async fn topic_config_cas_commits_once_rejects_stale_and_reports_version() {
        let runtime = new_test_runtime("topic-cas").await;
        let admin = runtime.admin_runtime_for_test();
        let handler = TopicRequestHandler::new();
        let broker_config_request_handler = BrokerConfigRequestHandler::new(admin.clone());
        let topic = CheetahString::from_static_str("topic-cas");
        let mut initial = TopicConfig::with_queues(topic.clone(), 2, 3);
        initial.perm = 4;
        initial.topic_sys_flag = 17;
        initial.attributes.insert("retained".into(), "value".into());
        admin.topic_config_manager().put_topic_config(initial.clone());

        let mut request = RemotingCommand::create_request_command(
            RequestCode::UpdateTopicConfigCas,
            UpdateTopicConfigCasRequestHeader {
                topic: topic.clone(),
                expected_version: 0,
                read_queue_nums: Some(5),
                write_queue_nums: Some(7),
                order: Some(true),
            },
        );
        request.make_custom_header_to_net();
        let request_opaque = request.opaque();
        let peer = "127.0.0.1:10911".parse().expect("test peer");
        let response = handler
            .update_topic_config_cas(
                &broker_config_request_handler,
                &AdminRequestMetadata::network_for_test(peer),
                RequestCode::UpdateTopicConfigCas,
                &mut request,
            )
            .await
            .expect("Topic CAS should run")
            .expect("Topic CAS should return a response");
        assert_eq!(ResponseCode::from(response.code()), ResponseCode::Success);
        assert_eq!(response.opaque(), request_opaque);
        assert_eq!(
            response.remark().map(CheetahString::as_str),
            Some("Topic configuration patch committed, version=1")
        );
        let response_header = response
            .read_custom_header_ref::<UpdateTopicConfigCasResponseHeader>()
            .expect("success response should carry the committed version");
        assert_eq!(response_header.topic_version, 1);
        let current = admin
            .topic_config_manager()
            .select_topic_config(&topic)
            .expect("Topic should remain available");
        assert_eq!(current.read_queue_nums, 5);
        assert_eq!(current.write_queue_nums, 7);
        assert!(current.order);
        assert_eq!(current.perm, initial.perm);
        assert_eq!(current.topic_sys_flag, initial.topic_sys_flag);
        assert_eq!(current.attributes, initial.attributes);

        let mut stale_request = RemotingCommand::create_request_command(
            RequestCode::UpdateTopicConfigCas,
            UpdateTopicConfigCasRequestHeader {
                topic: topic.clone(),
                expected_version: 0,
                read_queue_nums: Some(9),
                write_queue_nums: None,
                order: None,
            },
        );
        stale_request.make_custom_header_to_net();
        let peer = "127.0.0.1:10911".parse().expect("test peer");
        let stale_response = handler
            .update_topic_config_cas(
                &broker_config_request_handler,
                &AdminRequestMetadata::network_for_test(peer),
                RequestCode::UpdateTopicConfigCas,
                &mut stale_request,
            )
            .await
            .expect("stale Topic CAS should return normally")
            .expect("stale Topic CAS should return a response");
        assert_eq!(
            ResponseCode::from(stale_response.code()),
            ResponseCode::InvalidParameter
        );
        assert_eq!(
            stale_response
                .read_custom_header_ref::<UpdateTopicConfigCasResponseHeader>()
                .expect("conflict should carry current version")
                .topic_version,
            1
        );
        assert_eq!(
            admin
                .topic_config_manager()
                .select_topic_config(&topic)
                .expect("Topic should remain available")
                .read_queue_nums,
            5
        );

        let mut get_request = RemotingCommand::create_request_command(
            RequestCode::GetTopicConfig,
            GetTopicConfigRequestHeader {
                topic: topic.clone(),
                topic_request_header: None,
            },
        );
        get_request.make_custom_header_to_net();
        let get_response = handler
            .get_topic_config(&admin, RequestCode::GetTopicConfig, &mut get_request)
            .await
            .expect("get Topic config should run")
            .expect("get Topic config should return a response");
        assert_eq!(
            get_response
                .read_custom_header_ref::<UpdateTopicConfigCasResponseHeader>()
                .expect("Topic query should carry the current version")
                .topic_version,
            1
        );

        let _ = std::fs::remove_dir_all(runtime.message_store_config().store_path_root_dir.as_str());
    }

    #[tokio::test]
    async fn topic_state_cas_reports_applied_when_persistence_fails() {
        let runtime = new_test_runtime("topic-state-persist-fail").await;
        let admin = runtime.admin_runtime_for_test();
        let handler = TopicRequestHandler::new();
        let broker_handler = BrokerConfigRequestHandler::new(admin.clone());
        let topic = CheetahString::from_static_str("PersistFailureTopic");
        let persistence_target = admin.topic_config_manager().config_file_path();
        std::fs::create_dir_all(persistence_target.as_str()).expect("occupy persistence target with a directory");

        let mut request = RemotingCommand::create_request_command(
            RequestCode::UpdateTopicConfigStateCas,
            GetTopicConfigRequestHeader {
                topic: topic.clone(),
                topic_request_header: None,
            },
        )
        .set_body(
            SupervisedTopicConfigCasRequestBody {
                expected_state: ExpectedState::Absent,
                replacement: SupervisedTopicConfig {
                    read_queue_nums: 2,
                    write_queue_nums: 2,
                    perm: 6,
                    order: false,
                    message_type: "NORMAL".to_owned(),
                },
            }
            .encode()
            .expect("request body"),
        );
        request.make_custom_header_to_net();
        let response = handler
            .update_topic_config_state_cas(
                &broker_handler,
                &AdminRequestMetadata::network_for_test("127.0.0.1:10911".parse().expect("peer")),
                &mut request,
            )
            .await
            .expect("handler")
            .expect("response");

        assert_eq!(ResponseCode::from(response.code()), ResponseCode::SystemError);
        let outcome = StateCasResultBody::decode(response.body().expect("body")).expect("typed outcome");
        assert!(outcome.applied);
        assert!(outcome.changed);
        assert_eq!(outcome.persistence, MutationPersistenceState::Failed);
        let ExpectedState::Present { version } = outcome.state else {
            panic!("applied Topic state must be present");
        };
        assert!(admin.topic_config_manager().select_topic_config(&topic).is_some());

        for queues in [2, 3] {
            let mut follow_up = RemotingCommand::create_request_command(
                RequestCode::UpdateTopicConfigStateCas,
                GetTopicConfigRequestHeader {
                    topic: topic.clone(),
                    topic_request_header: None,
                },
            )
            .set_body(
                SupervisedTopicConfigCasRequestBody {
                    expected_state: ExpectedState::Present { version },
                    replacement: SupervisedTopicConfig {
                        read_queue_nums: queues,
                        write_queue_nums: queues,
                        perm: 6,
                        order: false,
                        message_type: "NORMAL".to_owned(),
                    },
                }
                .encode()
                .expect("follow-up body"),
            );
            follow_up.make_custom_header_to_net();
            let response = handler
                .update_topic_config_state_cas(
                    &broker_handler,
                    &AdminRequestMetadata::network_for_test("127.0.0.1:10911".parse().expect("peer")),
                    &mut follow_up,
                )
                .await
                .expect("handler")
                .expect("response");
            assert_eq!(ResponseCode::from(response.code()), ResponseCode::SystemError);
            let follow_up = StateCasResultBody::decode(response.body().expect("body")).expect("typed outcome");
            assert!(!follow_up.applied);
            assert!(!follow_up.changed);
            assert_eq!(follow_up.persistence, MutationPersistenceState::Failed);
            assert_eq!(follow_up.state, ExpectedState::Present { version });
        }
        assert_eq!(
            admin
                .topic_config_manager()
                .select_topic_config(&topic)
                .expect("dirty Topic remains in memory")
                .read_queue_nums,
            2
        );

        let _ = std::fs::remove_dir_all(runtime.message_store_config().store_path_root_dir.as_str());
    }

    #[tokio::test]
    async fn batch_delete_validates_all_topics_before_mutation_and_deduplicates() {
        let runtime = new_test_runtime("batch-delete-topics").await;
        let admin = runtime.admin_runtime_for_test();
        let handler = TopicRequestHandler::new();
        let topic_a = CheetahString::from_static_str("BatchDeleteTopicA");
        let topic_b = CheetahString::from_static_str("BatchDeleteTopicB");
        admin
            .topic_config_manager()
            .put_topic_config(TopicConfig::with_queues(topic_a.clone(), 1, 1));
        admin
            .topic_config_manager()
            .put_topic_config(TopicConfig::with_queues(topic_b.clone(), 1, 1));

        let empty_body =
            rocketmq_protocol::protocol::body::delete_topic_list_request_body::DeleteTopicListRequestBody::default();
        let mut empty = RemotingCommand::create_remoting_command(RequestCode::DeleteTopicInBrokerList.to_i32())
            .set_body(empty_body.encode().unwrap());
        let peer = "127.0.0.1:10911".parse().expect("test peer");
        let response = handler
            .delete_topic_list(
                &admin,
                &AdminRequestMetadata::network_for_test(peer),
                RequestCode::DeleteTopicInBrokerList,
                &mut empty,
            )
            .await
            .unwrap()
            .unwrap();
        assert_eq!(ResponseCode::InvalidParameter, ResponseCode::from(response.code()));
        assert!(admin.topic_config_manager().select_topic_config(&topic_a).is_some());
        assert!(admin.topic_config_manager().select_topic_config(&topic_b).is_some());

        let invalid_body =
            rocketmq_protocol::protocol::body::delete_topic_list_request_body::DeleteTopicListRequestBody {
                topic_list: vec![topic_a.clone(), CheetahString::from_static_str("invalid topic")],
            };
        let mut invalid = RemotingCommand::create_remoting_command(RequestCode::DeleteTopicInBrokerList.to_i32())
            .set_body(invalid_body.encode().unwrap());
        let peer = "127.0.0.1:10911".parse().expect("test peer");
        let response = handler
            .delete_topic_list(
                &admin,
                &AdminRequestMetadata::network_for_test(peer),
                RequestCode::DeleteTopicInBrokerList,
                &mut invalid,
            )
            .await
            .unwrap()
            .unwrap();
        assert_eq!(ResponseCode::InvalidParameter, ResponseCode::from(response.code()));
        assert!(admin.topic_config_manager().select_topic_config(&topic_a).is_some());
        assert!(admin.topic_config_manager().select_topic_config(&topic_b).is_some());

        let body = rocketmq_protocol::protocol::body::delete_topic_list_request_body::DeleteTopicListRequestBody {
            topic_list: vec![topic_a.clone(), topic_b.clone(), topic_a.clone()],
        };
        let mut request = RemotingCommand::create_remoting_command(RequestCode::DeleteTopicInBrokerList.to_i32())
            .set_body(body.encode().unwrap());
        let peer = "127.0.0.1:10911".parse().expect("test peer");
        let response = handler
            .delete_topic_list(
                &admin,
                &AdminRequestMetadata::network_for_test(peer),
                RequestCode::DeleteTopicInBrokerList,
                &mut request,
            )
            .await
            .unwrap()
            .unwrap();
        assert_eq!(ResponseCode::Success, ResponseCode::from(response.code()));
        assert!(admin.topic_config_manager().select_topic_config(&topic_a).is_none());
        assert!(admin.topic_config_manager().select_topic_config(&topic_b).is_none());

        let _ = std::fs::remove_dir_all(runtime.message_store_config().store_path_root_dir.as_str());
    }
}
