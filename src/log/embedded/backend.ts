/**
 * The embedded log backend: Iggy's data model in a message log of preallocated segment files
 * (_message_log.ts) beside a SQLite catalog file through Deno's built-in `node:sqlite`. The
 * default backend, so the gateway runs with nothing else.
 *
 * @module
 */
import type { UserConfig } from "../../config/types.ts";
import { wallClock } from "../../base/wall_clock.ts";
import {
  type AppendReceipt,
  type AppendRequest,
  type AuthResult,
  BackendError,
  type BackendHealth,
  type CreateTopicOptions,
  type EncodedAppendRequest,
  type EncodedMessages,
  type PartitionAddress,
  type StoredMessage,
  type TopicInfo,
} from "../port.ts";
import type { GrowthObserver, LocalLog, PartitionBytes, RetentionObserver } from "../local_log.ts";
import { LogWatchers } from "./_log_watchers.ts";
import { type Catalog, topicInfo, type TopicState } from "./_catalog.ts";
import { isStoreFull, toBackendError } from "./_errors.ts";
import type { GroupCommitStats } from "./_group_commit.ts";
import type { MessageLog } from "./_message_log.ts";
import { partitionBytes, type PartitionLog } from "./_log_index.ts";
import { readEncoded, readMessages } from "./_log_read.ts";
import { decodeEncoded } from "./_batch.ts";
import { openWriteSide, type WriteSide } from "./_write_side.ts";
import { type OpenedStore, openStore } from "./_open_store.ts";
import { EmbeddedUsers } from "./_users.ts";
import { checkAppendBatch, existingPartition, validateName } from "./_validate.ts";
import { noteFullAppend, storeHealth, storeRoom, type WriteTrouble } from "./_health.ts";
import { storedOffset } from "./_forward_room.ts";
import type { WriterLink } from "./_writer_link.ts";
import { DELETED_OFFSET } from "./_writer.ts";
import { type EmbeddedOptions, type EmbeddedStats, wallClockMicros } from "./options.ts";

