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

use std::fmt::Display;

use serde::Deserialize;
use serde::Serialize;

/// Invocation status for metrics tracking
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum InvocationStatus {
    Success,
    Failure,
}

impl InvocationStatus {
    /// Get the name of the invocation status
    pub fn get_name(&self) -> &'static str {
        match self {
            InvocationStatus::Success => "success",
            InvocationStatus::Failure => "failure",
        }
    }
}

impl Display for InvocationStatus {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}", self.get_name())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn test_invocation_status_name() {
        assert_eq!(InvocationStatus::Success.get_name(), "success");
        assert_eq!(InvocationStatus::Failure.get_name(), "failure");
    }

    #[test]
    fn test_invocation_status_display() {
        assert_eq!(format!("{}", InvocationStatus::Success), "success");
        assert_eq!(format!("{}", InvocationStatus::Failure), "failure");
    }
}
