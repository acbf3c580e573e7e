/**
 * POLL ≠ ACK end to end (DESIGN §4): the stored consumer offset advances only over the
 * contiguous settled prefix; the QoS 1 in-flight window; QoS 0 copies over the cap dropped
 * and counted.
 */
import assert from "node:assert/strict";
import { connectRaw, startGateway, waitFor } from "../helpers/gateway.ts";
import {
  counter,
  opts,
  puback,
  publishAll,
  publishesBefore,
  rawSubscriber,
  receive,
  storedOffset,
  subscribe,
  tripleOf,
} from "./_subscribe_helpers.ts";

const ROOM42 = "building/north/room/42/temp";
const FAST_COMMITS = { IGGY_MQTT_LIMITS_COMMIT_INTERVAL_MS: "10" };

Deno.test({
  name:
    "contiguous commit: one withheld PUBACK among three QoS 1 subscribers stops the stored offset right before it; releasing it moves the offset past everything settled",
  ...opts,
  async fn() {
    const gw = await startGateway({ env: FAST_COMMITS });
    const subs = await Promise.all(
      ["a", "b", "c"].map((id) => rawSubscriber(gw.port, id, [[ROOM42, 1]])),
    );
    const p = await connectRaw(gw.port, "pub");
    try {
      const triple = tripleOf("building_north", "telemetry", "room_42");
      const base = await gw.view.log.nextOffset(triple);
      const msgs: [string, string][] = Array.from({ length: 10 }, (_, i) => [ROOM42, `m${i}`]);
      await publishAll(p, msgs);
      const [a, b, c] = subs;
      assert.equal((await receive(a, 10)).length, 10);
      assert.equal((await receive(b, 10)).length, 10);
      const cs = await receive(c, 10, { ack: false });
      // c acknowledges everything except m4, out of order.
      for (const r of [...cs].reverse()) if (r.payload !== "m4") await c.send(puback(r.packetId));
      for (const x of subs) await publishesBefore(x); // every PUBACK above has been handled
      const reader = gw.view.reader(triple)!;
      assert.equal(reader.safeOffset, base + 3, "safe offset stops before m4");
      await waitFor(async () => (await storedOffset(gw, triple)) === base + 3, 3000, "commit");
      assert.equal(reader.safeOffset, base + 3, "and stays there");
      assert.equal(reader.unsettled, 6, "m4..m9 held by the ledger");

      await c.send(puback(cs[4].packetId));
      await publishesBefore(c);
      await waitFor(async () => (await storedOffset(gw, triple)) === base + 9, 3000, "release");
      assert.equal(reader.unsettled, 0);
    } finally {
      for (const x of [...subs, p]) x.close();
      await gw.stop();
    }
  },
});

Deno.test({
  name:
    "a disconnecting subscriber's unacknowledged copies are struck, so the offset moves past them",
  ...opts,
  async fn() {
    const gw = await startGateway({ env: FAST_COMMITS });
    const keeper = await rawSubscriber(gw.port, "keeper", [[ROOM42, 1]]);
    const leaver = await rawSubscriber(gw.port, "leaver", [[ROOM42, 1]]);
    const p = await connectRaw(gw.port, "pub");
    try {
      const triple = tripleOf("building_north", "telemetry", "room_42");
      const base = await gw.view.log.nextOffset(triple);
      await publishAll(p, [[ROOM42, "x"], [ROOM42, "y"]]);
      await receive(keeper, 2);
      await receive(leaver, 2, { ack: false });
      await publishesBefore(keeper);
      assert.equal(gw.view.reader(triple)!.safeOffset, base - 1);
      leaver.close();
      await waitFor(async () => (await storedOffset(gw, triple)) === base + 1, 3000, "strike");
    } finally {
      keeper.close();
      p.close();
      await gw.stop();
    }
  },
});

