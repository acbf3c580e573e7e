/**
 * Forward mode end to end: MQTT.js devices publish QoS 1 into a gateway whose uplink goes to
 * the fake Iggy (both dialects). Everything PUBACKed while the uplink is down reaches Iggy once
 * it is up, in per-partition order, once; the same through a proxy that resets every
 * connection. Read back through Iggy (our client on the fake), not through the gateway.
 */
import assert from "node:assert/strict";
import mqtt from "mqtt";
import { IggyBackend } from "../../src/log/iggy/backend.ts";
import { ORIGIN_HEADER } from "../../src/forward/origin.ts";
import { fakeIggyConfig, FakeNode, FakeStore } from "../helpers/fake_iggy/mod.ts";
import { freePort, startGateway, type TestGateway, waitFor } from "../helpers/gateway.ts";
import { readTopic } from "../helpers/iggy_client.ts";
import { startResetProxy } from "../helpers/reset_proxy.ts";

const STREAM = "sensors";
const TOPIC = "sensor_data"; // sensors/<id>/data, keyed by sensor

function forwardEnv(address: string, dialect: "0.11" | "0.12"): Record<string, string> {
  return {
    IGGY_MQTT_FORWARD_ENABLED: "true",
    IGGY_MQTT_FORWARD_BATCH_MAX_MESSAGES: "200",
    IGGY_MQTT_FORWARD_LINGER_MS: "5",
    IGGY_MQTT_IGGY_ADDRESS: address,
    IGGY_MQTT_IGGY_PROTOCOL: dialect,
    IGGY_MQTT_IGGY_PASSWORD: "iggy",
    IGGY_MQTT_IGGY_RECONNECT_MAX_MS: "100",
    IGGY_MQTT_IGGY_REQUEST_TIMEOUT_MS: "1000",
    IGGY_MQTT_IGGY_HEARTBEAT_INTERVAL_MS: "1000",
  };
}

/**
 * `devices` clients publish `each` QoS 1 messages `<device>:<seq>` (seq from `from`); resolves
 * when all are PUBACKed.
 */
async function publishAll(gw: TestGateway, devices: number, each: number, from = 0) {
  await Promise.all(Array.from({ length: devices }, async (_, d) => {
    const c = await mqtt.connectAsync(`mqtt://127.0.0.1:${gw.port}`, {
      clientId: `dev-${d}`,
      reconnectPeriod: 0,
    });
    try {
      for (let i = from; i < from + each; i += 50) {
        const sends = [];
        for (let j = i; j < Math.min(from + each, i + 50); j++) {
          sends.push(c.publishAsync(`sensors/d${d}/data`, `d${d}:${j}`, { qos: 1 }));
        }
        await Promise.all(sends);
      }
    } finally {
      await c.endAsync();
    }
  }));
}

/** Every message of the upstream topic, per partition, read through our Iggy client. */
async function readUpstream(address: string, dialect: "0.11" | "0.12"): Promise<string[][]> {
  const iggy = new IggyBackend(
    fakeIggyConfig({ address, protocol: dialect }),
    { patUsername: "", cacheTtlMs: 0 },
  );
  await iggy.open();
  try {
    const parts = await readTopic(iggy, STREAM, TOPIC);
    return parts.map((part) =>
      part.map((m) => `${new TextDecoder().decode(m.payload)}@${m.headers.get(ORIGIN_HEADER)}`)
    );
  } finally {
    await iggy.close();
  }
}

function upstreamCount(store: FakeStore): number {
  const t = store.topic(STREAM, TOPIC);
  return t ? t.partitions.reduce((n, p) => n + p.messages.length, 0) : 0;
}

/** Each device's messages, in order, exactly once; no other message. */
function assertOncePerDeviceInOrder(parts: string[][], devices: number, each: number): void {
  const seen = new Map<string, number[]>();
  for (const part of parts) {
    for (const entry of part) {
      const [device, seq] = entry.split("@")[0].split(":");
      const list = seen.get(device) ?? [];
      list.push(Number(seq));
      seen.set(device, list);
    }
  }
  assert.equal(seen.size, devices);
  for (const [device, seqs] of seen) {
    assert.deepEqual(seqs, Array.from({ length: each }, (_, i) => i), `${device} in order, once`);
  }
}

for (const dialect of ["0.11", "0.12"] as const) {
  Deno.test(`forward ${dialect}: PUBACKed while the uplink is down, all in Iggy once it is up`, async () => {
    const port = freePort();
    const address = `127.0.0.1:${port}`;
    const gw = await startGateway({ env: forwardEnv(address, dialect) });
    const store = new FakeStore();
    const node = new FakeNode({ dialect, store });
    try {
      await publishAll(gw, 4, 500); // every one PUBACKed: on the box's disk
      const ready = async () => {
        const r = await fetch(`http://127.0.0.1:${gw.httpPort}/ready`);
        return { status: r.status, body: await r.json() };
      };
      await waitFor(async () => /2000 messages/.test((await ready()).body.uplink), 5_000, "lag");
      const { status, body } = await ready();
      assert.equal(status, 200, "devices are served with the uplink down");
      assert.match(body.uplink, /^down: .*; 2000 messages waiting, oldest \d+\.\d s$/);
      const page = await (await fetch(`http://127.0.0.1:${gw.httpPort}/status.json`)).json();
      assert.equal(page.uplink.up, false, "the status page has the uplink's fields");
      assert.equal(page.uplink.waiting_messages, 2000);
      assert.ok(page.uplink.waiting_bytes > 2000 * "d0:0".length, "payloads and headers");
      assert.match(page.uplink.reason, /\S/);
      node.listen(port);
      await waitFor(() => upstreamCount(store) >= 2000, 15_000, "2000 messages upstream");
      await waitFor(() => gw.view.forwarder!.status().lagMessages === 0, 5_000, "no lag");
      assertOncePerDeviceInOrder(await readUpstream(address, dialect), 4, 500);
      assert.equal(upstreamCount(store), 2000);
      const metrics = await (await fetch(`http://127.0.0.1:${gw.httpPort}/metrics`)).text();
      assert.match(metrics, /forward_uplink_up 1/);
      assert.match(metrics, /forward_messages\{kind="sent"\} 2000/);
    } finally {
      await gw.stop();
      await node.close();
    }
  });

  Deno.test(`forward ${dialect}: a proxy that resets every connection, 0 lost, 0 duplicates`, async () => {
    const store = new FakeStore();
    const node = new FakeNode({ dialect, store });
    const target = node.listen();
    // Reset by hand between rounds as well as on the timer: a busy test process may run its
    // rounds between two ticks.
    const proxy = await startResetProxy({ target, everyMs: 100 });
    const gw = await startGateway({ env: forwardEnv(proxy.address, dialect) });
    try {
      for (let round = 0; round < 5; round++) {
        await publishAll(gw, 4, 300, round * 300);
        await waitFor(() => proxy.connections > 0, 5_000, "the uplink connected");
        proxy.resetNow();
      }
      await waitFor(
        () => upstreamCount(store) >= 6000 && gw.view.forwarder!.status().lagMessages === 0,
        20_000,
        "6000 messages upstream",
      );
      assert.ok(proxy.resets > 0, "connections were reset");
      await proxy.close();
      assertOncePerDeviceInOrder(await readUpstream(target, dialect), 4, 1500);
      assert.equal(upstreamCount(store), 6000, "no duplicate stored");
    } finally {
      await gw.stop();
      await proxy.close();
      await node.close();
    }
  });
}