/** An open store's files (see {@link OpenedStore}) and its write side. */
interface OpenState extends Omit<OpenedStore, "link"> {
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
export class EmbeddedBackend implements LocalLog {
  readonly kind = "embedded";
  readonly #options: EmbeddedOptions;
  readonly #users: EmbeddedUsers;
  readonly #clock: () => number;
  #state: OpenState | undefined;
  #phase: "new" | "open" | "closed" = "new";
  #closing: Promise<void> | undefined;
  /** What is wrong with writes (see {@link WriteTrouble}); the writer's death until reopened. */
  readonly #trouble: WriteTrouble = {};
  #lastStats: GroupCommitStats = { commits: 0, appended: 0 };
  readonly #watchers = new LogWatchers();
  readonly watchRetention = (observe: RetentionObserver) =>
    void (this.#watchers.retention = observe);
  readonly watchGrowth = (observe: GrowthObserver) => this.#watchers.watchGrowth(observe);
  /** The disk has room again, or retention freed some: the next append makes its segment. */
  readonly #roomAgain = () => void (this.#trouble.full = undefined);
  /** Retention left room for a whole segment under the bound: a refusal by it is over too. */
  readonly #roomFreed = () => void (this.#trouble.full = this.#trouble.boundRefused = undefined);

  constructor(options: EmbeddedOptions) {
    this.#options = options;
    this.#clock = options.clock ?? wallClockMicros;
    this.#users = new EmbeddedUsers(options.users);
  }

  /** Replaces the users (SIGHUP); for the next CONNECT (connections keep their rights). */
  setUsers(users: readonly UserConfig[]): void {
    this.#users.set(users);
  }

  /** Opens (creating if missing) the store; rejects with BackendError("unavailable"). */
  async open(): Promise<void> {
    if (this.#phase === "open") return;
    const o = await openStore(this.#options, (e) => this.#writerFailed(e), this.#roomAgain);
    const writer = o.link && this.#writeSide(o.link, o.log, o.catalog);
    this.#state = { db: o.db, log: o.log, reads: o.reads, catalog: o.catalog, writer };
    this.#trouble.writerFailure = undefined;
    this.#closing = undefined;
    this.#phase = "open";
  }

  /** Commits pending appends (they resolve), stops retention and the writer. Idempotent. */
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
      // A retention pass stops at its next chunk boundary.
      await writer.retention.stop();
      await writer.commits.drain();
      this.#lastStats = { ...writer.commits.stats };
    }
    await state.log.close();
    await writer?.link.close().catch(() => {});
    if (state.db !== writer?.link.inlineDb) state.db.close();
  }

  /** Ready when open and no cause of fullness holds (`_health.ts`). */
  health(): BackendHealth {
    const log = this.#state?.writer ? this.#state.log : undefined;
    const room = log && storeRoom(log, this.#options.maxStoreBytes, this.#options.maxMessageBytes);
    return storeHealth(this.#options.path, this.#phase, this.#trouble, room);
  }

  authenticate(username: string, password: string): Promise<AuthResult> {
    return this.#users.authenticate(username, password);
  }
  principalOf(username: string): Promise<AuthResult> {
    return Promise.resolve(this.#users.principalOf(username));
  }

  getTopic(stream: string, topic: string): Promise<TopicInfo | null> {
    return this.#run("read topic", () => {
      const state = this.#topic(stream, topic);
      return state ? topicInfo(state) : null;
    });
  }

  listTopics(): Promise<TopicInfo[]> {
    return this.#run("list topics", (s) => [...s.catalog.topics()].map(topicInfo));
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
      throw new BackendError("invalid", `Cannot ${action}: partitions must be ≥ 1`);
    }
    const known = this.#topic(stream, topic);
    if (known) return topicInfo(known);
    const writer = this.#writer(action);
    const { partitions, messageExpiryMicros, maxTopicBytes } = options;
    try {
      await writer.link.request({
        type: "createTopic",
        stream,
        topic,
        options: { partitions, messageExpiryMicros, maxTopicBytes },
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
    const invalid = checkAppendBatch(messages);
    if (invalid !== null) return Promise.reject(invalid);
    return new Promise((resolve, reject) => {
      writer.commits.enqueue({
        state,
        partition: request.partition,
        messages,
        onCommitted: request.onCommitted,
        syncLater: request.syncLater === true,
        orderGroup: request.orderGroup,
        resolve: (baseOffset) => resolve({ baseOffset }),
        reject,
      });
    });
  }

  poll(address: PartitionAddress, fromOffset: number, count: number): Promise<StoredMessage[]> {
    return this.#run("poll", (s) => {
      const p = this.#log(s, address, "poll");
      return readMessages(s.log, p.topicId, p.partition, fromOffset, count);
    });
  }

  /** Messages still encoded (see {@link LocalLog.pollEncoded}): the forwarder's reads. */
  pollEncoded(
    address: PartitionAddress,
    fromOffset: number,
    count: number,
    maxBytes: number,
  ): Promise<EncodedMessages | null> {
    return this.#run("poll", (s) => {
      const p = this.#log(s, address, "poll");
      return readEncoded(s.log, p.topicId, p.partition, fromOffset, count, maxBytes);
    });
  }

  /** Encoded messages decoded and appended (a forwarder's upstream in tests). */
  appendEncoded(request: EncodedAppendRequest): Promise<AppendReceipt> {
    return this.append({ ...request, messages: decodeEncoded(request.messages) });
  }

  nextOffset(address: PartitionAddress): Promise<number> {
    return this.#run("read next offset", (s) => this.#log(s, address, "read next offset of").next);
  }

  /** The partition's offsets and bytes, without a read: what the forwarder's backlog is. */
  partitionBytes(address: PartitionAddress): Promise<PartitionBytes> {
    return this.#run("read bytes", (s) => partitionBytes(this.#log(s, address, "read bytes of")));
  }

  /** Stores the offset in the catalog; resolves once it is on disk. */
  storeOffset(consumer: string, address: PartitionAddress, offset: number): Promise<void> {
    if (!Number.isSafeInteger(offset) || offset < 0) {
      const why = `Cannot store consumer offset ${offset}: not an offset`;
      return Promise.reject(new BackendError("invalid", why));
    }
    return this.#commitOffset("store consumer offset", consumer, address, offset);
  }

  /** Deletes the offset's row, in order with the stores before and after it; once on disk. */
  deleteOffset(consumer: string, address: PartitionAddress): Promise<void> {
    return this.#commitOffset("delete consumer offset", consumer, address, DELETED_OFFSET);
  }

