/**
 * Per-source-address defences (against floods and auth abuse): a token bucket on new
 * connections per source, and an exponential back-off on CONNACK after repeated failed
 * logins from a source. Both maps are bounded (`MAX_SOURCES`; the oldest entry is dropped).
 *
 * @module
 */
import type { Clock } from "../base/clock.ts";

/** Most source addresses tracked at once. */
const MAX_SOURCES = 10_000;

/**
 * Each stretch this long without a failed login halves a source's failure count, so a source
 * that stops failing (a device whose password was fixed, a NAT shared with one bad client)
 * is back at full speed within minutes instead of never.
 */
export const FAILURE_HALF_LIFE_MS = 30_000;

/** Options, from `[limits]` and `[auth]`. */
export interface SourceGuardOptions {
  /** New connections per second per source; 0 disables the limit. Burst = 2× rate. */
  readonly connectionsPerSecond: number;
  /** First delay after `freeFailures` failed logins (ms); 0 disables back-off. */
  readonly failureBackoffMs: number;
  readonly failureBackoffMaxMs: number;
  /** Failed logins allowed before delays start. */
  readonly freeFailures: number;
}

interface Bucket {
  tokens: number;
  at: number;
}

/** Failed logins of one source, and when the last one happened. */
interface Failures {
  count: number;
  at: number;
}

/** Connection-rate limiting and login back-off per source. */
export class SourceGuard {
  #o: SourceGuardOptions;
  #clock: Clock;
  #buckets = new Map<string, Bucket>();
  #failures = new Map<string, Failures>();

  constructor(o: SourceGuardOptions, clock: Clock) {
    this.#o = o;
    this.#clock = clock;
  }

  /** Takes a token for a new connection from `source`; false = over the rate. */
  admit(source: string): boolean {
    const rate = this.#o.connectionsPerSecond;
    if (rate <= 0) return true;
    const now = this.#clock.now();
    const burst = rate * 2;
    let b = this.#buckets.get(source);
    if (!b) {
      b = { tokens: burst, at: now };
      remember(this.#buckets, source, b);
    }
    b.tokens = Math.min(burst, b.tokens + ((now - b.at) / 1000) * rate);
    b.at = now;
    if (b.tokens < 1) return false;
    b.tokens -= 1;
    return true;
  }

  /** Delay (ms) to apply before answering a failed login from `source`. Records the failure. */
  failed(source: string): number {
    const now = this.#clock.now();
    const f = this.#failures.get(source) ?? { count: 0, at: now };
    const halvings = Math.floor((now - f.at) / FAILURE_HALF_LIFE_MS);
    f.count = Math.floor(f.count / 2 ** Math.min(halvings, 31)) + 1;
    f.at = now;
    remember(this.#failures, source, f);
    const n = f.count;
    if (this.#o.failureBackoffMs <= 0 || n <= this.#o.freeFailures) return 0;
    const exp = Math.min(n - this.#o.freeFailures - 1, 20);
    return Math.min(this.#o.failureBackoffMaxMs, this.#o.failureBackoffMs * 2 ** exp);
  }

  /** A successful login clears the source's failures. */
  succeeded(source: string): void {
    this.#failures.delete(source);
  }
}

function remember<V>(m: Map<string, V>, k: string, v: V): void {
  m.delete(k);
  m.set(k, v);
  if (m.size > MAX_SOURCES) m.delete(m.keys().next().value!);
}
