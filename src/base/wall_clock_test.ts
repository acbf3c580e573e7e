import assert from "node:assert/strict";
import { JUMP_THRESHOLD_MS, MAX_AGE_SHIFTS, WallClock } from "./wall_clock.ts";

const DAY_MS = 86_400_000;
const T0 = 1_780_000_000_000;

/** Two settable clocks: `wall` steps when a test says, `mono` only runs. */
function clocks() {
  const c = { wall: T0, mono: 0 };
  const pass = (ms: number) => {
    c.wall += ms;
    c.mono += ms;
  };
  const clock = new WallClock({ wall: () => c.wall, mono: () => c.mono });
  return { c, pass, clock };
}

Deno.test("WallClock: a forward step moves what was recorded before it by the step", () => {
  const { c, pass, clock } = clocks();
  const jumps: number[] = [];
  clock.onJump((j) => jumps.push(j.stepMs));
  const before = clock.now();
  pass(1_000);
  c.wall += 20 * DAY_MS; // NTP answers
  pass(1_000);
  const after = clock.now();
  assert.deepEqual(jumps, [20 * DAY_MS]);
  assert.equal(clock.since(before), 2_000, "the time that actually passed");
  assert.equal(clock.since(after), 0, "what comes after ages by its own timestamp");
  assert.equal(clock.correctedMicros(before * 1000), (before + 20 * DAY_MS) * 1000);
  assert.equal(clock.lastJump?.stepMs, 20 * DAY_MS);
  assert.equal(clock.jumps, 1);
});

Deno.test("WallClock: a backward step moves nothing (what is before it looks younger, not older)", () => {
  const { c, pass, clock } = clocks();
  const before = clock.now();
  c.wall -= 20 * DAY_MS;
  pass(1_000);
  clock.now();
  assert.equal(clock.jumps, 1);
  assert.equal(clock.lastJump?.stepMs, -20 * DAY_MS);
  assert.equal(clock.corrected(before), before);
  assert.ok(clock.since(before) < 0, "lies ahead: counts as new");
});

Deno.test("WallClock: drift under the threshold is not a step; each step is told once", () => {
  const { c, pass, clock } = clocks();
  let told = 0;
  const off = clock.onJump(() => told++);
  c.wall += JUMP_THRESHOLD_MS - 1;
  clock.now();
  assert.equal(told, 0);
  c.wall += 2;
  clock.now();
  pass(10);
  clock.now();
  assert.equal(told, 1, "noticed once");
  off();
  c.wall += DAY_MS;
  clock.now();
  assert.equal(told, 1, "a removed listener hears nothing");
  assert.equal(clock.jumps, 2);
});

Deno.test("WallClock: shifts are restored before this run's; past MAX_AGE_SHIFTS the oldest are merged", () => {
  const { clock } = clocks();
  clock.shift(T0 - 10, 5);
  clock.restore([{ beforeMs: T0 - 100, shiftMs: 1 }]);
  assert.deepEqual(clock.shifts.map((s) => s.shiftMs), [1, 5]);
  assert.equal(clock.corrected(T0 - 200), T0 - 194, "both apply, oldest first");
  clock.shift(T0, 0);
  clock.shift(T0, -3);
  assert.equal(clock.shifts.length, 2, "only forward moves are shifts");
  const before = clock.corrected(T0 - 200);
  for (let i = 0; i < MAX_AGE_SHIFTS; i++) clock.shift(T0 + 100 * i, 1);
  assert.equal(clock.shifts.length, MAX_AGE_SHIFTS);
  // The oldest merged: what they moved is moved as much (or more), never less.
  assert.equal(clock.corrected(T0 - 200), before + MAX_AGE_SHIFTS);
  assert.ok(clock.shifts[0].shiftMs > 1);
});
