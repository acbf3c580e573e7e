/**
 * MQTT 5 on the way in, end to end with a real v5 client (MQTT.js, `protocolVersion: 5`):
 * properties stored as Iggy headers (`read --json` shows them), PUBACK reason codes with the
 * connection kept open (0x87 denied, 0x90 topic name invalid, 0x80 backend failed, 0x97 full,
 * 0x99 payload format invalid), and the log coordinates of a successful PUBACK, at which
 * `read` finds the message.
 */
import assert from "node:assert/strict";
import { Buffer } from "node:buffer";
import mqtt from "mqtt";
import { loadConfig } from "../../src/config/load.ts";
import { createBackend } from "../../src/log/create.ts";
import { cli, ROOT } from "../helpers/cli.ts";
import { startGateway, type TestGateway, waitFor } from "../helpers/gateway.ts";
import { SpyBackend } from "../helpers/spy_backend.ts";
import { removeStore } from "../helpers/store.ts";

const opts = {};

// deno-lint-ignore no-explicit-any
type Packet = any;

/**
 * An MQTT.js v5 client that records every PUBACK it receives; it asks for the log coordinates
 * (CONNECT user property iggy-coordinates = 1) unless `ask` is false.
 */
async function client5(gw: TestGateway, o: Record<string, unknown> = {}, ask = true) {
  const props = (o.properties ?? {}) as Record<string, unknown>;
  const c = await mqtt.connectAsync(`mqtt://127.0.0.1:${gw.port}`, {
    protocolVersion: 5,
    reconnectPeriod: 0,
    ...o,
    properties: ask ? { userProperties: { "iggy-coordinates": "1" }, ...props } : props,
  });
  const pubacks: Packet[] = [];
  c.on("packetreceive", (p: Packet) => {
    if (p.cmd === "puback") pubacks.push(p);
  });
  return { c, pubacks };
}

/** Publishes at QoS 1 and returns the PUBACK the gateway sent for it. */
async function publishQos1(
  k: Awaited<ReturnType<typeof client5>>,
  topic: string,
  payload: string | Uint8Array,
  properties: Record<string, unknown> = {},
): Promise<Packet> {
  const before = k.pubacks.length;
  await k.c.publishAsync(topic, Buffer.from(payload), { qos: 1, properties }).catch(() => {});
  await waitFor(() => k.pubacks.length > before, 5000, "PUBACK");
  return k.pubacks[before];
}

/** A gateway whose store sits under ./data, where the `read` CLI (permission set) may look. */
async function gatewayWithReadableStore(env: Record<string, string> = {}) {
  await Deno.mkdir(`${ROOT}data`, { recursive: true });
  const db = `data/mqtt5-${crypto.randomUUID()}.db`;
  const gw = await startGateway({ env: { IGGY_MQTT_EMBEDDED_PATH: `${ROOT}${db}`, ...env } });
  return { gw, db };
}

Deno.test({
  name:
    "MQTT 5 PUBLISH: properties are stored as documented Iggy headers; the PUBACK's coordinates lead `read --json` to the message",
  ...opts,
  async fn() {
    const { gw, db } = await gatewayWithReadableStore();
    try {
      const k = await client5(gw);
      const puback = await publishQos1(k, "sensors/s1/data", "21.5", {
        payloadFormatIndicator: true,
        messageExpiryInterval: 3600,
        contentType: "text/plain",
        responseTopic: "replies/s1",
        correlationData: Buffer.from([0xde, 0xad]),
        userProperties: { site: "north", tag: ["a", "b"], empty: "" },
      });
      assert.equal(puback.reasonCode ?? 0, 0);
      const coords = puback.properties.userProperties;
      assert.equal(coords["iggy.stream"], "sensors");
      assert.equal(coords["iggy.topic"], "sensor_data");
      const partition = coords["iggy.partition"];
      const offset = coords["iggy.offset"];
      assert.match(partition, /^\d+$/);
      assert.match(offset, /^\d+$/);
      await k.c.endAsync();
      const r = await cli(
        [
          "read",
          "--stream",
          coords["iggy.stream"],
          "--topic",
          coords["iggy.topic"],
          "--partition",
          partition,
          "--from",
          offset,
          "--count",
          "1",
          "--json",
        ],
        { env: { IGGY_MQTT_EMBEDDED_PATH: db } },
      );
      assert.equal(r.code, 0, r.stderr);
      const m = JSON.parse(r.stdout.trim().split("\n")[0]);
      assert.equal(m.offset, Number(offset));
      assert.equal(m.payload, "21.5");
      assert.deepEqual(m.headers, {
        "mqtt.topic": "sensors/s1/data",
        "mqtt.qos": "1",
        "mqtt.client_id": m.headers["mqtt.client_id"],
        "mqtt.packet_id": m.headers["mqtt.packet_id"],
        "mqtt5.payload_format": "1",
        "mqtt5.message_expiry_s": "3600",
        "mqtt5.content_type": "text/plain",
        "mqtt5.response_topic": "replies/s1",
        "mqtt5.correlation_data": "3q0=",
        "mqtt5.user.0.site": "north",
        "mqtt5.user.1.tag": "a",
        "mqtt5.user.2.tag": "b",
        "mqtt5.user.3.empty": "\u0000",
      });
    } finally {
      await gw.stop();
      await removeStore(`${ROOT}${db}`);
    }
  },
});

