/**
 * Catch-ups paced by their client's queue: several partitions of 200 KB messages behind one
 * client with a 1 MiB cap never hold more than the cap (plus one message into an empty queue),
 * read ahead no more than it, drop no QoS 0 copy, and wait, paused, for a queue that does not
 * drain; a share group's catch-up deals only to members with room.
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
import type { ShareGroup, Subscription } from "./registry.ts";
import { GroupCatchUp } from "./share/group_catch_up.ts";
import { roomInAny, roomUnderHardCap } from "./pacing.ts";

const CAP = 1 << 20;
const BIG = 200 * 1024;

/** An outbox whose socket takes what is queued only at `write()`. */
class SlowOutbox {
  queuedBytes = 0;
  maxQueued = 0;
  received = 0;
  onWritten: () => void = () => {};
  constructor(readonly budget: OutboundBudget) {}
  push(b: Uint8Array): void {
    this.queuedBytes += b.length;
    this.budget.bytes += b.length;
    if (b[0] >> 4 === 3) this.received++;
    this.maxQueued = Math.max(this.maxQueued, this.queuedBytes);
  }
  pushAck(): void {}
  /** The socket takes everything queued. */
  write(): void {
    this.budget.bytes -= this.queuedBytes;
    this.queuedBytes = 0;
    this.onWritten();
  }
}

function client(qos: 0 | 1, maxInflight = 1000, budget = new OutboundBudget(1 << 30)) {
  const outbox = new SlowOutbox(budget);
  const sub: Subscriber = {
    clientId: "c",
    principal: { username: "", permissions: { global: {} as never, streams: new Map() } },
    outbox: outbox as unknown as Outbox,
    spanContext: null,
    session: null,
    close() {},
  };
  const limits = { maxInflight, maxClientBytes: CAP, slowConsumerTimeoutMs: 500 };
  const q = new ClientQueue(sub, limits, budget);
  const pauses: boolean[] = [];
  q.onPauseChange = (p) => pauses.push(p);
  outbox.onWritten = () => q.refill();
  const keys = [0, 1, 2].map((p) => `s\u0000t\u0000${p}`);
  const sub0: Subscription<ClientQueue> = {
    client: q,
    qos,
    startOffsets: new Map(keys.map((k) => [k, Infinity])),
    match: "a/+",
    prefix: "",
    wildcard: true,
  };
  return { q, outbox, sub: sub0, pauses };
}

/** `count` messages of `bytes` on each of partitions 0..2. */
function log(
  count: number,
  bytes: number,
  qos: 0 | 1 = 0,
): { backend: Pick<LogBackend, "poll">; polled: number[] } {
  const parts = [0, 1, 2].map((p) => {
    const out: StoredMessage[] = [];
    for (let o = 0; o < count; o++) {
      const m = envelope("a/b", new Uint8Array(bytes), qos, "p", 0, false, false);
      out.push({ partition: p, offset: o, timestampMicros: o, ...m });
    }
    return out;
  });
  const polled: number[] = [];
  const backend: Pick<LogBackend, "poll"> = {
    poll: (a, from, n) => {
      polled.push(n);
      return Promise.resolve(parts[a.partition].slice(from, from + n));
    },
  };
  return { backend, polled };
}

function catchUps(
  c: ReturnType<typeof client>,
  backend: Pick<LogBackend, "poll">,
  count: number,
  metrics = new GatewayMetrics(),
): CatchUp[] {
  return [0, 1, 2].map((p) =>
    new CatchUp(c.q, { stream: "s", topic: "t", partition: p }, [c.sub], 0, {
      left: Infinity,
    }, {
      backend,
      metrics,
      logger: new Logger("error"),
      pollBatch: 512,
      maxClientBytes: CAP,
      reader: () => ({ position: count }) as SharedReader,
      live: () => !c.q.closed,
      evict: () => {},
    })
  );
}

