/**
 * PacketDecoder against the oracle (mqtt-packet): valid packets of every client type decode to
 * what mqtt-packet says, in any chunking; the size cap holds before the body; malformed bytes
 * throw ProtocolError citing the conformance statement.
 */
import assert from "node:assert/strict";
import { Buffer } from "node:buffer";
import mqttPacket from "mqtt-packet";
import { concatBytes } from "../base/bytes.ts";
import { type DecoderLimits, PacketDecoder } from "./decoder.ts";
import { remainingLength as varint } from "./encoder.ts";
import { ProtocolError } from "./errors.ts";
import type { ClientPacket, PublishPacket } from "./packets.ts";

const LIMITS: DecoderLimits = { maxPacketBytes: 8092, maxTopicBytes: 255, maxTopicLevels: 32 };

// Oracle plumbing -----------------------------------------------------------------------------

// deno-lint-ignore no-explicit-any
type Oracle = any;

function generate(p: Record<string, unknown>): Uint8Array {
  return new Uint8Array(mqttPacket.generate(p as unknown as mqttPacket.Packet));
}

/** Parses bytes with mqtt-packet; throws on its errors. */
function oracleParse(bytes: Uint8Array, protocolVersion = 4): Oracle[] {
  const parser = mqttPacket.parser({ protocolVersion });
  const out: Oracle[] = [];
  const errors: Error[] = [];
  parser.on("packet", (p: Oracle) => out.push(p));
  parser.on("error", (e: Error) => errors.push(e));
  parser.parse(Buffer.from(bytes));
  if (errors.length > 0) throw errors[0];
  return out;
}

const bytesOf = (b: Uint8Array | null | undefined) => new Uint8Array(b ?? []);

/** mqtt-packet's view of a packet, in our packet shape. */
function fromOracle(o: Oracle): ClientPacket {
  switch (o.cmd) {
    case "connect":
      return {
        type: "connect",
        protocolName: o.protocolId,
        protocolLevel: o.protocolVersion,
        cleanSession: o.clean,
        keepAliveSeconds: o.keepalive,
        clientId: o.clientId,
        will: o.will
          ? {
            topic: o.will.topic,
            payload: bytesOf(o.will.payload),
            qos: o.will.qos,
            retain: o.will.retain,
          }
          : null,
        username: o.username ?? null,
        password: o.password === undefined ? null : bytesOf(o.password),
      };
    case "publish":
      return {
        type: "publish",
        topic: o.topic,
        qos: o.qos,
        retain: o.retain,
        dup: o.dup,
        packetId: o.messageId ?? 0,
        payload: bytesOf(o.payload),
      };
    case "puback":
    case "pubrec":
    case "pubrel":
    case "pubcomp":
      return { type: o.cmd, packetId: o.messageId };
    case "subscribe":
      return {
        type: "subscribe",
        packetId: o.messageId,
        subscriptions: o.subscriptions.map((s: Oracle) => ({ filter: s.topic, qos: s.qos })),
      };
    case "unsubscribe":
      return { type: "unsubscribe", packetId: o.messageId, filters: o.unsubscriptions };
    case "pingreq":
      return { type: "pingreq" };
    case "disconnect":
      return { type: "disconnect" };
  }
  throw new Error(`unexpected oracle packet ${o.cmd}`);
}

const CONNECT = generate({
  cmd: "connect",
  protocolId: "MQTT",
  protocolVersion: 4,
  clientId: "dec-1",
  clean: true,
  keepalive: 30,
});

/** A decoder that has already seen a valid CONNECT. */
function connected(limits = LIMITS): PacketDecoder {
  const d = new PacketDecoder(limits);
  assert.equal(d.push(CONNECT).length, 1);
  return d;
}

/** A packet from a first byte and body bytes, with a correct remaining length. */
function packet(byte1: number, body: readonly number[]): Uint8Array {
  return new Uint8Array([byte1, ...varint(body.length), ...body]);
}

/** Length-prefixed UTF-8 string (or raw bytes) as MQTT encodes it. */
function str(s: string | readonly number[]): number[] {
  const b = typeof s === "string" ? [...new TextEncoder().encode(s)] : [...s];
  return [b.length >> 8, b.length & 0xff, ...b];
}

// Valid packets ------------------------------------------------------------------------------

