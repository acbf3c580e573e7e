/**
 * Where MQTT 5 (issue 17) meets wildcards, replay and the trie router (issue 18), with MQTT.js
 * `protocolVersion: 5`: overlapping v5 subscriptions deliver one copy carrying every matching
 * subscription identifier [MQTT-3.3.4-3, MQTT-3.3.5-1]; No Local applies to a wildcard
 * subscription; `iggy-from` replays through the catch-up with the v5 options; the delivery's
 * refusals of wildcard filters have their v5 reason codes; a session expiry > 0 makes a stored
 * session whose subscriptions keep their v5 options across a gateway restart.
 */
import assert from "node:assert/strict";
import mqtt from "mqtt";
import { startGateway, type TestGateway, waitFor } from "../helpers/gateway.ts";

const opts = {};

// deno-lint-ignore no-explicit-any
type Packet = any;

interface Received {
  readonly topic: string;
  readonly payload: string;
  readonly packet: Packet;
}

/**
 * An MQTT 5 client with a session expiry, recording from before its CONNACK is read (a resumed
 * session's backlog may follow the CONNACK at once); resolves with the CONNACK too.
 */
async function stored5(gw: TestGateway, clientId: string, expiry: number) {
  const c = mqtt.connect(`mqtt://127.0.0.1:${gw.port}`, {
    protocolVersion: 5,
    clientId,
    clean: false,
    reconnectPeriod: 0,
    properties: { sessionExpiryInterval: expiry },
  });
  const got: Received[] = [];
  c.on("message", (topic, payload, packet) => {
    got.push({ topic, payload: payload.toString(), packet });
  });
  const connack: Packet = await new Promise((resolve, reject) => {
    c.once("connect", resolve);
    c.once("error", reject);
  });
  return { c, got, connack };
}

async function client5(gw: TestGateway, o: Record<string, unknown> = {}) {
  const c = await mqtt.connectAsync(`mqtt://127.0.0.1:${gw.port}`, {
    protocolVersion: 5,
    reconnectPeriod: 0,
    ...o,
  });
  const got: Received[] = [];
  c.on("message", (topic, payload, packet) => {
    got.push({ topic, payload: payload.toString(), packet });
  });
  return { c, got };
}

/**
 * A barrier instead of a sleep: `pub` publishes an end marker to each of `topics` and this waits
 * until `s` has every marker. Each partition is delivered in order, a catch-up before the live
 * reader, so a copy the gateway was still going to send on those partitions has arrived by then.
 * Returns what `s` got before the markers (the markers themselves removed).
 */
async function untilEnd(
  pub: { c: mqtt.MqttClient },
  s: { got: Received[] },
  ...topics: string[]
): Promise<Received[]> {
  for (const t of topics) await pub.c.publishAsync(t, `end ${t}`, { qos: 1 });
  const ended = () => topics.every((t) => s.got.some((m) => m.payload === `end ${t}`));
  await waitFor(ended, 5000, "the end markers");
  return s.got.filter((m) => !m.payload.startsWith("end "));
}

/** The subscription identifiers of a received PUBLISH, sorted ([] when none). */
function ids(p: Packet): number[] {
  const v = p.properties?.subscriptionIdentifier;
  return v === undefined ? [] : (Array.isArray(v) ? [...v] : [v]).sort((a, b) => a - b);
}

/** The SUBACK reason codes of a SUBSCRIBE (MQTT.js rejects one with refusals). */
async function suback(
  c: mqtt.MqttClient,
  filters: Record<string, mqtt.IClientSubscribeOptions>,
  properties?: Record<string, unknown>,
): Promise<number[]> {
  return await c.subscribeAsync(filters, properties ? { qos: 1, properties } : undefined).then(
    (granted) => granted.map((g) => g.qos),
    (e: Packet) => e.packet.granted,
  );
}

Deno.test({
  name:
    "MQTT 5 overlapping wildcard and exact subscriptions: one copy per message, at the highest QoS, with every matching subscription identifier",
  ...opts,
  async fn() {
    const gw = await startGateway();
    try {
      const s = await client5(gw);
      await s.c.subscribeAsync("building/+/room/#", {
        qos: 0,
        properties: { subscriptionIdentifier: 1 },
      });
      await s.c.subscribeAsync("building/north/room/#", {
        qos: 1,
        properties: { subscriptionIdentifier: 2 },
      });
      await s.c.subscribeAsync("building/north/room/1/temp", {
        qos: 1,
        properties: { subscriptionIdentifier: 3 },
      });
      const pub = await client5(gw);
      await pub.c.publishAsync("building/north/room/1/temp", "all three", { qos: 1 });
      await pub.c.publishAsync("building/south/room/2", "only the first", { qos: 1 });
      const got = await untilEnd(pub, s, "building/north/room/1/temp", "building/south/room/2");
      assert.deepEqual(got.map((m) => m.payload).sort(), ["all three", "only the first"]);
      const all = got.find((m) => m.payload === "all three")!;
      const first = got.find((m) => m.payload === "only the first")!;
      assert.deepEqual(ids(all.packet), [1, 2, 3]);
      assert.equal(all.packet.qos, 1);
      assert.deepEqual(ids(first.packet), [1]);
      assert.equal(first.packet.qos, 0); // its one match was granted QoS 0
      await s.c.endAsync();
      await pub.c.endAsync();
    } finally {
      await gw.stop();
    }
  },
});

