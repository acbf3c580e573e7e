/**
 * The gateway in Iggy mode over the fake Iggy, both dialects, with the default
 * `limits.max_packet_bytes` (1 MiB): a backlog of 70 messages of 1 MiB (more than one Iggy frame
 * holds) is replayed to a `$replay` subscription whole and in order. A poll asks for as many
 * messages as fit one frame (`frame_reader.ts` `maxPollMessages`): asked for 512, the reply
 * passed the frame bound and the poll failed on every try.
 *
 * Polls are sized from the messages each partition's last poll returned (`poll_sizes.ts`): a
 * replay of 2,000 small messages asks for 512 at a time, not 47; and 100 small messages followed
 * by 70 of 1 MiB (a poll sized for the small ones gets a reply over the frame bound) replay whole
 * and in order, the oversized reply read past and the poll asked again, nothing failed.
 */
import assert from "node:assert/strict";
import { Buffer } from "node:buffer";
import mqtt from "mqtt";
import { FakeNode, FakeStore } from "../helpers/fake_iggy/mod.ts";
import { startGateway, waitFor } from "../helpers/gateway.ts";
import { maxPollMessages } from "../../src/log/iggy/frame_reader.ts";

const opts = {};
const MIB = 1024 * 1024;

Deno.test("maxPollMessages() keeps a poll of the largest messages within one frame, and 512 small ones", () => {
  assert.equal(maxPollMessages(MIB), 47);
  assert.ok(maxPollMessages(8092) >= 512);
  assert.equal(maxPollMessages(268_435_455), 1);
  assert.equal(maxPollMessages(undefined), Infinity);
});

function includesBytes(hay: Uint8Array, needle: Uint8Array): boolean {
  outer: for (let i = 0; i + needle.length <= hay.length; i++) {
    for (let j = 0; j < needle.length; j++) if (hay[i + j] !== needle[j]) continue outer;
    return true;
  }
  return false;
}

for (const dialect of ["0.12", "0.11"] as const) {
  Deno.test({
    name:
      `fake Iggy ${dialect}, default config: 70 messages of 1 MiB (over one frame) replay whole and in order`,
    ...opts,
    async fn() {
      const store = new FakeStore();
      const node = new FakeNode({ dialect, store });
      const gw = await startGateway({
        env: {
          IGGY_MQTT_GATEWAY_BACKEND: "iggy",
          IGGY_MQTT_IGGY_ADDRESS: node.listen(),
          IGGY_MQTT_IGGY_PASSWORD: "iggy",
        },
      });
      const url = `mqtt://127.0.0.1:${gw.port}`;
      const clients: mqtt.MqttClient[] = [];
      try {
        const pub = await mqtt.connectAsync(url, { clientId: "pub", reconnectPeriod: 0 });
        clients.push(pub);
        const fill = (i: number) => Buffer.alloc(MIB - 64, i);
        for (let i = 0; i < 70; i++) await pub.publishAsync("sensors/a/data", fill(i), { qos: 1 });
        const sub = await mqtt.connectAsync(url, { clientId: "sub", reconnectPeriod: 0 });
        clients.push(sub);
        const got: Buffer[] = [];
        sub.on("message", (_t, p) => got.push(p));
        await sub.subscribeAsync("$replay/earliest/sensors/a/data", { qos: 1 });
        await waitFor(() => got.length === 70, 30_000, `70 replayed (${got.length})`);
        assert.ok(got.every((p, i) => p.length === MIB - 64 && p[0] === i && p[MIB - 65] === i));
        assert.equal(gw.view.metrics.evictions.get(), 0);
        assert.ok(!gw.logs.some((l) => l.includes("poll failed")), "no poll failed");
      } finally {
        for (const c of clients) await c.endAsync();
        await gw.stop();
        await node.close();
      }
    },
  });
}

/** Counts of the plain polls (POLL_MESSAGES) the node saw: the u32 before the last byte. */
/**
 * The message counts the gateway's polls of the data topics asked for; the gateway's own topics
 * (stream `mqtt_gateway`: session records and claims, retained) are read in batches of their own.
 */
function pollCounts(node: FakeNode): number[] {
  const own = new TextEncoder().encode("mqtt_gateway");
  const reads = (b: Uint8Array) => !includesBytes(b, own);
  return node.seen.filter((r) => r.code === 100 && reads(r.body)).map((r) => {
    const b = r.body;
    return new DataView(b.buffer, b.byteOffset, b.byteLength).getUint32(b.length - 5, true);
  });
}

