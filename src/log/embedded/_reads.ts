/**
 * Reading messages back: the stored batches of one partition that cover an offset range,
 * sliced to the messages asked for (_batch.ts).
 *
 * @module
 */
import type { StoredMessage } from "../port.ts";
import type { TopicState } from "./_catalog.ts";
import { decodeBatch } from "./_batch.ts";
import type { ReadStatements } from "./_statements.ts";

interface BatchRow {
  base_offset: number;
  count: number;
  data: Uint8Array;
}

/**
 * Up to `count` messages of a partition with offset ≥ `fromOffset`, in offset order, across
 * batch boundaries. Offsets removed by retention are simply absent: the first message may come
 * after `fromOffset`.
 */
export function readMessages(
  stmts: ReadStatements,
  state: TopicState,
  partition: number,
  fromOffset: number,
  count: number,
): StoredMessage[] {
  const out: StoredMessage[] = [];
  if (!(count > 0)) return out;
  const limit = Math.floor(count);
  const from = Math.max(0, Math.floor(fromOffset));
  const covering = stmts.selectCoveringBatch.get(state.id, partition, from) as
    | { base_offset: number }
    | undefined;
  // Iterated, not all(): the rows are whole batches, and only as many as `count` needs are read.
  const rows = stmts.selectBatches.iterate(state.id, partition, covering?.base_offset ?? from);
  for (const row of rows as Iterable<unknown> as Iterable<BatchRow>) {
    decodeBatch(row.data, partition, row.base_offset, row.count, from, limit, out);
    if (out.length >= limit) break;
  }
  return out;
}
