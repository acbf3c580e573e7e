/**
 * Settings and counters of the embedded backend.
 *
 * @module
 */
import type { UserConfig } from "../../config/types.ts";
import type { WallClock } from "../../base/wall_clock.ts";

/**
 * Forward mode: what a consumer (the forwarder) has not stored its offset past is kept by
 * retention until the store is full; then `whenFull` decides.
 */
export interface ForwardRetention {
  /** The consumer whose stored offset is the last forwarded message of each partition. */
  readonly consumer: string;
  /**
   * Full store: keep unforwarded messages and refuse appends, or drop the oldest of them (the
   * forwarder finds the gap when it reads on, and reports it).
   */
  readonly whenFull: "refuse" | "drop_oldest";
}

/** Settings of the embedded backend (from `[embedded]`, `[log]`, `[limits]` and `users`). */
export interface EmbeddedOptions {
  /**
   * SQLite catalog file; the message log's segments go in the directory `<path>-log`.
   * ":memory:" (tests) keeps both in memory. Parent directories are created.
   */
  readonly path: string;
  /** Users that authenticate() checks (salted hashes, `verifyPassword`). */
  readonly users: readonly UserConfig[];
  /**
   * Bound on the message log's segments together (and on the catalog file); appends then fail
   * with BackendError("full").
   */
  readonly maxStoreBytes: number;
  /**
   * The largest message accepted (`limits.max_packet_bytes`): /ready says the store is full
   * while the log has no room for one (at most one segment is asked for). Absent: one segment.
   */
  readonly maxMessageBytes?: number;
  /** Messages older than this are deleted; 0 keeps them forever. */
  readonly retentionMaxAgeSeconds: number;
  /** Oldest messages of a topic beyond this many bytes (payload + headers) are deleted; 0 = unbounded. */
  readonly retentionMaxTopicBytes: number;
  /** How often retention runs, ms. */
  readonly retentionIntervalMs: number;
  /** At most this many messages per transaction. */
  readonly maxAppendBatch: number;
  /**
   * A transaction of appends nobody waits for (`syncLater`) is confirmed once written and
   * synced by the next one someone waits for or within this many ms; 0 (or absent) syncs each.
   */
  readonly qos0SyncMs?: number;
  /** How long a small transaction someone waits for lingers for others to share its fsync
   * (_commit_syncs.ts); 0 (or absent) fsyncs each at once. */
  readonly commitLingerMs?: number;
  /** Opens the file read-only (the `read` CLI beside a running gateway; WAL allows it). */
  readonly readOnly?: boolean;
  /**
   * Where the catalog's statements (consumer offsets, topic creation, floors) run: "worker"
   * (off the event loop) or "in-process" (no thread hop). No default here: the one default is
   * `embedded.writer_thread` in the config schema. Unused when `readOnly`. Messages go to the
   * message log on the main thread either way.
   */
  readonly writerThread: "worker" | "in-process";
  /** Forward mode's hold on retention; absent = retention by the limits alone. */
  readonly forward?: ForwardRetention;
  /** Clock for append timestamps and retention, µs since the epoch; tests inject one. */
  readonly clock?: () => number;
  /**
   * What age retention counts by: its now, and a stored timestamp moved by the wall clock's
   * forward steps since it was written (default: the process's `wallClock`).
   */
  readonly ageClock?: Pick<WallClock, "nowMicros" | "correctedMicros">;
  /**
   * Starts the catalog writer's worker from its module URL; default `new Worker(url)`. Tests
   * inject one that keeps the worker, to post it a request it does not know (its crash path).
   */
  readonly startWorker?: (url: URL) => Worker;
}

/** Counters for tests and metrics. */
export interface EmbeddedStats {
  /** Group commits written and synced. */
  readonly commits: number;
  /** Messages committed. */
  readonly appended: number;
  /**
   * Where the writer runs: "worker" (commits off the event loop), "in-process" when a worker
   * could not be used (`writerReason` says why), "none" when read-only or not open.
   */
  readonly writerThread: "worker" | "in-process" | "none";
  readonly writerReason?: string;
}

/** Append timestamps: wall-clock µs since the epoch (Iggy's unit), as the clock reads. */
export const wallClockMicros = (): number => Date.now() * 1000;
