/**
 * The embedded log backend: Iggy's data model on one SQLite file through Deno's built-in
 * `node:sqlite` (DESIGN §6). The default backend, so the gateway runs with nothing else.
 *
 * @module
 */
import type { DatabaseSync } from "node:sqlite";
import type { UserConfig } from "../../config/types.ts";
import { verifyPassword } from "../../session/password.ts";
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
import { Catalog, topicInfo, type TopicState } from "./_catalog.ts";
import { isStoreFull, toBackendError } from "./_errors.ts";
import { GroupCommit, type GroupCommitStats } from "./_group_commit.ts";
import { readMessages } from "./_reads.ts";
import { runRetentionPass } from "./_retention.ts";
import { openDatabase } from "./_schema.ts";
import { prepareStatements, type Statements } from "./_statements.ts";
import { AppendSignals } from "./_signals.ts";
import { dummyPasswordHash, validateName } from "./_validate.ts";
import type { EmbeddedOptions, EmbeddedStats } from "./options.ts";

interface OpenState {
  readonly db: DatabaseSync;
  readonly stmts: Statements;
  readonly catalog: Catalog;
  readonly commits: GroupCommit;
  readonly timer: ReturnType<typeof setInterval> | undefined;
}

/** The embedded backend. See {@link EmbeddedOptions}. */
export class EmbeddedBackend implements LogBackend {
  readonly kind = "embedded";
  readonly #options: EmbeddedOptions;
  readonly #users: ReadonlyMap<string, UserConfig>;
  readonly #signals = new AppendSignals();
  readonly #clock: () => number;
  #state: OpenState | undefined;
  #phase: "new" | "open" | "closed" = "new";
  /** Set when an append failed with "full"; cleared by the next successful commit. */
  #full = false;
  #retention: Promise<number> | undefined;
  #lastStats: GroupCommitStats = { commits: 0, appended: 0 };

  constructor(options: EmbeddedOptions) {
    this.#options = options;
    this.#clock = options.clock ?? wallClockMicros;
    this.#users = new Map(options.users.map((u) => [u.username, u]));
  }

  /** Opens (creating if missing) the store; rejects with BackendError("unavailable"). */
  open(): Promise<void> {
    if (this.#phase === "open") return Promise.resolve();
    const { path, maxStoreBytes, readOnly = false } = this.#options;
    let db: DatabaseSync | undefined;
    try {
      db = openDatabase(path, maxStoreBytes, readOnly);
      const stmts = prepareStatements(db);
      const catalog = new Catalog(db);
      catalog.load();
      const commits = new GroupCommit(
        db,
        stmts,
        this.#options.maxAppendBatch,
        this.#clock,
        (grown) => {
          this.#full = false;
          this.#signals.emit(grown);
        },
        (e) => this.#appendError(e),
      );
      this.#state = {
        db,
        stmts,
        catalog,
        commits,
        timer: readOnly ? undefined : this.#startTimer(),
      };
      this.#phase = "open";
      return Promise.resolve();
    } catch (e) {
      db?.close();
      const reason = e instanceof Error ? e.message : String(e);
      return Promise.reject(
        new BackendError("unavailable", `Cannot open embedded store "${path}": ${reason}`, {
          cause: e,
        }),
      );
    }
  }

  /** Commits pending appends (they resolve), stops retention, closes the file. Idempotent. */
  async close(): Promise<void> {
    const state = this.#state;
    this.#phase = "closed";
    if (!state) return;
    this.#state = undefined;
    clearInterval(state.timer);
    state.commits.flushAll();
    this.#lastStats = { ...state.commits.stats };
    // A retention pass stops at its next chunk boundary once #state is gone.
    await this.#retention?.catch(() => 0);
    state.db.close();
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
    if (this.#full) {
      return {
        ready: false,
        reason: `Embedded store "${path}" is full (max_store_bytes ${maxStoreBytes}); ` +
          "appends fail until retention frees room or the bound is raised",
      };
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

  createTopic(stream: string, topic: string, options: CreateTopicOptions): Promise<TopicInfo> {
    return this.#run(`create topic "${stream}/${topic}"`, (s) => {
      validateName("stream", stream);
      validateName("topic", topic);
      if (!Number.isInteger(options.partitions) || options.partitions < 1) {
        throw new BackendError(
          "invalid",
          `Cannot create topic "${stream}/${topic}": partitions must be ≥ 1`,
        );
      }
      return topicInfo(s.catalog.create(stream, topic, options, this.#clock()));
    });
  }

  /** Queues the append for the next group commit; resolves after its COMMIT. */
  append(request: AppendRequest): Promise<AppendReceipt> {
    const s = this.#state;
    if (!s) return Promise.reject(this.#closedError("append"));
    if (this.#options.readOnly) {
      return Promise.reject(
        new BackendError(
          "invalid",
          `Cannot append: embedded store "${this.#options.path}" is open read-only`,
        ),
      );
    }
    let state: TopicState;
    try {
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
      s.commits.enqueue({
        state,
        partition: request.partition,
        messages,
        resolve: (baseOffset) => resolve({ baseOffset }),
        reject,
      });
    });
  }

  poll(address: PartitionAddress, fromOffset: number, count: number): Promise<StoredMessage[]> {
    return this.#run("poll", (s) => {
      const state = this.#partition(address, "poll");
      return readMessages(s.stmts, state, address.partition, fromOffset, count);
    });
  }

