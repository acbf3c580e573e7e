/**
 * Restart (DESIGN §4 "POLL ≠ ACK"): a reader resumes after the stored offset, so messages
 * that were polled but not settled when the gateway stopped are delivered again.
 */
import assert from "node:assert/strict";
import { connectRaw, startGateway, waitFor } from "../helpers/gateway.ts";
import {
  opts,
  publishAll,
  publishesBefore,
  rawSubscriber,
  receive,
  storedOffset,
  tripleOf,
} from "./_subscribe_helpers.ts";

const ROOM42 = "building/north/room/42/temp";

Deno.test({
  name:
    "restart: messages unsettled when the gateway stopped are delivered again after start and resubscribe",
  ...opts,
  async fn() {
    const dir = await Deno.makeTempDir({ prefix: "iggy-mqtt-restart-" });
    const env = {
      IGGY_MQTT_EMBEDDED_PATH: `${dir}/gateway.db`,
      IGGY_MQTT_GATEWAY_ID: "restart-gw",
      IGGY_MQTT_LIMITS_COMMIT_INTERVAL_MS: "10",
    };
    try {
      const triple = tripleOf("building_north", "telemetry", "room_42");
      const gw1 = await startGateway({ env });
      const clients = [];
      try {
        const acker = await rawSubscriber(gw1.port, "acker", [[ROOM42, 1]]);
        const p = await connectRaw(gw1.port, "pub");
        clients.push(acker, p);
        await publishAll(p, [[ROOM42, "settled-0"], [ROOM42, "settled-1"]]);
        await receive(acker, 2);
        await publishesBefore(acker);
        await waitFor(async () => (await storedOffset(gw1, triple)) === 1, 3000, "commit 1");
        // A QoS 1 subscriber that never PUBACKs holds u-0..u-2 unsettled.
        const holder = await rawSubscriber(gw1.port, "holder", [[ROOM42, 1]]);
        clients.push(holder);
        await publishAll(p, [[ROOM42, "u-0"], [ROOM42, "u-1"], [ROOM42, "u-2"]], 10);
        assert.deepEqual((await receive(holder, 3, { ack: false })).map((r) => r.payload), [
          "u-0",
          "u-1",
          "u-2",
        ]);
        await receive(acker, 3);
        await publishesBefore(acker);
      } finally {
        // The gateway stops while the holder is still connected with u-0..u-2 unacknowledged.
        await gw1.stop();
        for (const c of clients) c.close();
      }

      const gw2 = await startGateway({ env });
      try {
        assert.equal(await storedOffset(gw2, triple), 1, "offset stored before the unsettled");
        const again = await rawSubscriber(gw2.port, "again", [[ROOM42, 1]]);
        const got = await receive(again, 3);
        assert.deepEqual(got.map((r) => [r.topic, r.payload, r.qos]), [
          [ROOM42, "u-0", 1],
          [ROOM42, "u-1", 1],
          [ROOM42, "u-2", 1],
        ]);
        assert.deepEqual(await publishesBefore(again), [], "settled messages are not redelivered");
        await waitFor(async () => (await storedOffset(gw2, triple)) === 4, 3000, "commit 4");
        again.close();
      } finally {
        await gw2.stop();
      }
    } finally {
      await Deno.remove(dir, { recursive: true }).catch(() => {});
    }
  },
});