Deno.test({
  name:
    "max_inflight_per_client=2: a client withholding PUBACKs gets exactly 2 PUBLISHes, then one more per PUBACK, never reusing an id in flight",
  ...opts,
  async fn() {
    const gw = await startGateway({ env: { IGGY_MQTT_LIMITS_MAX_INFLIGHT_PER_CLIENT: "2" } });
    const c = await rawSubscriber(gw.port, "window", [[ROOM42, 1]]);
    const p = await connectRaw(gw.port, "pub");
    try {
      const triple = tripleOf("building_north", "telemetry", "room_42");
      const base = await gw.view.log.nextOffset(triple);
      await publishAll(p, Array.from({ length: 6 }, (_, i) => [ROOM42, `w${i}`]));
      const reader = gw.view.reader(triple)!;
      await waitFor(() => reader.position === base + 6, 3000, "reader routed all 6");
      const first = await publishesBefore(c);
      assert.deepEqual(first.map((r) => r.payload), ["w0", "w1"]);
      const inflight = new Set(first.map((r) => r.packetId));
      assert.equal(inflight.size, 2);
      const seen: string[] = first.map((r) => r.payload);
      // Acknowledge the OLDER one each time; exactly one more arrives per PUBACK.
      const order = [...first];
      for (let i = 2; i < 6; i++) {
        const done = order.shift()!;
        await c.send(puback(done.packetId));
        inflight.delete(done.packetId);
        const more = await publishesBefore(c);
        assert.equal(more.length, 1, `one PUBLISH per PUBACK (step ${i})`);
        assert.ok(!inflight.has(more[0].packetId), "id still in flight was reused");
        assert.equal(more[0].dup, false);
        inflight.add(more[0].packetId);
        order.push(more[0]);
        seen.push(more[0].payload);
      }
      assert.deepEqual(seen, ["w0", "w1", "w2", "w3", "w4", "w5"]);
      // A duplicate or unknown PUBACK changes nothing.
      await c.send(puback(first[0].packetId));
      await c.send(puback(60000));
      assert.deepEqual(await publishesBefore(c), []);
    } finally {
      c.close();
      p.close();
      await gw.stop();
    }
  },
});

Deno.test({
  name:
    "QoS 0 copy over the per-client cap is dropped and counted in mqtt_deliveries_dropped_total; QoS 0 never holds the offset",
  ...opts,
  async fn() {
    const gw = await startGateway({
      env: {
        ...FAST_COMMITS,
        IGGY_MQTT_LIMITS_MAX_INFLIGHT_PER_CLIENT: "1",
        IGGY_MQTT_LIMITS_MAX_OUTBOUND_QUEUE_BYTES_PER_CLIENT: "1024",
        IGGY_MQTT_LIMITS_SLOW_CONSUMER_TIMEOUT_MS: "60000",
      },
    });
    // One client: QoS 1 on room 42 (withholding PUBACKs fills its queue behind the window),
    // QoS 0 on sensors/abc/data. A second client takes the same QoS 0 topic and reads.
    const c = await connectRaw(gw.port, "capped");
    assert.deepEqual(await subscribe(c, [[ROOM42, 1], ["sensors/abc/data", 0]]), [1, 0]);
    const reader0 = await rawSubscriber(gw.port, "reads", [["sensors/abc/data", 0]]);
    const p = await connectRaw(gw.port, "pub");
    try {
      const big = "x".repeat(200);
      await publishAll(p, Array.from({ length: 5 }, (_, i) => [ROOM42, `${i}${big}`]));
      const sensors = tripleOf("sensors", "sensor_data", "sensor_abc");
      const room = tripleOf("building_north", "telemetry", "room_42");
      await waitFor(
        () => gw.view.reader(room)!.unsettled === 5,
        3000,
        "5 QoS 1 copies routed",
      );
      const first = await publishesBefore(c);
      assert.equal(first.length, 1, "window of 1");
      const before = counter(gw, "mqtt_deliveries_dropped_total");
      const sBase = await gw.view.log.nextOffset(sensors);
      await publishAll(p, [["sensors/abc/data", `q0-${big}`]], 100);
      const sReader = gw.view.reader(sensors)!;
      await waitFor(() => sReader.position === sBase + 1, 3000, "QoS 0 routed");
      assert.equal(counter(gw, "mqtt_deliveries_dropped_total"), before + 1);
      assert.deepEqual(await publishesBefore(c), [], "the over-cap QoS 0 copy was dropped");
      assert.deepEqual((await receive(reader0, 1)).map((r) => r.qos), [0], "others still get it");
      await waitFor(async () => (await storedOffset(gw, sensors)) === sBase, 3000, "QoS 0 settled");
      // Draining the QoS 1 queue below the cap lets QoS 0 through again.
      await c.send(puback(first[0].packetId));
      const rest = await receive(c, 4);
      assert.equal(rest.length, 4);
      await publishAll(p, [["sensors/abc/data", "small"]], 200);
      const got = await receive(c, 1);
      assert.deepEqual(got.map((r) => [r.topic, r.payload, r.qos]), [[
        "sensors/abc/data",
        "small",
        0,
      ]]);
    } finally {
      for (const x of [c, reader0, p]) x.close();
      await gw.stop();
    }
  },
});