for (const qos of [0, 1] as const) {
  Deno.test(`pacing: three catch-ups of 200 KB messages at QoS ${qos} share one 1 MiB queue, deliver everything, drop nothing`, async () => {
    const c = client(qos);
    const { backend, polled } = log(40, BIG, qos);
    const metrics = new GatewayMetrics();
    let maxAhead = 0;
    const runs = catchUps(c, backend, 40, metrics).map((u) => u.run());
    let done = false;
    const all = Promise.all(runs).then(() => done = true);
    while (!done) { // the socket takes what is queued, a turn at a time
      await new Promise((r) => setTimeout(r, 0));
      maxAhead = Math.max(maxAhead, c.q.readAhead);
      c.outbox.write();
      if (qos === 1) { for (let id = 1; id <= 200; id++) c.q.puback(id); }
    }
    await all;
    assert.equal(c.outbox.received, 120, "every message of the three partitions");
    assert.equal(metrics.droppedQos0.get(), 0);
    assert.ok(c.outbox.maxQueued <= CAP, `queued at most the cap (${c.outbox.maxQueued})`);
    assert.ok(maxAhead <= CAP, `read ahead at most the cap (${maxAhead})`);
    assert.ok(Math.max(...polled) <= Math.ceil(CAP / BIG), `polls of ${Math.max(...polled)}`);
    assert.equal(c.q.readAhead, 0, "nothing stays reserved");
  });
}

Deno.test("pacing: small messages are still polled a full poll batch at a time", async () => {
  const c = client(0);
  const { backend, polled } = log(2000, 100);
  const runs = catchUps(c, backend, 2000).map((u) => u.run());
  let done = false;
  const all = Promise.all(runs).then(() => done = true);
  while (!done) {
    await new Promise((r) => setTimeout(r, 0));
    c.outbox.write();
  }
  await all;
  assert.equal(c.outbox.received, 6000);
  assert.ok(polled.filter((n) => n === 512).length >= 9, `polls: ${polled.join(",")}`);
});

Deno.test("pacing: a catch-up waits, paused, for a queue that does not drain, and ends when it closes", async () => {
  const c = client(0);
  const { backend } = log(40, BIG);
  const runs = Promise.all(catchUps(c, backend, 40).map((u) => u.run()));
  for (let i = 0; i < 20; i++) await new Promise((r) => setTimeout(r, 0));
  assert.ok(c.outbox.queuedBytes <= CAP && c.outbox.queuedBytes > CAP - BIG, "queue full");
  assert.ok(c.q.paused, "the waiting backlog counts as paused (slow_consumer_timeout_ms runs)");
  c.outbox.write(); // the client reads once: the timer starts again
  assert.deepEqual(c.pauses.slice(0, 2), [true, false]);
  for (let i = 0; i < 20; i++) await new Promise((r) => setTimeout(r, 0));
  assert.ok(c.q.paused);
  c.q.strikeAll(); // evicted: detached
  await runs;
  assert.equal(c.q.readAhead, 0);
  assert.equal(c.q.offerQos0(new Uint8Array(10)), "struck");
});

Deno.test("pacing: tiny QoS 1 messages a client reads but does not acknowledge wait in a bounded number of copies", async () => {
  const c = client(1, 32);
  const { backend } = log(20_000, 1, 1);
  const runs = Promise.all(catchUps(c, backend, 20_000).map((u) => u.run()));
  for (let i = 0; i < 50; i++) {
    await new Promise((r) => setTimeout(r, 0));
    c.outbox.write(); // read, never acknowledged: the window stays full
  }
  await new Promise((r) => setTimeout(r, 0)); // the catch-ups look again after the last write
  assert.equal(c.q.inflight, 32);
  assert.ok(c.q.waiting > 1000, `${c.q.waiting} waiting`);
  // At most the cap, and what the last copy in costs beyond its estimate.
  assert.ok(c.q.heldBytes <= CAP + 256, `${c.q.waiting} copies waiting hold ${c.q.heldBytes} B`);
  assert.ok(c.q.waiting < CAP / 128, "bounded in copies");
  assert.ok(c.q.paused, "the backlog waits for acknowledgements");
  c.q.strikeAll();
  await runs;
});

