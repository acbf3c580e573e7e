/**
 * MQTT 5 in the codec, against the oracle (mqtt-packet, protocolVersion 5): client packets it
 * generates decode to the same fields and properties; the packets we encode parse back in it
 * to what we meant; malformed MQTT 5 bytes throw ProtocolError with the reason code the
 * DISCONNECT will carry.
 */
import assert from "node:assert/strict";
import { Buffer } from "node:buffer";
import mqttPacket from "mqtt-packet";
import { type DecoderLimits, PacketDecoder } from "./decoder.ts";
import { encodePublish, remainingLength as varint } from "./encoder.ts";
import {
  encodeAck5,
  encodeConnack5,
  encodeDisconnect5,
  encodeMessageProperties,
  encodePuback5,
  encodeSuback5,
  encodeUnsuback5,
  PropertyWriter,
  withSubscriptionIds,
} from "./encode_v5.ts";
import { ProtocolError } from "./errors.ts";
import type { ConnectPacket, PublishPacket } from "./packets.ts";
import { Prop } from "./properties.ts";
import { utf8 } from "../base/utf8.ts";

const LIMITS: DecoderLimits = {
  maxPacketBytes: 8092,
  maxTopicBytes: 255,
  maxTopicLevels: 32,
  maxUserProperties: 4,
  topicAliasMaximum: 8,
};

// deno-lint-ignore no-explicit-any
type Oracle = any;

function generate(p: Record<string, unknown>): Uint8Array {
  return new Uint8Array(
    mqttPacket.generate(p as unknown as mqttPacket.Packet, { protocolVersion: 5 }),
  );
}

function oracleParse(bytes: Uint8Array): Oracle[] {
  const parser = mqttPacket.parser({ protocolVersion: 5 });
  const out: Oracle[] = [];
  const errors: Error[] = [];
  parser.on("packet", (p: Oracle) => out.push(p));
  parser.on("error", (e: Error) => errors.push(e));
  parser.parse(Buffer.from(bytes));
  if (errors.length > 0) throw errors[0];
  return out;
}

const CONNECT5 = generate({
  cmd: "connect",
  protocolId: "MQTT",
  protocolVersion: 5,
  clientId: "v5",
  clean: true,
  keepalive: 30,
});

function connected5(limits = LIMITS): PacketDecoder {
  const d = new PacketDecoder(limits);
  d.push(CONNECT5);
  assert.ok(d.v5);
  return d;
}

function packet(byte1: number, body: readonly number[]): Uint8Array {
  return new Uint8Array([byte1, ...varint(body.length), ...body]);
}

function str(s: string | readonly number[]): number[] {
  const b = typeof s === "string" ? [...new TextEncoder().encode(s)] : [...s];
  return [b.length >> 8, b.length & 0xff, ...b];
}

function throwsCode(fn: () => unknown, code: number): ProtocolError {
  try {
    fn();
  } catch (err) {
    assert.ok(err instanceof ProtocolError, `expected ProtocolError, got ${err}`);
    assert.equal(err.reasonCode, code, err.message);
    return err;
  }
  assert.fail("expected a ProtocolError");
}

// Decoding what the oracle generates ---------------------------------------------------------

Deno.test("PacketDecoder decodes an MQTT 5 CONNECT with every property and a will as mqtt-packet made it", () => {
  const bytes = generate({
    cmd: "connect",
    protocolId: "MQTT",
    protocolVersion: 5,
    clientId: "full",
    clean: true,
    keepalive: 10,
    username: "u",
    password: Buffer.from("p"),
    properties: {
      sessionExpiryInterval: 300,
      receiveMaximum: 7,
      maximumPacketSize: 4096,
      topicAliasMaximum: 3,
      requestResponseInformation: true,
      requestProblemInformation: false,
      userProperties: { a: "1", b: ["2", "3"] },
    },
    will: {
      topic: "w/t",
      payload: Buffer.from("bye"),
      qos: 1,
      retain: false,
      properties: {
        willDelayInterval: 5,
        payloadFormatIndicator: true,
        messageExpiryInterval: 60,
        contentType: "text/plain",
        responseTopic: "r/t",
        correlationData: Buffer.from([1, 2]),
        userProperties: { k: "v" },
      },
    },
  });
  const [p] = new PacketDecoder(LIMITS).push(bytes) as [ConnectPacket];
  assert.equal(p.protocolLevel, 5);
  assert.deepEqual(p.properties, {
    sessionExpiry: 300,
    receiveMaximum: 7,
    maximumPacketSize: 4096,
    topicAliasMaximum: 3,
    requestResponseInformation: 1,
    requestProblemInformation: 0,
    userProperties: [["a", "1"], ["b", "2"], ["b", "3"]],
  });
  assert.equal(p.will?.topic, "w/t");
  assert.deepEqual(p.will?.properties, {
    willDelay: 5,
    payloadFormat: 1,
    messageExpiry: 60,
    contentType: "text/plain",
    responseTopic: "r/t",
    correlationData: new Uint8Array([1, 2]),
    userProperties: [["k", "v"]],
  });
  assert.equal(p.username, "u");
});

