/**
 * Retention's reads of the message log (_message_log.ts): a partition's oldest retained
 * records, and dropping them from memory (the floors are stored and the segments deleted
 * after, by the log's owner).
 *
 * @module
 */
import type { PartitionLog } from "./_log_index.ts";
import { LOG_RECORD_HEADER_BYTES } from "./_log_record.ts";
import type { SegmentState } from "./_log_segments.ts";
import { scanRetained } from "./_log_scan.ts";

/**
 * Walks a partition's oldest retained records, oldest first, and drops each one `drop`
 * accepts, stopping at the first it refuses (or after `maxRecords`). Returns the messages
 * and batches dropped.
 */
export function dropOldestRecords(
  segments: readonly SegmentState[],
  p: PartitionLog,
  drop: (timestampMicros: number) => boolean,
  maxRecords: number,
): { messages: number; records: number } {
  let dropped = 0;
  let records = 0;
  scanRetained(segments, p, (header, pos) => {
    if (records >= maxRecords || !drop(header.timestampMicros)) return false;
    records++;
    const end = header.baseOffset + header.count;
    dropped += end - Math.max(header.baseOffset, p.start);
    p.dropPrefix(end, pos + LOG_RECORD_HEADER_BYTES + header.dataBytes, header.size);
    return true;
  });
  return { messages: dropped, records };
}

/** Position and timestamp of a partition's oldest retained record, if it has one. */
export function oldestRecord(
  segments: readonly SegmentState[],
  p: PartitionLog,
): { pos: number; timestampMicros: number; size: number } | undefined {
  let found: { pos: number; timestampMicros: number; size: number } | undefined;
  scanRetained(segments, p, (header, pos) => {
    found = { pos, timestampMicros: header.timestampMicros, size: header.size };
    return false;
  });
  return found;
}