  nextOffset(address: PartitionAddress): Promise<number> {
    return this.#run("read next offset", (s) => {
      const state = this.#partition(address, "read next offset of");
      if (!this.#options.readOnly) return state.committedNext[address.partition];
      // Read-only: the writer is another process; ask the table.
      const row = s.stmts.selectNextOffset.get(state.id, address.partition) as {
        next_offset: number;
      } | undefined;
      return row?.next_offset ?? 0;
    });
  }

  storeOffset(consumer: string, address: PartitionAddress, offset: number): Promise<void> {
    return this.#run("store consumer offset", (s) => {
      const state = this.#partition(address, "store consumer offset on");
      if (!Number.isSafeInteger(offset) || offset < 0) {
        throw new BackendError("invalid", `Cannot store consumer offset ${offset}: not an offset`);
      }
      s.stmts.upsertConsumerOffset.run(consumer, state.id, address.partition, offset);
    });
  }

  getOffset(consumer: string, address: PartitionAddress): Promise<number | null> {
    return this.#run("read consumer offset", (s) => {
      const state = this.#partition(address, "read consumer offset of");
      const row = s.stmts.selectConsumerOffset.get(consumer, state.id, address.partition) as
        | { consumer_offset: number }
        | undefined;
      return row?.consumer_offset ?? null;
    });
  }

  onAppend(listener: AppendListener): () => void {
    return this.#signals.add(listener);
  }

  /** Runs one retention pass now, as of `now` (µs; tests pass one). The timer calls it too. */
  async runRetention(now: number = this.#clock()): Promise<{ deleted: number }> {
    while (this.#retention) await this.#retention.catch(() => 0);
    const s = this.#state;
    if (!s || this.#options.readOnly) return { deleted: 0 };
    const { retentionMaxAgeSeconds, retentionMaxTopicBytes } = this.#options;
    const stopped = () => this.#state !== s;
    this.#retention = runRetentionPass(
      s.db,
      s.stmts,
      s.catalog.topics(),
      {
        maxAgeMicros: retentionMaxAgeSeconds * 1_000_000,
        maxTopicBytes: retentionMaxTopicBytes,
      },
      now,
      stopped,
    );
    try {
      return { deleted: await this.#retention };
    } catch (e) {
      throw toBackendError("run retention", this.#options.path, e);
    } finally {
      this.#retention = undefined;
    }
  }

  /** Transactions committed and messages appended since open (kept after close). */
  stats(): EmbeddedStats {
    const commits = this.#state?.commits.stats ?? this.#lastStats;
    return {
      commits: commits.commits,
      appended: commits.appended,
      listenerErrors: this.#signals.errors,
    };
  }

  #startTimer(): ReturnType<typeof setInterval> {
    return setInterval(() => {
      // A failing pass (e.g. disk I/O error) is retried next interval; appends report health.
      if (!this.#retention) this.runRetention().catch(() => {});
    }, Math.max(1, this.#options.retentionIntervalMs));
  }

  /** Topic lookup; a read-only store re-reads the table because the writer is elsewhere. */
  #topic(stream: string, topic: string): TopicState | undefined {
    const s = this.#state!;
    return this.#options.readOnly ? s.catalog.reload(stream, topic) : s.catalog.get(stream, topic);
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
    if (isStoreFull(e)) this.#full = true;
    return toBackendError("append", this.#options.path, e);
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
