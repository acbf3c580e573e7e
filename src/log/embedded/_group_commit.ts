/**
 * Group commit: append() calls queue here and are written together in ONE transaction (one
 * fsync) on the next macrotask, so many connections publishing at once cost one COMMIT
 * (DESIGN §6: ~150k rows/s at 100 rows per commit vs ~30k/s at one). Each append resolves only
 * after the COMMIT that holds it; a failed transaction rejects every append in it.
 *
 * @module
 */
import { clearImmediate, setImmediate } from "node:timers";
import type { DatabaseSync, SQLInputValue } from "node:sqlite";
import type { OutgoingMessage } from "../port.ts";
import type { TopicState } from "./_catalog.ts";
import { HeaderEncoder } from "./_headers.ts";
import { ROWS_PER_INSERT, type Statements, VALUES_PER_ROW } from "./_statements.ts";

/** One queued append() call. */
export interface PendingAppend {
  readonly state: TopicState;
  readonly partition: number;
  readonly messages: readonly OutgoingMessage[];
  readonly resolve: (baseOffset: number) => void;
  readonly reject: (error: unknown) => void;
}

/** What a committed transaction changed: flattened (topic, partition) pairs that grew. */
export type CommitHook = (grown: readonly (TopicState | number)[]) => void;

/** Counters for tests and metrics. */
export interface GroupCommitStats {
  /** Transactions committed. */
  commits: number;
  /** Messages committed. */
  appended: number;
}

/**
 * The append queue. Bounded by its callers: the gateway limits appends in flight per client
 * (`max_inflight_publishes_per_client`) and overall (`max_pending_appends`).
 */
export class GroupCommit {
  readonly stats: GroupCommitStats = { commits: 0, appended: 0 };
  readonly #db: DatabaseSync;
  readonly #stmts: Statements;
  readonly #maxBatch: number;
  readonly #now: () => number;
  readonly #onCommit: CommitHook;
  readonly #onError: (e: unknown) => unknown;
  #queue: PendingAppend[] = [];
  #timer: ReturnType<typeof setImmediate> | undefined;
  /** Reused between transactions: pairs (state, partition) touched by the one in progress. */
  #touched: (TopicState | number)[] = [];
  /** Reused: values of the rows waiting for the next multi-row INSERT. */
  readonly #row: SQLInputValue[] = [];
  readonly #headers = new HeaderEncoder();

  /**
   * @param onError maps a failed transaction's error to what each append rejects with.
   */
  constructor(
    db: DatabaseSync,
    stmts: Statements,
    maxBatch: number,
    now: () => number,
    onCommit: CommitHook,
    onError: (e: unknown) => unknown,
  ) {
    this.#db = db;
    this.#stmts = stmts;
    this.#maxBatch = Math.max(1, maxBatch);
    this.#now = now;
    this.#onCommit = onCommit;
    this.#onError = onError;
  }

  /** Number of append() calls waiting for a transaction. */
  get pending(): number {
    return this.#queue.length;
  }

  /** Queues an append; the flush runs on the next macrotask. */
  enqueue(append: PendingAppend): void {
    this.#queue.push(append);
    // setImmediate, not setTimeout(0): nested timers are clamped to ≥ 4 ms, which would cap a
    // sequential publisher at ~250 commits/s. setImmediate runs after the poll phase, so every
    // socket read of this loop turn has queued its appends by then.
    this.#timer ??= setImmediate(this.#onTick);
  }

