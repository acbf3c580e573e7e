/**
 * The way out, end to end (DESIGN §4, issue 3): real subscribers over real sockets receive
 * exactly their messages, under their exact topics, from one shared reader per triple; SUBACK
 * codes per filter; replacement, unsubscribe, limits, and "only what comes after the SUBACK".
 */
import assert from "node:assert/strict";
import mqtt from "mqtt";
import {
  connectPacket,
  connectRaw,
  HAS_MOSQUITTO_CLIENTS,
  RawClient,
  run,
  startGateway,
  waitFor,
} from "../helpers/gateway.ts";
import { tripleKey } from "../../src/delivery/mod.ts";
import { hashPassword } from "../../src/access/password.ts";
import {
  counter,
  opts,
  publishAll,
  publishesBefore,
  rawSubscriber,
  receive,
  storedOffset,
  subscribe,
  tripleOf,
  unsubscribePacket,
} from "./_subscribe_helpers.ts";

const ROOM42 = "building/north/room/42/temp";

Deno.test({
  name:
    "mosquitto_sub -q 1 receives a message published after it subscribed, exact topic and payload",
  ignore: !HAS_MOSQUITTO_CLIENTS,
  ...opts,
  async fn() {
    const gw = await startGateway();
    try {
      const args = ["-h", "127.0.0.1", "-p", String(gw.port), "-i", "sub-1", "-q", "1"];
      const sub = run("mosquitto_sub", [...args, "-t", ROOM42, "-v", "-C", "1", "-W", "10"]);
      await waitFor(() => gw.view.subscriptions(ROOM42) !== undefined, 5000, "SUB");
      const pub = await run("mosquitto_pub", [
        ...["-h", "127.0.0.1", "-p", String(gw.port), "-q", "1", "-t", ROOM42],
        ...["-m", "21.5 °C"],
      ]);
      assert.equal(pub.code, 0, pub.stderr);
      const r = await sub;
      assert.equal(r.code, 0, r.stderr);
      assert.equal(r.stdout, `${ROOM42} 21.5 °C\n`);
    } finally {
      await gw.stop();
    }
  },
});

Deno.test({
  name: "MQTT.js subscriber receives exact topic and bytes at min(message QoS, granted QoS)",
  ...opts,
  async fn() {
    const gw = await startGateway();
    const sub = await mqtt.connectAsync(`mqtt://127.0.0.1:${gw.port}`, {
      clientId: "js-sub",
      reconnectPeriod: 0,
    });
    const pub = await mqtt.connectAsync(`mqtt://127.0.0.1:${gw.port}`, {
      clientId: "js-pub",
      reconnectPeriod: 0,
    });
    try {
      const got: { topic: string; payload: number[]; qos: number }[] = [];
      sub.on("message", (topic, payload, packet) => {
        got.push({ topic, payload: [...payload], qos: packet.qos });
      });
      const granted = await sub.subscribeAsync({
        "sensors/abc/data": { qos: 1 },
        "building/south/room/7/co2": { qos: 0 },
      });
      assert.deepEqual(granted.map((g) => [g.topic, g.qos]), [
        ["sensors/abc/data", 1],
        ["building/south/room/7/co2", 0],
      ]);
      const bin = Buffer.from([0, 1, 2, 250, 255]);
      await pub.publishAsync("sensors/abc/data", bin, { qos: 1 });
      await pub.publishAsync("sensors/abc/data", "", { qos: 1 });
      await pub.publishAsync("sensors/abc/data", "q0", { qos: 0 });
      await pub.publishAsync("building/south/room/7/co2", "412", { qos: 1 });
      await waitFor(() => got.length >= 4, 5000, "4 messages");
      const byTopic = (t: string) => got.filter((g) => g.topic === t);
      assert.deepEqual(byTopic("sensors/abc/data"), [
        { topic: "sensors/abc/data", payload: [...bin], qos: 1 },
        { topic: "sensors/abc/data", payload: [], qos: 1 },
        { topic: "sensors/abc/data", payload: [...Buffer.from("q0")], qos: 0 },
      ]);
      assert.deepEqual(byTopic("building/south/room/7/co2"), [
        { topic: "building/south/room/7/co2", payload: [...Buffer.from("412")], qos: 0 },
      ]);
    } finally {
      await sub.endAsync();
      await pub.endAsync();
      await gw.stop();
    }
  },
});

