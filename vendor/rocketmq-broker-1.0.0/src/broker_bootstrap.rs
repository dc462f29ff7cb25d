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

use crate::config::validated::ValidatedBrokerConfig;
use rocketmq_observability::TelemetryRuntimeGuard;
use rocketmq_protocol::protocol::remoting_command_defaults::application_remoting_command_factory;
use rocketmq_protocol::protocol::remoting_command_defaults::RemotingCommandFactory;
use rocketmq_runtime::wait_for_signal;
use rocketmq_runtime::ChildServiceContext;
use rocketmq_runtime::RuntimeError;
use rocketmq_runtime::RuntimeOperation;
use rocketmq_runtime::RuntimeResult;
use rocketmq_runtime::ServiceLifecycle;
use rocketmq_runtime::ShutdownReason;
use tracing::error;
use tracing::info;

use crate::broker_runtime::BrokerRuntime;
use crate::lifecycle::BrokerReadiness;
use crate::lifecycle::BrokerStartupError;
use crate::lifecycle::Configured;
use crate::lifecycle::Initialized;
use crate::lifecycle::Running;

const INITIALIZE_BROKER: RuntimeOperation = RuntimeOperation::external("initialize-broker");
const START_BROKER: RuntimeOperation = RuntimeOperation::external("start-broker");
const SHUTDOWN_BROKER: RuntimeOperation = RuntimeOperation::external("shutdown-broker");

pub struct BrokerBootstrap<State = Configured> {
    broker_runtime: BrokerRuntime,
    release_identity_required: bool,
    state: State,
}

impl BrokerBootstrap<Configured> {
    pub async fn initialize(mut self) -> Result<BrokerBootstrap<Initialized>, BrokerStartupError> {
        if let Err(error) = self.broker_runtime.initialize().await {
            return Err(self.broker_runtime.rollback_startup(error).await);
        }
        Ok(BrokerBootstrap {
            broker_runtime: self.broker_runtime,
            release_identity_required: self.release_identity_required,
            state: Initialized,
        })
    }

    pub async fn boot(self) {
        let initialized = match self.initialize().await {
            Ok(initialized) => initialized,
            Err(error) => {
                error!(%error, "Broker initialization failed");
                return;
            }
        };
        let running = match initialized.start().await {
            Ok(running) => running,
            Err(error) => {
                error!(%error, "Broker startup failed");
                return;
            }
        };

        // Wait for shutdown signal (Ctrl+C or SIGTERM)
        wait_for_signal().await;
        info!("Broker received shutdown signal");

        // Graceful shutdown
        running.shutdown().await;
        info!("Broker shutdown completed");
    }

    /// Boots the broker under the shared process lifecycle and absolute shutdown deadline.
    ///
    /// # Errors
    ///
    /// Returns a lifecycle error when broker initialization, readiness publication, or
    /// platform signal observation fails.
    pub async fn boot_with_lifecycle(self, lifecycle: ServiceLifecycle) -> RuntimeResult<()> {
        record_broker_lifecycle("starting", "success", "startup");
        let initialized = self.initialize().await.map_err(|error| {
            lifecycle.mark_failed();
            lifecycle.request_shutdown(ShutdownReason::Internal);
            record_broker_lifecycle("failed", "failure", "initialization");
            RuntimeError::internal(INITIALIZE_BROKER, error)
        })?;
        let mut running = initialized.start().await.map_err(|error| {
            lifecycle.mark_failed();
            lifecycle.request_shutdown(ShutdownReason::Internal);
            record_broker_lifecycle("failed", "failure", "startup");
            RuntimeError::internal(START_BROKER, error)
        })?;
        lifecycle.mark_ready()?;
        record_broker_lifecycle("ready", "success", "startup");
        let shutdown_request = match lifecycle.wait_for_shutdown_signal().await {
            Ok(request) => request,
            Err(error) => {
                lifecycle.mark_failed();
                lifecycle.request_shutdown(ShutdownReason::Internal);
                record_broker_lifecycle("failed", "failure", "signal");
                return Err(error);
            }
        };
        record_broker_lifecycle("stopping", "success", "shutdown_request");
        info!(
            reason = shutdown_request.reason.as_str(),
            remaining_ms = shutdown_request.deadline.remaining().as_millis(),
            "Broker received shutdown request"
        );

        let report = running
            .broker_runtime
            .shutdown_basic_service_until(shutdown_request.deadline)
            .await;
        if !report.is_healthy() {
            tracing::warn!(
                unhealthy_components = ?report.unhealthy_component_names(),
                "Broker lifecycle shutdown report is unhealthy"
            );
            lifecycle.mark_failed();
            record_broker_lifecycle("failed", "failure", "shutdown_timeout");
            return Err(RuntimeError::timed_out(SHUTDOWN_BROKER));
        }
        lifecycle.mark_stopped();
        record_broker_lifecycle("stopped", "success", "shutdown_complete");
        Ok(())
    }
}

fn record_broker_lifecycle(state: &'static str, result: &'static str, reason: &'static str) {
    info!(
        event = rocketmq_observability::semantic::events::BROKER_LIFECYCLE,
        state, result, reason, "Broker lifecycle transition"
    );
}

impl BrokerBootstrap<Initialized> {
    pub async fn start(mut self) -> Result<BrokerBootstrap<Running>, BrokerStartupError> {
        let readiness = self.broker_runtime.start().await?;
        Ok(BrokerBootstrap {
            broker_runtime: self.broker_runtime,
            release_identity_required: self.release_identity_required,
            state: Running::new(readiness),
        })
    }
}

