/**
 * Measurement helpers: a log-linear latency histogram (≈0.1% precision, fixed memory), the
 * median of a few runs, and readers of a process's CPU ticks and RSS from /proc.
 *
 * @module
 */

const LINEAR = 2048; // exact below 2048 µs, then 1024 sub-buckets per power of two

/** Latency histogram in microseconds. */
export class Histogram {
  #counts = new Float64Array(LINEAR + 40 * 1024);
  count = 0;
  max = 0;

  /** Records one latency given in milliseconds. */
  recordMs(ms: number): void {
    const us = ms < 0 ? 0 : Math.round(ms * 1000);
    this.#counts[Histogram.#bucket(us)]++;
    this.count++;
    if (us > this.max) this.max = us;
  }

  static #bucket(us: number): number {
    if (us < LINEAR) return us;
    if (us < 2 ** 30) {
      // Integer bit arithmetic: called per delivery in fan-out (millions a second), where
      // Math.log2 and a power per call cost ~4× the rest of the delivery's scan.
      const e = 31 - Math.clz32(us); // 11..29
      return LINEAR + (e - 11) * 1024 + (((us - (1 << e)) / (1 << (e - 10))) | 0);
    }
    const exp = Math.floor(Math.log2(us)); // beyond 18 minutes: rare, no 32-bit shifts
    const mant = Math.floor((us / 2 ** exp - 1) * 1024);
    return Math.min(LINEAR + (exp - 11) * 1024 + mant, LINEAR + 40 * 1024 - 1);
  }

  static #value(b: number): number {
    if (b < LINEAR) return b;
    const exp = Math.floor((b - LINEAR) / 1024) + 11;
    const mant = (b - LINEAR) % 1024;
    return Math.round(2 ** exp * (1 + (mant + 0.5) / 1024));
  }

  /** The q-quantile (0..1) in milliseconds, or null when empty. */
  quantileMs(q: number): number | null {
    if (this.count === 0) return null;
    const target = Math.ceil(q * this.count);
    let seen = 0;
    for (let b = 0; b < this.#counts.length; b++) {
      seen += this.#counts[b];
      if (seen >= target) return Math.min(Histogram.#value(b), this.max) / 1000;
    }
    return this.max / 1000;
  }

  /** p50/p99/p99.9/max in ms. */
  summary(): { p50: number | null; p99: number | null; p999: number | null; max: number | null } {
    return {
      p50: this.quantileMs(0.5),
      p99: this.quantileMs(0.99),
      p999: this.quantileMs(0.999),
      max: this.count ? this.max / 1000 : null,
    };
  }
}

/** The median of `xs` (the mean of the middle two when even); NaN when empty. */
export function median(xs: readonly number[]): number {
  if (xs.length === 0) return NaN;
  const s = [...xs].sort((x, y) => x - y);
  const m = Math.floor(s.length / 2);
  return s.length % 2 === 1 ? s[m] : (s[m - 1] + s[m]) / 2;
}

/** utime+stime of a process in clock ticks (USER_HZ = 100 on Linux). */
export function cpuTicks(pid: number | "self"): number {
  const s = Deno.readTextFileSync(`/proc/${pid}/stat`);
  const f = s.slice(s.lastIndexOf(")") + 2).split(" ");
  return Number(f[11]) + Number(f[12]); // fields 14 and 15 counted from 1
}

/** CPU% over an interval: ticks / 100 per second of wall time. */
export function cpuPercent(ticks: number, wallMs: number): number {
  return wallMs > 0 ? (ticks / 100) / (wallMs / 1000) * 100 : 0;
}

/** Resident set size in bytes. */
export function rssBytes(pid: number | "self"): number {
  const m = Deno.readTextFileSync(`/proc/${pid}/status`).match(/VmRSS:\s+(\d+) kB/);
  return m ? Number(m[1]) * 1024 : 0;
}