Deno.test({
  name:
    "two subscribers of one topic and a third of another topic on the same triple get exactly their own messages from one shared reader",
  ...opts,
  async fn() {
    const gw = await startGateway();
    const humidity = "building/north/room/42/humidity"; // same key room_42 → same triple
    const a = await rawSubscriber(gw.port, "a", [[ROOM42, 1]]);
    const b = await rawSubscriber(gw.port, "b", [[ROOM42, 1]]);
    const c = await rawSubscriber(gw.port, "c", [[humidity, 1]]);
    const p = await connectRaw(gw.port, "pub");
    try {
      const triple = tripleOf("building_north", "telemetry", "room_42");
      assert.deepEqual(gw.view.readers().map((r) => tripleKey(r.triple)), [tripleKey(triple)]);
      const polls = () => gw.view.metrics.polls.get();
      const msgs: [string, string][] = [];
      for (let i = 0; i < 20; i++) msgs.push([i % 2 ? humidity : ROOM42, `m${i}`]);
      await publishAll(p, msgs);
      const temp = msgs.filter(([t]) => t === ROOM42).map(([t, m]) => [t, m]);
      const hum = msgs.filter(([t]) => t === humidity).map(([t, m]) => [t, m]);
      const pairs = (rs: { topic: string; payload: string }[]) =>
        rs.map((r) => [r.topic, r.payload]);
      assert.deepEqual(pairs(await receive(a, 10)), temp);
      assert.deepEqual(pairs(await receive(b, 10)), temp);
      assert.deepEqual(pairs(await receive(c, 10)), hum);
      for (const x of [a, b, c]) assert.deepEqual(await publishesBefore(x), []);
      assert.equal(gw.view.readers().length, 1, "one shared reader for the triple");
      assert.equal(gw.view.reader(triple)!.subscribers, 3);
      assert.ok(polls() > 0);
    } finally {
      for (const x of [a, b, c, p]) x.close();
      await gw.stop();
    }
  },
});

Deno.test({
  name:
    "aggregation: 20 device topics collapsed into one Iggy topic come back out under their own exact topics",
  ...opts,
  async fn() {
    const map = `
default_stream = "sensors"
default_topic = "messages_default"

[[rule]]
mqtt_topic = 'fleet/([^/]+)/telemetry'
stream = 'fleet'
topic = 'telemetry'
`;
    const gw = await startGateway({ map });
    const devices = Array.from({ length: 20 }, (_, i) => `fleet/dev-${i}/telemetry`);
    // One client on every device topic, one on a single device only.
    const all = await rawSubscriber(gw.port, "all", devices.map((d) => [d, 1]));
    const one = await rawSubscriber(gw.port, "one", [[devices[7], 1]]);
    const pubs = await Promise.all(devices.map((_, i) => connectRaw(gw.port, `dev-${i}`)));
    try {
      // Unkeyed rule: one reader per partition of fleet/telemetry, however many topics.
      assert.equal(gw.view.readers().length, 3);
      await Promise.all(pubs.map((c, i) => publishAll(c, [[devices[i], `reading-${i}`]])));
      const got = await receive(all, 20);
      assert.deepEqual(
        got.map((r) => `${r.topic}=${r.payload}`).sort(),
        devices.map((d, i) => `${d}=reading-${i}`).sort(),
      );
      assert.deepEqual(
        (await receive(one, 1)).map((r) => [r.topic, r.payload]),
        [[devices[7], "reading-7"]],
      );
      assert.deepEqual(await publishesBefore(one), []);
      assert.deepEqual(await publishesBefore(all), []);
    } finally {
      for (const x of [all, one, ...pubs]) x.close();
      await gw.stop();
    }
  },
});

