import assert from "node:assert/strict";
import { within } from "./within.ts";

Deno.test("within(): true when the promise resolves in time, false at the bound without cancelling it", async () => {
  assert.equal(await within(Promise.resolve(), 1000), true);
  let resolve!: () => void;
  const late = new Promise<void>((r) => resolve = r);
  const started = performance.now();
  assert.equal(await within(late, 50), false);
  assert.ok(performance.now() - started < 1000);
  resolve();
  assert.equal(await within(late, 0), true); // still the same promise, settled now
});

Deno.test("within(): a rejection is the caller's, not a late answer", async () => {
  await assert.rejects(within(Promise.reject(new Error("store failed")), 1000), /store failed/);
  assert.equal(await within(new Promise(() => {}), -5), false); // a bound already past
});
