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

/** Bytes of the active segment used before the next one is zero-filled (waiting for a quarter
 * of a full segment left too little time at QoS 0 rates: appends stalled behind the fill). */
const SPARE_AFTER_BYTES = 1024 * 1024;

/**
 * Where and how big the segment after the active one is made, once {@link SPARE_AFTER_BYTES}
 * of the active one (at most a quarter) are used: a store that sees little traffic never makes
 * one, a busy one has nearly a whole segment's time to zero-fill it. Null while it is not time
 * or the bound `maxBytes` leaves no room for one of `capacity`.
 */
export function spareDue(
  segments: readonly SegmentState[],
  maxBytes: number,
  capacity: number,
): { base: number; capacity: number } | null {
  const active = segments.at(-1);
  if (!active || active.written < Math.min(SPARE_AFTER_BYTES, active.segment.capacity / 4)) {
    return null;
  }
  if (segmentsBytes(segments) + capacity > maxBytes) return null;
  return { base: active.segment.base + active.segment.capacity, capacity };
}

/** The part of the active (last) segment written, 0 to 1; 1 when there is none. */
export function usedOfActive(segments: readonly SegmentState[]): number {
  const active = segments.at(-1);
  return active ? active.written / active.segment.capacity : 1;
}

/** Bytes left in the active (last) segment; 0 when there is none. */
export function activeRoom(segments: readonly SegmentState[]): number {
  const active = segments.at(-1);
  return active ? active.segment.capacity - active.written : 0;
}

/**
 * Bytes of the largest transaction written now without being refused, for one whose first
 * append takes `first` bytes: the active segment's room when that append fits there (what does
 * not waits for the next transaction, which rolls), else what a new segment may take under the
 * bound `maxBytes`.
 */
export function transactionRoom(
  segments: readonly SegmentState[],
  maxBytes: number,
  first: number,
): number {
  const left = activeRoom(segments);
  return first <= left ? left : newSegmentRoom(segments, maxBytes);
}

/**
 * Capacity of the segment a roll makes for a transaction of `bytes`: `next` (the usual size),
 * bigger when the transaction needs it, smaller where the bound leaves less; throws "full"
 * when the bound leaves less than `bytes`.
 */
export function rollCapacity(
  segments: readonly SegmentState[],
  maxBytes: number,
  next: number,
  bytes: number,
): number {
  const room = newSegmentRoom(segments, maxBytes);
  const capacity = Math.min(Math.max(next, roundUp(bytes, 4096)), room);
  if (capacity < bytes) throw boundFullError(segmentsBytes(segments), maxBytes, bytes);
  return capacity;
}

/** What a new segment may take under the bound `maxBytes`, in whole pages. */
function newSegmentRoom(segments: readonly SegmentState[], maxBytes: number): number {
  return Math.max(0, roundDown(maxBytes - segmentsBytes(segments), 4096));
}

/** Bytes the segments take (their preallocated sizes). */
export function segmentsBytes(segments: readonly SegmentState[]): number {
  let total = 0;
  for (const s of segments) total += s.segment.capacity;
  return total;
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

/**
 * The largest append the segments take now under `maxBytes` (the disk aside): the active
 * segment's free bytes, or a new segment's room under the bound, whichever is more.
 */
export function roomUnderBound(segments: readonly SegmentState[], maxBytes: number): number {
  return Math.max(activeRoom(segments), newSegmentRoom(segments, maxBytes));
}

export function roundDown(n: number, to: number): number {
  return Math.floor(n / to) * to;
}

/**
 * The append of `appendBytes` that would take the segments (`bytes`) past `max_store_bytes`;
 * one bigger than the whole bound is told apart: no retention can ever make room for it.
 */
export function boundFullError(bytes: number, maxBytes: number, appendBytes = 0): BackendError {
  if (roundUp(appendBytes, 4096) > maxBytes) {
    return new BackendError(
      "full",
      `An append of ${appendBytes} bytes cannot fit in embedded.max_store_bytes (${maxBytes} ` +
        "bytes) even with the store empty: raise embedded.max_store_bytes well above " +
        "limits.max_packet_bytes, or lower limits.max_packet_bytes",
    );
  }
  return new BackendError(
    "full",
    `The message log is full: max_store_bytes reached (${bytes} of ${maxBytes} bytes in ` +
      "segments); appends fail until retention frees room or the bound is raised",
    { bound: "max_store_bytes" },
  );
}
