import assert from "node:assert/strict";
import { BLOCK_BYTES, copyBytes, MAX_SHARED_BYTES, ownBytes } from "./byte_blocks.ts";

Deno.test("copyBytes() copies the range: later writes to the source do not show", () => {
  const src = new Uint8Array([9, 1, 2, 3, 9]);
  const copy = copyBytes(src, 1, 4);
  src.fill(0);
  assert.deepEqual([...copy], [1, 2, 3]);
});

Deno.test("copyBytes(): small copies share a block of BLOCK_BYTES, each 8-aligned, none overlapping", () => {
  const a = copyBytes(new Uint8Array(100).fill(1), 0, 100);
  const b = copyBytes(new Uint8Array(3).fill(2), 0, 3);
  const c = copyBytes(new Uint8Array(0), 0, 0);
  assert.equal(a.buffer.byteLength, BLOCK_BYTES, "a block, not a store per copy");
  assert.equal(a.byteOffset % 8, 0);
  assert.equal(b.byteOffset % 8, 0);
  if (a.buffer === b.buffer) assert.ok(b.byteOffset >= a.byteOffset + 100);
  assert.equal(c.length, 0);
  assert.ok(a.every((x) => x === 1) && b.every((x) => x === 2), "neither copy overwrote the other");
});

Deno.test("copyBytes(): at MAX_SHARED_BYTES still shared, one byte more gets a store of its own", () => {
  const src = new Uint8Array(MAX_SHARED_BYTES + 1).fill(7);
  assert.equal(copyBytes(src, 0, MAX_SHARED_BYTES).buffer.byteLength, BLOCK_BYTES);
  const own = copyBytes(src, 0, MAX_SHARED_BYTES + 1);
  assert.equal(own.buffer.byteLength, MAX_SHARED_BYTES + 1);
  assert.equal(own.byteOffset, 0);
});

Deno.test("copyBytes(): a full block starts a new one, and what was carved before stays intact", () => {
  const first = copyBytes(new Uint8Array(MAX_SHARED_BYTES).fill(5), 0, MAX_SHARED_BYTES);
  const copies = [first];
  // More than a block's worth: at least one rollover.
  for (let i = 0; i < (2 * BLOCK_BYTES) / MAX_SHARED_BYTES; i++) {
    copies.push(copyBytes(new Uint8Array(MAX_SHARED_BYTES).fill(i), 0, MAX_SHARED_BYTES));
  }
  const blocks = new Set(copies.map((c) => c.buffer));
  assert.ok(blocks.size >= 2, "a new block once one is full");
  for (const c of copies) {
    assert.ok(c.byteOffset + c.length <= BLOCK_BYTES, "no copy runs past its block");
  }
  assert.ok(first.every((x) => x === 5), "an earlier block is never written again");
});

Deno.test("ownBytes(): a copy carved from a block is copied out; a whole store is returned as it is", () => {
  const shared = copyBytes(new Uint8Array([1, 2, 3]), 0, 3);
  const owned = ownBytes(shared);
  assert.notEqual(owned.buffer, shared.buffer);
  assert.equal(owned.buffer.byteLength, 3);
  assert.deepEqual([...owned], [1, 2, 3]);
  const whole = new Uint8Array([4, 5]);
  assert.equal(ownBytes(whole), whole);
  const view = whole.subarray(1);
  assert.equal(ownBytes(view).buffer.byteLength, 1, "a view of a larger store is copied");
});
