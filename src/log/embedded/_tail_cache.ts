/**
 * The message log's newest records kept in memory, as views of the transaction buffers just
 * written, so that reads near a partition's end — the forwarder's caught-up lanes, live
 * readers — do not read back from the file what this process wrote a moment ago. A read from
 * the file also passes over every other partition's records in between (the log interleaves
 * them); from here a read touches its own records only.
 *
 * Bounded by the bytes of the buffers it holds ({@link TAIL_CACHE_BYTES}), oldest dropped
 * first. Within the bound a partition's cached records are contiguous up to its end: every
 * record written goes through {@link TailCache.add}, and only the oldest ever leave.
 *
 * @module
 */
import type { PartitionLog } from "./_log_index.ts";
import { LOG_RECORD_HEADER_BYTES } from "./_log_record.ts";

/** Bytes of transaction buffers kept in forward mode (the forwarder reads everything back). */
export const TAIL_CACHE_BYTES = 8 * 1024 * 1024;

/** One cached record of a partition: its batch data (`_batch.ts`) and first offset. */
interface CachedRecord {
  /** Which buffer it is a view of: dropped with it. */
  readonly seq: number;
  readonly baseOffset: number;
  readonly count: number;
  readonly data: Uint8Array;
}

/** A partition's cached records, oldest first, from `head` on (dropped ones before it). */
interface PartitionTail {
  readonly records: CachedRecord[];
  head: number;
}

interface HeldBuffer {
  readonly seq: number;
  readonly bytes: number;
  readonly partitions: readonly PartitionLog[];
}

/**
 * Sees one stored batch: as `MessageLog.readBatches`' visitor. `stable`: `data` is a view of a
 * buffer nothing writes again (this cache's), which may be kept; else of a shared chunk buffer.
 */
export type BatchVisitor = (
  data: Uint8Array,
  baseOffset: number,
  count: number,
  from: number,
  stable: boolean,
) => boolean;

/** The log's tail in memory. */
export class TailCache {
  readonly #maxBytes: number;
  /** Buffers held, oldest first, from `#bufferHead` on, with the partitions they hold. */
  readonly #buffers: HeldBuffer[] = [];
  #bufferHead = 0;
  #bytes = 0;
  #seq = 0;
  readonly #tails = new Map<PartitionLog, PartitionTail>();

  constructor(maxBytes: number) {
    this.#maxBytes = maxBytes;
  }

  /** Bytes of the buffers held, whole (at most the bound). */
  get bytes(): number {
    return this.#bytes;
  }

  /**
   * Holds a transaction just written: its records' data as views of `buffer`, per partition.
   * A buffer over the bound is not held (and what is cached of its partitions is dropped:
   * they would no longer be contiguous).
   */
  add(buffer: Uint8Array, records: readonly (Omit<CachedRecord, "seq"> & { p: PartitionLog })[]) {
    const seq = ++this.#seq;
    // What a view keeps alive is its whole buffer (the group commit's grows by doubling).
    const bytes = buffer.buffer.byteLength;
    if (bytes > this.#maxBytes) {
      for (const r of records) this.#tails.delete(r.p);
      return;
    }
    this.#buffers.push({ seq, bytes, partitions: records.map((r) => r.p) });
    this.#bytes += bytes;
    for (const r of records) {
      let tail = this.#tails.get(r.p);
      if (!tail) this.#tails.set(r.p, tail = { records: [], head: 0 });
      tail.records.push({ seq, baseOffset: r.baseOffset, count: r.count, data: r.data });
    }
    while (this.#bytes > this.#maxBytes) this.#dropOldest();
  }

  /**
   * Visits `p`'s cached batches from offset `from` (at or past the partition's start) until
   * `visit` returns false; false when the cache does not hold `from` (read the file).
   */
  read(p: PartitionLog, from: number, visit: BatchVisitor): boolean {
    const tail = this.#tails.get(p);
    if (!tail || tail.head >= tail.records.length) return false;
    const records = tail.records;
    if (records[tail.head].baseOffset > from) return false;
    // The newest records are the likely ones: search back from the end.
    let i = records.length - 1;
    while (i > tail.head && records[i].baseOffset > from) i--;
    for (; i < records.length; i++) {
      const r = records[i];
      if (!visit(r.data, r.baseOffset, r.count, from, true)) break;
    }
    return true;
  }

  /** Forgets everything (the log is closing). */
  clear(): void {
    this.#tails.clear();
    this.#buffers.length = 0;
    this.#bufferHead = 0;
    this.#bytes = 0;
  }

  #dropOldest(): void {
    const dropped = this.#buffers[this.#bufferHead++];
    this.#bytes -= dropped.bytes;
    for (const p of dropped.partitions) {
      const tail = this.#tails.get(p);
      if (!tail) continue;
      const records = tail.records;
      while (tail.head < records.length && records[tail.head].seq <= dropped.seq) tail.head++;
      if (tail.head === records.length) this.#tails.delete(p);
      else if (tail.head > 1024 && tail.head * 2 > records.length) {
        records.splice(0, tail.head);
        tail.head = 0;
      }
    }
    if (this.#bufferHead > 1024 && this.#bufferHead * 2 > this.#buffers.length) {
      this.#buffers.splice(0, this.#bufferHead);
      this.#bufferHead = 0;
    }
  }
}

/** A transaction's records as the cache holds them: each run's batch data in `buffer`. */
export function tailRecords(
  buffer: Uint8Array,
  runs: readonly { readonly at: number; readonly dataBytes: number; readonly count: number }[],
  parts: readonly PartitionLog[],
  bases: readonly number[],
) {
  return runs.map((run, r) => {
    const start = run.at + LOG_RECORD_HEADER_BYTES;
    const data = buffer.subarray(start, start + run.dataBytes);
    return { p: parts[r], baseOffset: bases[r], count: run.count, data };
  });
}
