/**
 * Retention: deletes messages older than the age limit and the oldest messages of a topic over
 * its byte limit (Iggy's `message_expiry` and `max_topic_size`, DESIGN §6). Runs in the writer.
 *
 * The unit of deletion is a stored batch (_batch.ts), as Iggy's is a segment: a batch goes when
 * its newest message is older than the limit, or when the topic is over its byte limit. So a
 * topic may keep up to one batch per partition beyond the byte limit, and a message may outlive
 * the age limit until the newest message of its batch expires too (batches hold one commit, so
 * their messages share one timestamp: in practice only the byte limit is coarser).
 *
 * Deletes always take a prefix of a partition (lowest offsets first), in chunks of at most
 * {@link CHUNK_ROWS} batches per transaction, yielding between chunks so group commits keep
 * flowing. Next offsets live in the catalog and the partitions table, not in the batches, so
 * they never go backwards when a partition is emptied.
 *
 * @module
 */
import type { DatabaseSync } from "node:sqlite";
import { setImmediate } from "node:timers";
import type { TopicState } from "./_catalog.ts";
import type { WriteStatements } from "./_statements.ts";

type Statements = WriteStatements;

/** Most batches deleted per transaction: bounds how long one chunk holds the writer. */
export const CHUNK_ROWS = 256;

/** Backend-wide defaults; a topic's own non-zero settings win. */
export interface RetentionLimits {
  /** µs; 0 = keep forever. */
  readonly maxAgeMicros: number;
  /** bytes per topic; 0 = unbounded. */
  readonly maxTopicBytes: number;
}

interface HeadRow {
  base_offset: number;
  count: number;
  timestamp_micros: number;
  size: number;
}

/**
 * Runs one retention pass over `topics`; stops early (between chunks) when `stopped()`.
 * Resolves with the number of messages deleted.
 */
export async function runRetentionPass(
  db: DatabaseSync,
  stmts: Statements,
  topics: Iterable<TopicState>,
  limits: RetentionLimits,
  nowMicros: number,
  stopped: () => boolean,
): Promise<number> {
  let deleted = 0;
  // Snapshot: a topic created while we yield is simply picked up by the next pass.
  for (const state of [...topics]) {
    const maxAge = state.messageExpiryMicros || limits.maxAgeMicros;
    if (maxAge > 0) {
      for (let p = 0; p < state.partitions && !stopped(); p++) {
        deleted += await expirePartition(db, stmts, state, p, nowMicros - maxAge, stopped);
      }
    }
    const maxBytes = state.maxTopicBytes || limits.maxTopicBytes;
    if (maxBytes > 0 && !stopped()) deleted += await trimTopic(db, stmts, state, maxBytes, stopped);
    if (stopped()) break;
  }
  return deleted;
}

/** Deletes the prefix of partition `p` whose batches are older than `cutoff`. */
async function expirePartition(
  db: DatabaseSync,
  stmts: Statements,
  state: TopicState,
  p: number,
  cutoff: number,
  stopped: () => boolean,
): Promise<number> {
  let deleted = 0;
  while (!stopped()) {
    const rows = stmts.selectHead.all(state.id, p, CHUNK_ROWS) as unknown as HeadRow[];
    let n = 0;
    let bytes = 0;
    let messages = 0;
    // Timestamps rise with offsets (one writer stamps them), so the old ones form a prefix; a
    // clock step back only delays deletion, it never removes a newer message.
    while (n < rows.length && rows[n].timestamp_micros < cutoff) {
      bytes += rows[n].size;
      messages += rows[n++].count;
    }
    if (n === 0) break;
    deletePrefix(db, stmts, state, p, rows[n - 1].base_offset + 1, bytes);
    deleted += messages;
    if (n < rows.length || rows.length < CHUNK_ROWS) break;
    await yieldToEventLoop();
  }
  return deleted;
}

/** Deletes the oldest batches of the topic, across partitions, until it fits `maxBytes`. */
async function trimTopic(
  db: DatabaseSync,
  stmts: Statements,
  state: TopicState,
  maxBytes: number,
  stopped: () => boolean,
): Promise<number> {
  let deleted = 0;
  const perPartition = Math.max(64, Math.ceil(CHUNK_ROWS / state.partitions));
  while (!stopped()) {
    let excess = -maxBytes;
    for (const b of state.committedBytes) excess += b;
    if (excess <= 0) break;
    // Merge the heads of all partitions by timestamp so the topic's oldest go first.
    const heads: HeadRow[][] = [];
    for (let p = 0; p < state.partitions; p++) {
      heads.push(stmts.selectHead.all(state.id, p, perPartition) as unknown as HeadRow[]);
    }
    const cut = new Array<number>(state.partitions).fill(0);
    const freed = new Array<number>(state.partitions).fill(0);
    let taken = 0;
    let messages = 0;
    while (excess > 0 && taken < CHUNK_ROWS) {
      let best = -1;
      for (let p = 0; p < heads.length; p++) {
        const row = heads[p][cut[p]];
        if (row && (best < 0 || row.timestamp_micros < heads[best][cut[best]].timestamp_micros)) {
          best = p;
        }
      }
      if (best < 0) break;
      const row = heads[best][cut[best]++];
      freed[best] += row.size;
      excess -= row.size;
      taken++;
      messages += row.count;
      // A partition whose loaded head ran out may hold older rows than the others' next ones:
      // stop this chunk and reload.
      if (cut[best] === heads[best].length && heads[best].length === perPartition) break;
    }
    if (taken === 0) break; // counters say over, rows say empty: nothing left to delete
    db.exec("BEGIN IMMEDIATE");
    try {
      for (let p = 0; p < state.partitions; p++) {
        if (cut[p] > 0) {
          deleteRows(stmts, state, p, heads[p][cut[p] - 1].base_offset + 1, freed[p]);
        }
      }
      db.exec("COMMIT");
    } catch (e) {
      rollback(db, state);
      throw e;
    }
    commitBytes(state);
    deleted += messages;
    await yieldToEventLoop();
  }
  return deleted;
}

function deletePrefix(
  db: DatabaseSync,
  stmts: Statements,
  state: TopicState,
  p: number,
  belowOffset: number,
  bytes: number,
): void {
  db.exec("BEGIN IMMEDIATE");
  try {
    deleteRows(stmts, state, p, belowOffset, bytes);
    db.exec("COMMIT");
  } catch (e) {
    rollback(db, state);
    throw e;
  }
  commitBytes(state);
}

/** Deletes batches starting below `belowOffset` of partition p and stages its byte counter. */
function deleteRows(
  stmts: Statements,
  state: TopicState,
  p: number,
  belowOffset: number,
  bytes: number,
): void {
  stmts.deleteBelow.run(state.id, p, belowOffset);
  state.bytes[p] = Math.max(0, state.bytes[p] - bytes);
  stmts.updatePartitionBytes.run(state.bytes[p], state.id, p);
}

function commitBytes(state: TopicState): void {
  for (let p = 0; p < state.partitions; p++) state.committedBytes[p] = state.bytes[p];
}

function rollback(db: DatabaseSync, state: TopicState): void {
  for (let p = 0; p < state.partitions; p++) state.bytes[p] = state.committedBytes[p];
  if (db.isTransaction) db.exec("ROLLBACK");
}

function yieldToEventLoop(): Promise<void> {
  return new Promise((resolve) => setImmediate(resolve));
}
