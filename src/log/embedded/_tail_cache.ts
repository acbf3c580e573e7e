/**
 * The message log's newest records kept in memory, so that reads near a partition's end — the
 * forwarder's caught-up lanes, live readers — do not read back from the file what this process
 * wrote a moment ago. A read from the file also passes over every other partition's records in
 * between (the log interleaves them); from here a read touches its own records only.
 *
 * The records are copied into one ring buffer made once, and each is known by its place in it.
 * Why not keep views of the transaction buffers just written, as this cache first did: a
 * buffer held for the fraction of a second the cache covers outlives two scavenges, so every
 * transaction's buffer was promoted to the old generation and freed only by a full collection,
 * many times more full collections under ingest with forwarding than with the ring. The copy
 * costs a memcpy of
 * what is written; a read copies what it keeps (`_log_read.ts`), as a read from the file always
 * did.
 *
 * Bounded by the ring's bytes ({@link TAIL_CACHE_BYTES}), oldest dropped first. Within the
 * bound a partition's cached records are contiguous up to its end: every record written goes
 * through {@link TailCache.add}, and only the oldest ever leave.
 *
 * @module
 */
import type { PartitionLog } from "./_log_index.ts";
import { LOG_RECORD_HEADER_BYTES } from "./_log_record.ts";

/** Bytes of the ring kept in forward mode (the forwarder reads everything back). */
export const TAIL_CACHE_BYTES = 8 * 1024 * 1024;

/** One record to cache: a partition's batch data (`_batch.ts`) and its first offset. */
export interface TailRecord {
  readonly p: PartitionLog;
  readonly baseOffset: number;
  readonly count: number;
  readonly data: Uint8Array;
}

/** One cached record: where its batch data is in the ring. */
interface CachedRecord {
  readonly p: PartitionLog;
  readonly baseOffset: number;
  readonly count: number;
  readonly at: number;
  readonly bytes: number;
}

/** A partition's cached records, oldest first, from `head` on (dropped ones before it). */
interface PartitionTail {
  readonly records: CachedRecord[];
  head: number;
}

/**
 * Sees one stored batch: as `MessageLog.readBatches`' visitor. `data` is a view of a shared
 * buffer (a file chunk or the ring), valid during the call only: copy what is kept.
 */
export type BatchVisitor = (
  data: Uint8Array,
  baseOffset: number,
  count: number,
  from: number,
) => boolean;

/** Records kept in an array before the dropped ones at its front are cut off. */
const SPLICE_AFTER = 1024;

/** The log's tail in memory. */
export class TailCache {
  readonly #maxBytes: number;
  /** Made at the first record (a log that is only read never needs it). */
  #ring: Uint8Array | undefined;
  /** Where the next record goes. */
  #writeAt = 0;
  /** Every cached record, oldest first (in ring order since the last wrap), from `#head` on. */
  readonly #order: CachedRecord[] = [];
  #head = 0;
  #bytes = 0;
  readonly #tails = new Map<PartitionLog, PartitionTail>();

  constructor(maxBytes: number) {
    this.#maxBytes = maxBytes;
  }

  /** Bytes of the records held (at most the bound). */
  get bytes(): number {
    return this.#bytes;
  }

  /**
   * Copies a transaction's records in, dropping the oldest they need the room of. A
   * transaction over the bound is not held (and what is cached of its partitions is
   * dropped: they would no longer be contiguous).
   */
  add(records: readonly TailRecord[]): void {
    let total = 0;
    for (const r of records) total += r.data.length;
    if (total > this.#maxBytes) {
      for (const r of records) this.#tails.delete(r.p);
      return;
    }
    const ring = this.#ring ??= new Uint8Array(this.#maxBytes);
    if (this.#writeAt + total > ring.length) {
      // Wrapping: what the lap before left past the write position is the oldest; it goes
      // first (else it would stop the loop below before the records it must drop).
      while (this.#head < this.#order.length && this.#order[this.#head].at >= this.#writeAt) {
        this.#dropOldest();
      }
      this.#writeAt = 0;
    }
    const from = this.#writeAt;
    const to = from + total;
    // The oldest records are the ones from the write position on, in ring order.
    while (this.#head < this.#order.length) {
      const oldest = this.#order[this.#head];
      if (oldest.at >= to || oldest.at + oldest.bytes <= from) break;
      this.#dropOldest();
    }
    let at = from;
    for (const r of records) {
      ring.set(r.data, at);
      const cached = { p: r.p, baseOffset: r.baseOffset, count: r.count, at, bytes: r.data.length };
      this.#order.push(cached);
      let tail = this.#tails.get(r.p);
      if (!tail) this.#tails.set(r.p, tail = { records: [], head: 0 });
      tail.records.push(cached);
      at += r.data.length;
    }
    this.#writeAt = to;
    this.#bytes += total;
  }

  /**
   * Visits `p`'s cached batches from offset `from` (at or past the partition's start) until
   * `visit` returns false; false when the cache does not hold `from` (read the file).
   */
  read(p: PartitionLog, from: number, visit: BatchVisitor): boolean {
    const tail = this.#tails.get(p);
    const ring = this.#ring;
    if (!tail || !ring || tail.head >= tail.records.length) return false;
    const records = tail.records;
    if (records[tail.head].baseOffset > from) return false;
    // The newest records are the likely ones: search back from the end.
    let i = records.length - 1;
    while (i > tail.head && records[i].baseOffset > from) i--;
    for (; i < records.length; i++) {
      const r = records[i];
      if (!visit(ring.subarray(r.at, r.at + r.bytes), r.baseOffset, r.count, from)) break;
    }
    return true;
  }

  /** Forgets everything and lets the ring go (the log is closing). */
  clear(): void {
    this.#tails.clear();
    this.#order.length = 0;
    this.#head = 0;
    this.#bytes = 0;
    this.#writeAt = 0;
    this.#ring = undefined;
  }

  #dropOldest(): void {
    const dropped = this.#order[this.#head++];
    this.#bytes -= dropped.bytes;
    const tail = this.#tails.get(dropped.p);
    // A partition whose tail was dropped whole (see add) may have a newer one by now.
    if (tail && tail.records[tail.head] === dropped) {
      tail.head++;
      if (tail.head === tail.records.length) this.#tails.delete(dropped.p);
      else tail.head = cutFront(tail.records, tail.head);
    }
    this.#head = cutFront(this.#order, this.#head);
  }
}

/**
 * Cuts the dropped records (before `head`) off the front of `records` once they are most of
 * it; returns the new head.
 */
function cutFront(records: CachedRecord[], head: number): number {
  if (head <= SPLICE_AFTER || head * 2 <= records.length) return head;
  records.splice(0, head);
  return 0;
}

/** A transaction's records as the cache takes them: each run's batch data in `buffer`. */
export function tailRecords(
  buffer: Uint8Array,
  runs: readonly { readonly at: number; readonly dataBytes: number; readonly count: number }[],
  parts: readonly PartitionLog[],
  bases: readonly number[],
): TailRecord[] {
  return runs.map((run, r) => {
    const start = run.at + LOG_RECORD_HEADER_BYTES;
    const data = buffer.subarray(start, start + run.dataBytes);
    return { p: parts[r], baseOffset: bases[r], count: run.count, data };
  });
}