  #commitOffset(action: string, consumer: string, address: PartitionAddress, offset: number) {
    try {
      const writer = this.#writer(action);
      const state = this.#partition(address, `${action} on`);
      const stored = writer.commits.storeOffset(consumer, state, address.partition, offset);
      // The forwarder moved on while the store is full: what it forwarded may now go.
      if (consumer === this.#options.forward?.consumer && this.health().full !== undefined) {
        stored.then(() => writer.retention.soon(), () => {});
      }
      return stored.catch((e) => {
        throw toBackendError(action, this.#options.path, e);
      });
    } catch (e) {
      return Promise.reject(toBackendError(action, this.#options.path, e));
    }
  }

  getOffset(consumer: string, address: PartitionAddress): Promise<number | null> {
    return this.#run("read consumer offset", (s) => {
      const state = this.#partition(address, "read consumer offset of");
      return storedOffset(s.reads, consumer, state.id, address.partition);
    });
  }

  /**
   * One retention pass now, as of `now` (µs; tests pass one), as the timer's: drops what the
   * limits say, stores the floors, deletes the segments nothing needs; resolves with the count.
   */
  async runRetention(
    now: number = this.#options.clock?.() ?? (this.#options.ageClock ?? wallClock).nowMicros(),
  ): Promise<{ deleted: number }> {
    const writer = this.#state?.writer;
    if (!writer) return { deleted: 0 };
    try {
      return { deleted: await writer.retention.run(now) };
    } catch (e) {
      throw toBackendError("run retention", this.#options.path, e);
    }
  }
  /** Drops the partition's batches before `before` (see {@link LocalLog.truncate}). */
  async truncate(address: PartitionAddress, before: number): Promise<number> {
    const p = await this.#run("truncate", (s) => this.#log(s, address, "truncate"));
    return await this.#writer("truncate").retention.truncate(p, before);
  }

  /** Transactions committed and messages appended since open (kept after close). */
  stats(): EmbeddedStats {
    const writer = this.#state?.writer;
    const commits = writer?.commits.stats ?? this.#lastStats;
    const mode = writer?.link.mode;
    return {
      commits: commits.commits,
      appended: commits.appended,
      writerThread: mode?.thread ?? "none",
      ...(mode?.reason ? { writerReason: mode.reason } : {}),
    };
  }

  #writeSide(link: WriterLink, log: MessageLog, catalog: Catalog): WriteSide {
    return openWriteSide(link, log, catalog, this.#options, {
      clock: this.#clock,
      appendFailed: (e) => this.#appendError(e),
      durable: () => {
        this.#trouble.full = undefined;
        this.#trouble.appendFailure = undefined;
      },
      reads: () => this.#state?.reads,
      watchers: this.#watchers,
      roomFreed: this.#roomFreed,
      runRetention: () => this.runRetention(),
    });
  }

  /** The writer died: everything queued fails now, and health says why until reopened. */
  #writerFailed(error: BackendError): void {
    this.#trouble.writerFailure = error;
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
    if (this.#trouble.writerFailure) throw this.#trouble.writerFailure;
    return s.writer;
  }

  /** Topic lookup; a read-only store re-reads the table because the writer is elsewhere. */
  #topic(stream: string, topic: string): TopicState | undefined {
    const s = this.#state!;
    return s.writer ? s.catalog.get(stream, topic) : s.catalog.reload(stream, topic);
  }

  /** The topic of an address, or BackendError("not_found") naming what is missing. */
  #partition(address: PartitionAddress, action: string): TopicState {
    return existingPartition(this.#topic(address.stream, address.topic), address, action);
  }

  /** A partition's view of the log; read-only mode first scans what the writer added. */
  #log(s: OpenState, address: PartitionAddress, action: string): PartitionLog {
    const state = this.#partition(address, action);
    if (!s.writer) s.log.refresh();
    return s.log.partition(state.id, address.partition);
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
    if (isStoreFull(e)) {
      const dir = this.#state?.log.room.dir ?? "";
      noteFullAppend(this.#trouble, e, dir, this.#options.maxStoreBytes);
      this.#state?.writer?.retention.soon(); // forward mode: free what is forwarded
    } else this.#trouble.appendFailure = error.message;
    return error;
  }

  #closedError(action: string): BackendError {
    const what = this.#phase === "new" ? "is not open" : "is closed";
    const message = `Cannot ${action}: embedded store "${this.#options.path}" ${what}`;
    return new BackendError("unavailable", message);
  }
}
