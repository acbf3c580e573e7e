import assert from "node:assert/strict";
import {
  IDLE_MS,
  MAX_ROUND_WAIT_MS,
  RoundGauge,
  WINDOW_SENDS,
  WINDOWS_BETWEEN_TRIES,
} from "./round_gauge.ts";

/**
 * Drives a gauge with a closed loop of `window` messages in flight, on a made-up clock:
 * sending at once, each send carries half the window (the halves take turns); waiting, each
 * carries the whole window and the lane then waits `roundMs` for it to come back. Returns
 * whether each send was made waiting.
 */
function closedLoop(
  gauge: RoundGauge,
  o: {
    sendMs: (messages: number, send: number) => number;
    roundMs: number;
    sends: number;
    from?: number;
  },
): boolean[] {
  const window = 200;
  const waited: boolean[] = [];
  let now = o.from ?? 0;
  for (let i = 0; i < o.sends; i++) {
    const waiting = gauge.waitMs() > 0;
    waited.push(waiting);
    const count = waiting ? window : window / 2;
    const ms = o.sendMs(count, i);
    now += ms;
    gauge.sent(count, ms, now);
    // The round is back before the next send is confirmed only when it is the quicker.
    if (waiting || o.roundMs < ms) gauge.arrived(count, now + o.roundMs);
    if (waiting) now += o.roundMs;
  }
  return waited;
}

const share = (xs: boolean[]) => xs.filter(Boolean).length / xs.length;
const CYCLE = WINDOW_SENDS * WINDOWS_BETWEEN_TRIES;

Deno.test("RoundGauge: sends at once until it has measured anything", () => {
  const g = new RoundGauge();
  assert.equal(g.waitMs(), 0);
  g.sent(10, 1, 1);
  assert.equal(g.waitMs(), 0, "one send says nothing yet");
});

Deno.test("RoundGauge: waits for the round when sends cost the same whatever they carry (fsync topics)", () => {
  const g = new RoundGauge();
  // At once: 100 per 1.25 ms = 80/ms. Waiting: 200 per (1.3 + 0.8) ms = 95/ms.
  const waited = closedLoop(g, { sendMs: (n) => 1.2 + n / 2000, roundMs: 0.8, sends: 4 * CYCLE });
  assert.ok(share(waited.slice(-CYCLE)) >= 0.9, `waited ${share(waited.slice(-CYCLE))}`);
  assert.ok(share(waited.slice(-CYCLE)) < 1, "and now and then tries sending at once again");
  assert.ok(g.waitMs() <= MAX_ROUND_WAIT_MS);
});

Deno.test("RoundGauge: goes back to sending at once when waiting confirms fewer messages per ms", () => {
  const g = new RoundGauge();
  // At once: 100 per 0.6 ms = 167/ms. Waiting: 200 per (0.9 + 0.5) ms = 143/ms.
  const waited = closedLoop(g, { sendMs: (n) => 0.3 + n * 0.003, roundMs: 0.5, sends: 4 * CYCLE });
  const tried = share(waited.slice(-CYCLE));
  assert.ok(tried > 0, "it does try");
  assert.ok(tried <= 2 / WINDOWS_BETWEEN_TRIES, `waited ${tried}`);
});

Deno.test("RoundGauge: never waits when the round is slower than a send", () => {
  const g = new RoundGauge();
  const waited = closedLoop(g, { sendMs: () => 0.5, roundMs: 1.5, sends: 3 * CYCLE });
  assert.equal(share(waited), 0);
});

Deno.test("RoundGauge: waits at most MAX_ROUND_WAIT_MS however slow sends are", () => {
  const g = new RoundGauge();
  closedLoop(g, { sendMs: () => 40, roundMs: 1, sends: 2.5 * CYCLE }); // not at a try
  assert.equal(g.waitMs(), MAX_ROUND_WAIT_MS);
});

Deno.test("RoundGauge: an idle spell is not measured as a slow round or a slow window", () => {
  const fsyncLike = { sendMs: (n: number) => 1.2 + n / 2000, roundMs: 0.8 };
  const g = new RoundGauge();
  closedLoop(g, { ...fsyncLike, sends: 2.5 * CYCLE });
  assert.ok(g.waitMs() > 0);
  // Half a window, a minute of nothing, then the load again: it keeps waiting.
  closedLoop(g, { ...fsyncLike, sends: WINDOW_SENDS / 2, from: 1e6 });
  const after = closedLoop(g, {
    ...fsyncLike,
    sends: 2 * WINDOW_SENDS,
    from: 1e6 + 60_000 + IDLE_MS,
  });
  assert.ok(share(after) > 0.9, `waited ${share(after)}`);
});

Deno.test("RoundGauge: one slower window while waiting does not send it back to sending at once", () => {
  const fsyncLike = { sendMs: (n: number) => 1.2 + n / 2000, roundMs: 0.8 };
  const g = new RoundGauge();
  closedLoop(g, { ...fsyncLike, sends: 2.5 * CYCLE }); // 40 windows, the last ones waiting
  assert.ok(g.waitMs() > 0);
  // One window whose rounds take 1.2 ms (200 per 2.5 ms = 80/ms, as much as sending at once).
  closedLoop(g, { ...fsyncLike, roundMs: 1.2, sends: WINDOW_SENDS, from: 1e5 });
  const next = closedLoop(g, { ...fsyncLike, sends: WINDOW_SENDS, from: 1e5 + 200 });
  assert.equal(share(next), 1);
});

Deno.test("RoundGauge: a slow window in the first second does not keep it from waiting", () => {
  const g = new RoundGauge();
  // The host is slow during the second window, the first one that waits (the load still
  // starting): sends take 2.5 times as long. Then as the fsync-topic test: waiting is better.
  const slowSecond = (n: number, i: number) =>
    (1.2 + n / 2000) * (i >= WINDOW_SENDS && i < 2 * WINDOW_SENDS ? 2.5 : 1);
  const waited = closedLoop(g, { sendMs: slowSecond, roundMs: 0.8, sends: 16 * WINDOW_SENDS });
  // Windows 10 to 15: past the tries of the start, before the periodic one at window 17.
  const settled = waited.slice(9 * WINDOW_SENDS, 15 * WINDOW_SENDS);
  assert.equal(share(settled), 1);
});
