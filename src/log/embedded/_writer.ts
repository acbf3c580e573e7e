/**
 * The writer: the one connection that writes the store — group commits of stored batches,
 * consumer-offset stores, topic creation, retention, and (through SQLite's auto-checkpoint)
 * checkpoints. It runs in a Worker (_writer_worker.ts) so that INSERTs and the fsync of each
 * COMMIT never block the gateway's event loop; for ":memory:" stores it runs in-process.
 *
 * It speaks plain messages ({@link WriterRequest} in, {@link WriterReply} out) and owns the
 * authoritative next offsets and byte counters (the writer's catalog).
 *
 * @module
 */
import type { DatabaseSync } from "node:sqlite";
import { BackendError, type CreateTopicOptions } from "../port.ts";
import { Catalog, type TopicState } from "./_catalog.ts";
import { runRetentionPass } from "./_retention.ts";
import { openDatabase } from "./_schema.ts";
import { prepareWriteStatements, type WriteStatements } from "./_statements.ts";

/** Numbers per partition run in {@link CommitRequest.runs}. */
export const RUN_FIELDS = 5;

/**
 * One transaction: for each partition run `[topicId, partition, count, byteEnd, size]` (the
 * run's records are `data[previous run's byteEnd, byteEnd)`), and the consumer offsets to store.
 */
export interface CommitRequest {
  readonly type: "commit";
  readonly id: number;
  readonly data: ArrayBuffer;
  readonly runs: Float64Array;
  /** Append time of every message of the transaction, µs. */
  readonly timestampMicros: number;
  /** `[consumer, topicId, partition, offset]` upserts committed with the batch. */
  readonly offsets: readonly (readonly [string, number, number, number])[];
}

/** Requests the writer understands. */
export type WriterRequest =
  | {
    readonly type: "open";
    readonly id: number;
    readonly path: string;
    readonly maxStoreBytes: number;
    /** Overrides SQLite's auto-checkpoint (1000 pages) when a checkpointer runs beside. */
    readonly autoCheckpointPages?: number;
  }
  | CommitRequest
  | {
    readonly type: "createTopic";
    readonly id: number;
    readonly stream: string;
    readonly topic: string;
    readonly options: CreateTopicOptions;
    readonly nowMicros: number;
  }
  | {
    readonly type: "retention";
    readonly id: number;
    readonly nowMicros: number;
    readonly maxAgeMicros: number;
    readonly maxTopicBytes: number;
  }
  /** Backfills what the checkpointer left (the tail written meanwhile); see _writer_link.ts. */
  | { readonly type: "checkpoint"; readonly id: number }
  | { readonly type: "close"; readonly id: number };

/** An error as it crosses the thread boundary. */
export interface WireError {
  readonly message: string;
  /** SQLite's result code, when SQLite raised it. */
  readonly errcode?: number;
  /** The port's code, when a BackendError was raised. */
  readonly code?: BackendError["code"];
}

/** The answer to one request (commit: base offset per run; retention: messages deleted). */
export type WriterReply =
  | { readonly id: number; readonly ok: true; readonly value: unknown }
  | { readonly id: number; readonly ok: false; readonly error: WireError };

/** The writer's state over one open database. */
export class Writer {
  readonly db: DatabaseSync;
  readonly #stmts: WriteStatements;
  readonly #catalog: Catalog;
  #closed = false;
  #retention: Promise<number> | undefined;

  constructor(path: string, maxStoreBytes: number, autoCheckpointPages?: number) {
    this.db = openDatabase(path, maxStoreBytes, false);
    try {
      if (autoCheckpointPages !== undefined) {
        this.db.exec(`PRAGMA wal_autocheckpoint = ${Math.floor(autoCheckpointPages)}`);
      }
      this.#stmts = prepareWriteStatements(this.db);
      this.#catalog = new Catalog(this.db);
      this.#catalog.load();
    } catch (e) {
      this.db.close();
      throw e;
    }
  }