Deno.test({
  name: "MQTT 5 No Local on a wildcard subscription keeps the client's own publishes from it",
  ...opts,
  async fn() {
    const gw = await startGateway();
    try {
      const a = await client5(gw);
      await a.c.subscribeAsync("building/+/room/#", { qos: 1, nl: true });
      const b = await client5(gw);
      await a.c.publishAsync("building/east/room/3", "mine", { qos: 1 });
      await b.c.publishAsync("building/east/room/3", "theirs", { qos: 1 });
      const got = await untilEnd(b, a, "building/east/room/3");
      assert.deepEqual(got.map((m) => m.payload), ["theirs"]);
      await a.c.endAsync();
      await b.c.endAsync();
    } finally {
      await gw.stop();
    }
  },
});

Deno.test({
  name: "MQTT 5 a resubscribe with iggy-from = earliest replays again (one copy each, then live)",
  ...opts,
  async fn() {
    const gw = await startGateway();
    try {
      const pub = await client5(gw);
      await pub.c.publishAsync("building/north/room/42/temp", "old-1", { qos: 1 });
      const s = await client5(gw);
      await s.c.subscribeAsync("building/+/room/+/temp", { qos: 1 });
      await pub.c.publishAsync("building/north/room/42/temp", "live-1", { qos: 1 });
      await waitFor(() => s.got.length === 1, 5000, "the live message");
      await s.c.subscribeAsync("building/+/room/+/temp", {
        qos: 1,
        properties: { userProperties: { "iggy-from": "earliest" } },
      });
      await waitFor(() => s.got.length === 3, 5000, "the replay");
      await pub.c.publishAsync("building/north/room/42/temp", "live-2", { qos: 1 });
      const got = await untilEnd(pub, s, "building/north/room/42/temp");
      assert.deepEqual(got.map((m) => m.payload), ["live-1", "old-1", "live-1", "live-2"]);
      await s.c.endAsync();
      await pub.c.endAsync();
    } finally {
      await gw.stop();
    }
  },
});

Deno.test({
  name:
    "MQTT 5 iggy-from = earliest replays a wildcard filter (plain topics, with its identifier), then live; a malformed iggy-from gets 0x83",
  ...opts,
  async fn() {
    const gw = await startGateway();
    try {
      const pub = await client5(gw);
      await pub.c.publishAsync("building/north/room/42/temp", "old-1", { qos: 1 });
      await pub.c.publishAsync("building/south/room/7/temp", "old-2", { qos: 1 });
      const s = await client5(gw);
      await s.c.subscribeAsync("building/+/room/+/temp", {
        qos: 1,
        properties: { subscriptionIdentifier: 7, userProperties: { "iggy-from": "earliest" } },
      });
      await waitFor(() => s.got.length === 2, 5000, "the replayed messages");
      assert.deepEqual(s.got.map((m) => m.payload).sort(), ["old-1", "old-2"]);
      assert.deepEqual(s.got.map((m) => m.topic).sort(), [
        "building/north/room/42/temp",
        "building/south/room/7/temp",
      ]);
      for (const m of s.got) assert.deepEqual(ids(m.packet), [7]);
      await pub.c.publishAsync("building/north/room/42/temp", "new", { qos: 1 });
      const got = await untilEnd(pub, s, "building/north/room/42/temp");
      assert.deepEqual(got.map((m) => m.payload).slice(2), ["new"]);
      assert.deepEqual(
        await suback(s.c, { "building/+/room/#": { qos: 1 } }, {
          userProperties: { "iggy-from": "yesterday" },
        }),
        [0x83],
      );
      await s.c.endAsync();
      await pub.c.endAsync();
    } finally {
      await gw.stop();
    }
  },
});

