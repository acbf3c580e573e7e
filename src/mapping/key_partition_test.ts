import assert from "node:assert/strict";
import { xxh32 } from "../base/xxhash.ts";
import { partitionForKey } from "./key_partition.ts";

// libxxhash's XXH32 check values (seed 0).
const VECTORS: [string, number][] = [
  ["", 0x02cc5d05],
  ["abc", 0x32d153ff],
  ["sensor-1", 0x7da9ad4a],
  ["devices/abc/telemetry", 0xb080ee2a],
  ["key", 0xb3d93ae0],
];

Deno.test("xxh32() matches Iggy's XXH32 seed 0 check values", () => {
  for (const [key, hash] of VECTORS) assert.equal(xxh32(key), hash, JSON.stringify(key));
});

Deno.test("partitionForKey() picks XXH32(key) mod partitions, 0-based, as Iggy does", () => {
  assert.equal(partitionForKey("sensor-1", 3), 1);
  assert.equal(partitionForKey("sensor-1", 4), 2);
  assert.equal(partitionForKey("devices/abc/telemetry", 3), 2);
  assert.equal(partitionForKey("devices/abc/telemetry", 4), 2);
  assert.equal(partitionForKey("key", 4), 0);
  assert.equal(partitionForKey("abc", 1), 0);
});

Deno.test("partitionForKey() puts the same key in the same partition every time", () => {
  const first = partitionForKey("room_42", 7);
  for (let i = 0; i < 100; i++) {
    partitionForKey(`other-${i}`, 7);
    assert.equal(partitionForKey("room_42", 7), first);
  }
});

Deno.test("partitionForKey() hashes the key's UTF-8 bytes", () => {
  // "é" is two UTF-8 bytes; hashing its UTF-16 units would differ.
  assert.equal(xxh32("é"), xxh32(new TextDecoder().decode(new Uint8Array([0xc3, 0xa9]))));
  assert.notEqual(xxh32("é"), xxh32("\u00e9\u0000"));
});

Deno.test("partitionForKey() refuses a partition count that is not a positive integer", () => {
  for (const n of [0, -1, 1.5, Number.NaN, 2 ** 32]) {
    assert.throws(() => partitionForKey("k", n), RangeError, String(n));
  }
});
