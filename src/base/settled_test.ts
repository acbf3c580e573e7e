import assert from "node:assert/strict";
import { settled } from "./settled.ts";

Deno.test("settled() reads until two reads agree, and at most `looks` more times", async () => {
  const values = [1, 2, 2, 3];
  let reads = 0;
  assert.equal(await settled(() => Promise.resolve(values[reads++]), 1, 3), 2);
  assert.equal(reads, 3);
  let n = 0;
  assert.equal(await settled(() => Promise.resolve(n++), 1, 3), 3, "still moving: the last read");
});
