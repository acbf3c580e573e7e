//! Golden vectors for the gateway's Iggy binary protocol 0.12 client.
//!
//! Every request the TypeScript 0.12 client sends and every reply it parses is built here with
//! the official codec crate (`iggy_binary_protocol`, declares protocol 0.12.2) from fixed
//! inputs, and written as hex into one JSON file that the Deno tests read. Random fields (client
//! id, bind secret, request checksum, message ids) are fixed inputs, so a run reproduces the file
//! byte for byte. Usage: `cargo run --release -- ../../tests/fixtures/iggy012/vectors.json`.

use bytemuck::bytes_of;
use bytes::BytesMut;
use iggy_binary_protocol::batch::{BATCH_HEADER_SIZE, BatchHeader, BatchProducer, calculate_batch_checksum};
use iggy_binary_protocol::codes::*;
use iggy_binary_protocol::primitives::user_headers::encode_user_headers;
use iggy_binary_protocol::requests::consumer_offsets::get_consumer_offset::GetConsumerOffsetRequest;
use iggy_binary_protocol::requests::consumer_offsets::store_consumer_offset::StoreConsumerOffsetRequest;
use iggy_binary_protocol::requests::messages::get_partition_route::GetPartitionRouteRequest;
use iggy_binary_protocol::requests::messages::poll_messages::{DeferredPollMessagesRequest, PollMessagesRequest};
use iggy_binary_protocol::requests::messages::send_messages::{RawMessage, SendMessagesEncoder};
use iggy_binary_protocol::requests::streams::create_stream::CreateStreamRequest;
use iggy_binary_protocol::requests::streams::get_stream::GetStreamRequest;
use iggy_binary_protocol::requests::system::bind_session::{BindSessionRequest, SessionIdentity};
use iggy_binary_protocol::requests::topics::create_topic::CreateTopicRequest;
use iggy_binary_protocol::requests::topics::get_topic::GetTopicRequest;
use iggy_binary_protocol::requests::users::get_user::GetUserRequest;
use iggy_binary_protocol::requests::users::login_register::{BindSecret, LoginRegisterRequest};
use iggy_binary_protocol::requests::users::login_register_with_pat::LoginRegisterWithPatRequest;
use iggy_binary_protocol::responses::consumer_offsets::get_consumer_offset::ConsumerOffsetResponse;
use iggy_binary_protocol::responses::messages::partition_route::PartitionRouteResponse;
use iggy_binary_protocol::responses::messages::poll_messages::{PollMessagesResponse, PollMessagesResponseHeader};
use iggy_binary_protocol::responses::messages::send_messages::{SendMessagesConfirmationResponse, SendMessagesResponse};
use iggy_binary_protocol::responses::streams::get_stream::{GetStreamResponse, TopicHeader};
use iggy_binary_protocol::responses::streams::get_streams::GetStreamsResponse;
use iggy_binary_protocol::responses::streams::StreamResponse;
use iggy_binary_protocol::responses::topics::get_topic::{GetTopicResponse, PartitionResponse};
use iggy_binary_protocol::responses::users::get_user::UserDetailsResponse;
use iggy_binary_protocol::responses::users::login_register::LoginRegisterResponse;
use iggy_binary_protocol::responses::users::user_response::UserResponse;
use iggy_binary_protocol::{
    AckLevel, ClientVersionInfo, Command, EvictionHeader, EvictionReason, IGGY_PROTOCOL_VERSION, Operation,
    PartitionContext, ReplyHeader, RequestHeader, WireConsumer, WireEncode, WireGlobalPermissions,
    WireIdentifier, WireName, WireOptions, WirePartitioning, WirePermissions, WirePollingStrategy,
    WireStreamPermissions, WireTopicPermissions,
};
use secrecy::SecretString;
use std::fmt::Write as _;

const CLIENT: u128 = 0x0102_0304_0506_0708_090a_0b0c_0d0e_0f10;
const SESSION: u64 = 5;
const SDK_NAME: &str = "iggy-mqtt-gateway";
const SDK_VERSION: &str = "0.1.0";
const ROUTE: PartitionContext = PartitionContext { incarnation: 7, owner_generation: 0, metadata_op: 9 };
const METADATA_CHECKSUM: u128 = 0x2222_2222_2222_2222_2222_2222_2222_2222;
// The gateway sets the top bit of every message id (never zero).
const MESSAGE_ID: u128 = (1 << 127) | 42;
const ORIGIN_US: u64 = 1_000_000;
const STRING: u8 = 2;
const UINT64: u8 = 12;

