/**
 * A real embedded-store outage: another process-level connection holds the SQLite write
 * lock. Appends fail fast (no PUBACK, `failed`), /ready says why with 503, the gateway keeps
 * answering, and everything works again when the lock is released — no restart.
 */
import assert from "node:assert/strict";
import { DatabaseSync } from "node:sqlite";
import { connectRaw, publishPacket, startGateway, waitFor } from "../helpers/gateway.ts";

Deno.test({
  name:
    "locked store: no PUBACK and /ready 503 while another connection holds the write lock; recovery after release",
  sanitizeOps: false,
  sanitizeResources: false,
  async fn() {
    const gw = await startGateway();
    const path = gw.config.embedded.path;
    const ready = async () => {
      const r = await fetch(`http://127.0.0.1:${gw.httpPort}/ready`);
      const body = await r.json();
      return { status: r.status, body: JSON.stringify(body) };
    };
    const locker = new DatabaseSync(path);
    try {
      const c = await connectRaw(gw.port, "locked-1");
      await c.send(publishPacket("sensors/l/data", "before", 1, 1));
      assert.deepEqual([...(await c.readPacket())!], [0x40, 2, 0, 1]);
      locker.exec("BEGIN IMMEDIATE"); // take the write lock and keep it
      await c.send(publishPacket("sensors/l/data", "locked", 1, 2));
      assert.ok(await c.closedByPeer(5000), "closed without PUBACK");
      assert.equal(gw.gateway.metrics.publishes.get({ outcome: "failed" }), 1);
      const down = await ready();
      assert.equal(down.status, 503);
      assert.match(down.body, /Appends are failing/);
      locker.exec("ROLLBACK");
      const d = await connectRaw(gw.port, "locked-1");
      await d.send(publishPacket("sensors/l/data", "after", 1, 3));
      assert.deepEqual([...(await d.readPacket())!], [0x40, 2, 0, 3]);
      await waitFor(async () => (await ready()).status === 200, 3000, "ready again");
      d.close();
    } finally {
      try {
        locker.exec("ROLLBACK");
      } catch { /* not in a transaction */ }
      locker.close();
      await gw.stop();
    }
  },
});
