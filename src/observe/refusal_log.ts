/**
 * The log of refused connections: one warn line per refusal, naming the peer, the listener and
 * the reason, rate-limited per source address so a flood cannot fill the journal. A source gets
 * {@link REFUSAL_LINES_PER_SOURCE} lines per {@link REFUSAL_WINDOW_MS}; its further refusals in
 * that window are counted and reported in one summary line when the window ends. All sources
 * together get {@link REFUSAL_LINES_PER_WINDOW} lines per window, so a flood from many addresses
 * is bounded too; what that budget holds back is summarised once per window. Every line not
 * written is counted (`onSuppressed`), so the metric and the summaries add up to the refusals.
 *
 * @module
 */
import type { Clock } from "../base/clock.ts";
import type { Logger } from "./logger.ts";

/** Refusal lines per source address per window; more are counted, then summarised. */
export const REFUSAL_LINES_PER_SOURCE = 5;
/** The window of both limits (ms). */
export const REFUSAL_WINDOW_MS = 60_000;
/** Refusal lines per window over all sources; more are counted, then summarised. */
export const REFUSAL_LINES_PER_WINDOW = 100;
/** Sources tracked at once; past that the oldest goes (its held-back count is reported first). */
export const REFUSAL_MAX_SOURCES = 10_000;
/** Distinct reasons a summary itemises; the rest are counted under "other". */
const MAX_REASONS = 8;

/** The bounds, all defaulting to the constants above (tests shrink them). */
export interface RefusalLogOptions {
  readonly linesPerSource?: number;
  readonly linesPerWindow?: number;
  readonly windowMs?: number;
  readonly maxSources?: number;
}

/** One window's refusals of one source (or of all sources, for the overall budget). */
interface Window {
  start: number;
  logged: number;
  /** Refusals not written in this window, by reason. */
  held: Map<string, number>;
  heldTotal: number;
}

/** Sets a timer and clears it: the gateway's timers, or a test's. */
export interface RefusalTimers {
  set(run: () => void, ms: number): unknown;
  clear(id: unknown): void;
}

const realTimers: RefusalTimers = {
  set: (run, ms) => setTimeout(run, ms),
  clear: (id) => clearTimeout(id as ReturnType<typeof setTimeout>),
};

/** Rate-limited warn lines for refused connections; see the module doc. */
export class RefusalLog {
  readonly #logger: Logger;
  readonly #clock: Clock;
  readonly #onSuppressed: () => void;
  readonly #timers: RefusalTimers;
  readonly #perSource: number;
  readonly #perWindow: number;
  readonly #windowMs: number;
  readonly #maxSources: number;
  readonly #sources = new Map<string, Window>();
  #all: Window;
  /** The pending summary timer, if any refusal is held back. */
  #timer: unknown = null;

  constructor(
    logger: Logger,
    clock: Clock,
    onSuppressed: () => void,
    o: RefusalLogOptions = {},
    timers: RefusalTimers = realTimers,
  ) {
    this.#logger = logger;
    this.#clock = clock;
    this.#onSuppressed = onSuppressed;
    this.#timers = timers;
    this.#perSource = o.linesPerSource ?? REFUSAL_LINES_PER_SOURCE;
    this.#perWindow = o.linesPerWindow ?? REFUSAL_LINES_PER_WINDOW;
    this.#windowMs = o.windowMs ?? REFUSAL_WINDOW_MS;
    this.#maxSources = o.maxSources ?? REFUSAL_MAX_SOURCES;
    this.#all = newWindow(clock.now());
  }

  /**
   * A connection from `remote` on `listener` was refused for `reason`: one warn line
   * ("Connection refused", with `fields`), unless this source or all sources used up the
   * window's lines.
   */
  refuse(remote: string, listener: string, reason: string, fields?: Record<string, unknown>) {
    const now = this.#clock.now();
    this.#rollAll(now);
    const w = this.#windowOf(remote, now);
    if (w.logged >= this.#perSource) return this.#hold(w, reason);
    if (this.#all.logged >= this.#perWindow) return this.#hold(this.#all, reason);
    w.logged++;
    this.#all.logged++;
    this.#logger.warn("Connection refused", { remote, listener, reason, ...fields });
  }

  /** Reports every held-back count now (at shutdown) and stops the timer. */
  close(): void {
    if (this.#timer !== null) this.#timers.clear(this.#timer);
    this.#timer = null;
    for (const [remote, w] of this.#sources) this.#summarise(w, remote);
    this.#summarise(this.#all, null);
  }

  /** The source's current window, opened (and the last one summarised) when it ended. */
  #windowOf(remote: string, now: number): Window {
    let w = this.#sources.get(remote);
    if (w !== undefined && now - w.start < this.#windowMs) return w;
    if (w !== undefined) {
      this.#summarise(w, remote);
      this.#sources.delete(remote); // re-inserted last: the map stays oldest-first
    } else if (this.#sources.size >= this.#maxSources) {
      const [oldest, ow] = this.#sources.entries().next().value!;
      this.#summarise(ow, oldest);
      this.#sources.delete(oldest);
    }
    w = newWindow(now);
    this.#sources.set(remote, w);
    return w;
  }

  #rollAll(now: number): void {
    if (now - this.#all.start < this.#windowMs) return;
    this.#summarise(this.#all, null);
    this.#all = newWindow(now);
  }

  #hold(w: Window, reason: string): void {
    const key = w.held.has(reason) || w.held.size < MAX_REASONS ? reason : "other";
    w.held.set(key, (w.held.get(key) ?? 0) + 1);
    w.heldTotal++;
    this.#onSuppressed();
    if (this.#timer === null) {
      const due = Math.max(0, w.start + this.#windowMs - this.#clock.now());
      this.#timer = this.#timers.set(() => this.#flush(), due);
    }
  }

  /** The timer: summarises the windows that ended; waits again for those still open. */
  #flush(): void {
    this.#timer = null;
    const now = this.#clock.now();
    let next = Infinity;
    for (const [remote, w] of [...this.#sources]) {
      if (now - w.start >= this.#windowMs) {
        this.#summarise(w, remote);
        this.#sources.delete(remote);
      } else if (w.heldTotal > 0) next = Math.min(next, w.start + this.#windowMs);
    }
    this.#rollAll(now);
    if (this.#all.heldTotal > 0) next = Math.min(next, this.#all.start + this.#windowMs);
    if (next !== Infinity) this.#timer = this.#timers.set(() => this.#flush(), next - now);
  }

  /** One line for what `w` held back (`remote` null: the overall budget); then nothing held. */
  #summarise(w: Window, remote: string | null): void {
    if (w.heldTotal === 0) return;
    const fields: Record<string, unknown> = remote === null
      ? { sources: "all", not_logged: w.heldTotal }
      : { remote, not_logged: w.heldTotal };
    fields.reasons = Object.fromEntries(w.held);
    fields.window_s = this.#windowMs / 1000;
    this.#logger.warn("Connection refusals not logged (rate limit)", fields);
    w.held = new Map();
    w.heldTotal = 0;
  }
}

function newWindow(start: number): Window {
  return { start, logged: 0, held: new Map(), heldTotal: 0 };
}
