/**
 * Retention's reads of the message log (_message_log.ts): a partition's oldest retained
 * records, and dropping them from memory (the floors are stored and the segments deleted
 * after, by the log's owner).
 *
 * @module
 */
import type { PartitionLog } from "./_log_index.ts";
import { LOG_RECORD_HEADER_BYTES } from "./_log_record.ts";
import type { SegmentState } from "./_segment_table.ts";
import { scanRetained } from "./_log_scan.ts";

/**
 * Walks a partition's oldest retained records, oldest first, and drops each one `drop`
 * accepts (given its append time and the offset after its last message), stopping at the
 * first it refuses (or after `maxRecords`). Returns the messages and batches dropped.
 */
export function dropOldestRecords(
  segments: readonly SegmentState[],
  p: PartitionLog,
  drop: (timestampMicros: number, end: number) => boolean,
  maxRecords: number,
): { messages: number; records: number } {
  let dropped = 0;
  let records = 0;
  scanRetained(segments, p, (header, pos) => {
    const end = header.baseOffset + header.count;
    if (records >= maxRecords || !drop(header.timestampMicros, end)) return false;
    records++;
    dropped += end - Math.max(header.baseOffset, p.start);
    p.dropPrefix(end, pos + LOG_RECORD_HEADER_BYTES + header.dataBytes, header.size);
    return true;
  });
  return { messages: dropped, records };
}

/** A partition's oldest retained record, as retention weighs it. */
export interface OldestRecord {
  /** Log position. */
  readonly pos: number;
  readonly timestampMicros: number;
  /** Retention bytes. */
  readonly size: number;
  /** The offset after its last message. */
  readonly end: number;
}

/** A partition's oldest retained record, if it has one. */
export function oldestRecord(
  segments: readonly SegmentState[],
  p: PartitionLog,
): OldestRecord | undefined {
  let found: OldestRecord | undefined;
  scanRetained(segments, p, (header, pos) => {
    const end = header.baseOffset + header.count;
    found = { pos, timestampMicros: header.timestampMicros, size: header.size, end };
    return false;
  });
  return found;
}
