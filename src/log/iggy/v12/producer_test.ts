import assert from "node:assert/strict";
import { ProducerTable } from "./producer.ts";

Deno.test("ProducerTable mints session << 20 | index and advances only confirmed batches", () => {
  const t = new ProducerTable(() => 5n);
  const a = t.stamp("a");
  assert.deepEqual(a, { producerId: 5n << 20n, epoch: 0, baseSequence: 0 });
  assert.deepEqual(t.stamp("a"), a, "not advanced before confirm");
  t.confirm("a", a, 3);
  assert.equal(t.stamp("a").baseSequence, 3);
  assert.equal(t.stamp("b").producerId, (5n << 20n) | 1n);
  t.renew("a");
  assert.deepEqual(t.stamp("a"), { producerId: (5n << 20n) | 2n, epoch: 0, baseSequence: 0 });
});

Deno.test("ProducerTable drops the oldest partition's state at its bound", () => {
  const t = new ProducerTable(() => 1n, 2);
  t.stamp("a");
  t.stamp("b");
  t.stamp("c");
  assert.equal(t.size, 2);
  assert.equal(t.stamp("a").producerId, (1n << 20n) | 3n, "a starts over under a fresh id");
});

Deno.test("ProducerTable refuses to mint without a session or past 2^20 ids of one session", () => {
  assert.throws(() => new ProducerTable(() => undefined).stamp("a"), RangeError);
  const t = new ProducerTable(() => 1n, 1);
  for (let i = 0; i < 1 << 20; i++) t.stamp(`p${i}`);
  assert.throws(() => t.stamp("one more"), /exhausted/);
});