const payload = (n: number) => Buffer.from(new Uint8Array(n).map((_, i) => (i * 7) & 0xff));
const connect = (o: Record<string, unknown>) =>
  generate({ cmd: "connect", protocolId: "MQTT", protocolVersion: 4, clean: true, ...o });

const VALID_CONNECTS: [string, Uint8Array][] = [
  ["minimal", connect({ clientId: "c1", keepalive: 60 })],
  ["empty client id", connect({ clientId: "", keepalive: 0 })],
  [
    "clean session 0, keep-alive 65535",
    connect({ clientId: "c2", clean: false, keepalive: 65535 }),
  ],
  ["unicode client id", connect({ clientId: "gerät-ü-€-𝄞", keepalive: 10 })],
  ["23+ char client id", connect({ clientId: "x".repeat(100), keepalive: 10 })],
  [
    "username and binary password",
    connect({
      clientId: "c3",
      keepalive: 5,
      username: "alice",
      password: Buffer.from([0, 1, 255, 0]),
    }),
  ],
  ["username only", connect({ clientId: "c4", keepalive: 5, username: "bob" })],
  [
    "will QoS 0",
    connect({
      clientId: "c5",
      keepalive: 5,
      will: { topic: "w/t", payload: payload(3), qos: 0, retain: false },
    }),
  ],
  [
    "will QoS 1 retain with credentials",
    connect({
      clientId: "c6",
      keepalive: 5,
      username: "u",
      password: Buffer.from("p"),
      will: { topic: "will/é", payload: payload(0), qos: 1, retain: true },
    }),
  ],
  [
    "will QoS 2",
    connect({
      clientId: "c7",
      keepalive: 5,
      will: { topic: "w", payload: payload(300), qos: 2, retain: false },
    }),
  ],
];

const VALID_PACKETS: [string, Uint8Array][] = [
  ["PUBLISH QoS 0", generate({ cmd: "publish", topic: "sensors/a/data", payload: payload(5) })],
  [
    "PUBLISH QoS 1 retain",
    generate({
      cmd: "publish",
      topic: "a/b",
      payload: payload(9),
      qos: 1,
      messageId: 1,
      retain: true,
    }),
  ],
  [
    "PUBLISH QoS 1 DUP id 65535",
    generate({
      cmd: "publish",
      topic: "a",
      payload: payload(1),
      qos: 1,
      messageId: 65535,
      dup: true,
    }),
  ],
  ["PUBLISH empty payload", generate({ cmd: "publish", topic: "e", payload: Buffer.alloc(0) })],
  [
    "PUBLISH 4-byte UTF-8 and BOM kept [MQTT-1.5.3-3]",
    generate({ cmd: "publish", topic: "\uFEFFé/€/𝄞", payload: payload(2), qos: 1, messageId: 9 }),
  ],
  [
    "PUBLISH topic of exactly 255 bytes",
    generate({ cmd: "publish", topic: "t".repeat(255), payload: payload(4) }),
  ],
  [
    "PUBLISH topic of exactly 32 levels",
    generate({ cmd: "publish", topic: "l/".repeat(31) + "l", payload: payload(4) }),
  ],
  [
    "PUBLISH $-topic with spaces and empty levels",
    generate({ cmd: "publish", topic: "$x/ a //b/", payload: payload(4) }),
  ],
  [
    "PUBLISH 64+ byte ASCII topic (slow string path)",
    generate({ cmd: "publish", topic: "s".repeat(100), payload: payload(4) }),
  ],
  [
    "PUBLISH 2-byte remaining length",
    generate({ cmd: "publish", topic: "big", payload: payload(8000), qos: 1, messageId: 3 }),
  ],
  [
    "PUBLISH QoS 2 DUP",
    generate({
      cmd: "publish",
      topic: "q/2",
      payload: payload(3),
      qos: 2,
      messageId: 7,
      dup: true,
    }),
  ],
  ["PUBACK id 1", generate({ cmd: "puback", messageId: 1 })],
  ["PUBREC id 2", generate({ cmd: "pubrec", messageId: 2 })],
  ["PUBREL id 3 (flags 0x2)", generate({ cmd: "pubrel", messageId: 3 })],
  ["PUBCOMP id 65535", generate({ cmd: "pubcomp", messageId: 65535 })],
  ["PUBACK id 65535", generate({ cmd: "puback", messageId: 65535 })],
  [
    "SUBSCRIBE one filter",
    generate({ cmd: "subscribe", messageId: 2, subscriptions: [{ topic: "a/b", qos: 1 }] }),
  ],
  [
    "SUBSCRIBE three filters QoS 0/1/2 with wildcards",
    generate({
      cmd: "subscribe",
      messageId: 300,
      subscriptions: [{ topic: "a/+/c", qos: 0 }, { topic: "#", qos: 1 }, { topic: "ü", qos: 2 }],
    }),
  ],
  [
    "UNSUBSCRIBE one filter",
    generate({ cmd: "unsubscribe", messageId: 4, unsubscriptions: ["a"] }),
  ],
  [
    "UNSUBSCRIBE two filters",
    generate({ cmd: "unsubscribe", messageId: 65535, unsubscriptions: ["a/b", "c/#"] }),
  ],
  ["PINGREQ", generate({ cmd: "pingreq" })],
  ["DISCONNECT", generate({ cmd: "disconnect" })],
];

