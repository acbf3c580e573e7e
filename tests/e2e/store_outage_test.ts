/**
 * Real embedded-store outages, seen from a device: the message log at its size bound (appends
 * fail: no PUBACK, `failed`, /ready 503 naming it, the gateway keeps answering, and everything
 * works again once retention frees room — no restart), and a catalog file locked by another
 * process (messages do not go through it: publishes keep their PUBACKs).
 */
import assert from "node:assert/strict";
import { DatabaseSync } from "node:sqlite";
import type { EmbeddedBackend } from "../../src/log/embedded/mod.ts";
import { connectRaw, publishPacket, startGateway, waitFor } from "../helpers/gateway.ts";

const opts = {};

Deno.test({
  name:
    "full store: no PUBACK and /ready 503 once the log reaches max_store_bytes; PUBACKs again after retention frees room",
  ...opts,
  async fn() {
    const gw = await startGateway({
      env: {
        IGGY_MQTT_EMBEDDED_MAX_STORE_BYTES: String(1024 * 1024),
        // A store this small takes messages up to an eighth of it (embedded.max_store_bytes's check).
        IGGY_MQTT_LIMITS_MAX_PACKET_BYTES: String(128 * 1024),
        IGGY_MQTT_LOG_RETENTION_MAX_TOPIC_BYTES: String(200 * 1024),
        // Retention runs when the test says so (below), as if its timer had come round.
        IGGY_MQTT_LOG_RETENTION_INTERVAL_MS: "3600000",
      },
    });
    const ready = async () => {
      const r = await fetch(`http://127.0.0.1:${gw.httpPort}/ready`);
      return { status: r.status, body: JSON.stringify(await r.json()) };
    };
    try {
      const payload = "p".repeat(7_000); // under max_packet_bytes
      let c = await connectRaw(gw.port, "filler");
      let acked = 0;
      for (let id = 1; id < 1000; id++) {
        await c.send(publishPacket("sensors/l/data", payload, 1, id));
        const reply = await c.readPacket(5000);
        if (!reply) break; // closed without PUBACK: the store is full
        assert.deepEqual([...reply], [0x40, 2, id >> 8, id & 0xff]);
        acked++;
      }
      assert.ok(acked > 50 && acked < 200, `${acked} PUBACKs before the store filled`);
      assert.equal(gw.view.metrics.publishes.get({ outcome: "failed" }), 1);
      const down = await ready();
      assert.equal(down.status, 503);
      assert.match(down.body, /full: max_store_bytes reached \(\d+ of 1048576 bytes/);
      assert.doesNotMatch(down.body, /The disk holding/);

      const { deleted } = await (gw.view.log as EmbeddedBackend).runRetention();
      assert.ok(deleted > 0);
      c = await connectRaw(gw.port, "filler");
      await c.send(publishPacket("sensors/l/data", "after", 1, 7));
      assert.deepEqual([...(await c.readPacket(5000))!], [0x40, 2, 0, 7]);
      await waitFor(async () => (await ready()).status === 200, 3000, "ready again");
      c.close();
    } finally {
      await gw.stop();
    }
  },
});

Deno.test({
  name: "locked catalog: publishes keep their PUBACKs while another process holds its write lock",
  ...opts,
  async fn() {
    const gw = await startGateway();
    const locker = new DatabaseSync(gw.config.embedded.path);
    try {
      const c = await connectRaw(gw.port, "locked-1");
      await c.send(publishPacket("sensors/l/data", "before", 1, 1));
      assert.deepEqual([...(await c.readPacket())!], [0x40, 2, 0, 1]);
      locker.exec("BEGIN IMMEDIATE"); // take the catalog's write lock and keep it
      await c.send(publishPacket("sensors/l/data", "locked", 1, 2));
      assert.deepEqual([...(await c.readPacket(5000))!], [0x40, 2, 0, 2]);
      const r = await fetch(`http://127.0.0.1:${gw.httpPort}/ready`);
      await r.body?.cancel();
      assert.equal(r.status, 200);
      c.close();
    } finally {
      try {
        locker.exec("ROLLBACK");
      } catch { /* not in a transaction */ }
      locker.close();
      await gw.stop();
    }
  },
});
