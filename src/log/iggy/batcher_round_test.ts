import assert from "node:assert/strict";
import type { PartitionAddress } from "../port.ts";
import { AppendBatcher, type LaneGauge, MAX_GAUGES } from "./batcher.ts";

const A = { stream: "s", topic: "t", partition: 0 };
const tick = () => new Promise((r) => setTimeout(r, 0));

/** A gauge that always says to wait `ms`, and counts what it is told. */
function waitingGauge(ms: number) {
  const told = { sent: [] as number[], arrived: 0 };
  const gauge: LaneGauge = {
    sent: (count) => void told.sent.push(count),
    arrived: (count) => void (told.arrived += count),
    waitMs: () => ms,
  };
  return { told, gauge };
}

/** A batcher over a recorder, with `gauge` for its balanced lanes; `bal` appends unkeyed. */
function batcherWith(gauge: () => LaneGauge, maxMessages = 100) {
  const r = recorder();
  const b = new AppendBatcher<string>(r.send, (m) => m.length, {
    maxMessages,
    maxBytes: 1000,
    lingerMs: 0,
    gauge,
  });
  const bal = (m: string[]) => b.append({ ...A, balancedOver: 3, messages: m });
  return { r, b, bal };
}

function recorder() {
  const calls: { address: PartitionAddress; messages: readonly string[] }[] = [];
  return {
    calls,
    send: (address: PartitionAddress, messages: readonly string[]) => {
      calls.push({ address, messages });
      return Promise.resolve(0);
    },
  };
}

Deno.test("AppendBatcher: after a send it waits for the round when the gauge says so, until as many as it confirmed", async () => {
  const { told, gauge } = waitingGauge(60_000);
  const { r, b, bal } = batcherWith(() => gauge);
  await Promise.all([bal(["a"]), bal(["b"])]);
  assert.deepEqual(told.sent, [2]);
  const c = bal(["c"]);
  await tick();
  assert.equal(r.calls.length, 1, "one of the two confirmed is back: it waits");
  const d = bal(["d"]);
  await Promise.all([c, d]);
  assert.deepEqual(r.calls.map((x) => x.messages), [["a", "b"], ["c", "d"]]);
  assert.equal(told.arrived, 4);
  await b.flush(); // the wait after the second send ends at once
});

Deno.test("AppendBatcher: a wait for the round ends at the gauge's time with what came", async () => {
  const { gauge } = waitingGauge(20);
  const { r, b, bal } = batcherWith(() => gauge);
  await bal(["a", "b", "c"]);
  const started = performance.now();
  await bal(["d"]);
  assert.ok(performance.now() - started >= 15, "it waited for the other two");
  assert.deepEqual(r.calls.map((x) => x.messages), [["a", "b", "c"], ["d"]]);
  await b.flush();
});

Deno.test("AppendBatcher: a full batch ends a wait for the round, and flush() ends one at once", async () => {
  const { gauge } = waitingGauge(60_000);
  const { r, b, bal } = batcherWith(() => gauge, 2);
  await bal(["a", "b"]);
  await bal(["c", "d"]); // the queue is full: no wait for more than a batch holds
  const e = bal(["e"]);
  await tick();
  assert.equal(r.calls.length, 2, "waiting for the round");
  await Promise.all([e, b.flush()]);
  assert.deepEqual(r.calls.map((x) => x.messages), [["a", "b"], ["c", "d"], ["e"]]);
});

Deno.test("AppendBatcher: keyed lanes never wait for a round, and gauges are bounded", async () => {
  const r = recorder();
  let made = 0;
  const b = new AppendBatcher<string>(r.send, (m) => m.length, {
    maxMessages: 100,
    maxBytes: 1000,
    lingerMs: 0,
    gauge: () => (made++, waitingGauge(60_000).gauge),
  });
  await b.append({ ...A, messages: ["k1"] });
  await b.append({ ...A, messages: ["k2"] });
  assert.equal(made, 0, "a keyed lane has no gauge");
  assert.equal(r.calls.length, 2);
  for (let i = 0; i <= MAX_GAUGES; i++) {
    await b.append({ ...A, topic: `t${i}`, balancedOver: 1, messages: ["u"] });
    await b.flush();
  }
  await b.append({ ...A, topic: "t0", balancedOver: 1, messages: ["u"] });
  await b.flush();
  assert.equal(made, MAX_GAUGES + 2, "the least recent gauge (t0's) was dropped, and made again");
  await b.append({ ...A, topic: `t${MAX_GAUGES}`, balancedOver: 1, messages: ["u"] });
  await b.flush();
  assert.equal(made, MAX_GAUGES + 2, "a recent one is kept");
});
