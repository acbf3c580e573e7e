/**
 * "Once per tick" scheduling. Work queued during one turn of the event loop (all packets of a
 * read, all appends confirmed by one commit) runs together right after it, so each socket gets
 * one write per tick and the log one commit per tick.
 *
 * `setImmediate` is used because nested `setTimeout(fn, 0)` timers are clamped to a minimum
 * delay, far longer than a tick (see docs/BENCHMARKS.md, 'Figures behind the code').
 *
 * @module
 */
import { setImmediate } from "node:timers";

/** Runs `fn` after the current tick's I/O callbacks and microtasks. */
export function nextTick(fn: () => void): void {
  setImmediate(fn);
}
