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
  readonly selectConsumerOffset: StatementSync;
  /**
   * The consumers of a partition whose stored offset lies below an offset (what retention
   * deleted that they had not read). A scan of the table: run only after a retention pass
   * that deleted something, once per partition it touched.
   */
  readonly selectConsumersBehind: StatementSync;
}

/** Statements of the writer. */
export interface WriteStatements {
  readonly begin: StatementSync;
  readonly commit: StatementSync;
  readonly upsertConsumerOffset: StatementSync;
  readonly deleteConsumerOffset: StatementSync;
  /** A partition's floors (see the partitions table in _schema.ts). */
  readonly updateFloors: StatementSync;
}

/** Prepares the reading statements. */
export function prepareReadStatements(db: DatabaseSync): ReadStatements {
  return {
    selectConsumerOffset: db.prepare(
      `SELECT consumer_offset FROM consumer_offsets
       WHERE consumer = ? AND topic_id = ? AND partition = ?`,
    ),
    selectConsumersBehind: db.prepare(
      `SELECT consumer FROM consumer_offsets
       WHERE topic_id = ? AND partition = ? AND consumer_offset < ?`,
    ),
  };
}

/** Prepares the writer's statements. */
export function prepareWriteStatements(db: DatabaseSync): WriteStatements {
  return {
    // IMMEDIATE takes the write lock at once, so a reader beside us cannot make COMMIT busy.
    begin: db.prepare("BEGIN IMMEDIATE"),
    commit: db.prepare("COMMIT"),
    upsertConsumerOffset: db.prepare(
      `INSERT INTO consumer_offsets (consumer, topic_id, partition, consumer_offset)
       VALUES (?, ?, ?, ?)
       ON CONFLICT (consumer, topic_id, partition) DO UPDATE SET consumer_offset = excluded.consumer_offset`,
    ),
    deleteConsumerOffset: db.prepare(
      "DELETE FROM consumer_offsets WHERE consumer = ? AND topic_id = ? AND partition = ?",
    ),
    updateFloors: db.prepare(
      `UPDATE partitions SET start_offset = max(start_offset, ?), next_offset = max(next_offset, ?)
       WHERE topic_id = ? AND partition = ?`,
    ),
  };
}
