/**
 * Golden vectors of protocol 0.12, written by the official codec (`tools/iggy-vectors`,
 * `tests/fixtures/iggy012/vectors.json`): our encoders write exactly these frames from the same
 * inputs (random fields injected), and our decoders read these replies.
 */
import assert from "node:assert/strict";
import { decodeSendReply } from "../batch.ts";
import { fromHex, toHex } from "../bytes.ts";
import { Code, IggyEvictionError, Operation } from "../codes.ts";
import * as cmd from "../v11/request_bodies.ts";
import { HEADER_SIZE, readReplyHeader } from "../header_layout.ts";
import { decodeRegisterReply } from "../login.ts";
import { decodeReply } from "../reply.ts";
import { SendEncoder } from "../send_encoder.ts";
import { loadHashes } from "../../../base/xxhash.ts";
import { writeNumericIdentifier } from "../encoding.ts";
import { ByteWriter } from "../bytes.ts";
import { createTopicBody012 } from "./topic_options.ts";
import { isCommittedReply, requestFrame012, type Stamp012 } from "./routed_header.ts";
import { decodePollReply012, deferredPollBody } from "./deferred_poll.ts";
import { stampProducer } from "./producer.ts";
import {
  decodeStreamDetails012,
  decodeStreams012,
  decodeTopic012,
  decodeUser012,
} from "./records.ts";
import { bindSessionBody, encodeRegister012, registerChecksum } from "./register.ts";
import { decodeRoute, routeBody } from "./route.ts";
import { Code012, PROTOCOL_012_PACKED } from "./wire.ts";

await loadHashes();
const url = new URL("../../../../tests/fixtures/iggy012/vectors.json", import.meta.url);
const fixture = JSON.parse(await Deno.readTextFile(url)) as {
  protocol_version: number;
  client: string;
  frames: Record<string, string>;
};
const CLIENT = BigInt(`0x${fixture.client}`);
const SESSION = 5n;
const ROUTE = { incarnation: 7n, ownerGeneration: 0n, metadataOp: 9n };
const METADATA_CHECKSUM = BigInt(`0x${"22".repeat(16)}`);
const SECRET = Uint8Array.from({ length: 32 }, (_, i) => 0xa0 + i);

function expected(name: string): string {
  const hex = fixture.frames[name];
  assert.ok(hex, `fixture ${name} missing`);
  return hex;
}

function stamp(request: number, code: number, extra: Partial<Stamp012> = {}): Stamp012 {
  const operation = code === Code.CREATE_STREAM
    ? Operation.CREATE_STREAM
    : code === Code.CREATE_TOPIC
    ? Operation.CREATE_TOPIC
    : code === Code.SEND_MESSAGES
    ? Operation.SEND_MESSAGES
    : code === Code.STORE_CONSUMER_OFFSET
    ? Operation.STORE_CONSUMER_OFFSET
    : Operation.NON_REPLICATED;
  return { client: CLIENT, request: BigInt(request), session: SESSION, operation, ...extra };
}

function frame(name: string): [Uint8Array, Uint8Array] {
  const f = fromHex(expected(name));
  return [f.subarray(0, HEADER_SIZE), f.subarray(HEADER_SIZE)];
}

function payload(name: string, code: number): Uint8Array {
  const [h, b] = frame(name);
  return decodeReply(h, b, code);
}

const poll = cmd.pollBody("mqtt-gateway-poll", { stream: "s", topic: "t", partition: 0 }, 3, 10);
const target = { stream: "s", topic: "t", partition: 0 };

function sendFrame(): Uint8Array {
  const ids = (out: Uint8Array) => {
    out.fill(0);
    out[0] = 42;
  };
  const message = {
    payload: new TextEncoder().encode("hello"),
    headers: new Map([["key", "value"]]),
  };
  return new SendEncoder(ids).encode("s", "t", 0, [message], 1_000_000);
}

Deno.test("vectors: the fixture is protocol 0.12.2, the version this client registers with", () => {
  assert.equal(fixture.protocol_version, PROTOCOL_012_PACKED);
});

Deno.test("vectors: Register with password and with token, bind secret and checksum rule", () => {
  for (
    const [name, credentials] of [
      ["request.register_password", { kind: "password", username: "iggy", password: "secret" }],
      ["request.register_token", { kind: "token", token: "tok" }],
    ] as const
  ) {
    const { code, body } = encodeRegister012(credentials, SECRET, PROTOCOL_012_PACKED);
    const f = requestFrame012(code, body, {
      client: CLIENT,
      request: 0n,
      session: 0n,
      operation: Operation.REGISTER,
      requestChecksum: registerChecksum(body),
    });
    assert.equal(toHex(f), expected(name), name);
  }
});

