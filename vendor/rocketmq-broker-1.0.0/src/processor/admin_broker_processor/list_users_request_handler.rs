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

use crate::auth::auth_admin_service::AuthAdminService;
use rocketmq_error::SharedError;
use rocketmq_protocol::code::request_code::RequestCode;
use rocketmq_protocol::protocol::header::list_users_request_header::ListUsersRequestHeader;
use rocketmq_protocol::protocol::remoting_command::RemotingCommand;
use rocketmq_protocol::protocol::RemotingSerializable;
use std::sync::Arc;

#[derive(Clone)]
pub struct ListUsersRequestHandler {
    auth_admin_service: Arc<AuthAdminService>,
}

impl ListUsersRequestHandler {
    pub fn new(auth_admin_service: Arc<AuthAdminService>) -> Self {
        Self { auth_admin_service }
    }

    pub async fn list_users(
        &self,
        _request_code: RequestCode,
        request: &mut RemotingCommand,
    ) -> crate::broker_error::BrokerResult<Option<RemotingCommand>> {
        let request_header = request.decode_command_custom_header::<ListUsersRequestHeader>()?;
        let response = RemotingCommand::create_java_default_error_response_command();

        match self
            .auth_admin_service
            .list_users(non_empty(request_header.filter.as_str()))
            .await
        {
            Ok(users) => {
                let success = RemotingCommand::create_success_response_command();
                Ok(Some(if users.is_empty() {
                    success
                } else {
                    success.set_body(users.encode()?)
                }))
            }
            Err(error) => Ok(Some(map_error_response(response, error))),
        }
    }
}

fn non_empty(value: &str) -> Option<&str> {
    if value.trim().is_empty() {
        None
    } else {
        Some(value)
    }
}

fn map_error_response(response: RemotingCommand, error: SharedError) -> RemotingCommand {
    super::map_auth_admin_error_response(response, error)
}