impl BrokerBootstrap<Running> {
    #[must_use]
    pub fn readiness(&self) -> &BrokerReadiness {
        self.state.readiness()
    }

    pub async fn shutdown(mut self) {
        self.broker_runtime.shutdown().await;
    }
}

pub struct Builder {
    validated_config: ValidatedBrokerConfig,
    service_context: ChildServiceContext,
    telemetry_runtime_guard: TelemetryRuntimeGuard,
    command_factory: RemotingCommandFactory,
    filter_registry: Arc<rocketmq_filter::filter::FilterRegistrySnapshot>,
    release_identity_required: bool,
    diagnostics_sources: rocketmq_observability::RuntimeDiagnosticsSources,
}

impl Builder {
    #[inline]
    pub fn new(service_context: ChildServiceContext, telemetry_runtime_guard: TelemetryRuntimeGuard) -> Self {
        Builder {
            validated_config: ValidatedBrokerConfig::default(),
            service_context,
            telemetry_runtime_guard,
            command_factory: application_remoting_command_factory(),
            filter_registry: rocketmq_filter::filter::FilterRegistrySnapshot::sql92(),
            release_identity_required: false,
            diagnostics_sources: rocketmq_observability::RuntimeDiagnosticsSources::default(),
        }
    }

    #[inline]
    pub fn with_validated_config(mut self, validated_config: ValidatedBrokerConfig) -> Self {
        self.validated_config = validated_config;
        self
    }

    #[inline]
    pub fn require_release_identity_registration(mut self, required: bool) -> Self {
        self.release_identity_required = required;
        self
    }

    /// Uses explicit immutable wire defaults for this Broker instance.
    #[inline]
    pub fn with_remoting_command_factory(mut self, command_factory: RemotingCommandFactory) -> Self {
        self.command_factory = command_factory;
        self
    }

    /// Binds immutable filter compilers before any subscription is accepted.
    /// Replacing compiler bindings requires a new Broker instance.
    pub fn with_filter_registry(mut self, registry: Arc<rocketmq_filter::filter::FilterRegistrySnapshot>) -> Self {
        self.filter_registry = registry;
        self
    }

    /// Connects the Broker's fixed maintenance jobs and metadata actor to diagnostics.
    ///
    /// Retain a clone at the process boundary to read the service-task shutdown
    /// summary after the diagnostic endpoint has stopped.
    pub fn with_runtime_diagnostics_sources(
        mut self,
        sources: rocketmq_observability::RuntimeDiagnosticsSources,
    ) -> Self {
        self.diagnostics_sources = sources;
        self
    }

    #[inline]
    pub fn build(self) -> BrokerBootstrap<Configured> {
        let telemetry_handle = self.telemetry_runtime_guard.handle();
        let mut broker_runtime = BrokerRuntime::new_with_bindings(
            Arc::new(self.validated_config),
            self.service_context,
            telemetry_handle,
            crate::broker_runtime::BrokerRuntimeBindings {
                command_factory: self.command_factory,
                filter_registry: self.filter_registry,
            },
        );
        broker_runtime.set_telemetry_runtime_guard(self.telemetry_runtime_guard);
        broker_runtime.set_runtime_diagnostics_sources(self.diagnostics_sources);

        BrokerBootstrap {
            broker_runtime,
            release_identity_required: self.release_identity_required,
            state: Configured,
        }
    }
}

#[cfg(all(test, feature = "local_file_store"))]
mod tests {
    use rocketmq_protocol::protocol::remoting_command_defaults::RemotingCommandDefaults;
    use rocketmq_protocol::protocol::SerializeType;
    use rocketmq_runtime::RuntimeContext;

    use super::*;

    #[tokio::test]
    async fn builder_passes_service_context_to_broker_runtime() {
        let context = RuntimeContext::from_current("broker-bootstrap-context-test");
        let service_context = context.service_context("broker-bootstrap-service");

        let sources = rocketmq_observability::RuntimeDiagnosticsSources::default();
        let mut bootstrap = Builder::new(service_context.clone(), TelemetryRuntimeGuard::noop())
            .with_runtime_diagnostics_sources(sources.clone())
            .build();
        let inputs = rocketmq_observability::RuntimeDiagnosticsDataProvider::snapshot(&sources);
        assert!(inputs.metadata.unwrap().accepting);

        let broker_task_group = bootstrap.broker_runtime.runtime_state_mut().broker_service_task_group();

        assert_eq!(broker_task_group.id(), service_context.task_group().id());
    }

    #[tokio::test]
    async fn builders_keep_independent_remoting_command_factories() {
        let context = RuntimeContext::from_current("broker-bootstrap-factory-test");
        let json_factory = RemotingCommandFactory::new(RemotingCommandDefaults::new(674, SerializeType::JSON));
        let binary_factory = RemotingCommandFactory::new(RemotingCommandDefaults::new(675, SerializeType::ROCKETMQ));
        let mut json = Builder::new(context.service_context("broker-json"), TelemetryRuntimeGuard::noop())
            .with_remoting_command_factory(json_factory)
            .build();
        let mut binary = Builder::new(context.service_context("broker-binary"), TelemetryRuntimeGuard::noop())
            .with_remoting_command_factory(binary_factory)
            .build();

        assert_eq!(json.broker_runtime.runtime_state_mut().command_factory(), json_factory);
        assert_eq!(
            binary.broker_runtime.runtime_state_mut().command_factory(),
            binary_factory
        );
    }
}
