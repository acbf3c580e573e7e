import assert from "node:assert/strict";
import { oncePerRun } from "./clock.ts";

Deno.test("oncePerRun() reads its clock once per synchronous run, and again in the next", async () => {
  let t = 100;
  let reads = 0;
  const clock = oncePerRun({ now: () => (reads++, t) });
  assert.equal(clock.now(), 100);
  t = 250;
  assert.equal(clock.now(), 100, "the same run: the first reading");
  assert.equal(reads, 1);
  await Promise.resolve();
  assert.equal(clock.now(), 250, "a later run reads the clock again");
  assert.equal(reads, 2);
  t = 300;
  await new Promise((r) => setTimeout(r, 0));
  assert.equal(clock.now(), 300);
});
