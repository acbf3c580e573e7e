/**
 * Opening the SQLite file: pragmas for durability and the size bound, and the tables.
 *
 * Data model (Iggy's): streams ⊃ topics (with a partition count) ⊃ partitions
 * (0-based) ⊃ messages with per-partition offsets from 0; consumer offsets keyed by
 * (consumer, topic, partition). Names identify streams/topics at the port; numeric ids stay
 * inside this folder.
 *
 * @module
 */
import { DatabaseSync } from "node:sqlite";
import { directoryOf } from "../durable_file.ts";

/**
 * Bumped when the tables change; a file of another version is refused rather than misread
 * (nothing is migrated). 1: one row per message (no `meta` table, version in `user_version`);
 * 2: one row per stored batch (_batch.ts); 3: messages in the message log beside the file
 * (_message_log.ts), each partition's floors here.
 */
export const SCHEMA_VERSION = 3;

/** Cap on the WAL file after a checkpoint, so the journal does not keep a burst's size. */
const WAL_SIZE_LIMIT_BYTES = 64 * 1024 * 1024;

// Messages are not here: they are in the message log (_message_log.ts). A partition's row holds
// its floors: the first retained offset and a lower bound of the next offset, stored before
// retention deletes a segment, so neither goes backwards when the log no longer shows them.
const TABLES = `
CREATE TABLE IF NOT EXISTS meta (
  key TEXT PRIMARY KEY,
  value INTEGER NOT NULL
) WITHOUT ROWID;
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
  start_offset INTEGER NOT NULL,
  next_offset INTEGER NOT NULL,
  PRIMARY KEY (topic_id, partition)
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
/** How long the writer waits for a write lock held by another process (ms). */
export const WRITER_BUSY_TIMEOUT_MS = 200;

export function openDatabase(path: string, maxStoreBytes: number, readOnly: boolean): DatabaseSync {
  // Deno.mkdirSync, not node:fs: node:fs and node:path load a sizeable set of Node
  // compatibility modules that nothing else of the gateway needs.
  if (path !== ":memory:" && !readOnly) Deno.mkdirSync(directoryOf(path), { recursive: true });
  const db = new DatabaseSync(path, { readOnly });
  try {
    if (readOnly) {
      checkVersion(db, false);
      // A reader beside the running gateway: wait for its short write locks instead of failing.
      db.exec("PRAGMA busy_timeout = 5000");
      return db;
    }
    // WAL: readers (the `read` CLI) run beside the writer. synchronous = NORMAL: a COMMIT
    // writes the WAL without fsync; the main thread then fsyncs the WAL off the event loop
    // and only then counts a stored offset or a created topic as done (_file_sync.ts).
    // Checkpoints still sync the WAL before and the database file after copying (SQLite's
    // NORMAL rules).
    db.exec("PRAGMA journal_mode = WAL");
    db.exec("PRAGMA synchronous = NORMAL");
    // Short: when another process holds the write lock, an offset store or topic creation fails
    // fast instead of blocking the event loop of an in-process writer for seconds.
    db.exec(`PRAGMA busy_timeout = ${WRITER_BUSY_TIMEOUT_MS}`);
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

/**
 * Accepts a store of {@link SCHEMA_VERSION}, creates the tables in an empty file (when allowed),
 * and refuses anything else with the version it found.
 */
function checkVersion(db: DatabaseSync, create: boolean): void {
  const found = schemaVersion(db);
  if (found === SCHEMA_VERSION) return;
  if (found !== null) {
    throw new Error(
      `it has schema version ${found} and this gateway reads only version ${SCHEMA_VERSION}; ` +
        "move the file aside (it is not migrated)",
    );
  }
  const tables = db.prepare("SELECT count(*) AS n FROM sqlite_master").get() as { n: number };
  if (tables.n > 0) throw new Error("not an embedded store (unknown tables, no schema version)");
  if (!create) throw new Error("not an embedded store (no tables)");
  db.exec("BEGIN IMMEDIATE");
  try {
    db.exec(TABLES);
    db.prepare("INSERT INTO meta (key, value) VALUES ('schema_version', ?)").run(SCHEMA_VERSION);
    db.exec(`PRAGMA user_version = ${SCHEMA_VERSION}`);
    db.exec("COMMIT");
  } catch (e) {
    if (db.isTransaction) db.exec("ROLLBACK");
    throw e;
  }
}

/** The store's schema version: `meta.schema_version`, else `user_version` (version 1), else null. */
function schemaVersion(db: DatabaseSync): number | null {
  const meta = db.prepare(
    "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'meta'",
  ).get();
  if (meta) {
    const row = db.prepare("SELECT value FROM meta WHERE key = 'schema_version'").get() as
      | { value: number }
      | undefined;
    return row?.value ?? -1;
  }
  const { user_version: version } = db.prepare("PRAGMA user_version").get() as {
    user_version: number;
  };
  return version === 0 ? null : version;
}
