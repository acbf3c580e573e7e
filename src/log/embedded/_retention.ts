/**
 * Retention: drops messages older than the age limit and the oldest messages of a topic over
 * its byte limit (Iggy's `message_expiry` and `max_topic_size`), in the message
 * log (_message_log.ts), on the main thread.
 *
 * The unit dropped is a stored batch (one partition's share of one group commit), as Iggy's is
 * a segment: a batch goes when its append time is older than the limit, or while the topic is
 * over its byte limit (so a topic may stay up to one batch per partition over it). Dropping
 * moves the partition's first retained offset; readers never see the batch again. The disk
 * space comes back when no partition needs anything of a segment any more: the backend then
 * stores the floors and deletes the segment (backend.ts). So the log on disk may hold a little
 * more than the limits while a segment still carries newer batches of some partition.
 *
 * Passes run in chunks of at most {@link CHUNK_RECORDS} batches, yielding between chunks so
 * group commits keep flowing. Next offsets never go backwards: dropping only moves starts.
 *
 * @module
 */
import { setImmediate } from "node:timers";
import type { TopicState } from "./_catalog.ts";
import type { MessageLog, PartitionLog } from "./_message_log.ts";
import { type RetentionTally, tallyDrop } from "./_retention_report.ts";

/** Most batches dropped between two yields to the event loop. */
export const CHUNK_RECORDS = 256;

/** Backend-wide defaults; a topic's own non-zero settings win. */
export interface RetentionLimits {
  /** µs; 0 = keep forever. */
  readonly maxAgeMicros: number;
  /** bytes per topic; 0 = unbounded. */
  readonly maxTopicBytes: number;
  /**
   * The first offset of a partition that age and size limits must keep (forward mode: what is
   * not yet forwarded); absent = no such hold.
   */
  readonly keepFrom?: (topicId: number, partition: number) => number;
  /** A batch's timestamp moved by the wall clock's forward steps since: its age counts from this. */
  readonly correctedMicros?: (micros: number) => number;
}

/**
 * Runs one retention pass over `topics`; stops early (between chunks) when `stopped()`.
 * Resolves with the number of messages dropped; `tally` gets them per partition.
 */
export async function runRetentionPass(
  log: MessageLog,
  topics: Iterable<TopicState>,
  limits: RetentionLimits,
  nowMicros: number,
  stopped: () => boolean,
  tally?: RetentionTally,
): Promise<number> {
  let deleted = 0;
  // Snapshot: a topic created while we yield is simply picked up by the next pass.
  for (const state of [...topics]) {
    const partitions: PartitionLog[] = [];
    for (let p = 0; p < state.partitions; p++) partitions.push(log.partition(state.id, p));
    const maxAge = state.messageExpiryMicros || limits.maxAgeMicros;
    if (maxAge > 0) {
      for (const p of partitions) {
        if (stopped()) break;
        const keepFrom = limits.keepFrom?.(p.topicId, p.partition) ?? Infinity;
        const cutoff = nowMicros - maxAge;
        deleted += await expirePartition(log, p, cutoff, keepFrom, limits, stopped, tally);
      }
    }
    const maxBytes = state.maxTopicBytes || limits.maxTopicBytes;
    if (maxBytes > 0 && !stopped()) {
      deleted += await trimTopic(log, partitions, maxBytes, limits.keepFrom, stopped, tally);
    }
    if (stopped()) break;
  }
  return deleted;
}

/** Drops the prefix of a partition whose batches are older than `cutoff` and before `keepFrom`. */
async function expirePartition(
  log: MessageLog,
  p: PartitionLog,
  cutoff: number,
  keepFrom: number,
  limits: RetentionLimits,
  stopped: () => boolean,
  tally?: RetentionTally,
): Promise<number> {
  let deleted = 0;
  const corrected = limits.correctedMicros ?? ((micros: number) => micros);
  while (!stopped()) {
    // Timestamps rise with offsets (one writer stamps them), so the old ones form a prefix; a
    // clock step back only delays deletion, it never removes a newer message. A step forward
    // moves every earlier timestamp by the step (`corrected`), which keeps them rising.
    const drop = (ts: number, end: number) => corrected(ts) < cutoff && end <= keepFrom;
    const bytesBefore = p.bytes;
    const { messages, records } = log.dropOldest(p, drop, CHUNK_RECORDS);
    tallyDrop(tally, p, messages, bytesBefore);
    deleted += messages;
    if (records < CHUNK_RECORDS) break;
    await yieldToEventLoop();
  }
  return deleted;
}

/**
 * Drops the oldest batches of the topic, across partitions, until it fits `maxBytes`; a
 * partition whose oldest batch is held (`keepFrom`) gives nothing more.
 */
async function trimTopic(
  log: MessageLog,
  partitions: readonly PartitionLog[],
  maxBytes: number,
  keepFrom: RetentionLimits["keepFrom"],
  stopped: () => boolean,
  tally?: RetentionTally,
): Promise<number> {
  let deleted = 0;
  let excess = -maxBytes;
  for (const p of partitions) excess += p.bytes;
  // The head (oldest retained batch) of each partition; the lowest log position goes first.
  const holds = partitions.map((p) => keepFrom?.(p.topicId, p.partition) ?? Infinity);
  const droppableHead = (i: number) => {
    const head = log.oldest(partitions[i]);
    return head && head.end <= holds[i] ? head : undefined;
  };
  const heads = partitions.map((_, i) => droppableHead(i));
  let taken = 0;
  while (excess > 0 && !stopped()) {
    let best = -1;
    for (let i = 0; i < heads.length; i++) {
      const head = heads[i];
      if (head && (best < 0 || head.pos < heads[best]!.pos)) best = i;
    }
    if (best < 0) break; // counters say over, the log says empty: nothing left to drop
    const p = partitions[best];
    const before = p.bytes;
    const dropped = log.dropOldest(p, () => true, 1).messages;
    tallyDrop(tally, p, dropped, before);
    deleted += dropped;
    excess -= before - p.bytes;
    heads[best] = droppableHead(best);
    if (++taken % CHUNK_RECORDS === 0) await yieldToEventLoop();
  }
  return deleted;
}

function yieldToEventLoop(): Promise<void> {
  return new Promise((resolve) => setImmediate(resolve));
}