Deno.test("vectors: PING bound and unbound, route lookup, reads", () => {
  const none = new Uint8Array(0);
  const cases: [string, Uint8Array][] = [
    ["request.ping_unbound", requestFrame012(1, none, { ...stamp(0, 1), session: 0n })],
    ["request.ping", requestFrame012(1, none, stamp(1, 1))],
    [
      "request.get_partition_route",
      requestFrame012(105, routeBody("s", "t", 0), stamp(2, Code012.GET_PARTITION_ROUTE)),
    ],
    ["request.get_stream", requestFrame012(200, cmd.getStreamBody("s"), stamp(9, 200))],
    ["request.get_streams", requestFrame012(201, none, stamp(10, 201))],
    ["request.get_topic", requestFrame012(300, cmd.getTopicBody("s", "t"), stamp(12, 300))],
    [
      "request.get_user",
      requestFrame012(31, writeNumericIdentifier(new ByteWriter(), 3).finish(), stamp(14, 31)),
    ],
  ];
  for (const [name, f] of cases) assert.equal(toHex(f), expected(name), name);
});

Deno.test("vectors: SEND_MESSAGES stamped with the route, without and with a producer", () => {
  const plain = requestFrame012(101, sendFrame(), stamp(3, 101, { context: ROUTE }), true);
  assert.equal(toHex(plain), expected("request.send_messages"));
  const f = sendFrame();
  stampProducer(f, { producerId: 4000n, epoch: 3, baseSequence: 17 });
  const idem = requestFrame012(101, f, stamp(4, 101, { context: ROUTE }), true);
  assert.equal(toHex(idem), expected("request.send_messages_producer"));
});

Deno.test("vectors: polls (plain, deferred, cancel) and consumer offsets are routed", () => {
  const deferred = deferredPollBody(poll, { waitMs: 5000, minCount: 1, maxBytes: 1 << 20 });
  const cases: [string, Uint8Array][] = [
    ["request.poll_messages", requestFrame012(100, poll, stamp(5, 100, { context: ROUTE }))],
    ["request.poll_deferred", requestFrame012(106, deferred, stamp(6, 106, { context: ROUTE }))],
    ["request.cancel_deferred", requestFrame012(108, new Uint8Array(0), stamp(6, 108))],
    [
      "request.store_offset",
      requestFrame012(
        121,
        cmd.storeOffsetBody("mqtt-gw-r", target, 41),
        stamp(7, 121, {
          context: ROUTE,
        }),
      ),
    ],
    [
      "request.get_offset",
      requestFrame012(
        120,
        cmd.getOffsetBody("mqtt-gw-r", target),
        stamp(8, 120, {
          context: ROUTE,
        }),
      ),
    ],
  ];
  for (const [name, f] of cases) assert.equal(toHex(f), expected(name), name);
});

Deno.test("vectors: CREATE_STREAM and CREATE_TOPIC (durability = persisted) carry the checksum", () => {
  const s = requestFrame012(202, cmd.createStreamBody("s"), {
    ...stamp(11, 202),
    requestChecksum: METADATA_CHECKSUM,
  });
  assert.equal(toHex(s), expected("request.create_stream"));
  const body = createTopicBody012("s", "t", {
    partitions: 2,
    messageExpiryMicros: 60_000_000,
    maxTopicBytes: 1_000_000,
    durable: true,
  });
  const t = requestFrame012(302, body, { ...stamp(13, 302), requestChecksum: METADATA_CHECKSUM });
  assert.equal(toHex(t), expected("request.create_topic"));
});

Deno.test("vectors: Register reply binds session 5 on protocol 0.12.2, server 0.10.0", () => {
  const r = decodeRegisterReply(payload("reply.register", Code.LOGIN_REGISTER));
  assert.deepEqual(r, {
    userId: 0,
    session: 5n,
    serverProtocolVersion: PROTOCOL_012_PACKED,
    serverVersion: "0.10.0",
  });
});

