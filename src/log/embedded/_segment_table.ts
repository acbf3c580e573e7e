/**
 * The segments of the message log (_message_log.ts) as the log knows them, and their sizes.
 *
 * @module
 */
import { BackendError } from "../port.ts";
import type { PartitionLog } from "./_log_index.ts";
import type { Segment } from "./_log_segment.ts";

/** Largest segment; smaller stores get smaller ones (see {@link segmentBytesFor}). */
const MAX_SEGMENT_BYTES = 32 * 1024 * 1024;
const MIN_SEGMENT_BYTES = 16 * 1024;
/**
 * A new log's first segment: small, so that zero-filling it does not delay the first append.
 * Each next one is twice the one before, up to the full size: a full-size spare behind a small
 * segment holds up the first roll under QoS 1 load (its fill competes with the commits' syncs).
 */
const FIRST_SEGMENT_BYTES = 1024 * 1024;

/** A segment and what the log knows about it. */
export interface SegmentState {
  readonly segment: Segment;
  /** Segment-relative end of its valid records (where the next record goes, if active). */
  written: number;
  /** For each partition with records here: the log position where its last one here ends. */
  readonly partitions: Map<PartitionLog, number>;
}

/** The next segment, being zero-filled ahead of need, and its base. */
export interface Spare {
  readonly base: number;
  readonly segment: Promise<Segment>;
}

/**
 * The segment to roll to at `base`: the spare when it was made for `base` and holds `bytes`
 * (undefined when it failed or is too small: the caller makes one); any other spare is removed.
 */
export async function claimSpare(
  spare: Spare | undefined,
  base: number,
  bytes: number,
): Promise<Segment | undefined> {
  if (spare?.base === base) {
    const segment = await spare.segment.catch(() => undefined); // made again if it failed
    if (segment && segment.capacity < bytes) {
      await segment.remove();
      return undefined;
    }
    return segment;
  }
  if (spare) await (await spare.segment.catch(() => undefined))?.remove();
  return undefined;
}

/** The part of the active (last) segment written, 0 to 1; 1 when there is none. */
export function usedOfActive(segments: readonly SegmentState[]): number {
  const active = segments.at(-1);
  return active ? active.written / active.segment.capacity : 1;
}

/** Segments of an eighth of the store, between 16 KiB and 32 MiB. */
export function segmentBytesFor(maxBytes: number): number {
  const eighth = Math.floor(maxBytes / 8 / 4096) * 4096;
  return Math.min(MAX_SEGMENT_BYTES, Math.max(MIN_SEGMENT_BYTES, eighth));
}

/** Size of the segment after `active` (the first one when there is none), at most `full`. */
export function nextSegmentBytes(full: number, active: SegmentState | undefined): number {
  if (!active) return Math.min(full, FIRST_SEGMENT_BYTES);
  return Math.min(full, Math.max(active.segment.capacity * 2, FIRST_SEGMENT_BYTES));
}

/** Segments, other than the active (last) one, that no partition needs any more. */
export function retainedOutSegments(segments: readonly SegmentState[]): SegmentState[] {
  const last = segments.length - 1;
  return segments.filter((s, i) => {
    if (i === last) return false;
    for (const [p, end] of s.partitions) if (p.startPos < end) return false;
    return true;
  });
}

/** Index of the segment holding log position `pos` (or the first after it). */
export function segmentIndex(segments: readonly SegmentState[], pos: number): number {
  let lo = 0;
  let hi = segments.length - 1;
  let found = 0;
  while (lo <= hi) {
    const mid = (lo + hi) >> 1;
    if (segments[mid].segment.base <= pos) {
      found = mid;
      lo = mid + 1;
    } else hi = mid - 1;
  }
  return found;
}

export function roundUp(n: number, to: number): number {
  return Math.ceil(n / to) * to;
}

/** Bytes the segments take on disk (their preallocated sizes). */
export function segmentsBytes(segments: readonly SegmentState[]): number {
  let total = 0;
  for (const s of segments) total += s.segment.capacity;
  return total;
}

/**
 * The largest append the segments take now under `maxBytes` (the disk aside): the active
 * segment's free bytes, or a new segment's room under the bound, whichever is more.
 */
export function roomUnderBound(segments: readonly SegmentState[], maxBytes: number): number {
  const bytes = segmentsBytes(segments);
  const active = segments.at(-1);
  const free = active ? active.segment.capacity - active.written : 0;
  return Math.max(free, Math.floor((maxBytes - bytes) / 4096) * 4096);
}

/** The append that would take the segments past `max_store_bytes`. */
export function boundFullError(bytes: number, maxBytes: number): BackendError {
  return new BackendError(
    "full",
    `The message log is full: max_store_bytes reached (${bytes} of ${maxBytes} bytes in ` +
      "segments); appends fail until retention frees room or the bound is raised",
    { bound: "max_store_bytes" },
  );
}