for (const dialect of ["0.12", "0.11"] as const) {
  Deno.test({
    name:
      `fake Iggy ${dialect}, default config: a replay of 2,000 messages of 100 B polls 512 at a time, not the 47 that 1 MiB messages allow`,
    ...opts,
    async fn() {
      const node = new FakeNode({ dialect, store: new FakeStore() });
      const gw = await startGateway({
        env: {
          IGGY_MQTT_GATEWAY_BACKEND: "iggy",
          IGGY_MQTT_IGGY_ADDRESS: node.listen(),
          IGGY_MQTT_IGGY_PASSWORD: "iggy",
        },
      });
      const url = `mqtt://127.0.0.1:${gw.port}`;
      const clients: mqtt.MqttClient[] = [];
      try {
        const pub = await mqtt.connectAsync(url, { clientId: "pub", reconnectPeriod: 0 });
        clients.push(pub);
        for (let i = 0; i < 2000; i += 100) {
          await Promise.all(
            Array.from(
              { length: 100 },
              (_, j) =>
                pub.publishAsync("sensors/a/data", `${i + j}:`.padEnd(100, "x"), { qos: 1 }),
            ),
          );
        }
        const before = pollCounts(node).length;
        const sub = await mqtt.connectAsync(url, { clientId: "sub", reconnectPeriod: 0 });
        clients.push(sub);
        const got: string[] = [];
        sub.on("message", (_t, p) => got.push(p.toString()));
        await sub.subscribeAsync("$replay/earliest/sensors/a/data", { qos: 1 });
        await waitFor(() => got.length === 2000, 30_000, `2000 replayed (${got.length})`);
        assert.ok(got.every((p, i) => p.startsWith(`${i}:`)), "in order");
        const counts = pollCounts(node).slice(before);
        assert.ok(Math.max(...counts) === 512, `asked for ${Math.max(...counts)} at most`);
        // At 47 a poll, the replay alone would take 43; the rest are the idle live reader's.
        assert.ok(counts.length < 30, `${counts.length} polls for 2,000 messages`);
      } finally {
        for (const c of clients) await c.endAsync();
        await gw.stop();
        await node.close();
      }
    },
  });

  Deno.test({
    name:
      `fake Iggy ${dialect}, default config: 100 small messages then 70 of 1 MiB replay whole and in order; the poll sized for the small ones is read past and asked again, nothing fails`,
    ...opts,
    async fn() {
      const node = new FakeNode({ dialect, store: new FakeStore() });
      const gw = await startGateway({
        env: {
          IGGY_MQTT_GATEWAY_BACKEND: "iggy",
          IGGY_MQTT_IGGY_ADDRESS: node.listen(),
          IGGY_MQTT_IGGY_PASSWORD: "iggy",
          // The fake builds a reply of 70 MiB in JavaScript, seconds on a shared machine.
          IGGY_MQTT_IGGY_REQUEST_TIMEOUT_MS: "30000",
        },
      });
      const url = `mqtt://127.0.0.1:${gw.port}`;
      const clients: mqtt.MqttClient[] = [];
      try {
        const pub = await mqtt.connectAsync(url, { clientId: "pub", reconnectPeriod: 0 });
        clients.push(pub);
        const sent: Buffer[] = [];
        for (let i = 0; i < 170; i++) {
          const p = Buffer.alloc(i < 100 ? 100 : MIB - 64, i & 0xff);
          sent.push(p);
          await pub.publishAsync("sensors/a/data", p, { qos: 1 });
        }
        const sub = await mqtt.connectAsync(url, { clientId: "sub", reconnectPeriod: 0 });
        clients.push(sub);
        const got: Buffer[] = [];
        sub.on("message", (_t, p) => got.push(p));
        await sub.subscribeAsync("$replay/earliest/sensors/a/data", { qos: 1 });
        await waitFor(() => got.length === 170, 60_000, `170 replayed (${got.length})`);
        assert.ok(got.every((p, i) => p.equals(sent[i])), "whole, in order");
        const counts = pollCounts(node);
        assert.ok(counts.some((n) => n > 47), "a poll sized for the small messages");
        const failed = gw.logs.filter((l) => l.includes("poll failed"));
        assert.deepEqual(failed, [], "no poll failed");
        assert.equal(gw.view.metrics.evictions.get(), 0);
      } finally {
        for (const c of clients) await c.endAsync();
        await gw.stop();
        await node.close();
      }
    },
  });
}
