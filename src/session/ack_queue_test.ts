import assert from "node:assert/strict";
import { AckQueue } from "./ack_queue.ts";

function queue() {
  const acked: number[] = [];
  let closed = 0;
  const outbox = {
    push: (b: Uint8Array) => acked.push((b[2] << 8) | b[3]),
    pushAck: (id: number) => acked.push(id),
  };
  const q = new AckQueue(outbox, { unacknowledged: () => closed++ });
  return { q, acked, closed: () => closed };
}

Deno.test("AckQueue releases PUBACKs in take order even when settled out of order", () => {
  const { q, acked } = queue();
  const a = q.take(10);
  const b = q.take(11);
  const c = q.take(12);
  q.settle(c, "ack");
  q.settle(b, "ack");
  assert.deepEqual(acked, []);
  assert.equal(q.pending, 3);
  q.settle(a, "ack");
  assert.deepEqual(acked, [10, 11, 12]);
  assert.equal(q.pending, 0);
});

Deno.test("AckQueue grows past its initial ring and keeps order across the wrap", () => {
  const { q, acked } = queue();
  // Advance the ring so the open slots straddle the end of the arrays when it grows.
  for (let i = 0; i < 20; i++) q.settle(q.take(i), "ack");
  acked.length = 0;
  const slots = Array.from({ length: 100 }, (_, i) => q.take(1000 + i));
  for (const s of slots.slice(1).reverse()) q.settle(s, "ack");
  assert.deepEqual(acked, []);
  q.settle(slots[0], "ack");
  assert.deepEqual(acked, Array.from({ length: 100 }, (_, i) => 1000 + i));
});

Deno.test("AckQueue 'close' sends earlier PUBACKs, then closes once and drops later slots", () => {
  const { q, acked, closed } = queue();
  const a = q.take(1);
  const b = q.take(2);
  const c = q.take(3);
  q.settle(b, "close");
  q.settle(c, "ack");
  assert.equal(closed(), 0);
  q.settle(a, "ack");
  assert.deepEqual(acked, [1]);
  assert.equal(closed(), 1);
  assert.equal(q.pending, 0);
  q.settle(c, "ack"); // already dropped
  assert.deepEqual(acked, [1]);
  assert.equal(closed(), 1);
});

Deno.test("AckQueue: queues that empty and fill in turn each keep their own slots", () => {
  const x = queue();
  const y = queue();
  // x empties (its ring goes back), y takes a ring, x takes another: neither sees the other's.
  x.q.settle(x.q.take(1), "ack");
  const y1 = y.q.take(20, true);
  const x2 = x.q.take(2);
  const y2 = y.q.take(21);
  const x3 = x.q.take(3, true);
  assert.deepEqual([y.q.packetIdOf(y1), y.q.isQos2(y1), y.q.packetIdOf(y2), y.q.isQos2(y2)], [
    20,
    true,
    21,
    false,
  ]);
  assert.deepEqual([x.q.packetIdOf(x2), x.q.isQos2(x2), x.q.packetIdOf(x3), x.q.isQos2(x3)], [
    2,
    false,
    3,
    true,
  ]);
  y.q.settle(y2, "ack");
  x.q.settle(x3, "ack");
  y.q.settle(y1, "ack");
  x.q.settle(x2, "ack");
  assert.deepEqual(x.acked, [1, 2, 3]);
  assert.deepEqual(y.acked, [20, 21]);
  // Emptied and taken again, after a wrap of sequence numbers past the first ring's size.
  for (let i = 0; i < 40; i++) x.q.settle(x.q.take(100 + i), "ack");
  assert.equal(x.acked.length, 43);
  assert.equal(x.q.pending, 0);
});
