import assert from "node:assert/strict";
import { concatBytes } from "./bytes.ts";

Deno.test("concatBytes() joins parts in order, with or without a known total; one part as is", () => {
  const a = new Uint8Array([1, 2]);
  const b = new Uint8Array([3]);
  assert.deepEqual([...concatBytes([a, b, new Uint8Array(0)])], [1, 2, 3]);
  assert.deepEqual([...concatBytes([a, b], 3)], [1, 2, 3]);
  assert.equal(concatBytes([a]), a);
  assert.equal(concatBytes([]).length, 0);
});