for (const [name, bytes] of VALID_CONNECTS) {
  Deno.test(`PacketDecoder.push() decodes CONNECT (${name}) as mqtt-packet does`, () => {
    const ours = new PacketDecoder(LIMITS).push(bytes);
    assert.deepEqual(ours, oracleParse(bytes).map(fromOracle));
  });
}

for (const [name, bytes] of VALID_PACKETS) {
  Deno.test(`PacketDecoder.push() decodes ${name} as mqtt-packet does`, () => {
    const ours = connected().push(bytes);
    assert.deepEqual(ours, oracleParse(bytes).map(fromOracle));
  });
}

Deno.test("PacketDecoder.push() answers MQTT 5 (when not enabled) and MQIsdp level 3 CONNECTs as unsupported", () => {
  const v5 = generate({
    cmd: "connect",
    protocolId: "MQTT",
    protocolVersion: 5,
    clientId: "v5",
    clean: true,
    keepalive: 5,
  });
  const v3 = generate({
    cmd: "connect",
    protocolId: "MQIsdp",
    protocolVersion: 3,
    clientId: "v3",
    clean: true,
    keepalive: 5,
  });
  assert.equal(oracleParse(v5, 5)[0].protocolVersion, 5);
  assert.deepEqual(new PacketDecoder(LIMITS, { v4: true, v5: false }).push(v5), [
    { type: "connect_unsupported", protocolName: "MQTT", level: 5 },
  ]);
  assert.deepEqual(new PacketDecoder(LIMITS, { v4: false, v5: true }).push(CONNECT), [
    { type: "connect_unsupported", protocolName: "MQTT", level: 4 },
  ]);
  assert.deepEqual(new PacketDecoder(LIMITS).push(v3), [
    { type: "connect_unsupported", protocolName: "MQIsdp", level: 3 },
  ]);
});

// Chunking -----------------------------------------------------------------------------------

const STREAM = concatBytes([
  CONNECT,
  ...VALID_PACKETS.filter(([n]) => !n.includes("2-byte remaining")).map(([, b]) => b),
]);
const WHOLE = new PacketDecoder(LIMITS).push(STREAM);

Deno.test("PacketDecoder.push() gives the same packets for a split at every byte boundary", () => {
  assert.equal(WHOLE.length, VALID_PACKETS.length);
  for (let i = 1; i < STREAM.length; i++) {
    const d = new PacketDecoder(LIMITS);
    const got = [...d.push(STREAM.subarray(0, i)), ...d.push(STREAM.subarray(i))];
    assert.deepEqual(got, WHOLE, `split at ${i}`);
    assert.equal(d.bufferedBytes, 0);
  }
});

Deno.test("PacketDecoder.push() gives the same packets fed one byte at a time", () => {
  const d = new PacketDecoder(LIMITS);
  const got: ClientPacket[] = [];
  for (let i = 0; i < STREAM.length; i++) got.push(...d.push(STREAM.subarray(i, i + 1)));
  assert.deepEqual(got, WHOLE);
});

Deno.test("PacketDecoder.push() gives the same packets fed in chunks of every size up to 64", () => {
  // Each chunk may finish a held packet, hold whole ones and start the next: the held one is
  // completed from the chunk's front alone, then the rest is decoded in place.
  for (let size = 2; size <= 64; size++) {
    const d = new PacketDecoder(LIMITS);
    const got: ClientPacket[] = [];
    for (let at = 0; at < STREAM.length; at += size) {
      got.push(...d.push(STREAM.subarray(at, at + size)));
    }
    assert.deepEqual(got, WHOLE, `chunks of ${size}`);
    assert.equal(d.bufferedBytes, 0);
  }
});

