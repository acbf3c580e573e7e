/**
 * The last minutes of the gateway's figures for the status page's charts: a ring of samples
 * taken at a fixed interval (default every 10 s, 90 kept: 15 minutes). Each sample holds running
 * totals, so a chart point is the difference of two neighbours per second; memory is bounded by
 * the ring's length whatever the traffic (a sample is a dozen numbers).
 *
 * @module
 */

/** Publish outcomes, as docs/ARCHITECTURE.md names them. */
export const HISTORY_OUTCOMES = ["appended", "acked", "rejected", "denied", "failed"] as const;

/** Running totals and levels at one moment. */
export interface HistorySample {
  /** Wall clock, ms. */
  readonly t: number;
  /** Publishes since start, per outcome. */
  readonly publishes: Readonly<Record<(typeof HISTORY_OUTCOMES)[number], number>>;
  readonly deliveries: number;
  /** PUBACK latency histogram's sum (s) and count since start. */
  readonly pubackSumS: number;
  readonly pubackCount: number;
  /** Messages waiting for the uplink (forward mode), else 0. */
  readonly forwardWaiting: number;
  readonly rssBytes: number;
  /** CPU time (user and system) since start, µs. */
  readonly cpuMicros: number;
}

/** One chart's points: per-interval values, oldest first, with their end times. */
export interface HistorySeries {
  readonly t: readonly number[];
  /** Per second, per outcome. */
  readonly publishes: Readonly<Record<(typeof HISTORY_OUTCOMES)[number], readonly number[]>>;
  /** Per second. */
  readonly deliveries: readonly number[];
  /** Mean PUBACK latency of the interval, ms (null: no QoS 1 publish in it). */
  readonly puback_ms: readonly (number | null)[];
  readonly forward_waiting: readonly number[];
  readonly rss_bytes: readonly number[];
  /** Share of one core, percent. */
  readonly cpu_percent: readonly number[];
}

/** A bounded ring of samples. */
export class History {
  readonly #ring: HistorySample[] = [];
  readonly capacity: number;
  readonly intervalMs: number;

  constructor(capacity = 90, intervalMs = 10_000) {
    this.capacity = capacity;
    this.intervalMs = intervalMs;
  }

  /** Samples held (at most {@link capacity}). */
  get size(): number {
    return this.#ring.length;
  }

  /** Adds a sample; the oldest goes when the ring is full. */
  add(s: HistorySample): void {
    this.#ring.push(s);
    if (this.#ring.length > this.capacity) this.#ring.shift();
  }

  /** The newest sample, or undefined before the first. */
  get last(): HistorySample | undefined {
    return this.#ring[this.#ring.length - 1];
  }

  /**
   * The sample to compute "now" rates against: the newest one at least `minMs` older than `now`
   * (so a rate spans a second or more), else the oldest.
   */
  baseFor(now: number, minMs = 1000): HistorySample | undefined {
    for (let i = this.#ring.length - 1; i >= 0; i--) {
      if (now - this.#ring[i].t >= minMs) return this.#ring[i];
    }
    return this.#ring[0];
  }

  /** Per-interval points between neighbouring samples. */
  series(): HistorySeries {
    const pairs = this.#ring.slice(1).map((b, i) => [this.#ring[i], b] as const);
    const perS = (f: (s: HistorySample) => number) =>
      pairs.map(([a, b]) => rate(f(b) - f(a), b.t - a.t));
    const publishes = Object.fromEntries(
      HISTORY_OUTCOMES.map((o) => [o, perS((s) => s.publishes[o])]),
    ) as unknown as HistorySeries["publishes"];
    return {
      t: pairs.map(([, b]) => b.t),
      publishes,
      deliveries: perS((s) => s.deliveries),
      puback_ms: pairs.map(([a, b]) => {
        const n = b.pubackCount - a.pubackCount;
        return n > 0 ? round(((b.pubackSumS - a.pubackSumS) / n) * 1000) : null;
      }),
      forward_waiting: pairs.map(([, b]) => b.forwardWaiting),
      rss_bytes: pairs.map(([, b]) => b.rssBytes),
      cpu_percent: pairs.map(([a, b]) =>
        round((b.cpuMicros - a.cpuMicros) / 10 / Math.max(1, b.t - a.t))
      ),
    };
  }
}

/** Per second over `ms`, two decimals; 0 over no time. */
export function rate(delta: number, ms: number): number {
  return ms > 0 ? round((delta * 1000) / ms) : 0;
}

function round(n: number): number {
  return Math.round(n * 100) / 100;
}