Deno.test("PacketDecoder decodes an MQTT 5 PUBLISH's properties, repeated user properties in order", () => {
  const d = connected5();
  const bytes = generate({
    cmd: "publish",
    topic: "a/b",
    qos: 1,
    messageId: 9,
    payload: Buffer.from("hi"),
    properties: {
      payloadFormatIndicator: true,
      messageExpiryInterval: 30,
      contentType: "application/json",
      responseTopic: "reply/x",
      correlationData: Buffer.from("cid"),
      userProperties: { z: ["1", "2"], a: "3" },
    },
  });
  const [p] = d.push(bytes) as [PublishPacket];
  assert.equal(p.topic, "a/b");
  assert.equal(p.packetId, 9);
  assert.deepEqual(p.payload, utf8("hi"));
  assert.deepEqual(p.properties, {
    payloadFormat: 1,
    messageExpiry: 30,
    contentType: "application/json",
    responseTopic: "reply/x",
    correlationData: utf8("cid"),
    userProperties: [["z", "1"], ["z", "2"], ["a", "3"]],
  });
});

Deno.test("PacketDecoder resolves inbound topic aliases: set with a topic, used with an empty one", () => {
  const d = connected5();
  const set = generate({
    cmd: "publish",
    topic: "s/1",
    qos: 0,
    payload: Buffer.from("x"),
    properties: { topicAlias: 2 },
  });
  const use = generate({
    cmd: "publish",
    topic: "",
    qos: 0,
    payload: Buffer.from("y"),
    properties: { topicAlias: 2 },
  });
  const [a, b] = d.push(new Uint8Array([...set, ...use])) as PublishPacket[];
  assert.equal(a.topic, "s/1");
  assert.equal(b.topic, "s/1");
  assert.deepEqual(b.payload, utf8("y"));
});

Deno.test("PacketDecoder decodes MQTT 5 SUBSCRIBE options and identifier, UNSUBSCRIBE, PUBACK, DISCONNECT", () => {
  const d = connected5();
  const sub = generate({
    cmd: "subscribe",
    messageId: 3,
    properties: { subscriptionIdentifier: 77 },
    subscriptions: [
      { topic: "x/1", qos: 1, nl: true, rap: true, rh: 2 },
      { topic: "x/2", qos: 0, nl: false, rap: false, rh: 0 },
    ],
  });
  const [s] = d.push(sub);
  assert.deepEqual(s, {
    type: "subscribe",
    packetId: 3,
    subscriptions: [
      {
        filter: "x/1",
        qos: 1,
        options: { noLocal: true, retainAsPublished: true, retainHandling: 2, subscriptionId: 77 },
      },
      {
        filter: "x/2",
        qos: 0,
        options: {
          noLocal: false,
          retainAsPublished: false,
          retainHandling: 0,
          subscriptionId: 77,
        },
      },
    ],
  });
  const unsub = generate({ cmd: "unsubscribe", messageId: 4, unsubscriptions: ["x/1"] });
  assert.deepEqual(d.push(unsub), [{ type: "unsubscribe", packetId: 4, filters: ["x/1"] }]);
  const puback = generate({ cmd: "puback", messageId: 5, reasonCode: 0x10 });
  assert.deepEqual(d.push(puback), [{ type: "puback", packetId: 5, reasonCode: 0x10 }]);
  assert.deepEqual(d.push(packet(0x40, [0, 6])), [{ type: "puback", packetId: 6 }]);
  // The QoS 2 flows are laid out as PUBACK: a reason code and properties when the length says.
  const pubrec = generate({ cmd: "pubrec", messageId: 8, reasonCode: 0x80 });
  assert.deepEqual(d.push(pubrec), [{ type: "pubrec", packetId: 8, reasonCode: 0x80 }]);
  const pubrel = generate({
    cmd: "pubrel",
    messageId: 9,
    reasonCode: 0x92,
    properties: { reasonString: "gone" },
  });
  assert.deepEqual(d.push(pubrel), [{ type: "pubrel", packetId: 9, reasonCode: 0x92 }]);
  assert.deepEqual(d.push(packet(0x70, [0, 10])), [{ type: "pubcomp", packetId: 10 }]);
  const disc = generate({ cmd: "disconnect", reasonCode: 4 });
  assert.deepEqual(d.push(disc), [{ type: "disconnect", reasonCode: 4 }]);
});