fn hex(bytes: &[u8]) -> String {
    bytes.iter().fold(String::with_capacity(bytes.len() * 2), |mut s, b| {
        let _ = write!(s, "{b:02x}");
        s
    })
}

fn encode(value: &impl WireEncode) -> Vec<u8> {
    let mut buf = BytesMut::new();
    value.encode(&mut buf);
    buf.to_vec()
}

fn frame(header: &RequestHeader, body: &[u8]) -> Vec<u8> {
    [bytes_of(header), body].concat()
}

/// The codec's header for `code`; the tests inject the same request id and checksum.
fn request(code: u32, request: u64, session: u64, body: &[u8], checksum: Option<u128>) -> RequestHeader {
    let mut h = RequestHeader::for_request(code, CLIENT, request, session, body).expect("header");
    if let Some(c) = checksum {
        h.request_checksum = c;
    }
    h
}

fn routed(code: u32, id: u64, body: &[u8]) -> Vec<u8> {
    let mut h = request(code, id, SESSION, body, None);
    ROUTE.stamp(&mut h);
    frame(&h, body)
}

fn reply(operation: Operation, id: u64, status: u32, body: &[u8]) -> Vec<u8> {
    let h = ReplyHeader {
        command: Command::Reply,
        size: (256 + body.len()) as u32,
        client: CLIENT,
        request: id,
        operation,
        status,
        partition_incarnation: ROUTE.incarnation,
        ..Default::default()
    };
    [bytes_of(&h), body].concat()
}

fn result_framed(payload: &[u8]) -> Vec<u8> {
    [&0u32.to_le_bytes()[..], payload].concat()
}

fn name(s: &str) -> WireName {
    WireName::new(s).expect("name")
}

fn id(s: &str) -> WireIdentifier {
    WireIdentifier::named(s).expect("identifier")
}

fn options(entries: &[(u8, &[u8], u8, &[u8])]) -> WireOptions {
    let mut buf = BytesMut::new();
    encode_user_headers(entries, &mut buf);
    WireOptions::from_slice(&buf).expect("options")
}

fn version_info() -> ClientVersionInfo {
    ClientVersionInfo { protocol_version: IGGY_PROTOCOL_VERSION, sdk_name: name(SDK_NAME), sdk_version: name(SDK_VERSION) }
}

fn bind_secret() -> BindSecret {
    let mut s = [0u8; 32];
    for (i, b) in s.iter_mut().enumerate() {
        *b = 0xa0 + i as u8;
    }
    BindSecret::new(Box::new(s))
}

/// Register's `request_checksum` by the gateway's rule: XXH3-64 of the body, widened. A 0.11
/// server verifies a non-zero stamp against exactly that, a 0.12 one only wants it non-zero and
/// kept on retries; the bind secret in the body makes it unique per session.
fn register_checksum(body: &[u8]) -> u128 {
    u128::from(twox_hash::XxHash3_64::oneshot(body))
}

fn poll_request() -> PollMessagesRequest {
    PollMessagesRequest {
        consumer: WireConsumer::consumer(id("mqtt-gateway-poll")),
        stream_id: id("s"),
        topic_id: id("t"),
        partition_id: Some(0),
        strategy: WirePollingStrategy::offset(3),
        count: 10,
        auto_commit: false,
    }
}

fn message_headers() -> Vec<u8> {
    let mut buf = BytesMut::new();
    encode_user_headers(&[(STRING, b"key", STRING, b"value")], &mut buf);
    buf.to_vec()
}

fn send_body(producer: Option<BatchProducer>) -> Vec<u8> {
    let headers = message_headers();
    let messages = [RawMessage { id: MESSAGE_ID, origin_timestamp: ORIGIN_US, headers: Some(&headers), payload: b"hello" }];
    let mut buf = BytesMut::new();
    SendMessagesEncoder::encode_with_producer(&mut buf, &id("s"), &id("t"), &WirePartitioning::PartitionId(0), producer, &messages)
        .expect("send body");
    buf.to_vec()
}

/// A batch as a poll reply carries it: stored offset and append time stamped, checksum resealed.
fn polled_batch(producer: Option<BatchProducer>) -> Vec<u8> {
    let body = send_body(producer);
    let meta_len = u32::from_le_bytes(body[0..4].try_into().unwrap()) as usize;
    let batch = &body[4 + meta_len..];
    let mut header = BatchHeader::decode(batch).expect("batch header");
    let blob = &batch[BATCH_HEADER_SIZE..];
    header.partition_id = 0;
    header.base_offset = 3;
    header.base_timestamp = 2_000_000;
    header.batch_checksum = calculate_batch_checksum(&header, blob);
    let mut out = vec![0u8; BATCH_HEADER_SIZE];
    header.encode_into(&mut out);
    out.extend_from_slice(blob);
    out
}

