/**
 * Wildcard filters end to end (issue 18, DESIGN §4 "Wildcards"): a filter is resolved into the
 * triples its messages can live in, targets created after the SUBSCRIBE are joined when this
 * gateway appends to them, the router matches `mqtt.topic` in a topic trie, and overlapping
 * filters deliver one copy per client [MQTT-3.3.5-1].
 */
import assert from "node:assert/strict";
import {
  connectRaw,
  HAS_MOSQUITTO_CLIENTS,
  publishPacket,
  run,
  startGateway,
  waitFor,
} from "../helpers/gateway.ts";
import {
  opts,
  publishAll,
  publishesBefore,
  rawSubscriber,
  receive,
  subscribe,
} from "./_subscribe_helpers.ts";

const MATCHING = [
  "building/north/room/1/temp",
  "building/south/room/22/humidity",
  "building/east/room/3",
  "building/north/room/4/a/b",
];
const NOT_MATCHING = [
  "building/north/hall/1/temp",
  "sensors/s-1/data",
  "building/west/rooms/1",
  "other/building/x/room/1",
];

Deno.test({
  name: "mosquitto_sub -t 'building/+/room/#' receives matching topics of several buildings " +
    "and rooms, and nothing else",
  ignore: !HAS_MOSQUITTO_CLIENTS,
  ...opts,
  async fn() {
    const gw = await startGateway();
    try {
      const base = ["-h", "127.0.0.1", "-p", String(gw.port)];
      const sub = run("mosquitto_sub", [
        ...base,
        ...["-i", "dash", "-q", "1", "-t", "building/+/room/#", "-v"],
        ...["-C", String(MATCHING.length), "-W", "15"],
      ]);
      await waitFor(
        () => gw.view.subscriptions("building/+/room/#") !== undefined,
        5000,
        "SUBSCRIBE",
      );
      // Interleaved, so a message that should not arrive would come before the last one.
      const order = [NOT_MATCHING[0], MATCHING[0], NOT_MATCHING[1], MATCHING[1]]
        .concat([NOT_MATCHING[2], MATCHING[2], NOT_MATCHING[3], MATCHING[3]]);
      for (const t of order) {
        const p = await run("mosquitto_pub", [...base, "-q", "1", "-t", t, "-m", `m:${t}`]);
        assert.equal(p.code, 0, p.stderr);
      }
      const r = await sub;
      assert.equal(r.code, 0, r.stderr);
      assert.deepEqual(r.stdout.trim().split("\n"), MATCHING.map((t) => `${t} m:${t}`));
    } finally {
      await gw.stop();
    }
  },
});

Deno.test({
  name: "overlapping filters deliver one copy per client, at the highest granted QoS",
  ...opts,
  async fn() {
    const gw = await startGateway();
    try {
      const pub = await connectRaw(gw.port, "pub");
      // Create the targets first, so the SUBSCRIBEs resolve them from the log's listing.
      await publishAll(pub, [["building/north/room/1/x", "before"], ["sensors/s-1/data", "b"]]);
      const sub = await rawSubscriber(gw.port, "dash", [
        ["building/+/room/#", 0],
        ["building/north/#", 1],
        ["#", 0],
        ["building/north/room/1/x", 0],
      ]);
      await publishAll(pub, [["building/north/room/1/x", "one"], ["sensors/s-1/data", "two"]], 10);
      const got = await receive(sub, 2);
      assert.deepEqual(got.map((g) => [g.topic, g.payload, g.qos]), [
        ["building/north/room/1/x", "one", 1],
        ["sensors/s-1/data", "two", 0],
      ]);
      assert.deepEqual(await publishesBefore(sub), [], "no second copy");
      sub.close();
      pub.close();
    } finally {
      await gw.stop();
    }
  },
});

Deno.test({
  name:
    "a QoS 0 message: one copy per client whose exact and wildcard filters overlap, one to each exact subscriber",
  ...opts,
  async fn() {
    const gw = await startGateway();
    try {
      const pub = await connectRaw(gw.port, "pub");
      await publishAll(pub, [["building/north/room/1/x", "before"], ["sensors/s-1/data", "b"]]);
      const dash = await rawSubscriber(gw.port, "dash", [
        ["building/north/room/1/x", 0],
        ["building/+/room/#", 0],
        ["#", 0],
      ]);
      const exact = await rawSubscriber(gw.port, "exact", [["building/north/room/1/x", 0]]);
      const wild = await rawSubscriber(gw.port, "wild", [["building/#", 0], ["+/+/room/1/x", 0]]);
      const both = new Uint8Array([
        ...publishPacket("building/north/room/1/x", "zero", 0, 0),
        ...publishPacket("sensors/s-1/data", "other", 0, 0),
      ]);
      await pub.send(both);
      const got = await receive(dash, 2);
      assert.deepEqual(got.map((g) => [g.topic, g.payload, g.qos]), [
        ["building/north/room/1/x", "zero", 0],
        ["sensors/s-1/data", "other", 0],
      ]);
      for (const sub of [exact, wild]) {
        const one = await receive(sub, 1);
        assert.deepEqual(one.map((g) => [g.topic, g.payload, g.qos]), [
          ["building/north/room/1/x", "zero", 0],
        ]);
      }
      for (const sub of [dash, exact, wild]) {
        assert.deepEqual(await publishesBefore(sub), [], "no second copy");
        sub.close();
      }
      pub.close();
    } finally {
      await gw.stop();
    }
  },
});