// Encoding, parsed back by the oracle -------------------------------------------------------

Deno.test("encodeConnack5() parses in mqtt-packet with its reason code and properties", () => {
  const w = new PropertyWriter()
    .u32(Prop.SESSION_EXPIRY, 0)
    .u16(Prop.RECEIVE_MAXIMUM, 32)
    .byte(Prop.MAXIMUM_QOS, 1)
    .byte(Prop.RETAIN_AVAILABLE, 0)
    .u32(Prop.MAXIMUM_PACKET_SIZE, 8092)
    .string(Prop.ASSIGNED_CLIENT_ID, "auto-1")
    .u16(Prop.TOPIC_ALIAS_MAXIMUM, 16)
    .byte(Prop.WILDCARD_SUB_AVAILABLE, 0)
    .byte(Prop.SUB_ID_AVAILABLE, 1)
    .byte(Prop.SHARED_SUB_AVAILABLE, 0)
    .u16(Prop.SERVER_KEEP_ALIVE, 60)
    .string(Prop.REASON_STRING, "ok");
  const [o] = oracleParse(encodeConnack5(false, 0, w));
  assert.equal(o.cmd, "connack");
  assert.equal(o.reasonCode, 0);
  assert.deepEqual(o.properties, {
    sessionExpiryInterval: 0,
    receiveMaximum: 32,
    maximumQoS: 1,
    retainAvailable: false,
    maximumPacketSize: 8092,
    assignedClientIdentifier: "auto-1",
    topicAliasMaximum: 16,
    wildcardSubscriptionAvailable: false,
    subscriptionIdentifiersAvailable: true,
    sharedSubscriptionAvailable: false,
    serverKeepAlive: 60,
    reasonString: "ok",
  });
  const [refused] = oracleParse(
    encodeConnack5(false, 0x86, new PropertyWriter().string(Prop.REASON_STRING, "bad")),
  );
  assert.equal(refused.reasonCode, 0x86);
  assert.equal(refused.properties.reasonString, "bad");
});

Deno.test("encodePuback5() parses in mqtt-packet: short form, reason code, reason string and user properties", () => {
  assert.deepEqual(encodePuback5(7, 0), new Uint8Array([0x40, 2, 0, 7]));
  const [o] = oracleParse(encodePuback5(7, 0x87, "denied", [["iggy.x", "1"], ["iggy.x", "2"]]));
  assert.equal(o.cmd, "puback");
  assert.equal(o.messageId, 7);
  assert.equal(o.reasonCode, 0x87);
  assert.equal(o.properties.reasonString, "denied");
  assert.deepEqual({ ...o.properties.userProperties }, { "iggy.x": ["1", "2"] });
});

Deno.test("encodeAck5() (PUBREL, PUBCOMP) and a PUBREC made from a PUBACK parse in mqtt-packet", () => {
  assert.deepEqual(encodeAck5(0x62, 7, 0), new Uint8Array([0x62, 2, 0, 7]));
  const [comp] = oracleParse(encodeAck5(0x70, 8, 0x92));
  assert.equal(comp.cmd, "pubcomp");
  assert.equal(comp.messageId, 8);
  assert.equal(comp.reasonCode, 0x92);
  const rec = encodePuback5(9, 0x87, "denied");
  rec[0] = 0x50; // what the ack queue sends for a QoS 2 publish
  const [o] = oracleParse(rec);
  assert.equal(o.cmd, "pubrec");
  assert.equal(o.reasonCode, 0x87);
  assert.equal(o.properties.reasonString, "denied");
});