Deno.test({
  name:
    "MQTT 5 PUBACK reason codes: 0x87 for a missing target and 0x90 for $SYS, 0x99 for a non-UTF-8 payload marked UTF-8, and the connection stays open",
  ...opts,
  async fn() {
    const gw = await startGateway({ env: { IGGY_MQTT_LOG_AUTO_CREATE: "false" } });
    try {
      await gw.view.log.createTopic("sensors", "sensor_data", { partitions: 1 });
      const k = await client5(gw);
      const denied = await publishQos1(k, "nowhere/at/all", "x");
      assert.equal(denied.reasonCode, 0x87);
      assert.match(denied.properties.reasonString, /does not exist/);
      const sys = await publishQos1(k, "$SYS/x", "x");
      assert.equal(sys.reasonCode, 0x90);
      const bad = await publishQos1(k, "sensors/s1/data", new Uint8Array([0xff, 0xfe]), {
        payloadFormatIndicator: true,
      });
      assert.equal(bad.reasonCode, 0x99);
      assert.equal(k.c.connected, true);
      const ok = await publishQos1(k, "sensors/s1/data", "fine");
      assert.equal(ok.reasonCode ?? 0, 0);
      assert.equal(gw.view.metrics.publishes.get({ outcome: "denied" }), 2);
      assert.equal(gw.view.metrics.publishes.get({ outcome: "rejected" }), 1);
      await k.c.endAsync();
    } finally {
      await gw.stop();
    }
  },
});

Deno.test({
  name:
    "MQTT 5 PUBACK 0x80 when the backend fails and 0x97 when it is full; the connection stays open and retries succeed",
  ...opts,
  async fn() {
    const dir = await Deno.makeTempDir();
    const env = { IGGY_MQTT_EMBEDDED_PATH: `${dir}/o.db`, IGGY_MQTT_LOG_AUTO_CREATE: "true" };
    const spy = new SpyBackend(await createBackend(loadConfig({ text: "", source: "t", env })));
    const gw = await startGateway({ env, overrides: { backend: spy } });
    try {
      const k = await client5(gw, { properties: { requestProblemInformation: true } });
      assert.equal((await publishQos1(k, "sensors/s1/data", "warm-up")).reasonCode ?? 0, 0);
      spy.failWith = "unavailable";
      const failed = await publishQos1(k, "sensors/s1/data", "lost?");
      assert.equal(failed.reasonCode, 0x80);
      assert.ok(failed.properties?.reasonString, "a reason string");
      spy.failWith = "full";
      assert.equal((await publishQos1(k, "sensors/s1/data", "full?")).reasonCode, 0x97);
      spy.failWith = null;
      assert.equal((await publishQos1(k, "sensors/s1/data", "retry")).reasonCode ?? 0, 0);
      assert.equal(k.c.connected, true);
      await k.c.endAsync();
    } finally {
      await gw.stop();
      await Deno.remove(dir, { recursive: true }).catch(() => {});
    }
  },
});

Deno.test({
  name:
    "MQTT 5 PUBACK without reason strings when the client asked for no problem information, and without coordinates when mqtt5.puback_coordinates is off",
  ...opts,
  async fn() {
    const gw = await startGateway({
      env: { IGGY_MQTT_LOG_AUTO_CREATE: "false", IGGY_MQTT_MQTT5_PUBACK_COORDINATES: "never" },
    });
    try {
      await gw.view.log.createTopic("sensors", "sensor_data", { partitions: 1 });
      const k = await client5(gw, { properties: { requestProblemInformation: false } });
      const denied = await publishQos1(k, "nowhere/at/all", "x");
      assert.equal(denied.reasonCode, 0x87);
      assert.equal(denied.properties?.reasonString, undefined);
      const ok = await publishQos1(k, "sensors/s1/data", "x");
      assert.equal(ok.properties, undefined);
      await k.c.endAsync();
    } finally {
      await gw.stop();
    }
  },
});