Deno.test("vectors: route reply, send receipt, refusals by status", () => {
  const route = decodeRoute(payload("reply.partition_route", 105));
  assert.deepEqual(route, { ...ROUTE, view: 0, partitionsCount: 2, primaryReplica: 0 });
  assert.equal(decodeSendReply(payload("reply.send_messages", 101)), 3);
  for (const [name, code] of [["not_primary", 89], ["history_unavailable", 87]] as const) {
    assert.throws(
      () => payload(`reply.send_${name}`, 101),
      (e: { code?: number }) => e.code === code,
    );
  }
  assert.throws(
    () => payload("reply.send_transient_not_accepted", 101),
    (e: { code?: number }) => e.code === 58,
  );
  const [h] = frame("reply.send_messages");
  assert.equal(readReplyHeader(h).request, 3n);
  assert.equal(isCommittedReply(h), false);
});

Deno.test("vectors: poll replies with the 40-byte head, with and without a producer section", () => {
  for (const name of ["reply.poll_messages", "reply.poll_messages_producer"]) {
    const r = decodePollReply012(payload(name, 100));
    assert.equal(r.currentOffset, 3);
    assert.deepEqual(r.context, ROUTE);
    assert.equal(r.messages.length, 1, name);
    const m = r.messages[0];
    assert.equal(m.offset, 3);
    assert.equal(m.id, (1n << 127n) | 42n);
    assert.equal(m.timestampMicros, 2_000_000);
    assert.equal(m.originTimestampMicros, 1_000_000);
    assert.equal(new TextDecoder().decode(m.payload), "hello");
  }
  assert.equal(decodePollReply012(payload("reply.poll_empty", 100)).messages.length, 0);
});

Deno.test("vectors: consumer offset replies, stored and none", () => {
  assert.equal(payload("reply.store_offset", 121).length, 0);
  assert.equal(cmd.decodeOffsetReply(payload("reply.get_offset", 120)), 41);
  assert.equal(cmd.decodeOffsetReply(payload("reply.get_offset_none", 120)), null);
});

Deno.test("vectors: stream, streams, topic records and the user with permissions", () => {
  const details = decodeStreamDetails012(payload("reply.get_stream", 200))!;
  assert.deepEqual(details.stream, { id: 1, name: "s", topicsCount: 1 });
  assert.equal(details.topics[0].name, "t");
  assert.deepEqual(decodeStreams012(payload("reply.get_streams", 201)), [details.stream]);
  assert.deepEqual(
    decodeStreams012(payload("reply.create_stream", 202)),
    [details.stream],
  );
  for (const name of ["reply.get_topic", "reply.create_topic"]) {
    const t = decodeTopic012(payload(name, name.includes("create") ? 302 : 300))!;
    assert.equal(t.partitionsCount, 2);
    assert.deepEqual(t.partitions, [
      { id: 0, currentOffset: 3, messagesCount: 4 },
      { id: 1, currentOffset: 0, messagesCount: 0 },
    ]);
    assert.equal(t.options.get("durability"), "persisted");
    assert.equal(t.options.get("message_expiry"), "60000000");
    assert.equal(t.messageExpiryMicros, 60_000_000, "the option read as the topic's retention");
  }
  const u = decodeUser012(payload("reply.get_user", 31))!;
  assert.equal(u.username, "alice");
  assert.equal(u.status, 1);
  assert.equal(u.permissions!.global[5], true); // read_streams
  assert.deepEqual(u.permissions!.streams[0].topics[0], {
    topicId: 1,
    flags: [false, false, false, true],
  });
});

Deno.test("vectors: IncompatibleProtocol evictions name the server's window", () => {
  for (const [name, version] of [["011", 0x2c00], ["012", PROTOCOL_012_PACKED]] as const) {
    const [h, b] = frame(`reply.eviction_incompatible_${name}`);
    assert.throws(
      () => decodeReply(h, b, 40),
      (e) =>
        e instanceof IggyEvictionError && e.reason === 14 && e.serverVersion === version &&
        e.serverVersionMin === version,
    );
  }
});

Deno.test("vectors: BindSession attaches a further connection to session 5 with the secret", () => {
  const body = bindSessionBody(PROTOCOL_012_PACKED, CLIENT, SESSION, SECRET);
  const f = requestFrame012(Code012.BIND_SESSION, body, stamp(15, Code012.BIND_SESSION));
  assert.equal(toHex(f), expected("request.bind_session"));
  const r = decodeRegisterReply(payload("reply.bind_session", Code012.BIND_SESSION));
  assert.equal(r.session, 5n);
});
