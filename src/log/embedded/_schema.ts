/**
 * Opening the SQLite file: pragmas for durability and the size bound, and the tables.
 *
 * Data model (Iggy's, DESIGN §6): streams ⊃ topics (with a partition count) ⊃ partitions
 * (0-based) ⊃ messages with per-partition offsets from 0; consumer offsets keyed by
 * (consumer, topic, partition). Names identify streams/topics at the port; numeric ids stay
 * inside this folder.
 *
 * @module
 */
import { mkdirSync } from "node:fs";
import { dirname } from "node:path";
import { DatabaseSync } from "node:sqlite";

/** Bumped when the tables change; an older file is refused rather than misread. */
const SCHEMA_VERSION = 1;

/** Cap on the WAL file after a checkpoint, so the journal does not keep a burst's size. */
const WAL_SIZE_LIMIT_BYTES = 64 * 1024 * 1024;

// Messages and partition rows are WITHOUT ROWID tables keyed by (topic, partition, offset):
// one b-tree insert per message instead of a rowid table plus an index. Columns read by
// retention (timestamp, size) come before the blobs so scanning them skips overflow pages.
const TABLES = `
CREATE TABLE IF NOT EXISTS streams (
  id INTEGER PRIMARY KEY,
  name TEXT NOT NULL UNIQUE,
  created_micros INTEGER NOT NULL
);
CREATE TABLE IF NOT EXISTS topics (
  id INTEGER PRIMARY KEY,
  stream_id INTEGER NOT NULL REFERENCES streams (id),
  name TEXT NOT NULL,
  partitions INTEGER NOT NULL,
  message_expiry_micros INTEGER NOT NULL,
  max_topic_bytes INTEGER NOT NULL,
  created_micros INTEGER NOT NULL,
  UNIQUE (stream_id, name)
);
CREATE TABLE IF NOT EXISTS partitions (
  topic_id INTEGER NOT NULL,
  partition INTEGER NOT NULL,
  next_offset INTEGER NOT NULL,
  bytes INTEGER NOT NULL,
  PRIMARY KEY (topic_id, partition)
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS messages (
  topic_id INTEGER NOT NULL,
  partition INTEGER NOT NULL,
  message_offset INTEGER NOT NULL,
  timestamp_micros INTEGER NOT NULL,
  size INTEGER NOT NULL,
  headers BLOB NOT NULL,
  payload BLOB NOT NULL,
  PRIMARY KEY (topic_id, partition, message_offset)
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS consumer_offsets (
  consumer TEXT NOT NULL,
  topic_id INTEGER NOT NULL,
  partition INTEGER NOT NULL,
  consumer_offset INTEGER NOT NULL,
  PRIMARY KEY (consumer, topic_id, partition)
) WITHOUT ROWID;
`;

/**
 * Opens (creating if needed) the store. Throws a plain Error with the reason; the caller words
 * it for the operator.
 */
export function openDatabase(path: string, maxStoreBytes: number, readOnly: boolean): DatabaseSync {
  if (path !== ":memory:" && !readOnly) mkdirSync(dirname(path), { recursive: true });
  const db = new DatabaseSync(path, { readOnly });
  try {
    if (readOnly) {
      checkVersion(db, false);
      // A reader beside the running gateway: wait for its short write locks instead of failing.
      db.exec("PRAGMA busy_timeout = 5000");
      return db;
    }
    // WAL: readers (the `read` CLI) run beside the writer. synchronous = FULL: the WAL is
    // fsynced at every COMMIT, so a resolved append is on disk (DESIGN §6, PUBACK after commit).
    db.exec("PRAGMA journal_mode = WAL");
    db.exec("PRAGMA synchronous = FULL");
    db.exec("PRAGMA busy_timeout = 5000");
    db.exec(`PRAGMA journal_size_limit = ${WAL_SIZE_LIMIT_BYTES}`);
    db.exec("PRAGMA foreign_keys = ON");
    setMaxStoreBytes(db, maxStoreBytes);
    checkVersion(db, true);
    return db;
  } catch (e) {
    db.close();
    throw e;
  }
}

/**
 * Bounds the database file: SQLite then fails writes with SQLITE_FULL instead of growing.
 * Pages freed by retention are reused, so the bound holds without VACUUM. (The WAL beside it is
 * bounded separately by checkpoints and `journal_size_limit`.)
 */
export function setMaxStoreBytes(db: DatabaseSync, maxStoreBytes: number): void {
  const { page_size: pageSize } = db.prepare("PRAGMA page_size").get() as { page_size: number };
  const pages = Math.max(1, Math.floor(maxStoreBytes / pageSize));
  db.exec(`PRAGMA max_page_count = ${pages}`);
}

function checkVersion(db: DatabaseSync, create: boolean): void {
  const { user_version: version } = db.prepare("PRAGMA user_version").get() as {
    user_version: number;
  };
  if (version === SCHEMA_VERSION) return;
  if (version !== 0) {
    throw new Error(`schema version ${version} is not ${SCHEMA_VERSION}`);
  }
  if (!create) throw new Error("not an embedded store (no tables)");
  db.exec("BEGIN");
  try {
    db.exec(TABLES);
    db.exec(`PRAGMA user_version = ${SCHEMA_VERSION}`);
    db.exec("COMMIT");
  } catch (e) {
    if (db.isTransaction) db.exec("ROLLBACK");
    throw e;
  }
}
