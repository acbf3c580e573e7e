import assert from "node:assert/strict";
import type { Outbox } from "../session/outbox.ts";
import { OutboundBudget } from "../session/outbox.ts";
import type { Subscriber } from "../session/delivery_port.ts";
import { ClientQueue, type Copy, type QueueLimits } from "./client_queue.ts";
import { AckLedger } from "./ledger.ts";

/** An outbox whose socket writes nothing until `drain()`: bytes stay queued. */
class FakeOutbox {
  packets: Uint8Array[] = [];
  queuedBytes = 0;
  onWritten: () => void = () => {};
  constructor(readonly budget: OutboundBudget) {}
  push(b: Uint8Array): void {
    this.packets.push(b);
    this.queuedBytes += b.length;
    this.budget.bytes += b.length;
  }
  /** A 4-byte acknowledgement (PUBREL: 0x62). */
  pushAck(id: number, type = 0x40): void {
    this.push(new Uint8Array([type, 2, id >> 8, id & 0xff]));
  }
  /** The packet ids of the 4-byte acknowledgements of first byte `type` pushed so far. */
  acks(type: number): number[] {
    return this.packets.filter((p) => p[0] === type).map((p) => (p[2] << 8) | p[3]);
  }
  /** The socket took everything. */
  drain(): void {
    this.budget.bytes -= this.queuedBytes;
    this.queuedBytes = 0;
  }
  /** Packet ids of the QoS 1 and 2 PUBLISHes pushed so far. */
  ids(): number[] {
    return this.packets.filter((p) => p[0] >> 4 === 3 && (p[0] & 0x06) !== 0).map((p) => {
      let at = 1;
      while (p[at] & 0x80) at++;
      at++;
      const tlen = (p[at] << 8) | p[at + 1];
      return (p[at + 2 + tlen] << 8) | p[at + 3 + tlen];
    });
  }
}

function setup(limits: Partial<QueueLimits> = {}, globalMax = 1 << 30) {
  const budget = new OutboundBudget(globalMax);
  const outbox = new FakeOutbox(budget);
  const sub: Subscriber = {
    clientId: "c",
    principal: { username: "", permissions: { global: {} as never, streams: new Map() } },
    outbox: outbox as unknown as Outbox,
    spanContext: null,
    session: null,
    close() {},
  };
  const q = new ClientQueue(sub, {
    maxInflight: 2,
    maxClientBytes: 1000,
    slowConsumerTimeoutMs: 500,
    ...limits,
  }, budget);
  const pauses: boolean[] = [];
  const evictions: string[] = [];
  q.onPauseChange = (p) => pauses.push(p);
  q.onEvict = (r) => evictions.push(r);
  const ledger = new AckLedger(-1);
  let offset = 0;
  const copy = (payloadBytes = 10, qos: 1 | 2 = 1): Copy => {
    const payload = new Uint8Array(payloadBytes);
    const topicBytes = new TextEncoder().encode("t");
    return {
      qos,
      topicBytes,
      payload,
      ledger,
      entry: ledger.record(offset++, 1)!,
      bytes: topicBytes.length + payload.length + 8,
      key: "k",
    };
  };
  return { q, outbox, budget, ledger, copy, pauses, evictions };
}

Deno.test("ClientQueue.offerQos1() sends up to max_inflight_per_client, then queues behind the window", () => {
  const { q, outbox, copy } = setup({ maxInflight: 2 });
  assert.deepEqual([copy(), copy(), copy(), copy()].map((c) => q.offerQos1(c)), [
    "sent",
    "sent",
    "queued",
    "queued",
  ]);
  assert.equal(q.inflight, 2);
  assert.deepEqual(outbox.ids(), [1, 2]);
});

Deno.test("ClientQueue.puback() settles the copy and moves exactly one waiting copy into the window", () => {
  const { q, outbox, ledger, copy } = setup({ maxInflight: 2 });
  for (let i = 0; i < 4; i++) q.offerQos1(copy());
  q.puback(2);
  assert.deepEqual(outbox.ids(), [1, 2, 3]);
  assert.equal(ledger.safeOffset, -1, "offset 0 (id 1) is still in flight");
  q.puback(1);
  assert.deepEqual(outbox.ids(), [1, 2, 3, 4]);
  assert.equal(ledger.safeOffset, 1);
  assert.equal(q.inflight, 2);
  q.puback(3);
  q.puback(4);
  assert.equal(ledger.safeOffset, 3);
  assert.equal(q.inflight, 0);
});

Deno.test("ClientQueue.puback() of an unknown or repeated id is ignored", () => {
  const { q, ledger, copy } = setup({ maxInflight: 2 });
  const a = copy();
  const b = copy();
  q.offerQos1(a);
  q.offerQos1(b);
  q.puback(1);
  q.puback(1);
  q.puback(777);
  assert.equal(a.entry.pending, 0);
  assert.equal(b.entry.pending, 1, "a repeated PUBACK must not settle another copy");
  assert.equal(ledger.safeOffset, 0);
});

