//! A pop answer built with rocketmq-protocol's own encoders decodes to the
//! LiteTopic messages it carries: the fuzz target starts from real frames.
//! `SLUICE_WRITE_SEEDS=1` also writes them as the target's seed corpus.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // tests fail loudly

use std::time::Instant;

use bytes::{BufMut, Bytes, BytesMut};
use cheetah_string::CheetahString;
use rocketmq_model::common::message::message_ext::MessageExt;
use rocketmq_model::common::message::{MessageConst, MessageTrait};
use rocketmq_protocol::common::message::message_decoder;
use rocketmq_protocol::protocol::header::pop_lite_message_response_header::PopLiteMessageResponseHeader;
use rocketmq_protocol::protocol::remoting_command::RemotingCommand;

fn message(lite_topic: &str, offset: i64, body: &str) -> Bytes {
    let mut ext = MessageExt::default();
    ext.message.set_topic(CheetahString::from("sluice-work"));
    ext.message.set_body(Some(Bytes::from(body.to_string())));
    ext.message.put_property(
        CheetahString::from_static_str(MessageConst::PROPERTY_LITE_TOPIC),
        CheetahString::from(lite_topic),
    );
    ext.message.put_property(
        CheetahString::from_static_str(MessageConst::PROPERTY_INNER_MULTI_QUEUE_OFFSET),
        CheetahString::from(offset.to_string()),
    );
    ext.message.put_property(
        CheetahString::from_static_str("sluice-req"),
        CheetahString::from("0123456789abcdef0123456789abcdef"),
    );
    message_decoder::encode(&ext, false).unwrap_or_default()
}

/// One whole frame: length, header, body.
fn pop_answer(messages: &[Bytes]) -> Vec<u8> {
    let body: Vec<u8> = messages.iter().flat_map(|m| m.to_vec()).collect();
    let header = PopLiteMessageResponseHeader {
        pop_time: 1_700_000_000_000,
        invisible_time: 30_000,
        revive_qid: 2,
        ..Default::default()
    };
    let mut command = RemotingCommand::create_response_command_with_code_and_header(0, header)
        .set_body(Bytes::from(body.clone()));
    let mut frame = BytesMut::new();
    frame.put(command.encode_header().unwrap_or_default());
    frame.put_slice(&body);
    frame.to_vec()
}

fn seeds() -> Vec<(&'static str, Vec<u8>)> {
    let work = r#"{"req_id":"0123456789abcdef0123456789abcdef","tenant":"acme"}"#;
    vec![
        (
            "one-message",
            pop_answer(&[message("acme__gpt-4o", 0, work)]),
        ),
        (
            "two-messages",
            pop_answer(&[
                message("acme__gpt-4o", 3, work),
                message("beta__llama", 0, "{}"),
            ]),
        ),
        ("empty-body", pop_answer(&[])),
    ]
}

#[test]
fn encoded_pop_answers_decode_to_their_messages() {
    for (name, frame) in seeds() {
        let mut buffer = BytesMut::from(frame.as_slice());
        let mut command = RemotingCommand::decode(&mut buffer)
            .unwrap_or_else(|e| panic!("{name}: {e}"))
            .unwrap_or_else(|| panic!("{name}: incomplete frame"));
        let messages = sluice_litetopic::decode_pop_answer(&mut command, Instant::now())
            .unwrap_or_else(|e| panic!("{name}: {e}"));
        let expected = match name {
            "one-message" => 1,
            "two-messages" => 2,
            _ => 0,
        };
        assert_eq!(messages.len(), expected, "{name}");
        if let Some(first) = messages.first() {
            assert_eq!(first.lite_topic, "acme__gpt-4o");
            assert_eq!(
                first.properties.get("sluice-req").map(String::as_str),
                Some("0123456789abcdef0123456789abcdef")
            );
        }
        if std::env::var_os("SLUICE_WRITE_SEEDS").is_some() {
            let dir = sluice_fuzz::fuzz_dir().join("corpus/lite_topic_frame");
            std::fs::create_dir_all(&dir).unwrap_or_else(|e| panic!("{e}"));
            std::fs::write(dir.join(name), &frame).unwrap_or_else(|e| panic!("{e}"));
        }
    }
}