Deno.test("PacketDecoder.push() copies what it keeps, so the caller may reuse its read buffer", () => {
  const big = VALID_PACKETS.find(([n]) => n.includes("2-byte remaining"))![1];
  const d = connected();
  const buf = new Uint8Array(4096);
  const got: ClientPacket[] = [];
  for (let at = 0; at < big.length; at += buf.length) {
    const n = Math.min(buf.length, big.length - at);
    buf.set(big.subarray(at, at + n));
    got.push(...d.push(buf.subarray(0, n)));
    buf.fill(0xee); // the connection reads the next chunk into the same buffer
  }
  assert.deepEqual(got, oracleParse(big).map(fromOracle));
});

// Size bound ---------------------------------------------------------------------------------

function throwsRule(fn: () => unknown, rule: string): ProtocolError {
  let caught: unknown;
  try {
    fn();
  } catch (err) {
    caught = err;
  }
  assert.ok(caught instanceof ProtocolError, `expected ProtocolError, got ${caught}`);
  assert.equal(caught.rule, rule, caught.message);
  return caught;
}

Deno.test("PacketDecoder.push() refuses a too-large packet from its fixed header alone [MQTT-2.2.3]", () => {
  const d = connected();
  const err = throwsRule(() => d.push(new Uint8Array([0x30, ...varint(8093)])), "MQTT-2.2.3");
  assert.equal(err.packetType, 3);
  // Also as the very first packet: the cap comes before the CONNECT-first rule.
  throwsRule(
    () => new PacketDecoder(LIMITS).push(new Uint8Array([0x10, ...varint(100_000)])),
    "MQTT-2.2.3",
  );
});

Deno.test("PacketDecoder.push() refuses on a partial remaining length already over the cap", () => {
  // 0xff 0xff so far means at least 16383 bytes: no need to wait for the next length byte.
  const err = throwsRule(() => connected().push(new Uint8Array([0x30, 0xff, 0xff])), "MQTT-2.2.3");
  assert.equal(err.packetType, 3, "a refused PUBLISH is counted as rejected");
});

Deno.test("PacketDecoder.push() buffers a packet of exactly max_packet_bytes until its body arrives", () => {
  const d = connected();
  const body = [0, 1, 0x74, ...new Array(8092 - 3).fill(0x41)];
  const whole = packet(0x30, body);
  assert.deepEqual(d.push(whole.subarray(0, 4)), []);
  assert.equal(d.bufferedBytes, 4);
  const got = d.push(whole.subarray(4));
  assert.equal(got.length, 1);
  assert.equal(d.bufferedBytes, 0);
});

Deno.test("PacketDecoder.push() refuses a 5-byte remaining length even under a huge cap [MQTT-2.2.3]", () => {
  const d = new PacketDecoder({ ...LIMITS, maxPacketBytes: 268_435_455 });
  d.push(CONNECT);
  const err = throwsRule(
    () => d.push(new Uint8Array([0x30, 0x80, 0x80, 0x80, 0x80, 0x01])),
    "MQTT-2.2.3",
  );
  assert.equal(err.packetType, 3);
});

Deno.test("PacketDecoder.push() refuses a 65,000-level topic quickly [MQTT-4.7.3-3]", () => {
  const limits = { maxPacketBytes: 200_000, maxTopicBytes: 65_535, maxTopicLevels: 32 };
  const topic = "/".repeat(64_999);
  const started = performance.now();
  throwsRule(() => connected(limits).push(packet(0x30, [...str(topic), 1])), "MQTT-4.7.3-3");
  assert.ok(performance.now() - started < 500);
});

// Malformed bytes ----------------------------------------------------------------------------