Deno.test({
  name:
    "MQTT 5 SUBACK codes of wildcard refusals: 0x97 over limits.max_triples_per_subscription, 0x87 without poll right on any target",
  ...opts,
  async fn() {
    const gw = await startGateway({ env: { IGGY_MQTT_LIMITS_MAX_TRIPLES_PER_SUBSCRIPTION: "4" } });
    try {
      const pub = await client5(gw);
      await pub.c.publishAsync("building/a/room/1/t", "x", { qos: 1 });
      await pub.c.publishAsync("building/b/room/1/t", "y", { qos: 1 });
      assert.deepEqual(await suback(pub.c, { "building/+/room/#": { qos: 1 } }), [0x97]);
      await pub.c.endAsync();
    } finally {
      await gw.stop();
    }
    const denied = await startGateway({ env: { IGGY_MQTT_AUTH_ANONYMOUS_PERMISSIONS: "send" } });
    try {
      const c = await client5(denied);
      assert.deepEqual(await suback(c.c, { "building/#": { qos: 1 } }), [0x87]);
      await c.c.endAsync();
    } finally {
      await denied.stop();
    }
  },
});

Deno.test({
  name:
    "MQTT 5 session expiry > 0: a stored session across a gateway restart, session present 1, the backlog with its subscription identifiers; No Local still applies after the resume",
  ...opts,
  async fn() {
    const dir = await Deno.makeTempDir({ prefix: "iggy-mqtt-stored5-" });
    const env = { IGGY_MQTT_EMBEDDED_PATH: `${dir}/gateway.db` };
    try {
      const gw1 = await startGateway({ env });
      try {
        const pub = await client5(gw1);
        await pub.c.publishAsync("building/north/room/1", "create", { qos: 1 }); // targets exist
        await pub.c.publishAsync("building/south/room/2", "create", { qos: 1 });
        const dev = await stored5(gw1, "v5-dev", 3600);
        assert.equal(dev.connack.sessionPresent, false);
        assert.equal(dev.connack.properties?.sessionExpiryInterval, undefined, "granted as asked");
        await dev.c.subscribeAsync("building/+/room/#", {
          qos: 1,
          properties: { subscriptionIdentifier: 11 },
        });
        await dev.c.subscribeAsync("building/north/room/#", {
          qos: 1,
          nl: true,
          properties: { subscriptionIdentifier: 12 },
        });
        await dev.c.endAsync();
        await waitFor(
          () => gw1.view.storedSession("v5-dev")?.offlineSinceMs != null,
          5000,
          "off",
        );
        await pub.c.publishAsync("building/north/room/1", "a", { qos: 1 });
        await pub.c.publishAsync("building/south/room/2", "b", { qos: 1 });
        await pub.c.endAsync();
      } finally {
        await gw1.stop();
      }
      const gw2 = await startGateway({ env });
      try {
        const dev = await stored5(gw2, "v5-dev", 3600);
        assert.equal(dev.connack.sessionPresent, true);
        await waitFor(() => dev.got.length === 2, 5000, "the backlog");
        const byPayload = new Map(dev.got.map((m) => [m.payload, ids(m.packet)]));
        assert.deepEqual(byPayload.get("a"), [11, 12]);
        assert.deepEqual(byPayload.get("b"), [11]);
        // Its own publish: No Local of subscription 12 came back with the session.
        await dev.c.publishAsync("building/north/room/1", "self", { qos: 1 });
        const got = await untilEnd(dev, dev, "building/north/room/1");
        assert.equal(got.length, 3, "its own message once");
        assert.deepEqual(ids(got[2].packet), [11]);
        await dev.c.endAsync();
      } finally {
        await gw2.stop();
      }
    } finally {
      await Deno.remove(dir, { recursive: true }).catch(() => {});
    }
  },
});

Deno.test({
  name:
    "MQTT 5 stored sessions: a DISCONNECT with Session Expiry Interval 0 ends the session (present 0 on return); past limits.max_stored_sessions a v5 CONNECT gets CONNACK 0x97",
  ...opts,
  async fn() {
    const gw = await startGateway({ env: { IGGY_MQTT_LIMITS_MAX_STORED_SESSIONS: "1" } });
    try {
      const pub = await client5(gw);
      await pub.c.publishAsync("building/north/room/1", "create", { qos: 1 });
      const dev = await stored5(gw, "v5-end", 3600);
      await dev.c.subscribeAsync("building/+/room/#", { qos: 1 });
      const other = mqtt.connect(`mqtt://127.0.0.1:${gw.port}`, {
        protocolVersion: 5,
        clientId: "v5-other",
        clean: false,
        reconnectPeriod: 0,
        properties: { sessionExpiryInterval: 60 },
      });
      const refused: Packet = await new Promise((resolve) => {
        other.once("error", (e: Packet) => resolve(e));
        other.once("connect", (p: Packet) => resolve(p));
      });
      assert.equal(refused.code, 0x97, "one stored session is the bound");
      other.end(true);
      await dev.c.endAsync(false, { properties: { sessionExpiryInterval: 0 } });
      await waitFor(() => gw.view.storedSession("v5-end")?.offlineSinceMs != null, 5000, "off");
      await pub.c.publishAsync("building/north/room/1", "while away", { qos: 1 });
      const back = await stored5(gw, "v5-end", 3600);
      assert.equal(back.connack.sessionPresent, false, "the session ended at the DISCONNECT");
      // Subscribed now, it gets live messages only: "while away" would have come first.
      await back.c.subscribeAsync("building/north/room/1", { qos: 1 });
      assert.deepEqual(await untilEnd(pub, back, "building/north/room/1"), []);
      await back.c.endAsync();
      await pub.c.endAsync();
    } finally {
      await gw.stop();
    }
  },
});

