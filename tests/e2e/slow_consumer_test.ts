/**
 * Slow consumers (DESIGN §4): one subscriber that stops reading its socket never stalls the
 * others on the same shared reader; its queue is bounded, it is evicted, and then the
 * partition's offset moves again.
 */
import assert from "node:assert/strict";
import { connectRaw, startGateway, type TestGateway, waitFor } from "../helpers/gateway.ts";
import type { SubscriberView } from "../../src/gateway_view.ts";
import {
  counter,
  FastSubscriber,
  opts,
  publishAll,
  storedOffset,
  stuckSubscriber,
  tripleOf,
} from "./_subscribe_helpers.ts";

const ROOM42 = "building/north/room/42/temp";

function queueOf(gw: TestGateway, clientId: string): SubscriberView | undefined {
  const subs = gw.view.subscriptions(ROOM42);
  for (const q of subs?.keys() ?? []) if (q.sub.clientId === clientId) return q;
  return undefined;
}

function sleep(ms: number): Promise<void> {
  return new Promise((r) => setTimeout(r, ms));
}

Deno.test({
  name:
    "slow consumer: among 100 subscribers one never reads; the other 99 keep receiving, bytes stay under the caps, it is evicted within slow_consumer_timeout_ms and the offset advances",
  ...opts,
  async fn() {
    const CAP = 32 * 1024;
    const TIMEOUT = 500;
    const GLOBAL = 8 * 1024 * 1024;
    const gw = await startGateway({
      env: {
        IGGY_MQTT_LIMITS_MAX_OUTBOUND_QUEUE_BYTES_PER_CLIENT: String(CAP),
        IGGY_MQTT_LIMITS_MAX_OUTBOUND_QUEUE_BYTES: String(GLOBAL),
        IGGY_MQTT_LIMITS_SLOW_CONSUMER_TIMEOUT_MS: String(TIMEOUT),
        IGGY_MQTT_LIMITS_COMMIT_INTERVAL_MS: "20",
        IGGY_MQTT_GATEWAY_LOG_LEVEL: "warn",
      },
    });
    const rssBefore = Deno.memoryUsage().rss;
    const good = await Promise.all(
      Array.from({ length: 99 }, (_, i) => FastSubscriber.start(gw.port, `good-${i}`, ROOM42)),
    );
    const stuck = await stuckSubscriber(gw.port, "stuck", ROOM42);
    await waitFor(() => gw.view.subscriptions(ROOM42)?.size === 100, 5000, "100");
    const stuckQueue = queueOf(gw, "stuck")!;
    const pub = await connectRaw(gw.port, "pub");
    const triple = tripleOf("building_north", "telemetry", "room_42");
    const base = await gw.view.log.nextOffset(triple);
    const payload = "p".repeat(200);
    try {
      // Sampler: queue bytes, pause and eviction times, the slowest good subscriber's lag.
      let published = 0;
      let pausedAt = 0;
      let evictedAt = 0;
      let lagAtEviction = -1;
      let maxStuckBytes = 0;
      let maxTotalBytes = 0;
      let maxRss = 0;
      let sampling = true;
      const sampler = (async () => {
        while (sampling) {
          const now = performance.now();
          if (evictedAt === 0) {
            maxStuckBytes = Math.max(maxStuckBytes, stuckQueue.queuedBytes);
            if (pausedAt === 0 && stuckQueue.paused) pausedAt = now;
            if (queueOf(gw, "stuck") === undefined) {
              evictedAt = now;
              lagAtEviction = published - Math.min(...good.map((g) => g.received));
            }
          }
          maxTotalBytes = Math.max(maxTotalBytes, counter(gw, "mqtt_outbound_queue_bytes"));
          maxRss = Math.max(maxRss, Deno.memoryUsage().rss);
          await sleep(5); // sampling period: pause and eviction times are measured in real time
        }
      })();
      // Steady publisher: 10 QoS 1 messages every 100 ms (100 msg/s, 10k deliveries/s) for
      // 3 s. The stuck queue crosses the cap after ~1.4 s and would reach the hard cap only
      // after ~2.8 s, so the eviction seen here is the timeout's.
      const started = performance.now();
      let id = 1;
      for (let tick = 1; performance.now() - started < 3000; tick++) {
        const batch: [string, string][] = [];
        for (let i = 0; i < 10; i++) batch.push([ROOM42, `${published + i}:${payload}`]);
        await publishAll(pub, batch, id);
        id += 10;
        published += 10;
        await sleep(Math.max(0, started + tick * 100 - performance.now()));
      }
      await waitFor(() => good.every((g) => g.received === published), 10_000, "99 get all");
      sampling = false;
      await sampler;

      assert.ok(pausedAt > 0, "the stuck subscriber was paused");
      assert.ok(evictedAt > 0, "the stuck subscriber was evicted");
      const pausedFor = evictedAt - pausedAt;
      assert.ok(
        pausedFor >= TIMEOUT - 20 && pausedFor <= TIMEOUT + 250 + 250,
        `evicted ${pausedFor.toFixed(0)} ms after the pause (timeout ${TIMEOUT} ms)`,
      );
      // At the eviction the slowest good subscriber is at most ~one batch behind the publisher.
      // `published` counts PUBACKed batches, and live delivery does not wait for the fsync that
      // the PUBACKs wait for: a subscriber may be one batch (10) ahead of it.
      assert.ok(
        lagAtEviction >= -10 && lagAtEviction <= 30,
        `99 lagged ${lagAtEviction} messages`,
      );
      assert.ok(maxStuckBytes <= 2 * CAP, `stuck queue ${maxStuckBytes} B within the hard cap`);
      assert.ok(maxTotalBytes <= GLOBAL, `outbound ${maxTotalBytes} B within the global cap`);
      assert.ok(
        maxRss - rssBefore < 100 * CAP + 128 * 1024 * 1024,
        `RSS grew ${((maxRss - rssBefore) / 1048576).toFixed(1)} MiB`,
      );
      assert.equal(counter(gw, "mqtt_slow_consumer_evictions_total"), 1);
      for (const g of good) assert.equal(g.last.split(":")[0], String(published - 1));
      // With the stuck copies struck and every good copy acknowledged, the offset moves on.
      await waitFor(
        async () => (await storedOffset(gw, triple)) === base + published - 1,
        3000,
        "offset past everything",
      );
    } finally {
      for (const g of good) g.close();
      try {
        stuck.close();
      } catch { /* closed by the gateway */ }
      pub.close();
      await gw.stop();
    }
  },
});