Deno.test("ClientQueue packet ids wrap at 65535 and never reuse an id still in flight", () => {
  const { q, outbox, copy } = setup({ maxInflight: 3 });
  q.offerQos1(copy()); // id 1 stays in flight throughout
  for (let i = 0; i < 65534; i++) { // ids 2..65535
    q.offerQos1(copy());
    const id = outbox.ids().at(-1)!;
    q.puback(id);
    outbox.packets.length = 1;
    outbox.drain();
  }
  q.offerQos1(copy());
  const ids = outbox.ids();
  assert.deepEqual(ids, [1, 2], "after 65535 comes 2: 1 is still in flight");
  q.offerQos1(copy());
  assert.deepEqual(outbox.ids(), [1, 2, 3]);
});

Deno.test("ClientQueue.offerQos0() drops a copy over the per-client cap and sends one under it", () => {
  const { q, outbox } = setup({ maxClientBytes: 1024 });
  assert.equal(q.offerQos0(new Uint8Array(1000)), "sent");
  assert.equal(q.offerQos0(new Uint8Array(100)), "dropped");
  assert.equal(outbox.packets.length, 1);
  outbox.drain();
  assert.equal(q.offerQos0(new Uint8Array(100)), "sent");
});

Deno.test("ClientQueue.offerQos0() drops a copy over the global cap even under the client's cap", () => {
  const { q, budget } = setup({ maxClientBytes: 10_000 }, 2048);
  budget.bytes = 2000; // other clients hold the rest
  assert.equal(q.offerQos0(new Uint8Array(100)), "dropped");
  assert.equal(q.offerQos0(new Uint8Array(40)), "sent");
});

Deno.test("ClientQueue pauses a client whose QoS 1 copies cross the cap and unpauses once drained under it", () => {
  const { q, outbox, copy, pauses } = setup({ maxInflight: 1, maxClientBytes: 1024 });
  q.offerQos1(copy(300)); // sent, in the outbox
  q.offerQos1(copy(300)); // waiting
  q.offerQos1(copy(300)); // waiting: 3 x 309 + ... below 1024
  assert.equal(q.paused, false);
  assert.equal(q.offerQos1(copy(300)), "queued");
  assert.equal(q.paused, true);
  assert.equal(q.timeoutMs, 500, "slow_consumer_timeout_ms starts");
  assert.deepEqual(pauses, [true]);
  q.offerQos1(copy(300)); // still paused, no second pause event
  assert.deepEqual(pauses, [true]);
  outbox.drain();
  q.puback(1); // refill sends one: 1 packet in the outbox + 3 waiting, still over the cap
  assert.equal(q.paused, true);
  outbox.drain();
  q.puback(2); // 1 packet in the outbox + 2 waiting: under the cap
  assert.ok(q.queuedBytes <= 1024, String(q.queuedBytes));
  assert.equal(q.paused, false);
  assert.equal(q.timeoutMs, 0);
  assert.deepEqual(pauses, [true, false]);
});

Deno.test("ClientQueue asks to evict at the hard cap (twice the per-client cap) and on the pause timeout", () => {
  const { q, copy, evictions } = setup({ maxInflight: 1, maxClientBytes: 1024 });
  const offers = [];
  for (let i = 0; i < 8; i++) offers.push(q.offerQos1(copy(300)));
  assert.deepEqual(offers, [
    "sent",
    "queued",
    "queued",
    "queued",
    "queued",
    "queued",
    "evict",
    "evict",
  ]);
  assert.ok(q.queuedBytes <= 2048, "the queue never passes the hard cap");
  q.expire();
  assert.equal(evictions.length, 1);
  assert.match(evictions[0], /slow consumer/);
});

Deno.test("ClientQueue.strikeAll() settles every in-flight and waiting copy once and returns their bytes", () => {
  const { q, ledger, budget, outbox, copy } = setup({ maxInflight: 2, maxClientBytes: 1024 });
  const copies = [copy(300), copy(300), copy(300), copy(300)];
  for (const c of copies) q.offerQos1(c);
  q.puback(1);
  assert.equal(q.paused, true);
  outbox.drain();
  q.strikeAll();
  assert.deepEqual(copies.map((c) => c.entry.pending), [0, 0, 0, 0]);
  assert.equal(ledger.safeOffset, 3);
  assert.equal(budget.bytes, 0);
  assert.equal(q.paused, false);
  assert.equal(q.inflight, 0);
  q.puback(2); // a late PUBACK after the strike changes nothing
  assert.equal(ledger.size, 0);
});

Deno.test("ClientQueue.strikeAll(false) (gateway stopping) drops copies without settling them", () => {
  const { q, ledger, budget, outbox, copy } = setup({ maxInflight: 1 });
  const copies = [copy(), copy(), copy()];
  for (const c of copies) q.offerQos1(c);
  outbox.drain();
  q.strikeAll(false);
  assert.deepEqual(copies.map((c) => c.entry.pending), [1, 1, 1]);
  assert.equal(ledger.safeOffset, -1, "a restart delivers them again");
  assert.equal(budget.bytes, 0, "but their bytes are released");
  assert.equal(q.inflight, 0);
});

