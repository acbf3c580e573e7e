/**
 * Floods and auth abuse: per-source connection rate, failed-login back-off, no secret in logs.
 */
import assert from "node:assert/strict";
import { hashPassword } from "../../src/access/password.ts";
import { connectPacket, connectRaw, RawClient, startGateway, waitFor } from "../helpers/gateway.ts";

const opts = {};

Deno.test({
  name:
    "max_connection_rate_per_source: a burst above the rate is refused and counted, then the source is served again",
  ...opts,
  async fn() {
    const gw = await startGateway({
      env: { IGGY_MQTT_LIMITS_MAX_CONNECTION_RATE_PER_SOURCE: "5" },
    });
    try {
      const clients: RawClient[] = [];
      for (let i = 0; i < 30; i++) clients.push(await RawClient.connect(gw.port));
      await waitFor(
        () => gw.view.metrics.connectionsAccepted.get({ listener: "tcp" }) >= 30,
        5000,
        "the gateway to take in all 30 sockets",
      );
      const refused = gw.view.metrics.connectionsRefused.get({ reason: "rate_per_source" });
      assert.ok(refused >= 15, `refused ${refused}`);
      clients.forEach((c) => c.close());
      // Real time: the bucket refills at 5 tokens per second (one token in 200 ms).
      await new Promise((r) => setTimeout(r, 300));
      const ok = await connectRaw(gw.port, "after-burst");
      ok.close();
    } finally {
      await gw.stop();
    }
  },
});

Deno.test({
  name:
    "failed logins from one source are slowed down exponentially after the free attempts; passwords never reach the log",
  ...opts,
  async fn() {
    const h = await hashPassword("right", 1000);
    const gw = await startGateway({
      toml:
        `[[users]]\nusername = "u"\npassword_hash = "${h}"\n[users.permissions.global]\nsend_messages = true\n`,
      env: {
        IGGY_MQTT_AUTH_FAILURE_FREE_ATTEMPTS: "1",
        IGGY_MQTT_AUTH_FAILURE_BACKOFF_MS: "300",
        IGGY_MQTT_AUTH_FAILURE_BACKOFF_MAX_MS: "600",
      },
    });
    try {
      const times: number[] = [];
      for (let i = 0; i < 4; i++) {
        const c = await RawClient.connect(gw.port);
        const t0 = performance.now();
        await c.send(connectPacket(`bad-${i}`, { username: "u", password: "wrong-pass-SECRET" }));
        const ack = await c.readPacket(5000);
        times.push(performance.now() - t0);
        assert.deepEqual([...ack!], [0x20, 2, 0, 4]);
        c.close();
      }
      assert.ok(times[0] < 300, `first failure answered at once (${times[0]} ms)`);
      assert.ok(times[1] >= 280, `second delayed ≥ 300 ms (${times[1]} ms)`);
      assert.ok(times[2] >= 580, `third delayed ≥ 600 ms (${times[2]} ms)`);
      assert.ok(times[3] >= 580 && times[3] < 2000, `capped at 600 ms (${times[3]} ms)`);
      // A right password clears the source's record.
      const good = await RawClient.connect(gw.port);
      await good.send(connectPacket("good", { username: "u", password: "right" }));
      assert.deepEqual([...(await good.readPacket(5000))!], [0x20, 2, 0, 0]);
      good.close();
      assert.ok(!gw.logs.some((l) => l.includes("wrong-pass-SECRET") || l.includes('"right"')));
    } finally {
      await gw.stop();
    }
  },
});
