import assert from "node:assert/strict";
import { AckLedger } from "./ledger.ts";

Deno.test("AckLedger.record() with no copies on an empty ledger advances the safe offset at once", () => {
  const l = new AckLedger(4);
  assert.equal(l.record(5, 0), null);
  assert.equal(l.safeOffset, 5);
  assert.equal(l.size, 0);
});

Deno.test("AckLedger advances only over the contiguous settled prefix when settles come out of order", () => {
  const l = new AckLedger(9);
  const e10 = l.record(10, 1)!;
  const e11 = l.record(11, 1)!;
  const e12 = l.record(12, 1)!;
  l.settle(e12);
  l.settle(e11);
  assert.equal(l.safeOffset, 9, "10 is still unsettled");
  assert.equal(l.size, 3);
  l.settle(e10);
  assert.equal(l.safeOffset, 12, "one settle releases the whole settled run");
  assert.equal(l.size, 0);
});

Deno.test("AckLedger entry with several copies is settled only when every copy is", () => {
  const l = new AckLedger(-1);
  const e = l.record(0, 3)!;
  l.settle(e);
  l.settle(e);
  assert.equal(l.safeOffset, -1);
  l.settle(e);
  assert.equal(l.safeOffset, 0);
});

Deno.test("AckLedger messages with no copies behind an unsettled one wait for it", () => {
  const l = new AckLedger(-1);
  const e0 = l.record(0, 1)!;
  assert.notEqual(l.record(1, 0), null, "kept: it cannot pass offset 0 yet");
  l.record(2, 0);
  assert.equal(l.safeOffset, -1);
  assert.equal(l.size, 3);
  l.settle(e0);
  assert.equal(l.safeOffset, 2);
  assert.equal(l.size, 0);
});

Deno.test("AckLedger.settle() of an already settled entry (a strike after a PUBACK) changes nothing", () => {
  const l = new AckLedger(-1);
  const e0 = l.record(0, 1)!;
  const e1 = l.record(1, 2)!;
  l.settle(e0);
  l.settle(e0); // duplicate: must not count against e1
  assert.equal(e0.pending, 0);
  assert.equal(l.safeOffset, 0);
  l.settle(e1);
  assert.equal(l.safeOffset, 0, "e1 still has one copy");
  l.settle(e1);
  l.settle(e1);
  assert.equal(e1.pending, 0);
  assert.equal(l.safeOffset, 1);
});

Deno.test("AckLedger safe offset is monotonic and follows gaps in offsets", () => {
  const l = new AckLedger(99);
  const a = l.record(100, 1)!;
  const b = l.record(105, 1)!; // offsets 101..104 belong to nothing this reader routes
  const seen: number[] = [];
  l.settle(b);
  seen.push(l.safeOffset);
  l.settle(a);
  seen.push(l.safeOffset);
  l.record(106, 0);
  seen.push(l.safeOffset);
  assert.deepEqual(seen, [99, 105, 106]);
});

Deno.test("AckLedger keeps size and safe offset right across compaction of a long settled run", () => {
  const l = new AckLedger(-1);
  const stuck = l.record(0, 1)!;
  const rest = [];
  for (let i = 1; i <= 10_000; i++) rest.push(l.record(i, 1)!);
  for (const e of rest.slice(0, 6000)) l.settle(e);
  assert.equal(l.safeOffset, -1);
  assert.equal(l.size, 10_001);
  l.settle(stuck);
  assert.equal(l.safeOffset, 6000);
  assert.equal(l.size, 4000);
  const late = l.record(10_001, 1)!;
  for (const e of rest.slice(6000)) l.settle(e);
  assert.equal(l.safeOffset, 10_000);
  assert.equal(l.size, 1);
  l.settle(late);
  assert.equal(l.safeOffset, 10_001);
  assert.equal(l.size, 0);
});
