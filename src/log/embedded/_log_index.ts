/**
 * One partition's view of the message log (_message_log.ts): its offsets, retained bytes and
 * the sparse index (offset → log position) that bounds how much of the log a read scans.
 *
 * @module
 */
import type { PartitionBytes } from "../local_log.ts";

/** A partition gets an index entry after this many bytes of its own records... */
const INDEX_OWN_BYTES = 16 * 1024;
/** ...or after this much log of any partition since its last entry (bounds a read's scan). */
const INDEX_MAX_GAP_BYTES = 256 * 1024;

/** A partition's offsets as the catalog stored them (retention and the scan start there). */
export interface PartitionFloor {
  readonly start: number;
  readonly next: number;
}

/** One partition's view of the log. */
export class PartitionLog {
  readonly topicId: number;
  readonly partition: number;
  /** First retained offset: lower offsets are gone (or about to go with their segment). */
  start: number;
  /** Next offset to assign. */
  next: number;
  /** Retained bytes (payloads + encoded headers), for retention by size. */
  bytes = 0;
  /** Bytes of every record noted since open (retained at open, then appended): never falls. */
  appendedBytes = 0;
  /** Log position at or before this partition's first retained record. */
  startPos = 0;
  /** End of this partition's newest record; a scan past it finds nothing of it. */
  endPos = 0;
  /** Sparse index: offsets and positions of some records, ascending, from `indexHead` on. */
  readonly indexOffsets: number[] = [];
  readonly indexPositions: number[] = [];
  indexHead = 0;
  /** Own bytes since the last index entry. */
  bytesSinceIndex = 0;

  constructor(topicId: number, partition: number, floor: PartitionFloor | undefined) {
    this.topicId = topicId;
    this.partition = partition;
    this.start = floor?.start ?? 0;
    this.next = Math.max(floor?.next ?? 0, this.start);
  }

  /** Records a new record of this partition at `pos` (`bytes` long, first offset `base`). */
  noteRecord(pos: number, bytes: number, base: number, count: number, size: number): void {
    const entries = this.indexPositions.length;
    const lastEntry = entries > this.indexHead ? this.indexPositions[entries - 1] : -Infinity;
    if (
      entries === this.indexHead || this.bytesSinceIndex >= INDEX_OWN_BYTES ||
      pos - lastEntry >= INDEX_MAX_GAP_BYTES
    ) {
      this.indexOffsets.push(base);
      this.indexPositions.push(pos);
      this.bytesSinceIndex = 0;
    }
    this.bytesSinceIndex += bytes;
    if (this.bytes === 0 && this.endPos <= this.startPos) this.startPos = pos;
    this.next = Math.max(this.next, base + count);
    this.bytes += size;
    this.appendedBytes += size;
    this.endPos = pos + bytes;
  }

  /** Where a scan for `offset` may start: the nearest index entry at or below it. */
  scanStart(offset: number): number {
    const offsets = this.indexOffsets;
    let lo = this.indexHead;
    let hi = offsets.length - 1;
    let found = -1;
    while (lo <= hi) {
      const mid = (lo + hi) >> 1;
      if (offsets[mid] <= offset) {
        found = mid;
        lo = mid + 1;
      } else hi = mid - 1;
    }
    return found < 0 ? this.startPos : Math.max(this.startPos, this.indexPositions[found]);
  }

  /** Drops a retained-out prefix: offsets below `start`, positions below `startPos`. */
  dropPrefix(start: number, startPos: number, size: number): void {
    this.start = start;
    this.startPos = startPos;
    this.bytes = Math.max(0, this.bytes - size);
    const offsets = this.indexOffsets;
    // Keep the last entry at or below start; the ones before it can never be a scan start.
    while (this.indexHead + 1 < offsets.length && offsets[this.indexHead + 1] <= start) {
      this.indexHead++;
    }
    if (this.indexHead > 1024 && this.indexHead * 2 > offsets.length) {
      offsets.splice(0, this.indexHead);
      this.indexPositions.splice(0, this.indexHead);
      this.indexHead = 0;
    }
  }
}

/** A partition's offsets and bytes as the port reports them. */
export function partitionBytes(p: PartitionLog): PartitionBytes {
  return { start: p.start, next: p.next, retainedBytes: p.bytes, appendedBytes: p.appendedBytes };
}

/** The key of a partition in the stored floors (`MessageLogOptions.floors`). */
export function partitionKey(topicId: number, partition: number): string {
  return `${topicId}/${partition}`;
}