/** [name, bytes, rule, sent after a valid CONNECT?], one row per case (hence no formatting). */
// deno-fmt-ignore
const MALFORMED: [string, Uint8Array, string, boolean][] = [
  ["PUBLISH before CONNECT", packet(0x30, [...str("a"), 1]), "MQTT-3.1.0-1", false],
  ["PINGREQ before CONNECT", packet(0xc0, []), "MQTT-3.1.0-1", false],
  ["SUBSCRIBE before CONNECT", packet(0x82, [0, 1, ...str("a"), 0]), "MQTT-3.1.0-1", false],
  ["second CONNECT", CONNECT, "MQTT-3.1.0-2", true],
  ["CONNECT flags 0x1", new Uint8Array([0x11, ...CONNECT.subarray(1)]), "MQTT-2.2.2-2", false],
  ["CONNECT reserved bit", packet(0x10, [...str("MQTT"), 4, 0x03, 0, 10, ...str("c")]), "MQTT-3.1.2-3", false],
  ["unknown protocol name", packet(0x10, [...str("MQTX"), 4, 2, 0, 10, ...str("c")]), "MQTT-3.1.2-1", false],
  ["will QoS without will flag", packet(0x10, [...str("MQTT"), 4, 0x0a, 0, 10, ...str("c")]), "MQTT-3.1.2-11", false],
  ["will retain without will flag", packet(0x10, [...str("MQTT"), 4, 0x22, 0, 10, ...str("c")]), "MQTT-3.1.2-11", false],
  ["will QoS 3", packet(0x10, [...str("MQTT"), 4, 0x1e, 0, 10, ...str("c"), ...str("w"), ...str("x")]), "MQTT-3.1.2-14", false],
  ["password without username", packet(0x10, [...str("MQTT"), 4, 0x42, 0, 10, ...str("c"), ...str("p")]), "MQTT-3.1.2-22", false],
  ["trailing bytes after CONNECT payload", packet(0x10, [...str("MQTT"), 4, 2, 0, 10, ...str("c"), 0]), "MQTT-3.1.3", false],
  ["CONNECT truncated in protocol name", packet(0x10, [0, 4, 0x4d, 0x51]), "MQTT-2.2.3", false],
  ["CONNECT truncated before keep-alive", packet(0x10, [...str("MQTT"), 4, 2, 0]), "MQTT-2.2.3", false],
  ["CONNECT truncated in username", packet(0x10, [...str("MQTT"), 4, 0x82, 0, 10, ...str("c"), 0, 5, 0x61]), "MQTT-2.2.3", false],
  ["CONNECT client id not UTF-8", packet(0x10, [...str("MQTT"), 4, 2, 0, 10, ...str([0xc0, 0x80])]), "MQTT-1.5.3-1", false],
  ["remaining length of 5 bytes", new Uint8Array([0x30, 0x80, 0x80, 0x80, 0x80, 0x01]), "MQTT-2.2.3", true],
  ["PUBLISH QoS 3", packet(0x36, [...str("a"), 0, 1]), "MQTT-3.3.1-4", true],
  ["PUBLISH DUP on QoS 0", packet(0x38, [...str("a"), 1]), "MQTT-3.3.1-2", true],
  ["PUBLISH QoS 1 packet id 0", packet(0x32, [...str("a"), 0, 0, 1]), "MQTT-2.3.1-1", true],
  ["PUBLISH empty topic", packet(0x30, [...str(""), 1]), "MQTT-4.7.3-1", true],
  ["PUBLISH topic with #", packet(0x30, [...str("a/#"), 1]), "MQTT-3.3.2-2", true],
  ["PUBLISH topic with +", packet(0x30, [...str("a/+/b"), 1]), "MQTT-3.3.2-2", true],
  ["PUBLISH topic with U+0000", packet(0x30, [...str([0x61, 0x00, 0x62]), 1]), "MQTT-1.5.3-2", true],
  ["PUBLISH long topic with U+0000", packet(0x30, [...str([...new Array(70).fill(0x61), 0]), 1]), "MQTT-1.5.3-2", true],
  ["PUBLISH topic é + U+0000", packet(0x30, [...str([0xc3, 0xa9, 0x00]), 1]), "MQTT-1.5.3-2", true],
  ["PUBLISH overlong NUL C0 80", packet(0x30, [...str([0x61, 0xc0, 0x80]), 1]), "MQTT-1.5.3-1", true],
  ["PUBLISH overlong E0 80 AF", packet(0x30, [...str([0xe0, 0x80, 0xaf]), 1]), "MQTT-1.5.3-1", true],
  ["PUBLISH surrogate U+D800", packet(0x30, [...str([0xed, 0xa0, 0x80]), 1]), "MQTT-1.5.3-1", true],
  ["PUBLISH surrogate U+DFFF", packet(0x30, [...str([0xed, 0xbf, 0xbf]), 1]), "MQTT-1.5.3-1", true],
  ["PUBLISH truncated UTF-8 sequence", packet(0x30, [...str([0x61, 0xe2, 0x82]), 1]), "MQTT-1.5.3-1", true],
  ["PUBLISH byte 0xFF", packet(0x30, [...str([0xff]), 1]), "MQTT-1.5.3-1", true],
  ["PUBLISH above U+10FFFF", packet(0x30, [...str([0xf4, 0x90, 0x80, 0x80]), 1]), "MQTT-1.5.3-1", true],
  ["PUBLISH topic with U+0001", packet(0x30, [...str([0x61, 0x01]), 1]), "MQTT-1.5.3-control", true],
  ["PUBLISH topic with U+007F", packet(0x30, [...str([0x7f]), 1]), "MQTT-1.5.3-control", true],
  ["PUBLISH topic with U+009F", packet(0x30, [...str([0x61, 0xc2, 0x9f]), 1]), "MQTT-1.5.3-control", true],
  ["will topic with U+001F", packet(0x10, [...str("MQTT"), 4, 0x06, 0, 10, ...str("c"), ...str([0x1f]), ...str("x")]), "MQTT-1.5.3-control", false],
  ["SUBSCRIBE empty filter", packet(0x82, [0, 1, ...str(""), 0]), "MQTT-4.7.3-1", true],
  ["SUBSCRIBE filter with U+0080", packet(0x82, [0, 1, ...str([0xc2, 0x80]), 0]), "MQTT-1.5.3-control", true],
  ["UNSUBSCRIBE empty filter", packet(0xa2, [0, 1, ...str("")]), "MQTT-4.7.3-1", true],
  ["UNSUBSCRIBE filter with U+0009", packet(0xa2, [0, 1, ...str([0x61, 0x09])]), "MQTT-1.5.3-control", true],
  ["PUBLISH topic of 256 bytes", packet(0x30, [...str("t".repeat(256)), 1]), "MQTT-4.7.3-3", true],
  ["PUBLISH topic of 33 levels", packet(0x30, [...str("l/".repeat(32) + "l"), 1]), "MQTT-4.7.3-3", true],
  ["PUBLISH topic length past the body", packet(0x30, [0, 9, 0x61]), "MQTT-2.2.3", true],
  ["PUBLISH QoS 1 without packet id", packet(0x32, [...str("a"), 0]), "MQTT-2.2.3", true],
  ["PUBLISH body of 1 byte", packet(0x30, [0]), "MQTT-2.2.3", true],
  ["PUBACK flags 0x2", packet(0x42, [0, 1]), "MQTT-2.2.2-2", true],
  ["PUBACK packet id 0", packet(0x40, [0, 0]), "MQTT-2.3.1-1", true],
  ["PUBACK truncated", packet(0x40, [0]), "MQTT-2.2.3", true],
  ["PUBACK with trailing byte", packet(0x40, [0, 1, 0]), "MQTT-2.2.3", true],
  ["PUBREC flags 0x2", packet(0x52, [0, 1]), "MQTT-2.2.2-2", true],
  ["PUBREC packet id 0", packet(0x50, [0, 0]), "MQTT-2.3.1-1", true],
  ["PUBREL flags 0x0 [MQTT-3.6.1-1]", packet(0x60, [0, 1]), "MQTT-3.6.1-1", true],
  ["PUBREL with trailing byte", packet(0x62, [0, 1, 0]), "MQTT-2.2.3", true],
  ["PUBCOMP truncated", packet(0x70, [0]), "MQTT-2.2.3", true],
  ["PUBLISH QoS 2 packet id 0", packet(0x34, [...str("a"), 0, 0]), "MQTT-2.3.1-1", true],
  ["SUBSCRIBE flags 0x0", packet(0x80, [0, 1, ...str("a"), 0]), "MQTT-3.8.1-1", true],
  ["SUBSCRIBE packet id 0", packet(0x82, [0, 0, ...str("a"), 0]), "MQTT-2.3.1-1", true],
  ["SUBSCRIBE no filters", packet(0x82, [0, 1]), "MQTT-3.8.3-3", true],
  ["SUBSCRIBE reserved QoS bits", packet(0x82, [0, 1, ...str("a"), 0x04]), "MQTT-3.8.3-4", true],
  ["SUBSCRIBE QoS 3", packet(0x82, [0, 1, ...str("a"), 0x03]), "MQTT-3.8.3-4", true],
  ["SUBSCRIBE filter without QoS byte", packet(0x82, [0, 1, ...str("a")]), "MQTT-2.2.3", true],
  ["SUBSCRIBE truncated packet id", packet(0x82, [0]), "MQTT-2.2.3", true],
  ["SUBSCRIBE filter not UTF-8", packet(0x82, [0, 1, ...str([0xed, 0xa0, 0x80]), 0]), "MQTT-1.5.3-1", true],
  ["UNSUBSCRIBE flags 0x0", packet(0xa0, [0, 1, ...str("a")]), "MQTT-3.10.1-1", true],
  ["UNSUBSCRIBE packet id 0", packet(0xa2, [0, 0, ...str("a")]), "MQTT-2.3.1-1", true],
  ["UNSUBSCRIBE no filters", packet(0xa2, [0, 1]), "MQTT-3.10.3-2", true],
  ["UNSUBSCRIBE truncated filter", packet(0xa2, [0, 1, 0, 3, 0x61]), "MQTT-2.2.3", true],
  ["PINGREQ flags 0x1", packet(0xc1, []), "MQTT-2.2.2-2", true],
  ["PINGREQ with a body", packet(0xc0, [0]), "MQTT-2.2.3", true],
  ["DISCONNECT flags 0x8", packet(0xe8, []), "MQTT-2.2.2-2", true],
  ["DISCONNECT with a body", packet(0xe0, [0]), "MQTT-2.2.3", true],
  ["CONNACK from a client", packet(0x20, [0, 0]), "MQTT-2.2.1", true],
  ["SUBACK from a client", packet(0x90, [0, 1, 0]), "MQTT-2.2.1", true],
  ["UNSUBACK from a client", packet(0xb0, [0, 1]), "MQTT-2.2.1", true],
  ["PINGRESP from a client", packet(0xd0, []), "MQTT-2.2.1", true],
  ["reserved type 0", packet(0x00, []), "MQTT-2.2.1", true],
  ["reserved type 15", packet(0xf0, []), "MQTT-2.2.1", true],
];

