/**
 * The embedded log backend: Iggy's data model in a message log of preallocated segment files
 * (_message_log.ts) beside a SQLite catalog file through Deno's built-in `node:sqlite`
 * (DESIGN §6). The default backend, so the gateway runs with nothing else.
 *
 * @module
 */
import type { DatabaseSync } from "node:sqlite";
import type { UserConfig } from "../../config/types.ts";
import { verifyPassword } from "../../access/password.ts";
import {
  type AppendListener,
  type AppendReceipt,
  type AppendRequest,
  type AuthResult,
  BackendError,
  type BackendHealth,
  type CreateTopicOptions,
  type LogBackend,
  type PartitionAddress,
  type StoredMessage,
  type TopicInfo,
} from "../port.ts";
import { loadHashes } from "../../base/xxhash.ts";
import { Catalog, loadFloors, topicInfo, type TopicState } from "./_catalog.ts";
import { isStoreFull, toBackendError } from "./_errors.ts";
import { GroupCommit, type GroupCommitStats } from "./_group_commit.ts";
import { MessageLog } from "./_message_log.ts";
import { runRetentionPass } from "./_retention.ts";
import { openDatabase } from "./_schema.ts";
import { prepareReadStatements, type ReadStatements } from "./_statements.ts";
import { AppendSignals } from "./_signals.ts";
import { dummyPasswordHash, validateName } from "./_validate.ts";
import { WriterLink } from "./_writer_link.ts";
import type { EmbeddedOptions, EmbeddedStats } from "./options.ts";

/** The writing side: absent in read-only mode. */
interface WriteSide {
  readonly link: WriterLink;
  readonly commits: GroupCommit;
  readonly timer: ReturnType<typeof setInterval>;
}

interface OpenState {
  /** The main thread's reading connection (the writer's own for ":memory:"). */
  readonly db: DatabaseSync;
  readonly log: MessageLog;
  readonly reads: ReadStatements;
  readonly catalog: Catalog;
  readonly writer: WriteSide | undefined;
}

/**
 * The embedded backend. See {@link EmbeddedOptions}.
 *
 * Messages are appended to the message log by the group commit (_group_commit.ts) on this
 * thread, its fsyncs off the event loop; polls read the log here. Catalog writes (consumer
 * offsets, topic creation, floors) run in a writer Worker (_writer.ts); consumer offsets are
 * read here on a read-only connection to the same WAL-mode file. Read-only mode (the `read`
 * CLI) starts no writer and scans what the writer added to the log before each read.
 */
export class EmbeddedBackend implements LogBackend {
  readonly kind = "embedded";
  readonly #options: EmbeddedOptions;
  #users: ReadonlyMap<string, UserConfig>;
  readonly #signals = new AppendSignals();
  readonly #clock: () => number;
  #state: OpenState | undefined;
  #phase: "new" | "open" | "closed" = "new";
  #closing: Promise<void> | undefined;
  /** Set when an append failed with "full"; cleared by the next successful commit. */
  #full = false;
  /** Why the last append failed (other than full), until a later commit succeeds. */
  #appendFailure: string | undefined;
  /** Set when the writer died; the backend stays unavailable until reopened. */
  #writerFailure: BackendError | undefined;
  #retention: Promise<number> | undefined;
  #retentionStopped = false;
  #lastStats: GroupCommitStats = { commits: 0, appended: 0 };

  constructor(options: EmbeddedOptions) {
    this.#options = options;
    this.#clock = options.clock ?? wallClockMicros;
    this.#users = new Map(options.users.map((u) => [u.username, u]));
  }

  /**
   * Replaces the configured users (SIGHUP reload). Takes effect for the next CONNECT;
   * connections keep the permissions they were granted.
   */
  setUsers(users: readonly UserConfig[]): void {
    this.#users = new Map(users.map((u) => [u.username, u]));
  }

