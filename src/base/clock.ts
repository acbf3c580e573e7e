/** Time source, injected so tests control time. Milliseconds. */
export interface Clock {
  now(): number;
}

/** Wall clock (monotonic enough for timeouts). */
export const systemClock: Clock = { now: () => performance.now() };

/**
 * `clock` read at most once per synchronous run: the first `now()` of a run reads it, the
 * rest of the run gets that reading, and a microtask queued with the first read makes the
 * next run read again. For checks made per message (the topic cache's TTL under a flood
 * asks once per PUBLISH): a read is decoded and handled in one run, which takes well under
 * a millisecond, and `performance.now()` per PUBLISH is a visible share of QoS 0 ingest CPU.
 */
export function oncePerRun(clock: Clock): Clock {
  let reading = 0;
  let fresh = false;
  const expire = () => {
    fresh = false;
  };
  return {
    now() {
      if (!fresh) {
        reading = clock.now();
        fresh = true;
        queueMicrotask(expire);
      }
      return reading;
    },
  };
}