Deno.test("pacing: a share group's catch-up deals 200 KB messages only to members with room; a member that stops reading gets nothing more", async () => {
  const a = client(1);
  const b = client(1);
  const key = "s\u0000t\u00000";
  const group: ShareGroup<ClientQueue> = { key: "g/a/+", members: [], next: 0 };
  for (const c of [a, b]) {
    c.sub.startOffsets.clear();
    c.sub.startOffsets.set(key, 0);
    c.sub.share = group;
    group.members.push(c.sub);
  }
  const { backend } = log(60, BIG, 1);
  const g = new GroupCatchUp(group, { stream: "s", topic: "t", partition: 0 }, 0, {
    backend,
    metrics: new GatewayMetrics(),
    logger: new Logger("error"),
    pollBatch: 512,
    maxClientBytes: CAP,
    reader: () => ({ position: 60 }) as SharedReader,
    evict: () => {},
  });
  let done = false;
  const run = g.run().then((r) => (done = true, r));
  while (!done) { // a reads and acknowledges; b never reads after its first 1 MiB
    await new Promise((r) => setTimeout(r, 0));
    a.outbox.write();
    for (let id = 1; id <= 100; id++) a.q.puback(id);
  }
  assert.equal(await run, true, "handed over to the reader");
  assert.equal(a.outbox.received + b.outbox.received, 60, "each message dealt once");
  assert.ok(b.outbox.maxQueued <= CAP, `b holds at most its cap (${b.outbox.maxQueued})`);
  assert.ok(b.outbox.received <= Math.ceil(CAP / BIG), `b got ${b.outbox.received}`);
  assert.ok(a.outbox.maxQueued <= CAP);
});

Deno.test("a live copy past a QoS 1 queue's hard cap waits while the client drains, and evicts it after the grace when it makes no progress", async () => {
  const copy = (bytes: number) => ({
    qos: 1 as const,
    topicBytes: new Uint8Array(3),
    payload: new Uint8Array(bytes),
    ledger: { settle() {} } as never,
    entry: { offset: 0, pending: 1 },
    bytes,
    key: "k",
    props: null,
    retain: false,
  });
  // A client that reads: 2 MiB queued (its hard cap), it writes 1 MiB at a time.
  const reads = client(1);
  assert.equal(reads.q.offerQos1(copy(CAP - 1024)), "sent");
  assert.equal(reads.q.offerQos1(copy(CAP - 1024)), "sent");
  assert.ok(reads.q.overHardCap(BIG), "a 200 KB copy would pass twice the cap");
  const evicted: string[] = [];
  const waited = roomUnderHardCap([[reads.q, BIG]], 200, (_q, why) => evicted.push(why));
  for (let i = 0; i < 3; i++) {
    await new Promise((r) => setTimeout(r, 100)); // under the grace each time
    reads.outbox.write();
  }
  await waited;
  assert.equal(evicted.length, 0, "the client that reads is not evicted");
  assert.equal(reads.q.overHardCap(BIG), false);
  // A client that stopped reading: evicted once the grace passes with no progress.
  const stuck = client(1);
  stuck.q.offerQos1(copy(CAP - 1024));
  stuck.q.offerQos1(copy(CAP - 1024));
  const started = performance.now();
  await roomUnderHardCap([[stuck.q, BIG]], 200, (q, why) => {
    evicted.push(why);
    q.close();
  });
  const took = performance.now() - started;
  assert.equal(evicted.length, 1);
  assert.match(evicted[0], /hard cap of outbound bytes, no progress for 200 ms/);
  assert.ok(took >= 190 && took < 1000, `evicted after ${took.toFixed(0)} ms`);
});

Deno.test("roomInAny: once one member has room, the others it waited for are no longer paused when under their own cap", async () => {
  const budget = new OutboundBudget(1 << 30);
  const a = client(1, 1000, budget);
  const b = client(1, 1000, budget);
  for (const c of [a, b]) c.outbox.push(new Uint8Array(CAP - BIG / 2).fill(0x30));
  assert.equal(a.q.blockedBy(BIG), "client");
  assert.equal(b.q.blockedBy(BIG), "client");
  const waited = roomInAny([a.q, b.q], BIG);
  await new Promise((r) => setTimeout(r, 10));
  assert.ok(a.q.paused && b.q.paused, "both paused while the backlog waits for them");
  a.outbox.write();
  await waited;
  assert.equal(a.q.paused, false);
  assert.equal(b.q.paused, false, "b is under its cap and nothing waits for it any more");
});