fn poll_reply_body(batches: &[Vec<u8>], count: u32) -> Vec<u8> {
    let head = PollMessagesResponseHeader { partition_id: 0, current_offset: 3, messages_count: count, context: ROUTE };
    let mut body = head.to_le_bytes().to_vec();
    for b in batches {
        body.extend_from_slice(b);
    }
    // The official decoder must read back what the tests expect.
    let decoded = PollMessagesResponse::decode(&body).expect("poll reply");
    for m in decoded.messages {
        let m = m.expect("polled message");
        assert_eq!((m.offset, m.id, m.timestamp, m.payload), (3, MESSAGE_ID, 2_000_000, &b"hello"[..]));
    }
    body
}

fn eviction(reason: EvictionReason, max: u32, min: u32) -> Vec<u8> {
    let h = EvictionHeader {
        checksum: 0,
        checksum_body: 0,
        cluster: 0,
        size: 256,
        view: 0,
        release: 0,
        command: Command::Eviction,
        replica: 0,
        reserved_frame: [0; 66],
        client: CLIENT,
        server_protocol_version: max,
        server_protocol_version_min: min,
        reserved: [0; 103],
        reason,
    };
    bytes_of(&h).to_vec()
}

fn topic_header() -> TopicHeader {
    TopicHeader {
        id: 1,
        created_at: 1_700_000_000_000_000,
        partitions_count: 2,
        size_bytes: 100,
        messages_count: 4,
        name: name("t"),
        options: options(&[(STRING, b"durability", STRING, b"persisted"), (STRING, b"message_expiry", UINT64, &60_000_000u64.to_le_bytes())]),
        derived_options: options(&[(STRING, b"replication_factor", UINT64, &1u64.to_le_bytes())]),
    }
}

fn partition(id: u32, current_offset: u64, messages: u64) -> PartitionResponse {
    PartitionResponse {
        id,
        created_at: 1_700_000_000_000_001,
        segments_count: 1,
        current_offset,
        size_bytes: 50,
        messages_count: messages,
        context: PartitionContext { incarnation: 7 + u64::from(id), owner_generation: 0, metadata_op: 9 },
        members: vec![1],
        in_sync_members: vec![1],
    }
}

fn stream_record() -> StreamResponse {
    StreamResponse {
        id: 1,
        created_at: 1_700_000_000_000_000,
        topics_count: 1,
        size_bytes: 100,
        messages_count: 4,
        name: name("s"),
        options: WireOptions::empty(),
        derived_options: options(&[(STRING, b"encryption_key_source", STRING, b"none")]),
    }
}

fn user_details() -> UserDetailsResponse {
    UserDetailsResponse {
        user: UserResponse { id: 3, created_at: 1_700_000_000_000_000, status: 1, username: name("alice"), options: WireOptions::empty(), derived_options: WireOptions::empty() },
        permissions: Some(WirePermissions {
            global: WireGlobalPermissions {
                manage_servers: false,
                read_servers: false,
                manage_users: false,
                read_users: false,
                manage_streams: false,
                read_streams: true,
                manage_topics: false,
                read_topics: false,
                poll_messages: false,
                send_messages: false,
            },
            streams: vec![WireStreamPermissions {
                stream_id: 1,
                manage_stream: false,
                read_stream: false,
                manage_topics: false,
                read_topics: false,
                poll_messages: true,
                send_messages: false,
                topics: vec![WireTopicPermissions { topic_id: 1, manage_topic: false, read_topic: false, poll_messages: false, send_messages: true }],
            }],
        }),
    }
}