Deno.test({
  name:
    "SUBSCRIBE: denied and invalid filters get 0x80 each while the other filters (wildcards too) are granted",
  ...opts,
  async fn() {
    const hash = await hashPassword("pw", 1000);
    const toml = `
[[users]]
username = "limited"
password_hash = "${hash}"
[users.permissions.streams.sensors]
poll_messages = true
send_messages = true
`;
    const gw = await startGateway({ toml });
    const c = await RawClient.connect(gw.port);
    try {
      await c.send(connectPacket("limited-1", { username: "limited", password: "pw" }));
      const ack = await c.readPacket();
      assert.deepEqual(ack && [...ack], [0x20, 2, 0, 0]);
      const codes = await subscribe(c, [
        ["sensors/abc/data", 1], // granted 1
        ["sensors/+/data", 1], // wildcard: sensors/sensor_data, which exists now
        ["sensors/#", 0], // wildcard
        [ROOM42, 1], // denied: no poll right on building_north
        ["sensors/x/data", 2], // granted 2
        ["a/".repeat(40) + "x", 0], // invalid: too many levels
        ["$SYS/broker/load", 0], // invalid: reserved
        ["building/n-rth/room/1/t", 0], // no rule match → default stream, granted 0
      ]);
      // (An empty filter closes the connection [MQTT-4.7.3-1]: tests/e2e/malformed_test.ts.)
      assert.deepEqual(codes, [1, 1, 0, 0x80, 2, 0x80, 0x80, 0]);
      assert.equal(gw.view.subscriptions(ROOM42), undefined);
      // The granted ones deliver, one copy although three filters match [MQTT-3.3.5-1].
      const p = await connectRaw(gw.port, "pub");
      await publishAll(p, [["sensors/abc/data", "ok"], [ROOM42, "not for you"]]);
      assert.deepEqual((await receive(c, 1)).map((r) => [r.topic, r.payload]), [
        ["sensors/abc/data", "ok"],
      ]);
      assert.deepEqual(await publishesBefore(c), []);
      p.close();
    } finally {
      c.close();
      await gw.stop();
    }
  },
});

Deno.test({
  name:
    "SUBSCRIBE again to the same topic replaces the granted QoS [MQTT-3.8.4-3]: one copy, new QoS",
  ...opts,
  async fn() {
    const gw = await startGateway();
    const c = await connectRaw(gw.port, "resub");
    const p = await connectRaw(gw.port, "pub");
    try {
      assert.deepEqual(await subscribe(c, [[ROOM42, 1]], 1), [1]);
      assert.deepEqual(await subscribe(c, [[ROOM42, 0]], 2), [0]);
      await publishAll(p, [[ROOM42, "once"]]);
      const got = await receive(c, 1);
      assert.deepEqual(got.map((r) => [r.topic, r.payload, r.qos]), [[ROOM42, "once", 0]]);
      assert.deepEqual(await publishesBefore(c), [], "no duplicate copy");
      // And back to 1.
      assert.deepEqual(await subscribe(c, [[ROOM42, 1]], 3), [1]);
      await publishAll(p, [[ROOM42, "again"]], 10);
      const got2 = await receive(c, 1);
      assert.deepEqual(got2.map((r) => [r.payload, r.qos]), [["again", 1]]);
      assert.deepEqual(await publishesBefore(c), []);
      assert.equal(gw.view.subscriptions(ROOM42)!.size, 1);
    } finally {
      c.close();
      p.close();
      await gw.stop();
    }
  },
});

Deno.test({
  name: "SUBSCRIBE asking QoS 2 is granted QoS 2 and QoS 1 messages arrive as QoS 1",
  ...opts,
  async fn() {
    const gw = await startGateway();
    const c = await connectRaw(gw.port, "q2");
    const p = await connectRaw(gw.port, "pub");
    try {
      assert.deepEqual(await subscribe(c, [[ROOM42, 2]]), [2]);
      await publishAll(p, [[ROOM42, "x"]]);
      assert.deepEqual((await receive(c, 1)).map((r) => r.qos), [1]);
    } finally {
      c.close();
      p.close();
      await gw.stop();
    }
  },
});

Deno.test({
  name: "UNSUBSCRIBE stops deliveries and the shared reader stops once it has no subscribers left",
  ...opts,
  async fn() {
    const gw = await startGateway();
    const c = await rawSubscriber(gw.port, "unsub", [[ROOM42, 1], ["sensors/abc/data", 1]]);
    const p = await connectRaw(gw.port, "pub");
    try {
      assert.equal(gw.view.readers().length, 2);
      await publishAll(p, [[ROOM42, "before"]]);
      assert.deepEqual((await receive(c, 1)).map((r) => r.payload), ["before"]);
      await c.send(unsubscribePacket(5, [ROOM42, "never/subscribed"]));
      const unsuback = await c.readPacket();
      assert.deepEqual(unsuback && [...unsuback], [0xb0, 2, 0, 5]);
      await waitFor(() => gw.view.readers().length === 1, 3000, "reader of room 42 stops");
      await publishAll(p, [[ROOM42, "after"], ["sensors/abc/data", "still"]], 10);
      assert.deepEqual((await receive(c, 1)).map((r) => [r.topic, r.payload]), [
        ["sensors/abc/data", "still"],
      ]);
      assert.deepEqual(await publishesBefore(c), []);
      await c.send(unsubscribePacket(6, ["sensors/abc/data"]));
      await waitFor(() => gw.view.readers().length === 0, 3000, "every reader stops");
    } finally {
      c.close();
      p.close();
      await gw.stop();
    }
  },
});