  /** Runs one request; a failure becomes an error reply, never an exception. */
  async handle(request: WriterRequest): Promise<WriterReply> {
    try {
      return { id: request.id, ok: true, value: await this.#dispatch(request) };
    } catch (e) {
      return { id: request.id, ok: false, error: toWireError(e) };
    }
  }

  #dispatch(request: WriterRequest): unknown {
    if (this.#closed) throw new BackendError("unavailable", "the writer is closed");
    switch (request.type) {
      case "commit":
        return this.commit(request);
      case "createTopic":
        this.#catalog.create(request.stream, request.topic, request.options, request.nowMicros);
        return null;
      case "retention":
        return this.#runRetention(request.nowMicros, request.maxAgeMicros, request.maxTopicBytes);
      case "checkpoint":
        return this.#checkpointTail();
      case "close":
        return this.close();
      case "open":
        throw new BackendError("invalid", "the writer is already open");
      default:
        // A request this writer does not know is a bug: fail loudly (the worker dies, and the
        // backend turns that into "unavailable" for every pending call).
        throw new Error(`Unknown writer request ${JSON.stringify(request)}`);
    }
  }

  /** One transaction; returns the base offset of each run. */
  commit(request: CommitRequest): number[] {
    const { runs, timestampMicros, offsets } = request;
    const data = new Uint8Array(request.data);
    const stmts = this.#stmts;
    const catalog = this.#catalog;
    const bases: number[] = [];
    const touched: TopicState[] = [];
    try {
      stmts.begin.run();
      let start = 0;
      for (let i = 0; i < runs.length; i += RUN_FIELDS) {
        const state = catalog.byId(runs[i]);
        const p = runs[i + 1];
        const count = runs[i + 2];
        const end = runs[i + 3];
        const size = runs[i + 4];
        if (!state || p >= state.partitions) {
          throw new BackendError("not_found", `topic id ${runs[i]} partition ${p} does not exist`);
        }
        const base = state.next[p];
        stmts.insertBatch.run(
          state.id,
          p,
          base,
          count,
          timestampMicros,
          size,
          data.subarray(start, end),
        );
        state.next[p] = base + count;
        state.bytes[p] += size;
        stmts.updatePartition.run(state.next[p], state.bytes[p], state.id, p);
        touched.push(state);
        bases.push(base);
        start = end;
      }
      for (const [consumer, topicId, p, offset] of offsets) {
        stmts.upsertConsumerOffset.run(consumer, topicId, p, offset);
      }
      stmts.commit.run();
    } catch (e) {
      for (const state of touched) {
        for (let p = 0; p < state.partitions; p++) {
          state.next[p] = state.committedNext[p];
          state.bytes[p] = state.committedBytes[p];
        }
      }
      // SQLite rolls back by itself on some errors (SQLITE_FULL among them); ROLLBACK only if
      // the transaction is still open, and never let a rollback failure hide the first error.
      try {
        if (this.db.isTransaction) this.db.exec("ROLLBACK");
      } catch { /* the original error is what the callers need */ }
      throw e;
    }
    for (const state of touched) {
      for (let p = 0; p < state.partitions; p++) {
        state.committedNext[p] = state.next[p];
        state.committedBytes[p] = state.bytes[p];
      }
    }
    return bases;
  }

  /**
   * Copies what is left in the WAL into the database file without SQLite's fsyncs: the caller
   * has synced the WAL before and syncs the database file after, off the event loop
   * (_writer_link.ts), and no transaction commits in between.
   */
  #checkpointTail(): null {
    this.db.exec("PRAGMA synchronous = OFF");
    try {
      this.db.exec("PRAGMA wal_checkpoint(PASSIVE)");
    } finally {
      this.db.exec("PRAGMA synchronous = NORMAL");
    }
    return null;
  }

  /** Stops retention at its next chunk boundary and closes the database. Idempotent. */
  async close(): Promise<null> {
    if (this.#closed) return null;
    this.#closed = true;
    await this.#retention?.catch(() => 0);
    this.db.close();
    return null;
  }

  async #runRetention(nowMicros: number, maxAgeMicros: number, maxTopicBytes: number) {
    while (this.#retention) await this.#retention.catch(() => 0);
    this.#retention = runRetentionPass(
      this.db,
      this.#stmts,
      this.#catalog.topics(),
      { maxAgeMicros, maxTopicBytes },
      nowMicros,
      () => this.#closed,
    );
    try {
      return await this.#retention;
    } finally {
      this.#retention = undefined;
    }
  }
}

/** What of an error can cross to the main thread (structured clone drops `errcode`). */
export function toWireError(e: unknown): WireError {
  if (e instanceof BackendError) return { message: e.message, code: e.code };
  const message = e instanceof Error ? e.message : String(e);
  const errcode = (e as { errcode?: unknown } | null)?.errcode;
  return typeof errcode === "number" ? { message, errcode } : { message };
}

/** Rebuilds an error on the main thread so `_errors.ts` can classify it as before. */
export function fromWireError(error: WireError): Error {
  if (error.code) return new BackendError(error.code, error.message);
  return Object.assign(new Error(error.message), { errcode: error.errcode });
}
