import assert from "node:assert/strict";
import { PartitionLog } from "./_log_index.ts";
import { TailCache } from "./_tail_cache.ts";

/**
 * One transaction holding one record per partition: `[p, base, count, bytes]`, each record's
 * bytes all `base` (mod 256), so a read can tell whose bytes it got.
 */
function add(cache: TailCache, records: [PartitionLog, number, number, number][]) {
  cache.add(records.map(([p, baseOffset, count, bytes]) => ({
    p,
    baseOffset,
    count,
    data: new Uint8Array(bytes).fill(baseOffset & 0xff),
  })));
}

/** The base offsets a read from `from` visits, or null when the cache does not hold it. */
function visited(cache: TailCache, p: PartitionLog, from: number): number[] | null {
  const bases: number[] = [];
  const held = cache.read(p, from, (data, base) => {
    assert.ok(data.every((b) => b === (base & 0xff)), `record ${base}: its own bytes`);
    bases.push(base);
    return true;
  });
  return held ? bases : null;
}

Deno.test("TailCache: reads from within what it holds, oldest records dropped at the bound", () => {
  const cache = new TailCache(1000);
  const a = new PartitionLog(1, 0, undefined);
  const b = new PartitionLog(1, 1, undefined);
  add(cache, [[a, 0, 10, 300], [b, 0, 5, 100]]);
  add(cache, [[a, 10, 10, 400]]);
  assert.deepEqual(visited(cache, a, 0), [0, 10]);
  assert.deepEqual(visited(cache, a, 15), [10], "from inside a record: that record on");
  assert.deepEqual(visited(cache, b, 3), [0]);
  assert.equal(cache.bytes, 800);
  // 300 more do not fit after 800: the ring wraps, and a's first record (at 0..300) goes.
  add(cache, [[a, 20, 10, 200], [b, 5, 5, 100]]);
  assert.equal(cache.bytes, 800);
  assert.equal(visited(cache, a, 5), null, "dropped: read the file");
  assert.deepEqual(visited(cache, a, 10), [10, 20]);
  assert.deepEqual(visited(cache, b, 0), [0, 5], "b's first (at 300..400) is not overwritten");
  add(cache, [[b, 10, 5, 100]]); // at 300..400: b's first goes
  assert.equal(visited(cache, b, 0), null);
  assert.deepEqual(visited(cache, b, 5), [5, 10]);
  assert.deepEqual(visited(cache, a, 10), [10, 20], "a's bytes intact after the overwrite");
});

Deno.test("TailCache: a transaction over the bound is not held, and its partitions' tails go", () => {
  const cache = new TailCache(1000);
  const a = new PartitionLog(1, 0, undefined);
  const b = new PartitionLog(1, 1, undefined);
  add(cache, [[a, 0, 1, 50], [b, 0, 1, 50]]);
  add(cache, [[a, 1, 100, 5000]]);
  assert.equal(visited(cache, a, 0), null, "no longer contiguous: not served from memory");
  assert.deepEqual(visited(cache, b, 0), [0]);
  assert.equal(cache.bytes, 100);
  // a's new tail survives the drop of its old record, which the ring still holds.
  add(cache, [[a, 101, 1, 900]]);
  assert.deepEqual(visited(cache, a, 101), [101]);
  add(cache, [[b, 1, 1, 100]]); // wraps: a's old record and b's first go
  assert.deepEqual(visited(cache, a, 101), [101]);
  assert.equal(visited(cache, b, 0), null);
  assert.deepEqual(visited(cache, b, 1), [1]);
  cache.clear();
  assert.equal(visited(cache, a, 101), null);
  assert.equal(cache.bytes, 0);
});

Deno.test("TailCache: a visitor that stops ends the read", () => {
  const cache = new TailCache(1000);
  const a = new PartitionLog(1, 0, undefined);
  for (let i = 0; i < 5; i++) add(cache, [[a, i * 2, 2, 10]]);
  const seen: number[] = [];
  assert.equal(cache.read(a, 3, (_d, base) => (seen.push(base), base < 4)), true);
  assert.deepEqual(seen, [2, 4]);
});

Deno.test("TailCache: many wraps keep every partition's newest records, within the bound", () => {
  const cache = new TailCache(4096);
  const parts = [0, 1, 2].map((p) => new PartitionLog(1, p, undefined));
  const next = [0, 0, 0];
  for (let t = 0; t < 5000; t++) {
    const p = t % 3;
    add(cache, [[parts[p], next[p], 1, 1 + (t * 37) % 300]]);
    next[p]++;
    assert.ok(cache.bytes <= 4096);
  }
  for (let p = 0; p < 3; p++) {
    const bases = visited(cache, parts[p], next[p] - 3);
    assert.deepEqual(bases, [next[p] - 3, next[p] - 2, next[p] - 1]);
  }
});
