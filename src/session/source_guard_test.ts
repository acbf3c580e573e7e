import assert from "node:assert/strict";
import { FAILURE_HALF_LIFE_MS, SourceGuard } from "./source_guard.ts";

function guard() {
  const clock = {
    t: 1_000_000,
    now() {
      return this.t;
    },
  };
  const g = new SourceGuard(
    { connectionsPerSecond: 0, failureBackoffMs: 100, failureBackoffMaxMs: 5_000, freeFailures: 2 },
    clock,
  );
  return { g, clock };
}

Deno.test("SourceGuard: failed logins back off, doubling up to the cap", () => {
  const { g } = guard();
  const delays = Array.from({ length: 10 }, () => g.failed("10.0.0.1"));
  assert.deepEqual(delays, [0, 0, 100, 200, 400, 800, 1600, 3200, 5000, 5000]);
  // Another source is not slowed by the first one.
  assert.equal(g.failed("10.0.0.2"), 0);
});

Deno.test("SourceGuard: the failed-login back-off decays once a source stops failing", () => {
  const { g, clock } = guard();
  for (let i = 0; i < 10; i++) g.failed("10.0.0.1");
  // A quiet half-life halves the count (10 → 5), so the next failure is the 6th: 800 ms.
  clock.t += FAILURE_HALF_LIFE_MS;
  assert.equal(g.failed("10.0.0.1"), 800);
  // Long quiet: the count decays to zero and the source is served at full speed again.
  clock.t += 5 * FAILURE_HALF_LIFE_MS;
  assert.equal(g.failed("10.0.0.1"), 0);
  assert.equal(g.failed("10.0.0.1"), 0);
  assert.equal(g.failed("10.0.0.1"), 100);
});

Deno.test("SourceGuard: a successful login clears the source's failures", () => {
  const { g } = guard();
  for (let i = 0; i < 6; i++) g.failed("10.0.0.1");
  g.succeeded("10.0.0.1");
  assert.equal(g.failed("10.0.0.1"), 0);
});