Deno.test({
  name:
    "MQTT 5 Clean Start 0 with Session Expiry Interval 0 resumes a stored session (present 1, its backlog) which then ends with that connection",
  ...opts,
  async fn() {
    const gw = await startGateway();
    try {
      const pub = await client5(gw);
      await pub.c.publishAsync("building/north/room/1", "create", { qos: 1 });
      const dev = await stored5(gw, "v5-zero", 3600);
      await dev.c.subscribeAsync("building/+/room/#", { qos: 1 });
      await dev.c.endAsync();
      await waitFor(() => gw.view.storedSession("v5-zero")?.offlineSinceMs != null, 5000, "off");
      await pub.c.publishAsync("building/north/room/1", "kept", { qos: 1 });
      const once = await stored5(gw, "v5-zero", 0);
      assert.equal(once.connack.sessionPresent, true);
      await waitFor(() => once.got.length === 1, 5000, "the backlog");
      assert.equal(once.got[0].payload, "kept");
      await once.c.endAsync();
      await waitFor(() => gw.view.storedSession("v5-zero")?.offlineSinceMs != null, 5000, "off");
      await pub.c.publishAsync("building/north/room/1", "gone", { qos: 1 });
      const after = await stored5(gw, "v5-zero", 0);
      assert.equal(after.connack.sessionPresent, false, "the session ended with the connection");
      await after.c.subscribeAsync("building/north/room/1", { qos: 1 });
      assert.deepEqual(await untilEnd(pub, after, "building/north/room/1"), []);
      await after.c.endAsync();
      await pub.c.endAsync();
    } finally {
      await gw.stop();
    }
  },
});

Deno.test({
  name:
    "MQTT 5 session expiry 0 survives a gateway restart as 0: a session resumed without expiry is not present after the restart",
  ...opts,
  async fn() {
    const dir = await Deno.makeTempDir({ prefix: "iggy-mqtt-expiry0-" });
    const env = { IGGY_MQTT_EMBEDDED_PATH: `${dir}/gateway.db` };
    try {
      const gw1 = await startGateway({ env });
      try {
        const first = await stored5(gw1, "v5-e0", 3600);
        await first.c.subscribeAsync("building/+/room/#", { qos: 1 });
        await first.c.endAsync();
        // Back with Clean Start 0 and no Session Expiry Interval (0): resumed, ends with it.
        const again = await stored5(gw1, "v5-e0", 0);
        assert.equal(again.connack.sessionPresent, true);
        await again.c.endAsync();
        await waitFor(
          () => gw1.view.storedSession("v5-e0")?.offlineSinceMs != null,
          5000,
          "off",
        );
      } finally {
        await gw1.stop();
      }
      const gw2 = await startGateway({ env });
      try {
        const later = await stored5(gw2, "v5-e0", 3600);
        assert.equal(later.connack.sessionPresent, false, "expiry 0 ended the session");
        await later.c.endAsync();
      } finally {
        await gw2.stop();
      }
    } finally {
      await Deno.remove(dir, { recursive: true }).catch(() => {});
    }
  },
});

Deno.test({
  name:
    "MQTT 5 Clean Start 0 with expiry 0 (paho's reconnect) and no stored session gets a clean one, even with limits.max_stored_sessions reached: no 0x97, no record",
  ...opts,
  async fn() {
    const gw = await startGateway({ env: { IGGY_MQTT_LIMITS_MAX_STORED_SESSIONS: "1" } });
    try {
      const holder = await stored5(gw, "e0-holder", 3600); // takes the only slot
      assert.equal(holder.connack.sessionPresent, false);
      const dev = await stored5(gw, "e0-new", 0);
      assert.equal(dev.connack.reasonCode ?? 0, 0);
      assert.equal(dev.connack.sessionPresent, false);
      assert.equal(gw.view.storedSession("e0-new"), undefined, "no stored session");
      await dev.c.subscribeAsync("building/+/room/#", { qos: 1 });
      await dev.c.publishAsync("building/north/room/1", "hi", { qos: 1 });
      await waitFor(() => dev.got.length === 1, 5000, "its own message");
      await dev.c.endAsync();
      await holder.c.endAsync();
    } finally {
      await gw.stop();
    }
  },
});