Deno.test("ClientQueue.lowestUnsettled() gives the lowest offset of unsettled copies per triple", () => {
  const { q, copy } = setup();
  for (let i = 0; i < 6; i++) q.offerQos1(copy()); // offsets 0..5: 2 in flight, 4 waiting
  q.puback(1); // offset 0 settled
  assert.deepEqual([...q.lowestUnsettled()], [["k", 1]]);
  q.strikeAll();
  assert.equal(q.lowestUnsettled().size, 0);
});

Deno.test("ClientQueue QoS 2: PUBREC settles and sends PUBREL; the id stays taken (in the window) until PUBCOMP", () => {
  const { q, outbox, ledger, copy } = setup({ maxInflight: 2 });
  q.offerQos1(copy(10, 2));
  q.offerQos1(copy(10, 2));
  assert.equal(q.offerQos1(copy(10, 2)), "queued");
  q.puback(1); // a PUBACK does not answer a QoS 2 copy
  assert.equal(ledger.safeOffset, -1);
  q.pubrec(1, 0);
  assert.deepEqual(outbox.acks(0x62), [1]);
  assert.equal(ledger.safeOffset, 0, "settled at the PUBREC");
  assert.equal(q.inflight, 2, "id 1 still taken: the window stays full");
  assert.deepEqual(outbox.ids(), [1, 2]);
  q.pubrec(1, 0); // a repeated PUBREC gets the PUBREL again
  assert.deepEqual(outbox.acks(0x62), [1, 1]);
  q.pubcomp(1);
  assert.deepEqual(outbox.ids(), [1, 2, 3], "the waiting copy takes the freed slot");
  q.pubrec(2, 0x80); // MQTT 5: a refusing PUBREC ends the exchange, no PUBREL
  assert.deepEqual(outbox.acks(0x62), [1, 1]);
  assert.equal(ledger.safeOffset, 1);
  assert.equal(q.inflight, 1);
});

Deno.test("ClientQueue QoS 2 across a reconnect: PUBRELs owed go again, a copy sent before keeps its id with DUP", () => {
  const a = setup({ maxInflight: 4 });
  const owned = a.copy(10, 2);
  const unanswered = a.copy(10, 2);
  a.q.offerQos1(owned);
  a.q.offerQos1(unanswered);
  a.q.pubrec(1, 0);
  const out = a.q.qos2Out()!;
  assert.deepEqual(out.releasing, [1]);
  assert.deepEqual([...out.sent.values()], [2]);

  const b = setup({ maxInflight: 4 });
  b.q.resumeQos2(out);
  assert.deepEqual(b.outbox.acks(0x62), [1], "PUBREL 1 again at once");
  b.q.offerQos1(b.copy()); // a new QoS 1 copy does not take ids 1 or 2
  b.q.offerQos1(unanswered); // the catch-up sends the unanswered copy again
  const publishes = b.outbox.packets.filter((p) => p[0] >> 4 === 3);
  assert.deepEqual(b.outbox.ids(), [3, 2]);
  assert.equal(publishes[1][0] & 0x08, 0x08, "DUP set on the resent copy");
  assert.equal(publishes[0][0] & 0x08, 0, "no DUP on a new copy");
  assert.equal(setup().q.qos2Out(), null, "nothing in flight: nothing to keep");
});

Deno.test("ClientQueue: a copy larger than the per-client cap goes into an empty queue, not into a busy one", () => {
  const { q, outbox, copy, evictions } = setup({ maxInflight: 10, maxClientBytes: 1000 });
  assert.equal(q.offerQos0(new Uint8Array(1500)), "sent", "alone: a client that reads gets it");
  assert.equal(q.offerQos0(new Uint8Array(1500)), "dropped");
  outbox.drain();
  assert.equal(q.offerQos1(copy(2500)), "sent", "over twice the cap, alone: not an eviction");
  outbox.drain();
  assert.equal(q.offerQos1(copy(10)), "sent");
  assert.equal(q.offerQos1(copy(2500)), "evict", "behind other bytes: the hard cap");
  assert.deepEqual(evictions, []);
});

Deno.test("ClientQueue: once closed it takes no copy and holds nothing of the global budget", () => {
  const { q, outbox, budget, copy } = setup({ maxInflight: 1 });
  q.offerQos1(copy(100));
  q.offerQos1(copy(100)); // waits for the window
  assert.ok(budget.bytes > outbox.queuedBytes, "the waiting copy counts");
  assert.equal(q.close(), true);
  assert.equal(q.close(), false, "closed once: one eviction counted");
  q.strikeAll();
  outbox.drain();
  assert.equal(budget.bytes, 0);
  assert.equal(q.offerQos1(copy(100)), "struck");
  assert.equal(q.offerQos0(new Uint8Array(10)), "struck");
  assert.equal(budget.bytes, 0, "late offers add nothing");
  assert.equal(q.queuedBytes, 0);
});