Deno.test({
  name:
    "MQTT 5 PUBACK coordinates: by default only to a client that asked (CONNECT user property iggy-coordinates = 1), never with Request Problem Information 0 [MQTT-3.1.2-29]; 'always' to every client",
  ...opts,
  async fn() {
    const gw = await startGateway({ env: { IGGY_MQTT_LOG_AUTO_CREATE: "false" } });
    try {
      await gw.view.log.createTopic("sensors", "sensor_data", { partitions: 1 });
      const quiet = await client5(gw, { properties: { requestProblemInformation: false } });
      const ok = await publishQos1(quiet, "sensors/s1/data", "x");
      assert.equal(ok.reasonCode ?? 0, 0);
      assert.equal(ok.properties, undefined);
      await quiet.c.endAsync();
      const k = await client5(gw); // asks for them: coordinates
      const coords = (await publishQos1(k, "sensors/s1/data", "y")).properties?.userProperties;
      assert.equal(coords?.["iggy.stream"], "sensors");
      await k.c.endAsync();
      const plain = await client5(gw, {}, false); // did not ask: a bare PUBACK
      assert.equal((await publishQos1(plain, "sensors/s1/data", "z")).properties, undefined);
      await plain.c.endAsync();
    } finally {
      await gw.stop();
    }
    const always = await startGateway({ env: { IGGY_MQTT_MQTT5_PUBACK_COORDINATES: "always" } });
    try {
      const plain = await client5(always, {}, false);
      const coords = (await publishQos1(plain, "sensors/s1/data", "z")).properties?.userProperties;
      assert.equal(coords?.["iggy.stream"], "sensors");
      await plain.c.endAsync();
    } finally {
      await always.stop();
    }
  },
});

Deno.test({
  name:
    "MQTT 5 inbound topic aliases: a real client's aliased publishes are stored under the full topic; an alias above the maximum gets DISCONNECT 0x94",
  ...opts,
  async fn() {
    const gw = await startGateway({ env: { IGGY_MQTT_LIMITS_MAX_TOPIC_ALIASES: "2" } });
    try {
      const k = await client5(gw);
      await publishQos1(k, "sensors/a1/data", "one", { topicAlias: 1 });
      await publishQos1(k, "", "two", { topicAlias: 1 });
      const stored = [];
      for (let p = 0; p < 3; p++) {
        stored.push(
          ...await gw.view.log.poll(
            { stream: "sensors", topic: "sensor_data", partition: p },
            0,
            10,
          ),
        );
      }
      assert.deepEqual(
        stored.map((m) => [m.headers.get("mqtt.topic"), new TextDecoder().decode(m.payload)]),
        [["sensors/a1/data", "one"], ["sensors/a1/data", "two"]],
      );
      const disconnects: Packet[] = [];
      k.c.on("packetreceive", (p: Packet) => p.cmd === "disconnect" && disconnects.push(p));
      // MQTT.js itself refuses aliases above the CONNACK's maximum: write the bytes directly.
      const topic = [...new TextEncoder().encode("sensors/a1/data")];
      const body = [0, topic.length, ...topic, 3, 0x23, 0, 3, 0x78];
      (k.c.stream as unknown as { write(b: Uint8Array): void }).write(
        new Uint8Array([0x30, body.length, ...body]),
      );
      await waitFor(() => disconnects.length > 0, 5000, "DISCONNECT");
      assert.equal(disconnects[0].reasonCode, 0x94);
      k.c.end(true);
    } finally {
      await gw.stop();
    }
  },
});

Deno.test({
  name:
    "MQTT 5 properties that cannot fit an Iggy header are never cut: QoS 1 gets PUBACK 0x99 naming the property, QoS 0 DISCONNECT 0x95; nothing is appended",
  ...opts,
  async fn() {
    const gw = await startGateway();
    try {
      const k = await client5(gw);
      const long = "v".repeat(256);
      const p1 = await publishQos1(k, "sensors/fit/data", "x", { userProperties: { big: long } });
      assert.equal(p1.reasonCode, 0x99);
      assert.match(p1.properties.reasonString, /user property "big": value longer than 255 bytes/);
      const p2 = await publishQos1(k, "sensors/fit/data", "x", { contentType: long });
      assert.equal(p2.reasonCode, 0x99);
      const p3 = await publishQos1(k, "sensors/fit/data", "x", {
        correlationData: Buffer.alloc(190),
      });
      assert.equal(p3.reasonCode, 0x99);
      // At the bound it fits: a 255-byte value and 189 bytes of correlation data.
      const ok = await publishQos1(k, "sensors/fit/data", "x", {
        userProperties: { big: "v".repeat(255) },
        correlationData: Buffer.alloc(189),
      });
      assert.equal(ok.reasonCode ?? 0, 0);
      const disconnects: Packet[] = [];
      k.c.on("packetreceive", (p: Packet) => p.cmd === "disconnect" && disconnects.push(p));
      k.c.publish("sensors/fit/data", "x", { qos: 0, properties: { responseTopic: long } });
      await waitFor(() => disconnects.length > 0, 5000, "DISCONNECT");
      assert.equal(disconnects[0].reasonCode, 0x95);
      assert.match(disconnects[0].properties.reasonString, /response topic longer than 255/);
      k.c.end(true);
      assert.equal(gw.view.metrics.publishes.get({ outcome: "rejected" }), 4);
      assert.equal(gw.view.metrics.publishes.get({ outcome: "acked" }), 1);
    } finally {
      await gw.stop();
    }
  },
});

