/**
 * Scanning the message log (_message_log.ts): visits its valid records in log order, reading a
 * bounded chunk at a time. Reads, retention and the scan at open all go through here.
 *
 * @module
 */
import type { PartitionLog } from "./_log_index.ts";
import {
  LOG_RECORD_HEADER_BYTES,
  logRecordBytes,
  type LogRecordHeader,
  logRecordIntact,
  readLogRecordHeader,
} from "./_log_record.ts";
import { segmentIndex, type SegmentState } from "./_segment_table.ts";

/** Bytes read at a time while scanning (a longer record is read whole). */
const SCAN_CHUNK_BYTES = 64 * 1024;

/**
 * The one chunk buffer of the scans whose visitors keep nothing of it (the scan at open,
 * retention, reads). A fresh buffer per chunk makes the scan at open allocate as many bytes of
 * ArrayBuffers as the store holds: much of it garbage awaiting a GC at once, and the allocator
 * keeps the pages after they are freed, which raises RSS at ready. Reads use it too, and copy out only the records they return
 * (the messages are views of those copies). It grows to the longest record scanned (a group
 * commit of 1,000 small messages is ~150 KiB), up to {@link SCRATCH_MAX_BYTES}; a longer
 * record gets a buffer of its own.
 */
let scratch = new Uint8Array(SCAN_CHUNK_BYTES);
const SCRATCH_MAX_BYTES = 4 * 1024 * 1024;

/** A buffer of `bytes` to read into: the shared one when `reuse` allows it. */
function chunkBuffer(bytes: number, reuse: boolean): Uint8Array {
  if (!reuse || bytes > SCRATCH_MAX_BYTES) return new Uint8Array(bytes);
  if (bytes > scratch.length) scratch = new Uint8Array(Math.min(SCRATCH_MAX_BYTES, bytes * 2));
  return scratch.subarray(0, bytes);
}

/** Sees one record: its header, its log position, and the buffer holding it from `at`. */
export type Visitor = (
  header: LogRecordHeader,
  pos: number,
  buf: Uint8Array,
  at: number,
) => boolean;

/**
 * Visits the valid records from log position `from` to `until` in order; `visit` returns
 * false to stop. With `reuse`, every chunk is read into one shared buffer: `visit` must keep
 * nothing of it. Checksums are not checked again: every record below a segment's `written`
 * was checked when the log was scanned at open (or, read-only, when it was first seen), or
 * was written by this process; checking them on every read made each poll hash every
 * partition's records it passes over.
 */
export function scanLog(
  segments: readonly SegmentState[],
  from: number,
  until: number,
  visit: Visitor,
  reuse = false,
): void {
  let i = segmentIndex(segments, from);
  let pos = from;
  for (; i < segments.length && pos < until; i++) {
    const s = segments[i];
    const rel = Math.max(0, pos - s.segment.base);
    if (!scanSegment(s, rel, s.written, visit, until, reuse, false)) return;
    if (i + 1 < segments.length) pos = segments[i + 1].segment.base;
  }
}

/** Visits a partition's retained records, oldest first, until `visit` returns false. */
export function scanRetained(
  segments: readonly SegmentState[],
  p: PartitionLog,
  visit: (header: LogRecordHeader, pos: number) => boolean,
): void {
  scanLog(segments, p.startPos, p.endPos, (header, pos) => {
    if (header.topicId !== p.topicId || header.partition !== p.partition) return true;
    if (header.baseOffset + header.count <= p.start) return true;
    return visit(header, pos);
  }, true);
}

/**
 * Visits the records of one segment from `rel` to `limit` (segment-relative). Returns true
 * when the segment's records ran out (the caller may go on to the next segment), false when
 * `visit` stopped the scan. `reuse`: as for {@link scanLog}. With `verify` (recovery's scan),
 * a record that fails its checksum ends the segment's valid records.
 */
export function scanSegment(
  s: SegmentState,
  rel: number,
  limit: number,
  visit: Visitor,
  until = Infinity,
  reuse = false,
  verify = true,
): boolean {
  const base = s.segment.base;
  let pos = rel;
  while (pos < limit && base + pos < until) {
    // Never past `until`: a poll near a partition's end reads only what it needs.
    const want = Math.min(SCAN_CHUNK_BYTES, limit - pos, until - (base + pos));
    let buf = chunkBuffer(want, reuse);
    let got = s.segment.readAt(pos, buf);
    let view = new DataView(buf.buffer, buf.byteOffset, got);
    let at = 0;
    let progressed = false;
    while (at < got && base + pos + at < until) {
      let bytes = logRecordBytes(view, at, got);
      if (bytes === 0 && at === 0) {
        // Maybe one record longer than the chunk: read it whole.
        const headerBytes = got >= 8 ? LOG_RECORD_HEADER_BYTES + view.getUint32(4, true) : 0;
        if (headerBytes > got && headerBytes <= limit - pos) {
          buf = chunkBuffer(headerBytes, reuse);
          got = s.segment.readAt(pos, buf);
          view = new DataView(buf.buffer, buf.byteOffset, got);
          bytes = logRecordBytes(view, 0, got);
        }
      }
      if (bytes === 0) break;
      if (verify && !logRecordIntact(buf, view, at, bytes)) return true;
      const header = readLogRecordHeader(view, at);
      if (!visit(header, base + pos + at, buf, at)) return false;
      at += bytes;
      progressed = true;
    }
    if (!progressed) return true; // no record here: the end of this segment's valid records
    pos += at;
  }
  return true;
}