Deno.test("encodeSuback5(), encodeUnsuback5() and encodeDisconnect5() parse in mqtt-packet", () => {
  const [s] = oracleParse(encodeSuback5(9, [1, 0x87, 0xa2]));
  assert.deepEqual([s.cmd, s.messageId, s.granted], ["suback", 9, [1, 0x87, 0xa2]]);
  const [u] = oracleParse(encodeUnsuback5(10, [0, 0x11]));
  assert.deepEqual([u.cmd, u.messageId, u.granted], ["unsuback", 10, [0, 0x11]]);
  const [d] = oracleParse(encodeDisconnect5(0x8d, "keep-alive timeout"));
  assert.deepEqual([d.cmd, d.reasonCode, d.properties.reasonString], [
    "disconnect",
    0x8d,
    "keep-alive timeout",
  ]);
  const [plain] = oracleParse(encodeDisconnect5(0x8b));
  assert.equal(plain.reasonCode, 0x8b);
  // Over the client's Maximum Packet Size the reason string is left out [MQTT-3.1.2-25].
  assert.equal(encodeDisconnect5(0x8d, "keep-alive timeout", 10).length, 4);
  assert.equal(encodeDisconnect5(0x8d, "keep-alive timeout", 100).length, 25);
});

Deno.test("encodeDisconnect5() with a Server Reference: 0x9C names the server; the reason string goes first when too big", () => {
  const [d] = oracleParse(encodeDisconnect5(0x9c, "gateway stopping", Infinity, "lb.example:1883"));
  assert.deepEqual([d.reasonCode, d.properties.reasonString, d.properties.serverReference], [
    0x9c,
    "gateway stopping",
    "lb.example:1883",
  ]);
  const [short] = oracleParse(encodeDisconnect5(0x9c, "gateway stopping", 24, "lb.example:1883"));
  assert.deepEqual([short.properties.reasonString, short.properties.serverReference], [
    undefined,
    "lb.example:1883",
  ]);
  assert.equal(encodeDisconnect5(0x9c, "gateway stopping", 10, "lb.example:1883").length, 4);
});

Deno.test("encodePublish() with an MQTT 5 property block parses in mqtt-packet with every property", () => {
  const shared = encodeMessageProperties({
    payloadFormat: 1,
    messageExpiry: 12,
    contentType: "text/plain",
    responseTopic: "r",
    correlationData: new Uint8Array([9]),
    userProperties: [["a", "1"], ["a", "2"], ["b", ""]],
  });
  const props = withSubscriptionIds(shared, [5, 300]);
  const bytes = encodePublish(utf8("t/1"), utf8("payload"), 1, 42, false, false, props);
  const [o] = oracleParse(bytes);
  assert.equal(o.topic, "t/1");
  assert.equal(o.messageId, 42);
  assert.equal(o.payload.toString(), "payload");
  assert.deepEqual({ ...o.properties.userProperties }, { a: ["1", "2"], b: "" });
  delete o.properties.userProperties;
  assert.deepEqual(o.properties, {
    payloadFormatIndicator: true,
    messageExpiryInterval: 12,
    contentType: "text/plain",
    responseTopic: "r",
    correlationData: Buffer.from([9]),
    subscriptionIdentifier: [5, 300],
  });
  const [empty] = oracleParse(
    encodePublish(utf8("t"), utf8("p"), 0, 0, false, false, new Uint8Array(0)),
  );
  assert.deepEqual([empty.topic, empty.payload.toString()], ["t", "p"]);
});

// Malformed MQTT 5 --------------------------------------------------------------------------

const after = (props: number[]) => [props.length, ...props];
const pub = (props: number[], topic = "a") => packet(0x30, [...str(topic), ...after(props), 0x61]);

