/**
 * "Once per tick" scheduling. Work queued during one turn of the event loop (the appends of
 * every read of that turn) runs together right after it, so the log gets one commit per tick.
 *
 * `setImmediate` is used because nested `setTimeout(fn, 0)` timers are clamped to a minimum
 * delay, far longer than a tick.
 *
 * @module
 */
import { setImmediate } from "node:timers";

/** Runs `fn` after the current tick's I/O callbacks and microtasks. */
export function nextTick(fn: () => void): void {
  setImmediate(fn);
}
