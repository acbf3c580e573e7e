/**
 * The load generator's latency histogram: exact below 2,048 µs, ~0.1% above, whatever the
 * range (its bucket arithmetic is integer bit operations up to 2^30 µs, floating point beyond).
 */
import assert from "node:assert/strict";
import { Histogram, median } from "./_stats.ts";

/** The value a reference (floating-point) log-linear bucketing maps `us` to, in µs. */
function reference(us: number): number {
  if (us < 2048) return us;
  const exp = Math.floor(Math.log2(us));
  const mant = Math.floor((us / 2 ** exp - 1) * 1024);
  return Math.round(2 ** exp * (1 + (mant + 0.5) / 1024));
}

Deno.test("Histogram.quantileMs() is exact below 2048 µs and within 0.1% above, up to hours", () => {
  for (
    const us of [0, 1, 999, 2047, 2048, 2049, 3071, 4096, 65_535, 1_000_001, 2 ** 29 + 12_345]
  ) {
    const h = new Histogram();
    h.recordMs(us / 1000);
    h.recordMs(us / 1000);
    const got = h.quantileMs(0.5)! * 1000;
    // One value recorded: the quantile is its bucket's value, capped at the maximum seen.
    assert.equal(Math.round(got), Math.min(reference(us), us), `at ${us} µs`);
    assert.ok(Math.abs(got - us) <= Math.max(0, us * 0.001), `${got} vs ${us} µs`);
  }
  const long = new Histogram(); // beyond 2^30 µs (~18 minutes): the floating-point path
  long.recordMs(3 * 3600 * 1000);
  assert.ok(Math.abs(long.quantileMs(0.5)! / (3 * 3600 * 1000) - 1) < 0.001);
});

Deno.test("Histogram.quantileMs() orders a spread of latencies across the linear and log ranges", () => {
  const h = new Histogram();
  for (let i = 1; i <= 1000; i++) h.recordMs(i * 0.5); // 0.5 ms .. 500 ms
  assert.equal(h.count, 1000);
  const p50 = h.quantileMs(0.5)!;
  const p99 = h.quantileMs(0.99)!;
  assert.ok(Math.abs(p50 - 250) / 250 < 0.001, `p50 ${p50}`);
  assert.ok(Math.abs(p99 - 495) / 495 < 0.001, `p99 ${p99}`);
  assert.equal(h.summary().max, 500);
});

Deno.test("median: the middle value, the mean of the middle two, NaN for none", () => {
  assert.equal(median([3, 1, 2]), 2);
  assert.equal(median([4, 1, 3, 2]), 2.5);
  assert.ok(Number.isNaN(median([])));
});
