/**
 * Gauges with one series per triple (stream, topic, partition), the shape of every per-reader
 * gauge: labels `stream`, `topic`, `partition`.
 *
 * @module
 */
import type { Gauge, Labels, Metrics } from "./metrics.ts";

/** Where a measured thing reads from: the triple's three names. */
export interface TripleOf {
  readonly triple: { readonly stream: string; readonly topic: string; readonly partition: number };
}

/** The labels of one triple's series. */
export function tripleLabels({ triple }: TripleOf): Labels {
  return { stream: triple.stream, topic: triple.topic, partition: String(triple.partition) };
}

/**
 * Registers a gauge read at each scrape from `items()`: one series per item, labelled with its
 * triple, valued `value(item)`.
 */
export function tripleGauge<T extends TripleOf>(
  metrics: Metrics,
  name: string,
  help: string,
  items: () => readonly T[],
  value: (item: T) => number,
): Gauge {
  return metrics.gauge(
    name,
    help,
    () => items().map((item): [Labels, number] => [tripleLabels(item), value(item)]),
  );
}
