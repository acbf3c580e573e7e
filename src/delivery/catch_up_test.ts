/**
 * CatchUp over a log whose oldest messages retention removed: the stub backend stands in for
 * a retention pass (the embedded log drops whole 32 MiB segments, too big for a unit test).
 */
import assert from "node:assert/strict";
import { OutboundBudget } from "../session/outbox.ts";
import type { Outbox } from "../session/outbox.ts";
import type { Subscriber } from "../session/delivery_port.ts";
import type { LogBackend, StoredMessage } from "../log/port.ts";
import { envelope } from "../stored/envelope.ts";
import { GatewayMetrics } from "../observe/gateway_metrics.ts";
import { Logger } from "../observe/logger.ts";
import { CatchUp } from "./catch_up.ts";
import { ClientQueue } from "./client_queue.ts";
import type { SharedReader } from "./reader.ts";
import type { Subscription } from "./registry.ts";

function queue(): { q: ClientQueue; packets: Uint8Array[] } {
  const packets: Uint8Array[] = [];
  const outbox = { queuedBytes: 0, onWritten() {}, push: (b: Uint8Array) => packets.push(b) };
  const sub: Subscriber = {
    clientId: "c",
    principal: { username: "", permissions: { global: {} as never, streams: new Map() } },
    outbox: outbox as unknown as Outbox,
    spanContext: null,
    session: null,
    close() {},
  };
  const limits = { maxInflight: 100, maxClientBytes: 1 << 20, slowConsumerTimeoutMs: 500 };
  return { q: new ClientQueue(sub, limits, new OutboundBudget(1 << 30)), packets };
}

/** Offsets `first`..`next - 1` on topic "a/b", QoS 0. */
function logFrom(first: number, next: number): Pick<LogBackend, "poll"> {
  const all: StoredMessage[] = [];
  for (let o = first; o < next; o++) {
    const m = envelope("a/b", new TextEncoder().encode(`m${o}`), 0, "p", 0, false, false);
    all.push({ partition: 0, offset: o, timestampMicros: o, ...m });
  }
  return {
    poll: (_a, from, count) => Promise.resolve(all.filter((m) => m.offset >= from).slice(0, count)),
  };
}

Deno.test("CatchUp skips what retention removed, counts and logs the gap, then hands over", async () => {
  const { q, packets } = queue();
  const metrics = new GatewayMetrics();
  const logs: string[] = [];
  const sub: Subscription<ClientQueue> = {
    client: q,
    qos: 1,
    startOffsets: new Map([["s\u0000t\u00000", Infinity]]),
    match: "a/+",
    prefix: "",
    wildcard: true,
  };
  const reader = { position: 10 } as SharedReader;
  const c = new CatchUp(q, { stream: "s", topic: "t", partition: 0 }, [sub], 2, {
    left: Infinity,
  }, {
    backend: logFrom(6, 10),
    metrics,
    logger: new Logger("info", (l) => logs.push(l)),
    pollBatch: 100,
    maxClientBytes: 1 << 20,
    reader: () => reader,
    live: () => true,
    evict: () => {},
  });
  await c.run();
  assert.equal(packets.length, 4, "offsets 6..9 delivered");
  assert.equal(metrics.retentionGaps.get(), 4, "offsets 2..5 were gone");
  assert.ok(logs.some((l) => l.includes("removed by retention") && l.includes('"skipped":4')));
  assert.equal(sub.startOffsets.get("s\u0000t\u00000"), 10, "the shared reader takes over at 10");
});

Deno.test("CatchUp past max_replay_messages counts matching messages only; offsets jumped are logged apart", async () => {
  const { q, packets } = queue();
  const metrics = new GatewayMetrics();
  const logs: string[] = [];
  const all: StoredMessage[] = [];
  for (let o = 0; o < 10; o++) { // even offsets match "a/+", odd ones do not
    const m = envelope(o % 2 === 0 ? "a/b" : "x/y", new Uint8Array(1), 0, "p", 0, false, false);
    all.push({ partition: 0, offset: o, timestampMicros: o, ...m });
  }
  const backend: Pick<LogBackend, "poll"> = {
    poll: (_a, from, count) => Promise.resolve(all.filter((m) => m.offset >= from).slice(0, count)),
  };
  const sub: Subscription<ClientQueue> = {
    client: q,
    qos: 0,
    startOffsets: new Map([["s\u0000t\u00000", Infinity]]),
    match: "a/+",
    prefix: "",
    wildcard: true,
  };
  const c = new CatchUp(q, { stream: "s", topic: "t", partition: 0 }, [sub], 0, { left: 2 }, {
    backend,
    metrics,
    logger: new Logger("info", (l) => logs.push(l)),
    pollBatch: 4,
    maxClientBytes: 1 << 20,
    reader: () => ({ position: 10 }) as SharedReader,
    live: () => true,
    evict: () => {},
  });
  await c.run();
  // Polls: offset 0 alone (no size known yet), then 1..4 (the poll batch).
  assert.equal(packets.length, 2, "offsets 0 and 2 replayed");
  assert.equal(
    metrics.replaySkipped.get(),
    1,
    "offset 4 matched and was passed over; 1, 3 did not match",
  );
  assert.ok(
    logs.some((l) => l.includes('"skipped":1') && l.includes('"skipped_offsets":5')),
    logs.join("\n"),
  );
  assert.equal(sub.startOffsets.get("s\u0000t\u00000"), 10);
});
