import assert from "node:assert/strict";
import { PartitionLog } from "./_log_index.ts";
import { TailCache } from "./_tail_cache.ts";

/** One transaction of `bytes` holding one record per partition: `[p, base, count]`. */
function add(cache: TailCache, bytes: number, records: [PartitionLog, number, number][]) {
  const buffer = new Uint8Array(bytes);
  cache.add(
    buffer,
    records.map(([p, baseOffset, count]) => ({
      p,
      baseOffset,
      count,
      data: buffer.subarray(0, 1),
    })),
  );
}

/** The base offsets a read from `from` visits, or null when the cache does not hold it. */
function visited(cache: TailCache, p: PartitionLog, from: number): number[] | null {
  const bases: number[] = [];
  const held = cache.read(p, from, (_d, base) => (bases.push(base), true));
  return held ? bases : null;
}

Deno.test("TailCache: reads from within what it holds, oldest transactions dropped at the bound", () => {
  const cache = new TailCache(1000);
  const a = new PartitionLog(1, 0, undefined);
  const b = new PartitionLog(1, 1, undefined);
  add(cache, 400, [[a, 0, 10], [b, 0, 5]]);
  add(cache, 400, [[a, 10, 10]]);
  assert.deepEqual(visited(cache, a, 0), [0, 10]);
  assert.deepEqual(visited(cache, a, 15), [10], "from inside a record: that record on");
  assert.deepEqual(visited(cache, b, 3), [0]);
  add(cache, 400, [[a, 20, 10], [b, 5, 5]]); // 1200 bytes > 1000: the first goes
  assert.equal(cache.bytes, 800);
  assert.equal(visited(cache, a, 5), null, "dropped: read the file");
  assert.deepEqual(visited(cache, a, 10), [10, 20]);
  assert.equal(visited(cache, b, 0), null);
  assert.deepEqual(visited(cache, b, 5), [5]);
});

Deno.test("TailCache: a transaction over the bound is not held, and its partitions' tails go", () => {
  const cache = new TailCache(1000);
  const a = new PartitionLog(1, 0, undefined);
  const b = new PartitionLog(1, 1, undefined);
  add(cache, 100, [[a, 0, 1], [b, 0, 1]]);
  add(cache, 5000, [[a, 1, 100]]);
  assert.equal(visited(cache, a, 0), null, "no longer contiguous: not served from memory");
  assert.deepEqual(visited(cache, b, 0), [0]);
  assert.equal(cache.bytes, 100);
  cache.clear();
  assert.equal(visited(cache, b, 0), null);
  assert.equal(cache.bytes, 0);
});

Deno.test("TailCache: a visitor that stops ends the read", () => {
  const cache = new TailCache(1000);
  const a = new PartitionLog(1, 0, undefined);
  for (let i = 0; i < 5; i++) add(cache, 10, [[a, i * 2, 2]]);
  const seen: number[] = [];
  assert.equal(cache.read(a, 3, (_d, base) => (seen.push(base), base < 4)), true);
  assert.deepEqual(seen, [2, 4]);
});

Deno.test("TailCache counts the whole buffer a view keeps alive, not the view", () => {
  const cache = new TailCache(1000);
  const a = new PartitionLog(1, 0, undefined);
  const view = new Uint8Array(new ArrayBuffer(800), 0, 100); // a grown buffer, 100 bytes used
  cache.add(view, [{ p: a, baseOffset: 0, count: 1, data: view.subarray(0, 1) }]);
  assert.equal(cache.bytes, 800);
  add(cache, 300, [[a, 1, 1]]); // 1100 > 1000: the 800-byte buffer goes
  assert.equal(cache.bytes, 300);
  assert.equal(visited(cache, a, 0), null);
});