for (const [name, bytes, rule, afterConnect] of MALFORMED) {
  Deno.test(`PacketDecoder.push() throws ProtocolError [${rule}] for ${name}`, () => {
    const d = afterConnect ? connected() : new PacketDecoder(LIMITS);
    throwsRule(() => d.push(bytes), rule);
  });
}

Deno.test("PacketDecoder.push() tags a rejected PUBLISH with packet type 3", () => {
  const err = throwsRule(() => connected().push(packet(0x36, [...str("a"), 0, 1])), "MQTT-3.3.1-4");
  assert.equal(err.packetType, 3);
});

Deno.test("a repeated PUBLISH topic is reused only when its bytes match; others are checked", () => {
  const d = connected();
  const pub = (topic: string | number[]) => packet(0x30, [...str(topic), 0x61]);
  const [a, b] = d.push(concatBytes([pub("s/1"), pub("s/1")])) as PublishPacket[];
  assert.equal(a.topic, "s/1");
  assert.equal(b.topic, "s/1");
  // Same length, different bytes: decoded, not reused.
  assert.equal((d.push(pub("s/2"))[0] as PublishPacket).topic, "s/2");
  // After a valid topic, a same-length wildcard or bad UTF-8 is still refused.
  throwsRule(() => connected().push(concatBytes([pub("s/1"), pub("s/#")])), "MQTT-3.3.2-2");
  throwsRule(() => connected().push(concatBytes([pub("ab"), pub([0xc3, 0x28])])), "MQTT-1.5.3-1");
  // Names not all ASCII: reused when their bytes repeat, decoded when the bytes differ, and an
  // ASCII name of as many bytes as the last (non-ASCII) one's is its own.
  const e = connected();
  const names = ["é/1", "é/1", "é/2", "ab/1", "ab/1", "é/2", "\u00e9/2"];
  const got = e.push(concatBytes(names.map((n) => pub(n)))) as PublishPacket[];
  assert.deepEqual(got.map((p) => p.topic), ["é/1", "é/1", "é/2", "ab/1", "ab/1", "é/2", "é/2"]);
  // After an ASCII name, bytes of as many chars are compared to its char codes.
  const f = connected();
  const [g, h] = f.push(concatBytes([pub("abc"), pub([0xc3, 0xa9, 0x62])])) as PublishPacket[];
  assert.deepEqual([g.topic, h.topic], ["abc", "éb"]);
});
