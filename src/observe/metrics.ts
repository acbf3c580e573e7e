/**
 * Counters and gauges of the gateway, kept in-process for `/metrics` (Prometheus text) and
 * mirrored to OpenTelemetry instruments from `@opentelemetry/api`, which Deno exports when
 * `OTEL_DENO=true` (without it there are no instruments: `otel.ts`). One registry per gateway
 * instance (no globals for tests to clear).
 *
 * @module
 */
import type { Counter as OtelCounter, Histogram as OtelHistogram } from "@opentelemetry/api";
import { otel } from "./otel.ts";

/** Label names to values of one series. */
export type Labels = Readonly<Record<string, string>>;

function labelKey(labels: Labels): string {
  // Counters on the message path (bytes in, bytes out) have no labels: no key to build.
  for (const _ in labels) return keyOf(labels);
  return "";
}

function keyOf(labels: Labels): string {
  const keys = Object.keys(labels).sort();
  return keys.map((k) => `${k}="${escapeLabel(labels[k])}"`).join(",");
}

function escapeLabel(v: string): string {
  return v.replaceAll("\\", "\\\\").replaceAll('"', '\\"').replaceAll("\n", "\\n");
}

/** A monotonically increasing counter with optional labels. */
export class Counter {
  readonly values = new Map<string, number>();
  #otel: OtelCounter | null;
  constructor(readonly name: string, readonly help: string, otel: OtelCounter | null) {
    this.#otel = otel;
  }
  inc(labels: Labels = {}, by = 1): void {
    const k = labelKey(labels);
    this.values.set(k, (this.values.get(k) ?? 0) + by);
    this.#otel?.add(by, labels);
  }
  get(labels: Labels = {}): number {
    return this.values.get(labelKey(labels)) ?? 0;
  }
  /**
   * A handle with its labels fixed, for hot paths: `inc` then costs one map update, with no
   * label key built per call.
   */
  child(labels: Labels): BoundCounter {
    const key = labelKey(labels);
    const frozen = Object.freeze({ ...labels });
    return {
      inc: (by = 1) => {
        this.values.set(key, (this.values.get(key) ?? 0) + by);
        this.#otel?.add(by, frozen);
      },
    };
  }
}

/** A counter with fixed labels (see {@link Counter.child}). */
export interface BoundCounter {
  inc(by?: number): void;
}

/** A gauge read from a callback when scraped. */
export class Gauge {
  constructor(
    readonly name: string,
    readonly help: string,
    readonly read: () => number | ReadonlyArray<[Labels, number]>,
  ) {}
}

/** A histogram kept as Prometheus cumulative buckets. */
export class Histogram {
  readonly counts: number[];
  sum = 0;
  count = 0;
  #otel: OtelHistogram | null;
  constructor(
    readonly name: string,
    readonly help: string,
    readonly buckets: readonly number[],
    otel: OtelHistogram | null,
  ) {
    this.counts = new Array(buckets.length).fill(0);
    this.#otel = otel;
  }
  observe(v: number): void {
    for (let i = 0; i < this.buckets.length; i++) if (v <= this.buckets[i]) this.counts[i]++;
    this.sum += v;
    this.count++;
    this.#otel?.record(v);
  }
}

/** The registry. */
export class Metrics {
  readonly #counters: Counter[] = [];
  readonly #gauges: Gauge[] = [];
  readonly #histograms: Histogram[] = [];
  readonly #meter = otel?.metrics.getMeter("iggy-mqtt-gateway") ?? null;

  counter(name: string, help: string): Counter {
    const c = new Counter(
      name,
      help,
      this.#meter?.createCounter(name, { description: help }) ?? null,
    );
    this.#counters.push(c);
    return c;
  }

  gauge(name: string, help: string, read: Gauge["read"]): Gauge {
    const g = new Gauge(name, help, read);
    this.#gauges.push(g);
    const og = this.#meter?.createObservableGauge(name, { description: help });
    og?.addCallback((result) => {
      const v = read();
      if (typeof v === "number") result.observe(v);
      else for (const [labels, n] of v) result.observe(n, labels);
    });
    return g;
  }

  histogram(name: string, help: string, buckets: readonly number[]): Histogram {
    const h = new Histogram(
      name,
      help,
      buckets,
      this.#meter?.createHistogram(name, { description: help }) ?? null,
    );
    this.#histograms.push(h);
    return h;
  }

  /** Prometheus text exposition format 0.0.4. */
  toPrometheus(): string {
    const out: string[] = [];
    for (const c of this.#counters) {
      out.push(`# HELP ${c.name} ${c.help}`, `# TYPE ${c.name} counter`);
      if (c.values.size === 0) out.push(`${c.name} 0`);
      for (const [k, v] of c.values) out.push(k ? `${c.name}{${k}} ${v}` : `${c.name} ${v}`);
    }
    for (const g of this.#gauges) {
      out.push(`# HELP ${g.name} ${g.help}`, `# TYPE ${g.name} gauge`);
      const v = g.read();
      if (typeof v === "number") out.push(`${g.name} ${v}`);
      else for (const [labels, n] of v) out.push(`${g.name}{${labelKey(labels)}} ${n}`);
    }
    for (const h of this.#histograms) {
      out.push(`# HELP ${h.name} ${h.help}`, `# TYPE ${h.name} histogram`);
      h.buckets.forEach((b, i) => out.push(`${h.name}_bucket{le="${b}"} ${h.counts[i]}`));
      out.push(`${h.name}_bucket{le="+Inf"} ${h.count}`);
      out.push(`${h.name}_sum ${h.sum}`, `${h.name}_count ${h.count}`);
    }
    return out.join("\n") + "\n";
  }
}
