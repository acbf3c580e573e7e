/**
 * Outbound topic aliases against the oracle: mqtt-packet (protocolVersion 5) parses each
 * rewritten PUBLISH to the topic (or none), alias, packet id, properties and payload meant.
 */
import assert from "node:assert/strict";
import { Buffer } from "node:buffer";
import mqttPacket from "mqtt-packet";
import { encodePublish, utf8 } from "./encoder.ts";
import { encodeMessageProperties } from "./encode_v5.ts";
import { OutboundTopicAliases } from "./topic_alias_out.ts";

// deno-lint-ignore no-explicit-any
type Oracle = any;

function parse(bytes: Uint8Array): Oracle {
  const parser = mqttPacket.parser({ protocolVersion: 5 });
  const out: Oracle[] = [];
  const errors: Error[] = [];
  parser.on("packet", (p: Oracle) => out.push(p));
  parser.on("error", (e: Error) => errors.push(e));
  const left = parser.parse(Buffer.from(bytes));
  assert.deepEqual(errors, []);
  assert.equal(out.length, 1);
  assert.equal(left, 0);
  return out[0];
}

function publish(topic: string, qos: 0 | 1 | 2 = 0, id = 0, props: Uint8Array = new Uint8Array(0)) {
  return encodePublish(utf8(topic), utf8(`payload of ${topic}`), qos, id, false, false, props);
}

Deno.test("OutboundTopicAliases: a topic goes in full with its alias once, then bare", () => {
  const a = new OutboundTopicAliases(4);
  const first = parse(a.apply(publish("TopicA")));
  assert.equal(first.topic, "TopicA");
  assert.equal(first.properties.topicAlias, 1);
  const second = parse(a.apply(publish("TopicA", 1, 7)));
  assert.equal(second.topic, "");
  assert.equal(second.properties.topicAlias, 1);
  assert.equal(second.messageId, 7);
  assert.equal(second.qos, 1);
  assert.equal(Buffer.from(second.payload).toString(), "payload of TopicA");
  const other = parse(a.apply(publish("TopicB", 2, 8)));
  assert.equal(other.topic, "TopicB");
  assert.equal(other.properties.topicAlias, 2);
  assert.equal(a.size, 2);
});

Deno.test("OutboundTopicAliases keeps the message's own properties beside the alias", () => {
  const a = new OutboundTopicAliases(1);
  const props = encodeMessageProperties({
    contentType: "text/plain",
    userProperties: [["k", "v"]],
  });
  const shared = publish("t/1", 1, 3, props);
  const copy = shared.slice();
  const p = parse(a.apply(shared));
  assert.equal(p.properties.topicAlias, 1);
  assert.equal(p.properties.contentType, "text/plain");
  assert.deepEqual({ ...p.properties.userProperties }, { k: "v" });
  assert.deepEqual(shared, copy, "the shared encoding is not changed");
});

Deno.test("OutboundTopicAliases at its bound rebinds the least recently used alias", () => {
  const a = new OutboundTopicAliases(2);
  a.apply(publish("a")); // alias 1
  a.apply(publish("b")); // alias 2
  a.apply(publish("a")); // a is now the most recent: b is the least
  const c = parse(a.apply(publish("c")));
  assert.equal(c.topic, "c", "a rebound alias carries its topic");
  assert.equal(c.properties.topicAlias, 2);
  assert.equal(a.size, 2);
  const b = parse(a.apply(publish("b")));
  assert.equal(b.topic, "b", "b lost its alias: full topic again");
  assert.equal(b.properties.topicAlias, 1, "a was least recent now");
  const bareC = parse(a.apply(publish("c")));
  assert.equal(bareC.topic, "");
  assert.equal(bareC.properties.topicAlias, 2);
});

Deno.test("OutboundTopicAliases.upTo(0) is none: full topics always", () => {
  assert.equal(OutboundTopicAliases.upTo(0), null);
});

Deno.test("OutboundTopicAliases: a long payload's remaining length grows a byte when needed", () => {
  const a = new OutboundTopicAliases(1);
  // 127 - 2 - 1 - 1 = 123 payload bytes: remaining 127 before, 130 after (the header grows).
  const packet = encodePublish(
    utf8("x"),
    new Uint8Array(123),
    0,
    0,
    false,
    false,
    new Uint8Array(0),
  );
  assert.equal(packet.length, 2 + 127);
  const p = parse(a.apply(packet));
  assert.equal(p.payload.length, 123);
  assert.equal(p.properties.topicAlias, 1);
});
