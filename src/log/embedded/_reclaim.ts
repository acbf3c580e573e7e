/**
 * Room for new appends in a log whose messages must reach an upstream first (forward mode).
 * When the next segment would not fit under the store's bound, or on its disk, the oldest
 * segment's batches are dropped if they are forwarded (and, under `drop_oldest`, even if they
 * are not), so that the segment holds nothing any partition needs and the retention runner
 * deletes it. Without this a store that keeps messages forever would stay full although
 * everything is upstream.
 *
 * @module
 */
import { setImmediate } from "node:timers";
import type { MessageLog } from "./_message_log.ts";
import { segmentBytesFor } from "./_segment_table.ts";
import { type RetentionTally, tallyDrop } from "./_retention_report.ts";

/** Most batches dropped between two yields to the event loop. */
const CHUNK_RECORDS = 256;

/** What forward mode asks of retention. */
export interface ForwardHold {
  /** The first offset of a partition not yet forwarded: retention keeps it and what follows. */
  firstUnforwarded(topicId: number, partition: number): number;
  /** When the store is full: drop unforwarded messages (`drop_oldest`) or keep them (`refuse`). */
  readonly dropUnforwarded: boolean;
}

/**
 * Whether the next segment would pass the bound, or the disk refuses it (_disk_room.ts); with one
 * segment there is nothing to free.
 */
export function needsRoom(log: MessageLog, maxBytes: number): boolean {
  if (log.segmentCount <= 1) return false;
  return log.bytes + segmentBytesFor(maxBytes) > maxBytes || log.room.refusal !== undefined;
}

/** Whether a whole next segment fits under the bound (appends do not fail "full"). */
export function hasRoom(log: MessageLog, maxBytes: number): boolean {
  return log.bytes + segmentBytesFor(maxBytes) <= maxBytes;
}

/**
 * Drops batches of the oldest segment, oldest first, while the hold allows; stops at the first
 * unforwarded one under `refuse`. Resolves with the messages dropped (the caller stores the
 * floors and deletes the freed segment).
 */
export async function reclaimOldestSegment(
  log: MessageLog,
  hold: ForwardHold,
  stopped: () => boolean,
  tally?: RetentionTally,
): Promise<number> {
  const end = log.firstSegmentEnd;
  const parts = [...log.partitions()];
  const heads = parts.map((p) => log.oldest(p));
  const firstUnforwarded = parts.map((p) => hold.firstUnforwarded(p.topicId, p.partition));
  let dropped = 0;
  let taken = 0;
  while (!stopped()) {
    let best = -1;
    for (let i = 0; i < heads.length; i++) {
      const h = heads[i];
      if (h && h.pos < end && (best < 0 || h.pos < heads[best]!.pos)) best = i;
    }
    if (best < 0) break;
    const p = parts[best];
    if (heads[best]!.end > firstUnforwarded[best] && !hold.dropUnforwarded) break;
    const bytesBefore = p.bytes;
    const messages = log.dropOldest(p, () => true, 1).messages;
    tallyDrop(tally, p, messages, bytesBefore);
    dropped += messages;
    heads[best] = log.oldest(p);
    if (++taken % CHUNK_RECORDS === 0) await new Promise((r) => setImmediate(r));
  }
  return dropped;
}