Deno.test({
  name: "a leading wildcard does not match $-topics [MQTT-4.7.2-1]; a $ filter does",
  ...opts,
  async fn() {
    const gw = await startGateway();
    try {
      const sub = await rawSubscriber(gw.port, "s", [["#", 0], ["+/x", 0], ["$dev/#", 0]]);
      const pub = await connectRaw(gw.port, "pub");
      await publishAll(pub, [["$dev/x", "dollar"], ["a/x", "plain"]]);
      const got = await receive(sub, 2);
      assert.deepEqual(got.map((g) => [g.topic, g.payload]), [["$dev/x", "dollar"], [
        "a/x",
        "plain",
      ]]);
      assert.deepEqual(await publishesBefore(sub), []);
      sub.close();
      pub.close();
    } finally {
      await gw.stop();
    }
  },
});

Deno.test({
  name: "limits.max_triples_per_subscription: a filter resolving to more triples gets SUBACK 0x80",
  ...opts,
  async fn() {
    const gw = await startGateway({ env: { IGGY_MQTT_LIMITS_MAX_TRIPLES_PER_SUBSCRIPTION: "4" } });
    try {
      const pub = await connectRaw(gw.port, "pub");
      await publishAll(pub, [["building/a/room/1/t", "x"], ["building/b/room/1/t", "y"]]);
      const c = await connectRaw(gw.port, "s");
      // Two building streams of 3 partitions each, plus the default topic's 3: 9 > 4.
      assert.deepEqual(await subscribe(c, [["building/+/room/#", 1], ["building/a/room/1/#", 1]]), [
        0x80,
        1,
      ]);
      c.close();
      pub.close();
    } finally {
      await gw.stop();
    }
  },
});

Deno.test({
  name: "a wildcard filter without poll right on any target gets SUBACK 0x80",
  ...opts,
  async fn() {
    const gw = await startGateway({
      env: { IGGY_MQTT_AUTH_ANONYMOUS_PERMISSIONS: "send" },
    });
    try {
      const c = await connectRaw(gw.port, "s");
      assert.deepEqual(await subscribe(c, [["building/#", 1], ["a/b#", 0]]), [0x80, 0x80]);
      c.close();
    } finally {
      await gw.stop();
    }
  },
});

Deno.test({
  name: "SIGHUP reload re-resolves a wildcard subscription against the new map",
  ...opts,
  async fn() {
    const gw = await startGateway();
    try {
      const sub = await rawSubscriber(gw.port, "s", [["plant/+/line", 1]]);
      const before = gw.view.subscriptions("plant/+/line")!.values().next().value!;
      assert.deepEqual([...before.startOffsets.keys()].map((k) => k.split("\u0000")[1]), [
        "messages_default",
        "messages_default",
        "messages_default",
      ]);
      const pub = await connectRaw(gw.port, "pub");
      await publishAll(pub, [["plant/p1/line", "create"]]); // default target
      await receive(sub, 1);
      // New map: plant topics go to their own (existing) target.
      await publishAll(pub, [["sensors/s/data", "creates sensor_data"]], 5);
      const next = gw.config;
      const map = `default_stream = "sensors"
default_topic = "messages_default"
[[rule]]
mqtt_topic = 'plant/([^/]+)/line'
stream = 'sensors'
topic = 'sensor_data'
`;
      await Deno.writeTextFile(`${gw.dir}/map.toml`, map);
      await gw.gateway.reload({
        ...next,
        mapping: { ...next.mapping, map_file: `${gw.dir}/map.toml` },
      });
      const keys = [...before.startOffsets.keys()].map((k) => k.split("\u0000")[1]);
      assert.ok(keys.includes("sensor_data"), `re-resolved: ${keys}`);
      await publishAll(pub, [["plant/p2/line", "after"]], 9);
      const got = await receive(sub, 1);
      assert.equal(got[0].payload, "after");
      sub.close();
      pub.close();
    } finally {
      await gw.stop();
    }
  },
});

Deno.test({
  name: "a wildcard filter never resolves to the stored sessions' record topic",
  ...opts,
  async fn() {
    const map = `default_stream = "sensors"
default_topic = "messages_default"
[[rule]]
mqtt_topic = '([^/]+)/sessions'
stream = '$1'
topic = 'sessions'
`;
    const gw = await startGateway({ map });
    try {
      const pub = await connectRaw(gw.port, "pub");
      await publishAll(pub, [["plant/sessions", "x"]]); // creates stream "plant", topic "sessions"
      const c = await connectRaw(gw.port, "s");
      assert.deepEqual(await subscribe(c, [["+/sessions", 1]]), [1]);
      const s = gw.view.subscriptions("+/sessions")!.values().next().value!;
      const streams = new Set([...s.startOffsets.keys()].map((k) => k.split("\u0000")[0]));
      assert.deepEqual([...streams].sort(), ["plant", "sensors"], "not mqtt_gateway/sessions");
      c.close();
      pub.close();
    } finally {
      await gw.stop();
    }
  },
});
