/**
 * Every SQL statement the backend runs, prepared once at open and reused: preparing on the hot
 * path would cost more than the insert itself.
 *
 * @module
 */
import type { DatabaseSync, StatementSync } from "node:sqlite";

/**
 * Rows per multi-row INSERT. Each `run()` crosses from JS into SQLite once, so binding 64 rows at
 * a time cuts that fixed cost (measured here: ~150k rows/s one row per call, ~250k at 64).
 */
export const ROWS_PER_INSERT = 64;

/** Values bound per message row. */
export const VALUES_PER_ROW = 7;

const MESSAGE_ROW = "(?, ?, ?, ?, ?, ?, ?)";
const INSERT_MESSAGES = `INSERT INTO messages
  (topic_id, partition, message_offset, timestamp_micros, size, headers, payload) VALUES`;

/** The prepared statements of one open database. */
export interface Statements {
  readonly begin: StatementSync;
  readonly commit: StatementSync;
  readonly insertMessage: StatementSync;
  /** {@link ROWS_PER_INSERT} rows at once. */
  readonly insertMessages: StatementSync;
  readonly updatePartition: StatementSync;
  readonly pollMessages: StatementSync;
  readonly selectNextOffset: StatementSync;
  readonly upsertConsumerOffset: StatementSync;
  readonly selectConsumerOffset: StatementSync;
  readonly selectHead: StatementSync;
  readonly deleteBelow: StatementSync;
  readonly updatePartitionBytes: StatementSync;
}

/** Prepares the statements (a read-only store prepares writes too; they fail only if run). */
export function prepareStatements(db: DatabaseSync): Statements {
  return {
    // IMMEDIATE takes the write lock at once, so a reader beside us cannot make COMMIT busy.
    begin: db.prepare("BEGIN IMMEDIATE"),
    commit: db.prepare("COMMIT"),
    insertMessage: db.prepare(`${INSERT_MESSAGES} ${MESSAGE_ROW}`),
    insertMessages: db.prepare(
      `${INSERT_MESSAGES} ${new Array(ROWS_PER_INSERT).fill(MESSAGE_ROW).join(", ")}`,
    ),
    updatePartition: db.prepare(
      "UPDATE partitions SET next_offset = ?, bytes = ? WHERE topic_id = ? AND partition = ?",
    ),
    pollMessages: db.prepare(
      `SELECT message_offset, timestamp_micros, headers, payload FROM messages
       WHERE topic_id = ? AND partition = ? AND message_offset >= ?
       ORDER BY message_offset LIMIT ?`,
    ),
    selectNextOffset: db.prepare(
      "SELECT next_offset FROM partitions WHERE topic_id = ? AND partition = ?",
    ),
    upsertConsumerOffset: db.prepare(
      `INSERT INTO consumer_offsets (consumer, topic_id, partition, consumer_offset)
       VALUES (?, ?, ?, ?)
       ON CONFLICT (consumer, topic_id, partition) DO UPDATE SET consumer_offset = excluded.consumer_offset`,
    ),
    selectConsumerOffset: db.prepare(
      `SELECT consumer_offset FROM consumer_offsets
       WHERE consumer = ? AND topic_id = ? AND partition = ?`,
    ),
    selectHead: db.prepare(
      `SELECT message_offset, timestamp_micros, size FROM messages
       WHERE topic_id = ? AND partition = ? ORDER BY message_offset LIMIT ?`,
    ),
    deleteBelow: db.prepare(
      "DELETE FROM messages WHERE topic_id = ? AND partition = ? AND message_offset < ?",
    ),
    updatePartitionBytes: db.prepare(
      "UPDATE partitions SET bytes = ? WHERE topic_id = ? AND partition = ?",
    ),
  };
}
