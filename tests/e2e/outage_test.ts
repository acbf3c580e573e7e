/**
 * Backend outages: nothing is PUBACKed while the log does not confirm, memory stays bounded
 * (the gateway stops reading sockets when `max_pending_appends` is reached), and service
 * resumes by itself when the backend is back.
 */
import assert from "node:assert/strict";
import { loadConfig } from "../../src/config/load.ts";
import { createBackend } from "../../src/log/create.ts";
import { connectRaw, publishPacket, startGateway, waitFor } from "../helpers/gateway.ts";
import { SpyBackend } from "../helpers/spy_backend.ts";

const opts = {};

async function spyGateway(env: Record<string, string>) {
  const dir = await Deno.makeTempDir();
  const all = { IGGY_MQTT_EMBEDDED_PATH: `${dir}/o.db`, IGGY_MQTT_LOG_AUTO_CREATE: "true", ...env };
  const spy = new SpyBackend(await createBackend(loadConfig({ text: "", source: "t", env: all })));
  const gw = await startGateway({ env: all, overrides: { backend: spy } });
  return { gw, spy };
}

Deno.test({
  name:
    "hung backend: pending appends stay bounded by max_pending_appends (sockets are not read), no PUBACK; recovery without restart",
  ...opts,
  async fn() {
    const { gw, spy } = await spyGateway({
      IGGY_MQTT_LIMITS_MAX_PENDING_APPENDS: "50",
      IGGY_MQTT_LIMITS_MAX_INFLIGHT_PUBLISHES_PER_CLIENT: "1000",
      IGGY_MQTT_LIMITS_MAX_APPEND_BATCH: "10",
    });
    try {
      const c = await connectRaw(gw.port, "outage-1");
      await c.send(publishPacket("sensors/o/data", "warm", 1, 1));
      assert.deepEqual([...(await c.readPacket())!], [0x40, 2, 0, 1]);
      spy.holding = true;
      // 2000 QoS 1 publishes of 1 KB: far more than the cap. The writer does not wait for it.
      const payload = new Uint8Array(1000).fill(65);
      const writes = (async () => {
        for (let i = 2; i <= 2001; i++) {
          await c.send(publishPacket("sensors/o/data", payload, 1, i));
        }
      })().catch(() => {});
      const pendingAppends = () =>
        Number(
          gw.view.prometheus().match(/^log_pending_appends (\d+)$/m)?.[1],
        );
      await waitFor(() => pendingAppends() >= 50, 5000, "max_pending_appends reached");
      // Real time: a stall can only be seen over time. A gateway still reading its socket now
      // would take hundreds more of the writer's publishes within this window.
      await new Promise((r) => setTimeout(r, 500));
      const n = pendingAppends();
      // One read may overshoot the cap by what it decoded (≤ 64 KB of 1 KB packets).
      assert.ok(n <= 50 + 70, `pending appends ${n} exceed the bound`);
      assert.equal(await c.readPacket(300), null, "no PUBACK while the backend holds");
      spy.release();
      // Recovery: all 2000 get their PUBACKs, in order.
      let next = 2;
      while (next <= 2001) {
        const p = await c.readPacket(10_000);
        assert.ok(p, `PUBACK ${next} after recovery`);
        assert.equal((p[2] << 8) | p[3], next);
        next++;
      }
      await writes;
      c.close();
    } finally {
      spy.release();
      await gw.stop();
    }
  },
});

Deno.test({
  name:
    "backend down: /ready is 503 with the reason, publishes fail without PUBACK, and succeed again once it is back",
  ...opts,
  async fn() {
    const { gw, spy } = await spyGateway({});
    try {
      spy.failWith = "unavailable";
      const r = await fetch(`http://127.0.0.1:${gw.httpPort}/ready`);
      assert.equal(r.status, 503);
      assert.match(JSON.stringify(await r.json()), /backend not ready/);
      const c = await connectRaw(gw.port, "down-1");
      await c.send(publishPacket("sensors/d/data", "x", 1, 1));
      assert.ok(await c.closedByPeer(), "closed without PUBACK");
      spy.failWith = null;
      const ok = await fetch(`http://127.0.0.1:${gw.httpPort}/ready`);
      assert.equal(ok.status, 200);
      await ok.body?.cancel();
      const d = await connectRaw(gw.port, "down-1");
      await d.send(publishPacket("sensors/d/data", "x", 1, 1));
      assert.deepEqual([...(await d.readPacket())!], [0x40, 2, 0, 1]);
      d.close();
    } finally {
      await gw.stop();
    }
  },
});