  /** Opens (creating if missing) the store; rejects with BackendError("unavailable"). */
  async open(): Promise<void> {
    if (this.#phase === "open") return;
    const { path, maxStoreBytes, readOnly = false } = this.#options;
    let link: WriterLink | undefined;
    let db: DatabaseSync | undefined;
    let log: MessageLog | undefined;
    try {
      await loadHashes(); // the log's record checksums
      // The writer first: it creates the file and the tables the reader then opens.
      if (!readOnly) {
        link = await WriterLink.start(
          path,
          maxStoreBytes,
          (e) => this.#writerFailed(e),
          this.#options.writerThread,
        );
      }
      db = link?.inlineDb ?? openDatabase(path, maxStoreBytes, true);
      const reads = prepareReadStatements(db);
      const catalog = new Catalog(db);
      catalog.load();
      log = await MessageLog.open({
        dir: path === ":memory:" ? path : `${path}-log`,
        maxBytes: maxStoreBytes,
        readOnly,
        floors: loadFloors(db),
      });
      this.#retentionStopped = false;
      this.#state = { db, log, reads, catalog, writer: link && this.#writeSide(link, log) };
      this.#writerFailure = undefined;
      this.#closing = undefined;
      this.#phase = "open";
    } catch (e) {
      await log?.close();
      if (db && db !== link?.inlineDb) db.close();
      await link?.close().catch(() => {});
      const reason = e instanceof Error ? e.message : String(e);
      throw new BackendError("unavailable", `Cannot open embedded store "${path}": ${reason}`, {
        cause: e,
      });
    }
  }

  /**
   * Commits pending appends (they resolve), stops retention, stops the writer, closes the
   * file. Idempotent.
   */
  close(): Promise<void> {
    this.#closing ??= this.#close();
    return this.#closing;
  }

  async #close(): Promise<void> {
    const state = this.#state;
    this.#phase = "closed";
    if (!state) return;
    this.#state = undefined;
    const writer = state.writer;
    if (writer) {
      clearInterval(writer.timer);
      // A retention pass stops at its next chunk boundary.
      this.#retentionStopped = true;
      await this.#retention?.catch(() => 0);
      await writer.commits.drain();
      this.#lastStats = { ...writer.commits.stats };
    }
    await state.log.close();
    await writer?.link.close().catch(() => {});
    if (state.db !== writer?.link.inlineDb) state.db.close();
  }

  /** Ready when open and not full. */
  health(): BackendHealth {
    const { path, maxStoreBytes } = this.#options;
    if (this.#phase === "new") {
      return { ready: false, reason: `Embedded store "${path}" is not open` };
    }
    if (this.#phase === "closed") {
      return { ready: false, reason: `Embedded store "${path}" is closed` };
    }
    if (this.#writerFailure) return { ready: false, reason: this.#writerFailure.message };
    if (this.#full) {
      return {
        ready: false,
        reason: `Embedded store "${path}" is full (max_store_bytes ${maxStoreBytes}); ` +
          "appends fail until retention frees room or the bound is raised",
      };
    }
    if (this.#appendFailure !== undefined) {
      return { ready: false, reason: `Appends are failing: ${this.#appendFailure}` };
    }
    return { ready: true };
  }

  /** Checks a configured user's password; unknown users cost the same hash work as known ones. */
  async authenticate(username: string, password: string): Promise<AuthResult> {
    const user = this.#users.get(username);
    const ok = await verifyPassword(
      password,
      user?.passwordHash ?? dummyPasswordHash(this.#options.users),
    );
    if (!user || !ok) return { ok: false, reason: "bad_credentials" };
    return { ok: true, principal: { username: user.username, permissions: user.permissions } };
  }

  getTopic(stream: string, topic: string): Promise<TopicInfo | null> {
    return this.#run("read topic", () => {
      const state = this.#topic(stream, topic);
      return state ? topicInfo(state) : null;
    });
  }

