import assert from "node:assert/strict";
import {
  IDS_PER_SESSION,
  MAX_MINT_SESSIONS,
  ProducerIdsExhaustedError,
  ProducerTable,
} from "./producer.ts";

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
  const t = new ProducerTable(() => 1n, { maxStates: 2 });
  t.stamp("a");
  t.stamp("b");
  t.stamp("c");
  assert.equal(t.size, 2);
  assert.equal(t.stamp("a").producerId, (1n << 20n) | 3n, "a starts over under a fresh id");
});

Deno.test("ProducerTable never mints an id twice when the live session flips A → B → A", () => {
  let session = 7n;
  const t = new ProducerTable(() => session);
  const ids = new Set<bigint>();
  for (const s of [7n, 8n, 7n, 8n, 7n]) {
    session = s;
    for (let i = 0; i < 3; i++) {
      const key = `p${ids.size}`;
      ids.add(t.stamp(key).producerId);
    }
  }
  assert.equal(ids.size, 15);
});

Deno.test("ProducerTable refuses to mint without a session", () => {
  assert.throws(() => new ProducerTable(() => undefined).stamp("a"), RangeError);
});

Deno.test("ProducerTable: a session past 2^20 ids asks for a fresh session; the new one mints", () => {
  assert.equal(IDS_PER_SESSION, 1 << 20);
  let session = 1n;
  const retired: bigint[] = [];
  const t = new ProducerTable(() => session, {
    maxStates: 1,
    idsPerSession: 3,
    onExhausted: (s) => retired.push(s),
  });
  for (let i = 0; i < 3; i++) t.stamp(`p${i}`);
  assert.throws(() => t.stamp("one more"), ProducerIdsExhaustedError);
  assert.deepEqual(retired, [1n]);
  session = 2n; // the pool registered afresh
  assert.equal(t.stamp("one more").producerId, 2n << 20n);
});

Deno.test("ProducerTable: a session forgotten at the bound is not minted from again", () => {
  let session = 0n;
  const retired: bigint[] = [];
  const t = new ProducerTable(() => session, { onExhausted: (s) => retired.push(s) });
  for (let s = 1; s <= MAX_MINT_SESSIONS + 1; s++) {
    session = BigInt(s);
    t.stamp(`p${s}`);
  }
  session = 1n; // an old connection still on the first session
  assert.throws(() => t.stamp("again"), ProducerIdsExhaustedError);
  assert.deepEqual(retired, [1n]);
});
