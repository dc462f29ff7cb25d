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

use std::fmt::Debug;
use std::fmt::Display;
use std::fmt::Formatter;
use std::sync::Arc;

use cheetah_string::CheetahString;
use rocketmq_filter::expression::Expression;
use rocketmq_filter::utils::bloom_filter_data::BloomFilterData;
use serde::Deserialize;
use serde::Serialize;

#[derive(Clone, Serialize, Deserialize, Default)]
#[serde(rename_all = "camelCase")]
pub struct ConsumerFilterData {
    consumer_group: CheetahString,
    topic: CheetahString,
    expression: Option<CheetahString>,
    expression_type: Option<CheetahString>,
    #[serde(skip)]
    // Instance compilation wraps this expression in CompiledFilter, retaining
    // the frozen registry across clones without changing persisted metadata.
    compiled_expression: Option<Arc<dyn Expression + 'static>>,
    born_time: u64,
    dead_time: u64,
    bloom_filter_data: Option<BloomFilterData>,
    client_version: u64,
}

impl ConsumerFilterData {
    pub fn consumer_group(&self) -> &CheetahString {
        &self.consumer_group
    }

    pub fn topic(&self) -> &CheetahString {
        &self.topic
    }

    pub fn expression(&self) -> Option<&CheetahString> {
        self.expression.as_ref()
    }

    pub fn expression_type(&self) -> Option<&CheetahString> {
        self.expression_type.as_ref()
    }

    pub fn born_time(&self) -> u64 {
        self.born_time
    }

    pub fn dead_time(&self) -> u64 {
        self.dead_time
    }

    pub fn bloom_filter_data(&self) -> Option<&BloomFilterData> {
        self.bloom_filter_data.as_ref()
    }

    pub fn client_version(&self) -> u64 {
        self.client_version
    }

    pub fn set_consumer_group(&mut self, consumer_group: CheetahString) {
        self.consumer_group = consumer_group;
    }

    pub fn set_topic(&mut self, topic: CheetahString) {
        self.topic = topic;
    }

    pub fn set_expression(&mut self, expression: Option<CheetahString>) {
        self.expression = expression;
    }

    pub fn set_expression_type(&mut self, expression_type: Option<CheetahString>) {
        self.expression_type = expression_type;
    }

    pub fn set_born_time(&mut self, born_time: u64) {
        self.born_time = born_time;
    }

    pub fn set_dead_time(&mut self, dead_time: u64) {
        self.dead_time = dead_time;
    }

    pub fn set_bloom_filter_data(&mut self, bloom_filter_data: Option<BloomFilterData>) {
        self.bloom_filter_data = bloom_filter_data;
    }

    pub fn set_client_version(&mut self, client_version: u64) {
        self.client_version = client_version;
    }

    pub fn compiled_expression(&self) -> &Option<Arc<dyn Expression + 'static>> {
        &self.compiled_expression
    }

    pub fn set_compiled_expression(&mut self, compiled_expression: Box<dyn Expression + 'static>) {
        self.compiled_expression = Some(Arc::from(compiled_expression));
    }

    pub fn set_compiled_expression_arc(&mut self, compiled_expression: Arc<dyn Expression + 'static>) {
        self.compiled_expression = Some(compiled_expression);
    }

    pub fn is_dead(&self) -> bool {
        self.dead_time >= self.born_time
    }

    pub fn how_long_after_death(&self) -> Option<u64> {
        self.is_dead()
            .then(|| rocketmq_runtime::common::time_utils::current_millis().saturating_sub(self.dead_time))
    }

    pub fn is_msg_in_live(&self, msg_store_time: u64) -> bool {
        msg_store_time > self.born_time
    }
}

impl Debug for ConsumerFilterData {
    fn fmt(&self, f: &mut Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ConsumerFilterData")
            .field("consumer_group", &self.consumer_group)
            .field("topic", &self.topic)
            .field("expression", &self.expression)
            .field("expression_type", &self.expression_type)
            .field("compiled_expression", &self.compiled_expression.is_some())
            .field("born_time", &self.born_time)
            .field("dead_time", &self.dead_time)
            .field("bloom_filter_data", &self.bloom_filter_data)
            .field("client_version", &self.client_version)
            .finish()
    }
}

impl Display for ConsumerFilterData {
    fn fmt(&self, f: &mut Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "ConsumerFilterData {{ group: {}, topic: {}, has_expression: {}, type: {:?}, has_compiled: {}, born: {}, \
             dead: {}, has_bloom: {}, client_ver: {} }}",
            self.consumer_group,
            self.topic,
            self.expression.is_some(),
            self.expression_type,
            self.compiled_expression.is_some(),
            self.born_time,
            self.dead_time,
            self.bloom_filter_data.is_some(),
            self.client_version
        )
    }
}

#[cfg(test)]
mod tests {
    use rocketmq_filter::expression::AlwaysTrueExpression;
    use rocketmq_filter::utils::bloom_filter_data::BloomFilterData;
    use rocketmq_runtime::common::time_utils::current_millis;

    use super::ConsumerFilterData;

    #[test]
    fn consumer_filter_data_lifetime_boundaries_are_explicit() {
        let mut data = ConsumerFilterData::default();
        data.set_born_time(100);

        data.set_dead_time(99);
        assert!(!data.is_dead());
        data.set_dead_time(100);
        assert!(data.is_dead());

        assert!(!data.is_msg_in_live(99));
        assert!(!data.is_msg_in_live(100));
        assert!(data.is_msg_in_live(101));
    }

    #[test]
    fn consumer_filter_data_reports_bounded_time_after_death() {
        let now = current_millis();
        let mut data = ConsumerFilterData::default();
        data.set_born_time(0);
        data.set_dead_time(now.saturating_sub(10));

        let elapsed = data.how_long_after_death().expect("filter should be dead");
        assert!(elapsed >= 10);
        assert!(elapsed <= 500);

        data.set_born_time(now.saturating_add(1));
        assert_eq!(data.how_long_after_death(), None);
    }

    #[test]
    fn consumer_filter_data_accessors_round_trip_and_display_redacts_expression() {
        let mut data = ConsumerFilterData::default();
        data.set_consumer_group("group-a".into());
        data.set_topic("orders".into());
        data.set_expression(Some("private-filter-body".into()));
        data.set_expression_type(Some("SQL92".into()));
        data.set_born_time(10);
        data.set_dead_time(20);
        data.set_bloom_filter_data(Some(BloomFilterData::new(vec![1, 3], 8)));
        data.set_client_version(7);
        data.set_compiled_expression(Box::new(AlwaysTrueExpression));

        assert_eq!(data.consumer_group(), "group-a");
        assert_eq!(data.topic(), "orders");
        assert_eq!(
            data.expression().map(|value| value.as_str()),
            Some("private-filter-body")
        );
        assert_eq!(data.expression_type().map(|value| value.as_str()), Some("SQL92"));
        assert_eq!(data.born_time(), 10);
        assert_eq!(data.dead_time(), 20);
        assert_eq!(data.bloom_filter_data().expect("bloom data").bit_pos(), &[1, 3]);
        assert_eq!(data.client_version(), 7);
        assert!(data.compiled_expression().is_some());

        let rendered = data.to_string();
        assert!(rendered.contains("has_compiled: true"));
        assert!(rendered.contains("has_bloom: true"));
        assert!(!rendered.contains("private-filter-body"));
    }
}
