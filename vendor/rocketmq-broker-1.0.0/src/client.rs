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

pub(crate) mod client_housekeeping_service;
pub(crate) mod client_session_info;
pub(crate) mod consumer_group_event;
pub(crate) mod consumer_group_info;
pub(crate) mod consumer_ids_change_listener;
pub(crate) mod default_consumer_ids_change_listener;
pub(crate) mod manager;
pub(crate) mod net;
pub(crate) mod producer_change_listener;
pub(crate) mod producer_group_event;
pub(crate) mod rebalance;
pub(crate) mod session_transition_locks;
