import assert from "node:assert/strict";
import { TopicRecordCache } from "./topic_record_cache.ts";
import type { TopicRecord } from "./v11/records.ts";

const rec = (n: number): TopicRecord => ({
  id: 0,
  name: "t",
  partitionsCount: n,
  partitions: [],
  options: new Map(),
});

Deno.test("TopicRecordCache serves a fresh entry without a read and re-reads after the TTL", async () => {
  let now = 0;
  let reads = 0;
  const cache = new TopicRecordCache(() => Promise.resolve(rec(++reads)), 1000, () => now);
  assert.equal((await cache.get("s", "t"))?.partitionsCount, 1);
  assert.equal((await cache.get("s", "t"))?.partitionsCount, 1);
  now = 1001;
  assert.equal((await cache.get("s", "t"))?.partitionsCount, 2);
  assert.equal(reads, 2);
});

Deno.test("TopicRecordCache does not cache absence and forgets on invalidate()", async () => {
  let answer: TopicRecord | null = null;
  let reads = 0;
  const cache = new TopicRecordCache(
    () => {
      reads++;
      return Promise.resolve(answer);
    },
    1000,
    () => 0,
  );
  assert.equal(await cache.get("s", "t"), null);
  answer = rec(3);
  assert.equal((await cache.get("s", "t"))?.partitionsCount, 3);
  cache.invalidate("s", "t");
  await cache.get("s", "t");
  assert.equal(reads, 3);
});

Deno.test("TopicRecordCache shares one read among concurrent misses", async () => {
  let reads = 0;
  const cache = new TopicRecordCache(
    () => {
      reads++;
      return Promise.resolve(rec(1));
    },
    1000,
    () => 0,
  );
  await Promise.all([cache.get("s", "t"), cache.get("s", "t")]);
  assert.equal(reads, 1);
});