fn requests(v: &mut Vec<(&'static str, Vec<u8>)>) {
    let password = LoginRegisterRequest {
        version_info: version_info(),
        bind_secret: bind_secret(),
        username: name("iggy"),
        password: SecretString::from("secret"),
        client_context: None,
    };
    let body = encode(&password);
    v.push(("request.register_password", frame(&request(LOGIN_REGISTER_CODE, 0, 0, &body, Some(register_checksum(&body))), &body)));
    let token = LoginRegisterWithPatRequest { version_info: version_info(), bind_secret: bind_secret(), token: SecretString::from("tok"), client_context: None };
    let body = encode(&token);
    v.push(("request.register_token", frame(&request(LOGIN_REGISTER_WITH_PAT_CODE, 0, 0, &body, Some(register_checksum(&body))), &body)));
    v.push(("request.ping_unbound", frame(&request(PING_CODE, 0, 0, &[], None), &[])));
    v.push(("request.ping", frame(&request(PING_CODE, 1, SESSION, &[], None), &[])));
    let body = encode(&GetPartitionRouteRequest { stream_id: id("s"), topic_id: id("t"), partition_id: 0 });
    v.push(("request.get_partition_route", frame(&request(GET_PARTITION_ROUTE_CODE, 2, SESSION, &body, None), &body)));
    v.push(("request.send_messages", routed(SEND_MESSAGES_CODE, 3, &send_body(None))));
    let producer = BatchProducer::new(4000, 3, 17);
    v.push(("request.send_messages_producer", routed(SEND_MESSAGES_CODE, 4, &send_body(producer))));
    v.push(("request.poll_messages", routed(POLL_MESSAGES_CODE, 5, &encode(&poll_request()))));
    let deferred = DeferredPollMessagesRequest { poll: poll_request(), wait_us: 5_000_000, min_count: 1, max_bytes: 1 << 20, request_timeout_us: 6_000_000 };
    let body = encode(&deferred);
    let mut h = request(POLL_MESSAGES_DEFERRED_CODE, 6, SESSION, &body, None);
    ROUTE.stamp(&mut h);
    v.push(("request.poll_deferred", frame(&h, &body)));
    let cancel = h.deferred_cancellation().expect("cancel");
    v.push(("request.cancel_deferred", frame(&cancel, &[])));
    let store = StoreConsumerOffsetRequest {
        consumer: WireConsumer::consumer(id("mqtt-gw-r")),
        stream_id: id("s"),
        topic_id: id("t"),
        partition_id: Some(0),
        offset: 41,
        ack: AckLevel::Quorum,
    };
    v.push(("request.store_offset", routed(STORE_CONSUMER_OFFSET_CODE, 7, &encode(&store))));
    let get = GetConsumerOffsetRequest { consumer: WireConsumer::consumer(id("mqtt-gw-r")), stream_id: id("s"), topic_id: id("t"), partition_id: Some(0) };
    v.push(("request.get_offset", routed(GET_CONSUMER_OFFSET_CODE, 8, &encode(&get))));
    let body = encode(&GetStreamRequest { stream_id: id("s") });
    v.push(("request.get_stream", frame(&request(GET_STREAM_CODE, 9, SESSION, &body, None), &body)));
    v.push(("request.get_streams", frame(&request(GET_STREAMS_CODE, 10, SESSION, &[], None), &[])));
    let body = encode(&CreateStreamRequest { name: name("s"), options: WireOptions::empty() });
    v.push(("request.create_stream", frame(&request(CREATE_STREAM_CODE, 11, SESSION, &body, Some(METADATA_CHECKSUM)), &body)));
    let body = encode(&GetTopicRequest { stream_id: id("s"), topic_id: id("t") });
    v.push(("request.get_topic", frame(&request(GET_TOPIC_CODE, 12, SESSION, &body, None), &body)));
    let create = CreateTopicRequest {
        stream_id: id("s"),
        partitions_count: 2,
        name: name("t"),
        options: options(&[
            (STRING, b"message_expiry", UINT64, &60_000_000u64.to_le_bytes()),
            (STRING, b"max_topic_size", UINT64, &1_000_000u64.to_le_bytes()),
            (STRING, b"durability", STRING, b"persisted"),
        ]),
    };
    let body = encode(&create);
    v.push(("request.create_topic", frame(&request(CREATE_TOPIC_CODE, 13, SESSION, &body, Some(METADATA_CHECKSUM)), &body)));
    let bind = BindSessionRequest {
        version_info: version_info(),
        identity: SessionIdentity { client_id: CLIENT, session: SESSION, metadata_watermark: 0 },
        bind_secret: bind_secret(),
    };
    let body = encode(&bind);
    v.push(("request.bind_session", frame(&request(BIND_SESSION_CODE, 15, SESSION, &body, None), &body)));
    let body = encode(&GetUserRequest { user_id: WireIdentifier::numeric(3) });
    v.push(("request.get_user", frame(&request(GET_USER_CODE, 14, SESSION, &body, None), &body)));
}

fn replies(v: &mut Vec<(&'static str, Vec<u8>)>) {
    let login = LoginRegisterResponse { user_id: 0, session: SESSION, server_protocol_version: IGGY_PROTOCOL_VERSION, server_version: name("0.10.0") };
    v.push(("reply.register", reply(Operation::Register, 0, 0, &result_framed(&encode(&login)))));
    v.push(("reply.ping", reply(Operation::NonReplicated, 1, 0, &[])));
    v.push(("reply.bind_session", reply(Operation::NonReplicated, 15, 0, &encode(&login))));
    let route = PartitionRouteResponse { incarnation: 7, metadata_op: 9, view: 0, partitions_count: 2, primary_replica: 0 };
    v.push(("reply.partition_route", reply(Operation::NonReplicated, 2, 0, &encode(&route))));
    let sent = SendMessagesResponse { confirmations: vec![SendMessagesConfirmationResponse { stream_id: 1, topic_id: 1, partition_id: 0, base_offset: 3 }] };
    v.push(("reply.send_messages", reply(Operation::SendMessages, 3, 0, &encode(&sent))));
    v.push(("reply.send_not_primary", reply(Operation::SendMessages, 3, 89, &[])));
    v.push(("reply.send_history_unavailable", reply(Operation::SendMessages, 3, 87, &[])));
    v.push(("reply.send_transient_not_accepted", reply(Operation::SendMessages, 3, 58, &[])));
    v.push(("reply.poll_messages", reply(Operation::NonReplicated, 5, 0, &poll_reply_body(&[polled_batch(None)], 1))));
    let producer = BatchProducer::new(4000, 3, 17);
    v.push(("reply.poll_messages_producer", reply(Operation::NonReplicated, 5, 0, &poll_reply_body(&[polled_batch(producer)], 1))));
    v.push(("reply.poll_empty", reply(Operation::NonReplicated, 6, 0, &poll_reply_body(&[], 0))));
    v.push(("reply.store_offset", reply(Operation::StoreConsumerOffset, 7, 0, &result_framed(&[]))));
    let offset = ConsumerOffsetResponse { partition_id: 0, current_offset: 10, stored_offset: 41 };
    v.push(("reply.get_offset", reply(Operation::NonReplicated, 8, 0, &encode(&offset))));
    v.push(("reply.get_offset_none", reply(Operation::NonReplicated, 8, 0, &[])));
    let stream = GetStreamResponse { stream: stream_record(), topics: vec![topic_header()] };
    v.push(("reply.get_stream", reply(Operation::NonReplicated, 9, 0, &encode(&stream))));
    let streams = GetStreamsResponse { streams: vec![stream_record()] };
    v.push(("reply.get_streams", reply(Operation::NonReplicated, 10, 0, &encode(&streams))));
    v.push(("reply.create_stream", reply(Operation::CreateStream, 11, 0, &result_framed(&encode(&stream_record())))));
    let topic = GetTopicResponse { topic: topic_header(), partitions: vec![partition(0, 3, 4), partition(1, 0, 0)] };
    v.push(("reply.get_topic", reply(Operation::NonReplicated, 12, 0, &encode(&topic))));
    v.push(("reply.create_topic", reply(Operation::CreateTopic, 13, 0, &result_framed(&encode(&topic)))));
    v.push(("reply.get_user", reply(Operation::NonReplicated, 14, 0, &encode(&user_details()))));
    v.push(("reply.eviction_incompatible_011", eviction(EvictionReason::IncompatibleProtocol, 0x2C00, 0x2C00)));
    v.push(("reply.eviction_incompatible_012", eviction(EvictionReason::IncompatibleProtocol, IGGY_PROTOCOL_VERSION, IGGY_PROTOCOL_VERSION)));
}

fn main() {
    let out = std::env::args().nth(1).expect("usage: iggy-vectors <output.json>");
    let mut v = Vec::new();
    requests(&mut v);
    replies(&mut v);
    let mut json = String::from("{\n");
    let _ = writeln!(json, "  \"generator\": \"tools/iggy-vectors with iggy_binary_protocol =0.11.1-edge.8\",");
    let _ = writeln!(json, "  \"protocol_version\": {IGGY_PROTOCOL_VERSION},");
    let _ = writeln!(json, "  \"client\": \"{CLIENT:032x}\",");
    let _ = writeln!(json, "  \"session\": {SESSION},");
    let _ = writeln!(json, "  \"frames\": {{");
    for (i, (k, bytes)) in v.iter().enumerate() {
        let comma = if i + 1 == v.len() { "" } else { "," };
        let _ = writeln!(json, "    \"{k}\": \"{}\"{comma}", hex(bytes));
    }
    json.push_str("  }\n}\n");
    std::fs::write(&out, json).expect("write output");
    eprintln!("wrote {} frames to {out}", v.len());
}
