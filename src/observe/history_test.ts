import assert from "node:assert/strict";
import { History, type HistorySample } from "./history.ts";

function sample(t: number, n: number, o: Partial<HistorySample> = {}): HistorySample {
  return {
    t,
    publishes: { appended: n, acked: 2 * n, rejected: 0, denied: 0, failed: 0 },
    deliveries: 3 * n,
    pubackSumS: n * 0.002,
    pubackCount: n,
    forwardWaiting: 0,
    rssBytes: 50_000_000,
    cpuMicros: n * 1000,
    ...o,
  };
}

Deno.test("History keeps at most its capacity, dropping the oldest sample", () => {
  const h = new History(90, 10_000);
  for (let i = 0; i < 1000; i++) h.add(sample(i * 10_000, i));
  assert.equal(h.size, 90);
  const s = h.series();
  assert.equal(s.t.length, 89, "one point per pair of neighbours");
  assert.equal(s.t[0], 911 * 10_000, "the oldest kept is the 911th");
  assert.equal(s.t.at(-1), 999 * 10_000);
});

Deno.test("History.series() gives per-second rates, mean PUBACK ms and CPU percent per interval", () => {
  const h = new History(10, 10_000);
  h.add(sample(0, 0));
  h.add(sample(10_000, 100)); // 100 appended, 200 acked, 300 delivered in 10 s
  h.add(sample(20_000, 100, { cpuMicros: 100_000 + 5_000_000 })); // no publish; 5 s CPU in 10 s
  const s = h.series();
  assert.deepEqual(s.publishes.appended, [10, 0]);
  assert.deepEqual(s.publishes.acked, [20, 0]);
  assert.deepEqual(s.deliveries, [30, 0]);
  assert.deepEqual(s.puback_ms, [2, null], "no QoS 1 publish: no latency, not 0");
  assert.deepEqual(s.cpu_percent, [1, 50]);
});

Deno.test("History.baseFor() is the newest sample at least a second old, else the oldest", () => {
  const h = new History(10, 10_000);
  assert.equal(h.baseFor(0), undefined);
  h.add(sample(0, 0));
  assert.equal(h.baseFor(500)?.t, 0, "only one: the oldest");
  h.add(sample(10_000, 1));
  assert.equal(h.baseFor(10_400)?.t, 0, "the newest is too fresh for a rate");
  assert.equal(h.baseFor(11_000)?.t, 10_000);
});
