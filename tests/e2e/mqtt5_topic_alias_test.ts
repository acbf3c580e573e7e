/**
 * The rest of MQTT 5 toward clients, with MQTT.js: server-to-client topic aliases (only to a
 * client whose Topic Alias Maximum allows them, bounded, the least recently used rebound), and
 * the rights of anonymous clients per topic (`[anonymous.permissions]`) with the SUBACK code a
 * refused subscription gets (`mqtt5.subscribe_refusal`).
 */
import assert from "node:assert/strict";
import mqtt from "mqtt";
import { startGateway, waitFor } from "../helpers/gateway.ts";

const opts = {};

// deno-lint-ignore no-explicit-any
type Packet = any;

/** Connects an MQTT 5 client that records each PUBLISH as it arrived (before alias lookup). */
async function aliasWatcher(port: number, topicAliasMaximum?: number) {
  const c = mqtt.connect(`mqtt://127.0.0.1:${port}`, {
    protocolVersion: 5,
    reconnectPeriod: 0,
    ...(topicAliasMaximum === undefined ? {} : { properties: { topicAliasMaximum } }),
  });
  const wire: { topic: string; alias: number | undefined }[] = [];
  const messages: string[] = [];
  c.on("packetreceive", (p: Packet) => {
    if (p.cmd === "publish") wire.push({ topic: p.topic, alias: p.properties?.topicAlias });
  });
  c.on("message", (t, m) => messages.push(`${t}=${m}`));
  await new Promise((r) => c.once("connect", r));
  await c.subscribeAsync("sensors/+/data", { qos: 1 });
  return { c, wire, messages };
}

Deno.test({
  name:
    "MQTT 5 topic aliases to a client that allows 2: each topic in full once, then bare; a third topic rebinds the least recently used alias; the client resolves every message",
  ...opts,
  async fn() {
    const gw = await startGateway();
    try {
      const w = await aliasWatcher(gw.port, 2);
      const pub = await mqtt.connectAsync(`mqtt://127.0.0.1:${gw.port}`, { reconnectPeriod: 0 });
      const order = ["a", "a", "b", "a", "c", "b", "c", "c"];
      for (const [i, s] of order.entries()) {
        await pub.publishAsync(`sensors/${s}/data`, `m${i}`, { qos: 1 });
        await waitFor(() => w.messages.length === i + 1, 5000, `message ${i}`);
      }
      assert.deepEqual(w.messages, order.map((s, i) => `sensors/${s}/data=m${i}`));
      const full = (s: string) => `sensors/${s}/data`;
      assert.deepEqual(w.wire, [
        { topic: full("a"), alias: 1 },
        { topic: "", alias: 1 },
        { topic: full("b"), alias: 2 },
        { topic: "", alias: 1 },
        { topic: full("c"), alias: 2 }, // b was the least recently used
        { topic: full("b"), alias: 1 }, // a was, now: b takes alias 1 again, in full
        { topic: "", alias: 2 },
        { topic: "", alias: 2 },
      ]);
      await pub.endAsync();
      await w.c.endAsync();
    } finally {
      await gw.stop();
    }
  },
});

Deno.test({
  name:
    "MQTT 5 topic aliases: none to a client that did not allow them, none with limits.max_topic_aliases_out = 0",
  ...opts,
  async fn() {
    for (
      const [env, max] of [[{}, undefined], [
        { IGGY_MQTT_LIMITS_MAX_TOPIC_ALIASES_OUT: "0" },
        8,
      ]] as const
    ) {
      const gw = await startGateway({ env });
      try {
        const w = await aliasWatcher(gw.port, max);
        const pub = await mqtt.connectAsync(`mqtt://127.0.0.1:${gw.port}`, { reconnectPeriod: 0 });
        for (let i = 0; i < 3; i++) await pub.publishAsync("sensors/a/data", `m${i}`, { qos: 0 });
        await waitFor(() => w.messages.length === 3, 5000, "3 messages");
        assert.deepEqual(w.wire.map((p) => p.alias), [undefined, undefined, undefined]);
        assert.deepEqual(w.wire.map((p) => p.topic), Array(3).fill("sensors/a/data"));
        await pub.endAsync();
        await w.c.endAsync();
      } finally {
        await gw.stop();
      }
    }
  },
});

const PAHO_MAP = `default_stream = "paho"
default_topic = "messages"
[[rule]]
mqtt_topic = 'test/nosubscribe'
stream = 'paho'
topic = 'nosubscribe'
`;

const ANONYMOUS_TABLE = `[anonymous.permissions.streams.paho.topics.messages]
send_messages = true
poll_messages = true
[anonymous.permissions.streams.paho.topics.nosubscribe]
send_messages = true
`;

Deno.test({
  name:
    "[anonymous.permissions]: an anonymous client may publish to test/nosubscribe but not subscribe (v5 SUBACK 0x87; 0x80 with mqtt5.subscribe_refusal = unspecified; 3.1.1 0x80)",
  ...opts,
  async fn() {
    const cases = [
      [5, {}, 0x87],
      [5, { IGGY_MQTT_MQTT5_SUBSCRIBE_REFUSAL: "unspecified" }, 0x80],
      [4, {}, 0x80],
    ] as const;
    for (const [protocolVersion, env, code] of cases) {
      const gw = await startGateway({ env, toml: ANONYMOUS_TABLE, map: PAHO_MAP });
      try {
        const c = await mqtt.connectAsync(`mqtt://127.0.0.1:${gw.port}`, {
          protocolVersion,
          reconnectPeriod: 0,
        });
        // MQTT.js rejects a v5 SUBACK with a refusal: the SUBACK itself is read off the wire.
        const suback = new Promise<Packet>((r) =>
          c.on("packetreceive", (p: Packet) => p.cmd === "suback" && r(p))
        );
        c.subscribe(["TopicA", "test/nosubscribe"], { qos: 1 }, () => {});
        const codes = (await suback).granted;
        assert.deepEqual(codes, [1, code], `v${protocolVersion} ${JSON.stringify(env)}`);
        const ack: Packet = await c.publishAsync("test/nosubscribe", "x", { qos: 1 });
        assert.equal(ack?.reasonCode ?? 0, 0, "publishing there is allowed");
        await c.endAsync();
      } finally {
        await gw.stop();
      }
    }
  },
});