  async createTopic(
    stream: string,
    topic: string,
    options: CreateTopicOptions,
  ): Promise<TopicInfo> {
    const action = `create topic "${stream}/${topic}"`;
    const s = this.#state;
    if (!s) throw this.#closedError(action);
    validateName("stream", stream);
    validateName("topic", topic);
    if (!Number.isInteger(options.partitions) || options.partitions < 1) {
      throw new BackendError(
        "invalid",
        `Cannot create topic "${stream}/${topic}": partitions must be ≥ 1`,
      );
    }
    const known = this.#topic(stream, topic);
    if (known) return topicInfo(known);
    const writer = this.#writer(action);
    try {
      await writer.link.request({
        type: "createTopic",
        stream,
        topic,
        options: {
          partitions: options.partitions,
          messageExpiryMicros: options.messageExpiryMicros,
          maxTopicBytes: options.maxTopicBytes,
        },
        nowMicros: this.#clock(),
        minId: s.log.maxTopicId() + 1,
      });
      // On disk before any message names it: the log refers to topics by id.
      await writer.link.syncCommitted();
    } catch (e) {
      throw toBackendError(action, this.#options.path, e);
    }
    // Concurrent creates of one topic: keep the first state object (appends hold it).
    const state = s.catalog.get(stream, topic) ?? s.catalog.reload(stream, topic);
    if (!state) {
      throw new BackendError("unavailable", `Cannot ${action}: the writer did not create it`);
    }
    return topicInfo(state);
  }

  /**
   * Queues the append for the next group commit; `onCommitted` runs once it is written (the
   * messages are then readable), the promise resolves once it is on disk.
   */
  append(request: AppendRequest): Promise<AppendReceipt> {
    let state: TopicState;
    let writer: WriteSide;
    try {
      writer = this.#writer("append");
      state = this.#partition(request, "append to");
    } catch (e) {
      return Promise.reject(e);
    }
    const { messages } = request;
    if (messages.length === 0) {
      return Promise.reject(
        new BackendError("invalid", "Cannot append: the batch has no messages"),
      );
    }
    for (let i = 0; i < messages.length; i++) {
      if (messages[i].payload.length === 0) {
        return Promise.reject(new BackendError("invalid", "Cannot append: a payload is empty"));
      }
    }
    return new Promise((resolve, reject) => {
      writer.commits.enqueue({
        state,
        partition: request.partition,
        messages,
        onCommitted: request.onCommitted,
        resolve: (baseOffset) => resolve({ baseOffset }),
        reject,
      });
    });
  }

  poll(address: PartitionAddress, fromOffset: number, count: number): Promise<StoredMessage[]> {
    return this.#run("poll", (s) => {
      const state = this.#partition(address, "poll");
      // Read-only: the writer is another process; scan what it added first.
      if (!s.writer) s.log.refresh();
      return s.log.read(state.id, address.partition, fromOffset, count);
    });
  }

  nextOffset(address: PartitionAddress): Promise<number> {
    return this.#run("read next offset", (s) => {
      const state = this.#partition(address, "read next offset of");
      if (!s.writer) s.log.refresh();
      return s.log.partition(state.id, address.partition).next;
    });
  }

  /** Stores the offset in the catalog; resolves once it is on disk. */
  storeOffset(consumer: string, address: PartitionAddress, offset: number): Promise<void> {
    const action = "store consumer offset";
    try {
      const writer = this.#writer(action);
      const state = this.#partition(address, "store consumer offset on");
      if (!Number.isSafeInteger(offset) || offset < 0) {
        throw new BackendError("invalid", `Cannot store consumer offset ${offset}: not an offset`);
      }
      return writer.commits.storeOffset(consumer, state, address.partition, offset).catch((e) => {
        throw toBackendError(action, this.#options.path, e);
      });
    } catch (e) {
      return Promise.reject(toBackendError(action, this.#options.path, e));
    }
  }

  getOffset(consumer: string, address: PartitionAddress): Promise<number | null> {
    return this.#run("read consumer offset", (s) => {
      const state = this.#partition(address, "read consumer offset of");
      const row = s.reads.selectConsumerOffset.get(consumer, state.id, address.partition) as
        | { consumer_offset: number }
        | undefined;
      return row?.consumer_offset ?? null;
    });
  }

  onAppend(listener: AppendListener): () => void {
    return this.#signals.add(listener);
  }

  /**
   * Runs one retention pass now, as of `now` (µs; tests pass one); the timer calls it too.
   * Drops what the limits say in the log, stores every partition's floors, then deletes the
   * segments nothing needs any more. Resolves with the number of messages dropped.
   */
  async runRetention(now: number = this.#clock()): Promise<{ deleted: number }> {
    while (this.#retention) await this.#retention.catch(() => 0);
    const s = this.#state;
    const writer = s?.writer;
    if (!s || !writer) return { deleted: 0 };
    this.#retention = this.#retentionPass(s, writer, now);
    try {
      return { deleted: await this.#retention };
    } catch (e) {
      throw toBackendError("run retention", this.#options.path, e);
    } finally {
      this.#retention = undefined;
    }
  }

  async #retentionPass(s: OpenState, writer: WriteSide, now: number): Promise<number> {
    const { retentionMaxAgeSeconds, retentionMaxTopicBytes } = this.#options;
    const deleted = await runRetentionPass(
      s.log,
      s.catalog.topics(),
      { maxAgeMicros: retentionMaxAgeSeconds * 1_000_000, maxTopicBytes: retentionMaxTopicBytes },
      now,
      () => this.#retentionStopped,
    );
    if ((deleted > 0 || s.log.hasRetainedOut()) && !this.#retentionStopped) {
      // Floors first: the dropped batches stay on disk until their segment goes (a reopened
      // log must skip them), and once a segment is gone only the floors say how far each
      // partition's offsets went.
      const floors: [number, number, number, number][] = [];
      for (const p of s.log.partitions()) floors.push([p.topicId, p.partition, p.start, p.next]);
      await writer.link.request({ type: "floors", floors });
      await writer.link.syncCommitted();
      await s.log.deleteRetainedOut();
    }
    return deleted;
  }

  /** Transactions committed and messages appended since open (kept after close). */
  stats(): EmbeddedStats {
    const writer = this.#state?.writer;
    const commits = writer?.commits.stats ?? this.#lastStats;
    const mode = writer?.link.mode;
    return {
      commits: commits.commits,
      appended: commits.appended,
      listenerErrors: this.#signals.errors,
      writerThread: mode?.thread ?? "none",
      ...(mode?.reason ? { writerReason: mode.reason } : {}),
    };
  }

  /** For tests: makes the writer worker fail as a crash would. */
  crashWriterForTest(): void {
    this.#state?.writer?.link.crashForTest();
  }

  #writeSide(link: WriterLink, log: MessageLog): WriteSide {
    const commits = new GroupCommit(
      link,
      log,
      this.#options.maxAppendBatch,
      this.#clock,
      (grown) => this.#signals.emit(grown),
      (e) => this.#appendError(e),
      // Healthy again only once a transaction is on disk, not merely committed: a disk that
      // fails every fsync must keep /ready at 503.
      () => {
        this.#full = false;
        this.#appendFailure = undefined;
      },
    );
    const timer = setInterval(() => {
      // A failing pass (e.g. disk I/O error) is retried next interval; appends report health.
      if (!this.#retention) this.runRetention().catch(() => {});
    }, Math.max(1, this.#options.retentionIntervalMs));
    return { link, commits, timer };
  }

  /** The writer died: everything queued fails now, and health says why until reopened. */
  #writerFailed(error: BackendError): void {
    this.#writerFailure = error;
    this.#state?.writer?.commits.failAll(error);
  }

  /** The write side, or the error a write gets: closed, read-only, or writer stopped. */
  #writer(action: string): WriteSide {
    const s = this.#state;
    if (!s) throw this.#closedError(action);
    if (!s.writer) {
      throw new BackendError(
        "invalid",
        `Cannot ${action}: embedded store "${this.#options.path}" is open read-only`,
      );
    }
    if (this.#writerFailure) throw this.#writerFailure;
    return s.writer;
  }

  /** Topic lookup; a read-only store re-reads the table because the writer is elsewhere. */
  #topic(stream: string, topic: string): TopicState | undefined {
    const s = this.#state!;
    return s.writer ? s.catalog.get(stream, topic) : s.catalog.reload(stream, topic);
  }

  /** The topic of an address, or BackendError("not_found") naming what is missing. */
  #partition(address: PartitionAddress, action: string): TopicState {
    const { stream, topic, partition } = address;
    const state = this.#topic(stream, topic);
    if (!state) {
      throw new BackendError(
        "not_found",
        `Cannot ${action} "${stream}/${topic}": no such stream or topic`,
      );
    }
    if (!Number.isInteger(partition) || partition < 0 || partition >= state.partitions) {
      throw new BackendError(
        "not_found",
        `Cannot ${action} "${stream}/${topic}": partition ${partition} does not exist (${state.partitions} partitions)`,
      );
    }
    return state;
  }

  /** Runs a synchronous database action as a promise with the port's errors. */
  #run<T>(action: string, fn: (s: OpenState) => T): Promise<T> {
    const s = this.#state;
    if (!s) return Promise.reject(this.#closedError(action));
    try {
      return Promise.resolve(fn(s));
    } catch (e) {
      return Promise.reject(toBackendError(action, this.#options.path, e));
    }
  }

  #appendError(e: unknown): BackendError {
    const error = toBackendError("append", this.#options.path, e);
    if (isStoreFull(e)) this.#full = true;
    else this.#appendFailure = error.message;
    return error;
  }

  #closedError(action: string): BackendError {
    const what = this.#phase === "new" ? "is not open" : "is closed";
    return new BackendError(
      "unavailable",
      `Cannot ${action}: embedded store "${this.#options.path}" ${what}`,
    );
  }
}

/** Wall-clock time in microseconds since the epoch (Iggy's timestamp unit). */
function wallClockMicros(): number {
  return Date.now() * 1000;
}
