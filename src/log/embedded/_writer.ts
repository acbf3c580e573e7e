/**
 * The writer: the one connection that writes the catalog file — consumer-offset stores, topic
 * creation, each partition's floors, and (through SQLite's auto-checkpoint) checkpoints.
 * Messages do not come here: they go to the message log (_message_log.ts). It runs in a
 * Worker (_writer_worker.ts) so that no statement or fsync blocks the gateway's event loop;
 * for ":memory:" stores it runs in-process.
 *
 * It speaks plain messages ({@link WriterRequest} in, {@link WriterReply} out).
 *
 * @module
 */
import type { DatabaseSync } from "node:sqlite";
import { BackendError, type CreateTopicOptions } from "../port.ts";
import { Catalog } from "./_catalog.ts";
import { openDatabase } from "./_schema.ts";
import { prepareWriteStatements, type WriteStatements } from "./_statements.ts";

/** The offset of an {@link OffsetsRequest} entry that deletes the consumer's row instead. */
export const DELETED_OFFSET = -1;

/**
 * Consumer offsets to store, `[consumer, topicId, partition, offset]`, in one transaction; an
 * entry with {@link DELETED_OFFSET} deletes the row (an expired stored session's position).
 */
export interface OffsetsRequest {
  readonly type: "offsets";
  readonly id: number;
  readonly offsets: readonly (readonly [string, number, number, number])[];
}

/** Requests the writer understands. */
export type WriterRequest =
  | {
    readonly type: "open";
    readonly id: number;
    readonly path: string;
    readonly maxStoreBytes: number;
  }
  | OffsetsRequest
  | {
    readonly type: "createTopic";
    readonly id: number;
    readonly stream: string;
    readonly topic: string;
    readonly options: CreateTopicOptions;
    readonly nowMicros: number;
    /** Lowest id the topic may get (one above any the message log has seen). */
    readonly minId: number;
  }
  /** Raises partitions' floors, `[topicId, partition, start, next]`; before segments go. */
  | {
    readonly type: "floors";
    readonly id: number;
    readonly floors: readonly (readonly [number, number, number, number])[];
  }
  | { readonly type: "close"; readonly id: number };

/** An error as it crosses the thread boundary. */
export interface WireError {
  readonly message: string;
  /** SQLite's result code, when SQLite raised it. */
  readonly errcode?: number;
  /** The port's code, when a BackendError was raised. */
  readonly code?: BackendError["code"];
}

/** The answer to one request. */
export type WriterReply =
  | { readonly id: number; readonly ok: true; readonly value: unknown }
  | { readonly id: number; readonly ok: false; readonly error: WireError };

/** The writer's state over one open database. */
export class Writer {
  readonly db: DatabaseSync;
  readonly #stmts: WriteStatements;
  readonly #catalog: Catalog;
  #closed = false;

  constructor(path: string, maxStoreBytes: number) {
    this.db = openDatabase(path, maxStoreBytes, false);
    try {
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
      case "offsets":
        return this.storeOffsets(request);
      case "createTopic":
        this.#catalog.create(
          request.stream,
          request.topic,
          request.options,
          request.nowMicros,
          request.minId,
        );
        return null;
      case "floors":
        return this.#storeFloors(request.floors);
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

  /** One transaction of consumer-offset upserts and deletions, in their order. */
  storeOffsets(request: OffsetsRequest): null {
    this.#transaction(() => {
      for (const [consumer, topicId, p, offset] of request.offsets) {
        if (offset === DELETED_OFFSET) this.#stmts.deleteConsumerOffset.run(consumer, topicId, p);
        else this.#stmts.upsertConsumerOffset.run(consumer, topicId, p, offset);
      }
    });
    return null;
  }

  #storeFloors(floors: readonly (readonly [number, number, number, number])[]): null {
    this.#transaction(() => {
      for (const [topicId, p, start, next] of floors) {
        this.#stmts.updateFloors.run(start, next, topicId, p);
      }
    });
    return null;
  }

  #transaction(body: () => void): void {
    try {
      this.#stmts.begin.run();
      body();
      this.#stmts.commit.run();
    } catch (e) {
      // SQLite rolls back by itself on some errors (SQLITE_FULL among them); ROLLBACK only if
      // the transaction is still open, and never let a rollback failure hide the first error.
      try {
        if (this.db.isTransaction) this.db.exec("ROLLBACK");
      } catch { /* the original error is what the callers need */ }
      throw e;
    }
  }

  /** Closes the database. Idempotent. */
  close(): null {
    if (this.#closed) return null;
    this.#closed = true;
    this.db.close();
    return null;
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
