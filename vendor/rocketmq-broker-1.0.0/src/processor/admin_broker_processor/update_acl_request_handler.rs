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

use rocketmq_error::SharedError;
use rocketmq_protocol::code::request_code::RequestCode;
use rocketmq_protocol::code::response_code::ResponseCode;
use rocketmq_protocol::protocol::body::acl_info::AclInfo;
use rocketmq_protocol::protocol::header::update_acl_request_header::UpdateAclRequestHeader;
use rocketmq_protocol::protocol::remoting_command::RemotingCommand;
use rocketmq_protocol::protocol::RemotingDeserializable;

use crate::auth::acl_converter::AclConverter;
use crate::auth::auth_admin_service::AuthAdminService;

#[derive(Clone)]
pub struct UpdateAclRequestHandler {
    auth_admin_service: Arc<AuthAdminService>,
}

impl UpdateAclRequestHandler {
    pub fn new(auth_admin_service: Arc<AuthAdminService>) -> Self {
        Self { auth_admin_service }
    }

    pub async fn update_acl(
        &self,
        _request_code: RequestCode,
        request: &mut RemotingCommand,
    ) -> crate::broker_error::BrokerResult<Option<RemotingCommand>> {
        let request_header = request.decode_command_custom_header::<UpdateAclRequestHeader>()?;
        let response = RemotingCommand::create_java_default_error_response_command();

        if request_header.subject.is_empty() {
            return Ok(Some(
                response
                    .set_code(ResponseCode::InvalidParameter)
                    .set_remark("The subject is blank"),
            ));
        }

        let Some(body) = request.get_body() else {
            return Ok(Some(
                response
                    .set_code(ResponseCode::InvalidParameter)
                    .set_remark("Request body is empty"),
            ));
        };
        let acl_info = match AclInfo::decode(body) {
            Ok(acl_info) => acl_info,
            Err(error) => {
                return Ok(Some(map_error_response(
                    response,
                    super::auth_admin_body_decode_error("decode acl body", error),
                )));
            }
        };
        let acl = match AclConverter::convert_acl_info(&acl_info, request_header.subject.as_str()) {
            Ok(acl) => acl,
            Err(error) => return Ok(Some(map_error_response(response, error))),
        };

        match self.auth_admin_service.update_acl(acl).await {
            Ok(()) => Ok(Some(RemotingCommand::create_success_response_command())),
            Err(error) => Ok(Some(map_error_response(response, error))),
        }
    }
}

fn map_error_response(response: RemotingCommand, error: SharedError) -> RemotingCommand {
    super::map_auth_admin_error_response(response, error)
}