Deno.test({
  name: "max_subscriptions_per_client bounds a client's subscriptions: the excess gets 0x80",
  ...opts,
  async fn() {
    const gw = await startGateway({ env: { IGGY_MQTT_LIMITS_MAX_SUBSCRIPTIONS_PER_CLIENT: "2" } });
    const c = await connectRaw(gw.port, "bounded");
    try {
      assert.deepEqual(
        await subscribe(c, [["sensors/a/data", 1], ["sensors/b/data", 0], ["sensors/c/data", 1]]),
        [1, 0, 0x80],
      );
      // Re-subscribing a held topic is a replacement, not a new subscription.
      assert.deepEqual(await subscribe(c, [["sensors/a/data", 0], ["sensors/d/data", 0]], 2), [
        0,
        0x80,
      ]);
      // Freeing one makes room.
      await c.send(unsubscribePacket(3, ["sensors/b/data"]));
      assert.deepEqual([...(await c.readPacket())!], [0xb0, 2, 0, 3]);
      assert.deepEqual(await subscribe(c, [["sensors/d/data", 1]], 4), [1]);
    } finally {
      c.close();
      await gw.stop();
    }
  },
});

Deno.test({
  name: "a subscription sees only messages appended after its SUBACK, new reader or live reader",
  ...opts,
  async fn() {
    const gw = await startGateway();
    const p = await connectRaw(gw.port, "pub");
    try {
      // No reader yet: messages appended before the first SUBSCRIBE are not delivered.
      await publishAll(p, [[ROOM42, "old-1"], [ROOM42, "old-2"]]);
      const first = await rawSubscriber(gw.port, "first", [[ROOM42, 1]]);
      await publishAll(p, [[ROOM42, "new-1"]], 10);
      assert.deepEqual((await receive(first, 1)).map((r) => r.payload), ["new-1"]);
      // A live reader with a withheld PUBACK (it lags nothing, but holds unsettled work):
      // a late subscriber still starts at the partition's next offset.
      await publishAll(p, [[ROOM42, "held"]], 20);
      const held = await receive(first, 1, { ack: false });
      assert.deepEqual(held.map((r) => r.payload), ["held"]);
      const late = await rawSubscriber(gw.port, "late", [[ROOM42, 1]]);
      assert.deepEqual(await publishesBefore(late), []);
      await publishAll(p, [[ROOM42, "new-2"]], 30);
      assert.deepEqual((await receive(late, 1)).map((r) => r.payload), ["new-2"]);
      assert.deepEqual((await receive(first, 1)).map((r) => r.payload), ["new-2"]);
      assert.deepEqual(await publishesBefore(late), []);
      first.close();
      late.close();
    } finally {
      p.close();
      await gw.stop();
    }
  },
});

Deno.test({
  name:
    "messages from non-MQTT producers (no mqtt.topic) are skipped and counted, and do not hold the offset; the idle reader finds appends it was not told about",
  ...opts,
  async fn() {
    const gw = await startGateway({ env: { IGGY_MQTT_LIMITS_COMMIT_INTERVAL_MS: "10" } });
    const c = await rawSubscriber(gw.port, "mixed", [[ROOM42, 1]]);
    const p = await connectRaw(gw.port, "pub");
    try {
      const triple = tripleOf("building_north", "telemetry", "room_42");
      const base = await gw.view.log.nextOffset(triple);
      const skipped = counter(gw, "reader_skipped_messages_total");
      // Appended behind the gateway's back (no in-process signal): the idle reader's back-off
      // must find it by polling.
      await gw.view.log.append({
        ...triple,
        messages: [
          { payload: new TextEncoder().encode("foreign"), headers: new Map() },
          { payload: new TextEncoder().encode("kafka-ish"), headers: new Map([["k", "v"]]) },
        ],
      });
      await waitFor(
        () => counter(gw, "reader_skipped_messages_total") === skipped + 2,
        3000,
        "skips",
      );
      await publishAll(p, [[ROOM42, "mqtt"]]);
      assert.deepEqual((await receive(c, 1)).map((r) => [r.topic, r.payload]), [[ROOM42, "mqtt"]]);
      assert.deepEqual(await publishesBefore(c), []);
      await waitFor(async () => (await storedOffset(gw, triple)) === base + 2, 3000, "offset");
    } finally {
      c.close();
      p.close();
      await gw.stop();
    }
  },
});
