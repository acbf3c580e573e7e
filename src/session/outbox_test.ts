import assert from "node:assert/strict";
import { encodePingresp, encodePuback } from "../codec/encoder.ts";
import { OutboundBudget, Outbox } from "./outbox.ts";
import type { Transport } from "./transport.ts";

/** A transport that records every write and can hold writes open. */
function recording() {
  const writes: Uint8Array[] = [];
  let gate: PromiseWithResolvers<void> | null = null;
  const t: Transport = {
    remoteAddress: "test",
    start() {},
    pause() {},
    resume() {},
    async write(bytes) {
      writes.push(bytes.slice()); // a copy: what was on the wire at that moment
      if (gate) await gate.promise;
      return bytes.length;
    },
    close() {},
  };
  return {
    t,
    writes,
    hold: () => (gate = Promise.withResolvers()),
    release: () => gate?.resolve(),
    wire: () => [...writes.flatMap((w) => [...w])],
  };
}

Deno.test("Outbox: staged PUBACKs and pushed packets leave in the order they were queued", async () => {
  const r = recording();
  const budget = new OutboundBudget(1 << 20);
  const o = new Outbox(r.t, budget);
  o.pushAck(1);
  o.pushAck(0x0203);
  o.push(encodePingresp());
  o.pushAck(0xfffe);
  assert.equal(o.queuedBytes, 14);
  assert.equal(budget.bytes, 14);
  await o.drained();
  assert.equal(r.writes.length, 1, "one write for what one run of JavaScript pushed");
  const expected = [encodePuback(1), encodePuback(0x0203), encodePingresp(), encodePuback(0xfffe)]
    .flatMap((b) => [...b]);
  assert.deepEqual(r.wire(), expected);
  assert.equal(budget.bytes, 0);
  assert.equal(o.written, 14);
});

Deno.test("Outbox: PUBACKs queued during a write, across many blocks, are neither lost nor overwritten", async () => {
  const r = recording();
  const o = new Outbox(r.t, new OutboundBudget(1 << 20));
  r.hold();
  o.pushAck(1);
  await new Promise((res) => setTimeout(res, 0)); // the first write is now in flight
  const ids: number[] = [1];
  for (let id = 2; id <= 1000; id++) {
    o.pushAck(id); // 1000 PUBACKs: several 128-PUBACK blocks
    ids.push(id);
  }
  r.release();
  await o.drained();
  assert.deepEqual(r.wire(), ids.flatMap((id) => [...encodePuback(id)]));
});

Deno.test("Outbox: PUBACKs of outboxes staged in turn, across many blocks, each leave on their own socket in order", async () => {
  const a = recording();
  const b = recording();
  const budget = new OutboundBudget(1 << 20);
  const oa = new Outbox(a.t, budget);
  const ob = new Outbox(b.t, budget);
  const idsA: number[] = [];
  const idsB: number[] = [];
  // Interleaved, runs of one and two: the staged acks of one outbox are cut by the other's.
  for (let id = 1; id <= 400; id++) {
    oa.pushAck(id);
    idsA.push(id);
    if (id % 3 === 0) {
      oa.pushAck(id + 1000);
      idsA.push(id + 1000);
    }
    ob.pushAck(id + 2000, 0x50);
    idsB.push(id + 2000);
  }
  oa.push(encodePingresp());
  await Promise.all([oa.drained(), ob.drained()]);
  const expectedA = [...idsA.flatMap((id) => [...encodePuback(id)]), ...encodePingresp()];
  assert.deepEqual(a.wire(), expectedA);
  assert.deepEqual(b.wire(), idsB.flatMap((id) => [0x50, 2, id >> 8, id & 0xff]));
  assert.equal(budget.bytes, 0);
});

Deno.test("Outbox: close drops staged PUBACKs and gives their bytes back to the budget", async () => {
  const r = recording();
  const budget = new OutboundBudget(1 << 20);
  const o = new Outbox(r.t, budget);
  o.pushAck(7);
  o.pushAck(8);
  o.close();
  o.pushAck(9);
  assert.equal(budget.bytes, 0);
  assert.equal(o.queuedBytes, 0);
  await new Promise((res) => setTimeout(res, 5));
  assert.equal(r.writes.length, 0);
});

Deno.test("Outbox: a transport that takes a few bytes per write gets the rest, in order", async () => {
  const writes: Uint8Array[] = [];
  const t: Transport = {
    remoteAddress: "test",
    start() {},
    pause() {},
    resume() {},
    write(bytes) {
      const n = Math.min(3, bytes.length);
      writes.push(bytes.slice(0, n));
      return Promise.resolve(n);
    },
    close() {},
  };
  const budget = new OutboundBudget(1 << 20);
  const o = new Outbox(t, budget);
  for (let id = 1; id <= 5; id++) o.pushAck(id);
  o.push(encodePingresp());
  await o.drained();
  const expected = [1, 2, 3, 4, 5].flatMap((id) => [...encodePuback(id)]);
  assert.deepEqual(writes.flatMap((w) => [...w]), [...expected, ...encodePingresp()]);
  assert.equal(writes.length, Math.ceil(22 / 3));
  assert.equal(budget.bytes, 0);
  assert.equal(o.written, 22);
});

Deno.test("Outbox: outboxes pushed to in one run of JavaScript each write once, and again after", async () => {
  const rs = [recording(), recording(), recording()];
  const os = rs.map((r) => new Outbox(r.t, new OutboundBudget(1 << 20)));
  for (const o of os) {
    o.pushAck(1);
    o.pushAck(2);
  }
  await Promise.all(os.map((o) => o.drained()));
  for (const r of rs) assert.equal(r.writes.length, 1);
  os[1].pushAck(3); // a later run: only that outbox writes
  await os[1].drained();
  assert.deepEqual(rs.map((r) => r.writes.length), [1, 2, 1]);
  assert.deepEqual(rs[1].wire(), [1, 2, 3].flatMap((id) => [...encodePuback(id)]));
});