  /** Writes everything queued now, synchronously (used by close()). */
  flushAll(): void {
    if (this.#timer !== undefined) clearImmediate(this.#timer);
    this.#timer = undefined;
    while (this.#queue.length > 0) this.#flushOne();
  }

  readonly #onTick = (): void => {
    this.#timer = undefined;
    this.#flushOne();
    // The rest waits one more macrotask so I/O and timers are not starved by a long queue.
    if (this.#queue.length > 0) this.#timer = setImmediate(this.#onTick);
  };

  /** One transaction of at most maxBatch messages (a bigger single append goes alone). */
  #flushOne(): void {
    const batch = this.#take();
    const touched = this.#touched;
    touched.length = 0;
    const stmts = this.#stmts;
    const row = this.#row;
    const headerEncoder = this.#headers;
    row.length = 0;
    headerEncoder.reset();
    // One append time per transaction: the messages are committed at the same instant.
    const ts = this.#now();
    let count = 0;
    try {
      stmts.begin.run();
      for (let i = 0; i < batch.length; i++) {
        const { state, partition, messages } = batch[i];
        const { next, bytes } = state;
        if (next[partition] === state.committedNext[partition]) touched.push(state, partition);
        let offset = next[partition];
        let size = 0;
        for (let j = 0; j < messages.length; j++) {
          const m = messages[j];
          const headers = headerEncoder.encode(m.headers);
          const s = m.payload.length + headers.length;
          row.push(state.id, partition, offset++, ts, s, headers, m.payload);
          size += s;
          if (row.length === ROWS_PER_INSERT * VALUES_PER_ROW) {
            stmts.insertMessages.run(...row);
            row.length = 0;
            headerEncoder.reset();
          }
        }
        next[partition] = offset;
        bytes[partition] += size;
        count += messages.length;
      }
      for (let k = 0; k < row.length; k += VALUES_PER_ROW) {
        stmts.insertMessage.run(...row.slice(k, k + VALUES_PER_ROW));
      }
      row.length = 0; // drop references to payloads until the next transaction
      // One row update per partition that grew keeps next offsets durable even after
      // retention deletes every message (offsets never go backwards).
      for (let i = 0; i < touched.length; i += 2) {
        const state = touched[i] as TopicState;
        const p = touched[i + 1] as number;
        stmts.updatePartition.run(state.next[p], state.bytes[p], state.id, p);
      }
      stmts.commit.run();
    } catch (e) {
      this.#fail(batch, e);
      return;
    }
    this.stats.commits++;
    this.stats.appended += count;
    // Base offsets are recomputed from the committed state, walking the batch in order.
    for (let i = 0; i < touched.length; i += 2) {
      const state = touched[i] as TopicState;
      const p = touched[i + 1] as number;
      const base = state.committedNext[p];
      state.committedNext[p] = state.next[p];
      state.next[p] = base; // temporarily rewound: the resolve loop walks it forward again
      state.committedBytes[p] = state.bytes[p];
    }
    for (let i = 0; i < batch.length; i++) {
      const { state, partition, messages, resolve } = batch[i];
      const base = state.next[partition];
      state.next[partition] = base + messages.length;
      resolve(base);
    }
    this.#onCommit(touched);
  }

  /** Undoes the staged counters and rejects every append of the failed transaction. */
  #fail(batch: readonly PendingAppend[], e: unknown): void {
    this.#row.length = 0;
    const touched = this.#touched;
    for (let i = 0; i < touched.length; i += 2) {
      const state = touched[i] as TopicState;
      const p = touched[i + 1] as number;
      state.next[p] = state.committedNext[p];
      state.bytes[p] = state.committedBytes[p];
    }
    // SQLite rolls back by itself on some errors (SQLITE_FULL among them); ROLLBACK only if
    // the transaction is still open, and never let a rollback failure hide the first error.
    try {
      if (this.#db.isTransaction) this.#db.exec("ROLLBACK");
    } catch { /* the original error is what the callers need */ }
    const error = this.#onError(e);
    for (const append of batch) append.reject(error);
  }

  /** Takes the next batch off the queue. */
  #take(): PendingAppend[] {
    const queue = this.#queue;
    let total = 0;
    let n = 0;
    while (n < queue.length) {
      const size = queue[n].messages.length;
      if (n > 0 && total + size > this.#maxBatch) break;
      total += size;
      n++;
    }
    if (n === queue.length) {
      this.#queue = [];
      return queue;
    }
    return queue.splice(0, n);
  }
}
