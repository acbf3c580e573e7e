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

/** What a shared reader reports per triple, for {@link readerGauges}. */
export interface ReaderStatsOf extends TripleOf {
  readonly position: number;
  readonly committed: number;
  readonly unsettled: number;
}

/** The shared readers' gauges: lag, ledger entries and stored offset per triple. */
export function readerGauges(metrics: Metrics, stats: () => readonly ReaderStatsOf[]): void {
  tripleGauge(
    metrics,
    "reader_lag_messages",
    "Messages between a reader's position and its committed offset",
    stats,
    (s) => s.position - 1 - s.committed,
  );
  tripleGauge(
    metrics,
    "ledger_pending_entries",
    "Polled messages not yet settled, per triple",
    stats,
    (s) => s.unsettled,
  );
  tripleGauge(
    metrics,
    "reader_committed_offset",
    "Stored consumer offset per triple",
    stats,
    (s) => s.committed,
  );
}