Deno.test({
  name:
    "MQTT 5 SUBACK and UNSUBACK reason codes per filter (MQTT.js): 0x87 $SYS, granted QoS for the rest (wildcards and a shared subscription too); UNSUBACK 0x11 for no subscription",
  ...opts,
  async fn() {
    const gw = await startGateway();
    try {
      const k = await client5(gw);
      // MQTT.js rejects a SUBSCRIBE with refused filters; the SUBACK rides on the error.
      const suback: Packet = await k.c.subscribeAsync({
        "sensors/+/data": { qos: 1 },
        "$share/g/sensors/a/data": { qos: 1 },
        "$SYS/broker": { qos: 0 },
        "sensors/a/data": { qos: 2 },
        "sensors/b/data": { qos: 0 },
      }).then(() => assert.fail("refusals expected"), (e: Packet) => e.packet);
      assert.deepEqual(suback.granted, [1, 1, 0x87, 2, 0]);
      const unsubacks: Packet[] = [];
      k.c.on("packetreceive", (p: Packet) => p.cmd === "unsuback" && unsubacks.push(p));
      await k.c.unsubscribeAsync(["sensors/a/data", "never/subscribed"]);
      await waitFor(() => unsubacks.length === 1, 5000, "UNSUBACK");
      assert.deepEqual(unsubacks[0].granted ?? unsubacks[0].reasonCode, [0, 0x11]);
      await k.c.endAsync();
    } finally {
      await gw.stop();
    }
  },
});

Deno.test({
  name:
    "MQTT 5 SUBACK 0x97 for the filters past limits.max_subscriptions_per_client; replacing a held subscription still works",
  ...opts,
  async fn() {
    const gw = await startGateway({ env: { IGGY_MQTT_LIMITS_MAX_SUBSCRIPTIONS_PER_CLIENT: "2" } });
    try {
      const k = await client5(gw);
      await k.c.subscribeAsync("sensors/q1/data", { qos: 0 });
      const suback: Packet = await k.c.subscribeAsync({
        "sensors/q1/data": { qos: 1 }, // a replacement: not counted
        "sensors/q2/data": { qos: 1 },
        "sensors/q3/data": { qos: 1 },
      }).then(() => assert.fail("0x97 expected"), (e: Packet) => e.packet);
      assert.deepEqual(suback.granted, [1, 1, 0x97]);
      await k.c.endAsync();
    } finally {
      await gw.stop();
    }
  },
});

Deno.test({
  name:
    "MQTT 5 Maximum Packet Size 64 (MQTT.js): PUBACKs come without the coordinates or reason string that would pass it, a refused CONNACK without its reason string, and the connection stays [MQTT-3.1.2-25, MQTT-3.4.2-2/3]",
  ...opts,
  async fn() {
    const gw = await startGateway({ env: { IGGY_MQTT_LOG_AUTO_CREATE: "false" } });
    try {
      await gw.view.log.createTopic("sensors", "sensor_data", { partitions: 1 });
      const properties = { maximumPacketSize: 64, requestProblemInformation: true };
      const k = await client5(gw, { properties });
      const errors: unknown[] = [];
      k.c.on("error", (e) => errors.push(e));
      const ok = await publishQos1(k, "sensors/s1/data", "x");
      assert.equal(ok.reasonCode ?? 0, 0);
      assert.equal(ok.properties?.userProperties, undefined, "coordinates would not fit");
      const denied = await publishQos1(k, "nowhere/at/all", "x");
      assert.equal(denied.reasonCode, 0x87); // its reason string fits: it stays
      assert.match(denied.properties?.reasonString, /does not exist/);
      assert.equal(k.c.connected, true);
      assert.deepEqual(errors, []);
      await k.c.endAsync();
      // A will topic the gateway refuses, with a reason string naming it (> 64 bytes).
      const refused = await mqtt.connectAsync(`mqtt://127.0.0.1:${gw.port}`, {
        protocolVersion: 5,
        reconnectPeriod: 0,
        properties,
        will: { topic: "$SYS/" + "w".repeat(80), payload: Buffer.from("x"), qos: 0, retain: false },
      }).then(() => null, (e) => e);
      assert.equal(refused?.code, 0x87, String(refused)); // not 149 (packet too large)
    } finally {
      await gw.stop();
    }
  },
});
