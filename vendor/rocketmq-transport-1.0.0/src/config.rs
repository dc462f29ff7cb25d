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

pub mod server_config;
pub mod socket_options;
pub mod tls_config;

pub use server_config::ServerConfig;
pub use socket_options::SocketOptions;
pub use socket_options::TcpKeepaliveConfig;
pub use tls_config::TlsClientAuth;
pub use tls_config::TlsClientConfig;
pub use tls_config::TlsConfig;
pub use tls_config::TlsConfigError;
pub use tls_config::TlsMode;
pub use tls_config::TlsServerConfig;