/** [name, bytes, reason code]; all sent after a valid MQTT 5 CONNECT. */
// deno-fmt-ignore
const MALFORMED5: [string, Uint8Array, number][] = [
  ["PUBLISH property length past the packet", packet(0x30, [...str("a"), 9, 0x01]), 0x81],
  ["PUBLISH unknown property 0x7f", pub([0x7f, 0]), 0x81],
  ["PUBLISH with a subscription identifier", pub([0x0b, 1]), 0x81],
  ["PUBLISH with a session expiry", pub([0x11, 0, 0, 0, 1]), 0x81],
  ["PUBLISH payload format twice", pub([0x01, 1, 0x01, 1]), 0x82],
  ["PUBLISH payload format 2", pub([0x01, 2]), 0x82],
  ["PUBLISH topic alias 0", pub([0x23, 0, 0]), 0x82],
  ["PUBLISH topic alias above the maximum", pub([0x23, 0, 9]), 0x94],
  ["PUBLISH empty topic, no alias", pub([], ""), 0x82],
  ["PUBLISH empty topic, unset alias", pub([0x23, 0, 1], ""), 0x82],
  ["PUBLISH content type not UTF-8", pub([0x03, ...str([0xc0, 0x80])]), 0x81],
  ["PUBLISH truncated user property", pub([0x26, 0, 1, 0x61]), 0x81],
  ["PUBLISH 5 user properties (max 4)", pub([0x26, ...str("k"), ...str("v"), 0x26, ...str("k"), ...str("v"), 0x26, ...str("k"), ...str("v"), 0x26, ...str("k"), ...str("v"), 0x26, ...str("k"), ...str("v")]), 0x95],
  ["PUBLISH 5-byte property id", pub([0x80, 0x80, 0x80, 0x80, 0x01]), 0x81],
  ["SUBSCRIBE reserved option bits", packet(0x82, [0, 1, 0, ...str("a"), 0x40]), 0x81],
  ["SUBSCRIBE retain handling 3", packet(0x82, [0, 1, 0, ...str("a"), 0x30]), 0x82],
  ["SUBSCRIBE subscription identifier 0", packet(0x82, [0, 1, 2, 0x0b, 0, ...str("a"), 0]), 0x82],
  ["SUBSCRIBE no filters", packet(0x82, [0, 1, 0]), 0x82],
  ["UNSUBSCRIBE topic alias property", packet(0xa2, [0, 1, 3, 0x23, 0, 1, ...str("a")]), 0x81],
  ["PUBACK trailing byte after properties", packet(0x40, [0, 1, 0, 0, 9]), 0x81],
  ["DISCONNECT session expiry after 0", packet(0xe0, [0, 5, 0x11, 0, 0, 0, 9]), 0x82],
  ["DISCONNECT with a topic alias", packet(0xe0, [0, 3, 0x23, 0, 1]), 0x81],
  ["AUTH", packet(0xf0, [0x18, 0]), 0x82],
];

for (const [name, bytes, code] of MALFORMED5) {
  Deno.test(`PacketDecoder (MQTT 5) throws ProtocolError with reason 0x${code.toString(16)} for ${name}`, () => {
    throwsCode(() => connected5().push(bytes), code);
  });
}

Deno.test("PacketDecoder (MQTT 5) refuses a CONNECT with a repeated receive maximum and 0 values", () => {
  const head = [...str("MQTT"), 5, 2, 0, 10];
  const twice = packet(0x10, [...head, 6, 0x21, 0, 1, 0x21, 0, 1, ...str("c")]);
  throwsCode(() => new PacketDecoder(LIMITS).push(twice), 0x82);
  const zero = packet(0x10, [...head, 3, 0x21, 0, 0, ...str("c")]);
  throwsCode(() => new PacketDecoder(LIMITS).push(zero), 0x82);
  const maxZero = packet(0x10, [...head, 5, 0x27, 0, 0, 0, 0, ...str("c")]);
  throwsCode(() => new PacketDecoder(LIMITS).push(maxZero), 0x82);
  const reasonString = packet(0x10, [...head, 4, 0x1f, ...str("x"), ...str("c")]);
  throwsCode(() => new PacketDecoder(LIMITS).push(reasonString), 0x81);
});

Deno.test("PacketDecoder (MQTT 5) accepts a password without a user name (3.1.1 does not)", () => {
  const bytes = packet(0x10, [...str("MQTT"), 5, 0x42, 0, 10, 0, ...str("c"), ...str("pw")]);
  const [p] = new PacketDecoder(LIMITS).push(bytes) as [ConnectPacket];
  assert.equal(p.username, null);
  assert.deepEqual(p.password, utf8("pw"));
});
