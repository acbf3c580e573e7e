/**
 * The invariants of DESIGN §3, each a named test, over real sockets.
 */
import assert from "node:assert/strict";
import { loadConfig } from "../../src/config/load.ts";
import { createBackend } from "../../src/log/create.ts";
import { openStoreReadOnly } from "../helpers/store.ts";
import { compileMap, partitionForKey, resolveTopic } from "../../src/mapping/mod.ts";
import { hashPassword } from "../../src/access/password.ts";
import {
  connectPacket,
  connectRaw,
  DESIGN_MAP,
  pingBarrier,
  publishPacket,
  RawClient,
  startGateway,
  waitFor,
} from "../helpers/gateway.ts";
import { SpyBackend } from "../helpers/spy_backend.ts";

const opts = {};

async function spyGateway(extraEnv: Record<string, string> = {}, toml = "") {
  const dir = await Deno.makeTempDir();
  const env = {
    IGGY_MQTT_EMBEDDED_PATH: `${dir}/held.db`,
    IGGY_MQTT_LOG_AUTO_CREATE: "true",
    ...extraEnv,
  };
  const spy = new SpyBackend(await createBackend(loadConfig({ text: toml, source: "t", env })));
  const gw = await startGateway({ env, toml, overrides: { backend: spy } });
  return { gw, spy, dbPath: `${dir}/held.db` };
}

Deno.test({
  name:
    "invariant: no PUBACK without a confirmed durable append (commit held → no PUBACK; released → PUBACK, on disk)",
  ...opts,
  async fn() {
    const { gw, spy, dbPath } = await spyGateway();
    try {
      const c = await connectRaw(gw.port, "held-1");
      // Create the target first so the held append is the only thing pending.
      await c.send(publishPacket("sensors/a/data", "warm-up", 1, 1));
      assert.deepEqual([...(await c.readPacket())!], [0x40, 2, 0, 1]);
      spy.holding = true;
      await c.send(publishPacket("sensors/a/data", "held", 1, 2));
      await waitFor(() => spy.heldCount === 1, 3000, "the append to be held");
      // Barrier: PINGRESP arrives, and no PUBACK came before it.
      assert.deepEqual(await pingBarrier(c), []);
      // A separate reader of the same file sees only the warm-up message.
      const address = {
        stream: "sensors",
        topic: "sensor_data",
        partition: partitionForKey("sensor_a", 3),
      };
      const reader = await openStoreReadOnly(dbPath);
      assert.equal((await reader.poll(address, 0, 10)).length, 1);
      spy.release();
      assert.deepEqual([...(await c.readPacket())!], [0x40, 2, 0, 2]);
      // The PUBACK came after the commit: a second process-level reader sees it on disk now.
      const after = await reader.poll(address, 0, 10);
      assert.equal(after.length, 2);
      assert.equal(new TextDecoder().decode(after[1].payload), "held");
      await reader.close();
      c.close();
    } finally {
      await gw.stop();
    }
  },
});

Deno.test({
  name:
    "invariant: a failed append gets no PUBACK (outcome failed, connection closed so the device retries)",
  ...opts,
  async fn() {
    const { gw, spy } = await spyGateway();
    try {
      const c = await connectRaw(gw.port, "fail-1");
      await c.send(publishPacket("sensors/a/data", "one", 1, 1));
      assert.deepEqual([...(await c.readPacket())!], [0x40, 2, 0, 1]);
      spy.failWith = "unavailable";
      const ready = await fetch(`http://127.0.0.1:${gw.httpPort}/ready`);
      assert.equal(ready.status, 503);
      await ready.body?.cancel();
      await c.send(publishPacket("sensors/a/data", "two", 1, 2));
      assert.ok(await c.closedByPeer(), "closed without PUBACK");
      assert.equal(gw.view.metrics.publishes.get({ outcome: "failed" }), 1);
      spy.failWith = null;
      const d = await connectRaw(gw.port, "fail-1");
      await d.send(publishPacket("sensors/a/data", "two", 1, 2));
      assert.deepEqual([...(await d.readPacket())!], [0x40, 2, 0, 2]);
      d.close();
    } finally {
      await gw.stop();
    }
  },
});

Deno.test({
  name: "invariant: no backend call happens before the ACL check passes",
  ...opts,
  async fn() {
    const h = await hashPassword("pw", 1000);
    const toml =
      `[[users]]\nusername = "u"\npassword_hash = "${h}"\n[users.permissions.streams.other]\nsend_messages = true\n`;
    const { gw, spy } = await spyGateway({ IGGY_MQTT_AUTH_ALLOW_ANONYMOUS: "false" }, toml);
    try {
      const c = await RawClient.connect(gw.port);
      await c.send(connectPacket("acl-1", { username: "u", password: "pw" }));
      assert.deepEqual([...(await c.readPacket())!], [0x20, 2, 0, 0]);
      const before = spy.calls.length;
      await c.send(publishPacket("building/x/room/1/t", "denied", 0));
      await c.send(publishPacket("sensors/x/data", "denied", 0));
      await pingBarrier(c);
      assert.deepEqual(spy.calls.slice(before), []);
      assert.equal(gw.view.metrics.publishes.get({ outcome: "denied" }), 2);
      c.close();
    } finally {
      await gw.stop();
    }
  },
});

Deno.test({
  name:
    "invariant: the same key always lands in the same partition, and appends of one connection keep their order",
  ...opts,
  async fn() {
    const gw = await startGateway();
    try {
      const c = await connectRaw(gw.port, "order-1");
      const N = 300;
      const batch: number[] = [];
      for (let i = 1; i <= N; i++) {
        batch.push(...publishPacket("sensors/k1/data", `m${i}`, (i % 2) as 0 | 1, i));
      }
      await c.send(new Uint8Array(batch));
      const acks = await pingBarrier(c);
      // PUBACKs in packet order.
      assert.deepEqual(
        acks.map((p) => (p[2] << 8) | p[3]),
        Array.from({ length: N / 2 }, (_, i) => 2 * i + 1),
      );
      const p = partitionForKey("sensor_k1", 3);
      await waitFor(async () =>
        (await gw.view.log.poll(
          { stream: "sensors", topic: "sensor_data", partition: p },
          0,
          1000,
        )).length === N
      );
      const msgs = await gw.view.log.poll(
        { stream: "sensors", topic: "sensor_data", partition: p },
        0,
        1000,
      );
      assert.deepEqual(
        msgs.map((m) => new TextDecoder().decode(m.payload)),
        Array.from({ length: N }, (_, i) => `m${i + 1}`),
      );
      for (let q = 0; q < 3; q++) {
        if (q === p) continue;
        assert.equal(
          (await gw.view.log.poll(
            { stream: "sensors", topic: "sensor_data", partition: q },
            0,
            10,
          )).length,
          0,
        );
      }
      c.close();
    } finally {
      await gw.stop();
    }
  },
});

Deno.test("invariant: mapping is a pure function of (map, topic)", () => {
  const a = compileMap(DESIGN_MAP, "a.toml");
  const b = compileMap(DESIGN_MAP, "b.toml");
  for (
    const t of ["building/north/room/42/temp", "sensors/x/data", "other", "building/n/room/x/t"]
  ) {
    assert.deepEqual(resolveTopic(a, t), resolveTopic(b, t));
    assert.deepEqual(resolveTopic(a, t), resolveTopic(a, t));
  }
});
