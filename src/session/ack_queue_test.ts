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
