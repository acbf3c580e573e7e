/**
 * The scan at open (and on each refresh of a read-only log): rebuilds every partition's state
 * and every segment's extent from the records on disk. It stops in a segment at the first
 * record whose checksum fails (a torn write) or whose epoch is older than the one before it (a
 * record of an earlier run that a crash left past the torn one).
 *
 * @module
 */
import type { PartitionLog } from "./_log_index.ts";
import { LOG_RECORD_HEADER_BYTES } from "./_log_record.ts";
import { FileSegment, segmentBase } from "./_log_segment.ts";
import type { SegmentState, Spare } from "./_segment_table.ts";
import { scanSegment } from "./_log_scan.ts";

/** Bases of the segment files in `dir` after `known`, ascending. */
function newSegmentBases(dir: string, known: number, readOnly: boolean): number[] {
  const bases: number[] = [];
  try {
    for (const entry of Deno.readDirSync(dir)) {
      const base = entry.isFile ? segmentBase(entry.name) : undefined;
      if (base !== undefined && base > known) bases.push(base);
    }
  } catch (e) {
    if (!(readOnly && e instanceof Deno.errors.NotFound)) throw e;
  }
  return bases.sort((a, b) => a - b);
}

/**
 * Opens segment files not seen yet (appending them to `segments`) and scans every segment from
 * where its records ended, noting each record in its partition. Returns the highest epoch seen.
 */
export function scanNewSegments(
  dir: string,
  readOnly: boolean,
  segments: SegmentState[],
  maxEpoch: number,
  partition: (topicId: number, partition: number) => PartitionLog,
): number {
  const bases = newSegmentBases(dir, segments.at(-1)?.segment.base ?? -1, readOnly);
  // Only the last segment with records may have grown (an empty spare may follow it); the
  // new ones are scanned whole.
  let first = segments.length - 1;
  while (first > 0 && segments[first].written === 0) first--;
  first = Math.max(0, first);
  for (const base of bases) {
    segments.push({ segment: FileSegment.open(dir, base), written: 0, partitions: new Map() });
  }
  for (let i = first; i < segments.length; i++) {
    const state = segments[i];
    const base = state.segment.base;
    scanSegment(
      state,
      state.written,
      state.segment.capacity,
      (h, pos) => {
        if (h.epoch < maxEpoch) return false; // stale: past an earlier crash's torn tail
        maxEpoch = h.epoch;
        const recordBytes = LOG_RECORD_HEADER_BYTES + h.dataBytes;
        state.written = pos - base + recordBytes;
        const p = partition(h.topicId, h.partition);
        if (h.baseOffset + h.count <= p.start) return true; // retained out already
        p.noteRecord(pos, recordBytes, h.baseOffset, h.count, h.size);
        state.partitions.set(p, pos + recordBytes);
        return true;
      },
      Infinity,
      true,
    );
  }
  return maxEpoch;
}

/** Takes the empty segments after the last one with records off the end of `segments`. */
export function takeEmptyTail(segments: SegmentState[]): SegmentState[] {
  const empty: SegmentState[] = [];
  while (segments.length > 0 && segments.at(-1)!.written === 0) empty.unshift(segments.pop()!);
  return empty;
}

/**
 * Empty segments after the last record: spares made ahead of need. The one right after the last
 * record's segment, if it has the size the next one gets, is the spare again; the rest are
 * removed, so that restarts never pile up empty files. The last segment with records stays
 * active: appends continue where its valid records end (overwriting a torn tail; see the epoch
 * in _log_record.ts).
 */
export async function reuseEmptyTail(
  segments: SegmentState[],
  nextCapacity: (last: SegmentState | undefined) => number,
): Promise<Spare | undefined> {
  const empty = takeEmptyTail(segments);
  const last = segments.at(-1);
  const nextBase = last ? last.segment.base + last.segment.capacity : 0;
  let spare: Spare | undefined;
  for (const s of empty) {
    const base = s.segment.base;
    if (!spare && base === nextBase && s.segment.capacity === nextCapacity(last)) {
      spare = { base, segment: Promise.resolve(s.segment) };
    } else {
      await s.segment.remove();
    }
  }
  return spare;
}
