/** Time source, injected so tests control time. Milliseconds. */
export interface Clock {
  now(): number;
}

/** Wall clock (monotonic enough for timeouts). */
export const systemClock: Clock = { now: () => performance.now() };
