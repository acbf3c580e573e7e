/**
 * Every SQL statement the backend runs, prepared once per connection and reused: preparing on
 * the hot path would cost more than the statement itself. Reads run on the main thread's
 * connection, writes on the writer's (_writer.ts); each side prepares only its own.
 *
 * @module
 */
import type { DatabaseSync, StatementSync } from "node:sqlite";

/** Statements of a reading connection (the main thread, or the read-only `read` CLI). */
export interface ReadStatements {
  /** Base offset of the batch that holds an offset (the newest batch starting at or below it). */
  readonly selectCoveringBatch: StatementSync;
  /** Batches of a partition from a base offset on, in order (iterated, stopped when enough). */
  readonly selectBatches: StatementSync;
  readonly selectNextOffset: StatementSync;
  readonly selectConsumerOffset: StatementSync;
}

/** Statements of the writer. */
export interface WriteStatements {
  readonly begin: StatementSync;
  readonly commit: StatementSync;
  readonly insertBatch: StatementSync;
  readonly updatePartition: StatementSync;
  readonly upsertConsumerOffset: StatementSync;
  /** The oldest batches of a partition, without their data (retention). */
  readonly selectHead: StatementSync;
  readonly deleteBelow: StatementSync;
  readonly updatePartitionBytes: StatementSync;
}

/** Prepares the reading statements. */
export function prepareReadStatements(db: DatabaseSync): ReadStatements {
  return {
    selectCoveringBatch: db.prepare(
      `SELECT base_offset FROM batches WHERE topic_id = ? AND partition = ? AND base_offset <= ?
       ORDER BY base_offset DESC LIMIT 1`,
    ),
    selectBatches: db.prepare(
      `SELECT base_offset, count, data FROM batches
       WHERE topic_id = ? AND partition = ? AND base_offset >= ? ORDER BY base_offset`,
    ),
    selectNextOffset: db.prepare(
      "SELECT next_offset FROM partitions WHERE topic_id = ? AND partition = ?",
    ),
    selectConsumerOffset: db.prepare(
      `SELECT consumer_offset FROM consumer_offsets
       WHERE consumer = ? AND topic_id = ? AND partition = ?`,
    ),
  };
}

/** Prepares the writer's statements. */
export function prepareWriteStatements(db: DatabaseSync): WriteStatements {
  return {
    // IMMEDIATE takes the write lock at once, so a reader beside us cannot make COMMIT busy.
    begin: db.prepare("BEGIN IMMEDIATE"),
    commit: db.prepare("COMMIT"),
    insertBatch: db.prepare(
      `INSERT INTO batches (topic_id, partition, base_offset, count, timestamp_micros, size, data)
       VALUES (?, ?, ?, ?, ?, ?, ?)`,
    ),
    updatePartition: db.prepare(
      "UPDATE partitions SET next_offset = ?, bytes = ? WHERE topic_id = ? AND partition = ?",
    ),
    upsertConsumerOffset: db.prepare(
      `INSERT INTO consumer_offsets (consumer, topic_id, partition, consumer_offset)
       VALUES (?, ?, ?, ?)
       ON CONFLICT (consumer, topic_id, partition) DO UPDATE SET consumer_offset = excluded.consumer_offset`,
    ),
    selectHead: db.prepare(
      `SELECT base_offset, count, timestamp_micros, size FROM batches
       WHERE topic_id = ? AND partition = ? ORDER BY base_offset LIMIT ?`,
    ),
    deleteBelow: db.prepare(
      "DELETE FROM batches WHERE topic_id = ? AND partition = ? AND base_offset < ?",
    ),
    updatePartitionBytes: db.prepare(
      "UPDATE partitions SET bytes = ? WHERE topic_id = ? AND partition = ?",
    ),
  };
}