Deno.test({
  name:
    "slow consumer: reaching the hard cap (twice the per-client cap) evicts at once, long before the timeout",
  ...opts,
  async fn() {
    const CAP = 16 * 1024;
    const gw = await startGateway({
      env: {
        IGGY_MQTT_LIMITS_MAX_OUTBOUND_QUEUE_BYTES_PER_CLIENT: String(CAP),
        IGGY_MQTT_LIMITS_SLOW_CONSUMER_TIMEOUT_MS: "60000",
        IGGY_MQTT_LIMITS_COMMIT_INTERVAL_MS: "20",
      },
    });
    const reader = await FastSubscriber.start(gw.port, "reader", ROOM42);
    const stuck = await stuckSubscriber(gw.port, "stuck", ROOM42);
    await waitFor(() => gw.view.subscriptions(ROOM42)?.size === 2, 3000, "subs");
    const pub = await connectRaw(gw.port, "pub");
    const triple = tripleOf("building_north", "telemetry", "room_42");
    const base = await gw.view.log.nextOffset(triple);
    try {
      const t0 = performance.now();
      const payload = "h".repeat(300);
      for (let b = 0; b < 10; b++) {
        const batch: [string, string][] = [];
        for (let i = 0; i < 20; i++) batch.push([ROOM42, payload]);
        await publishAll(pub, batch, b * 20 + 1);
      }
      await waitFor(() => queueOf(gw, "stuck") === undefined, 5000, "eviction");
      assert.ok(performance.now() - t0 < 5000);
      assert.equal(counter(gw, "mqtt_slow_consumer_evictions_total"), 1);
      await waitFor(() => reader.received === 200, 5000, "reader gets all 200");
      await waitFor(
        async () => (await storedOffset(gw, triple)) === base + 199,
        3000,
        "offset moves past the struck copies",
      );
    } finally {
      reader.close();
      try {
        stuck.close();
      } catch { /* closed by the gateway */ }
      pub.close();
      await gw.stop();
    }
  },
});
