/**
 * Group commit, pipelined: append() calls queue here; whenever no transaction is in flight the
 * queue (at most `maxBatch` messages) is encoded into one buffer, one log record per partition,
 * and appended to the message log (_message_log.ts) in ONE write. While it is written, the next
 * appends accumulate and go right after it: at most one transaction in flight, everything that
 * arrived meanwhile in the next one. Each append resolves only after the fsync that followed
 * its write (the next transaction is written while the disk syncs; one fsync covers every
 * transaction written before it started); a failed write or fsync rejects every append in it.
 * A transaction is readable as soon as it is written (the commit hook and each append's
 * `onCommitted`), before that fsync. A queue bigger than the log's room is cut between appends
 * into several transactions (_commit_shape.ts).
 *
 * A transaction of appends nobody waits for (QoS 0 only, `syncLater`) resolves once written,
 * and its fsync is left to the next transaction someone waits for (an fsync covers every write
 * before it) or to a timer of `lazySyncMs`: a stream of QoS 0 readings costs one fsync per
 * interval, not one per reading. A crash loses at most those; never an append that resolved
 * after its fsync. With `lingerMs`, small transactions someone waits for share an fsync
 * (_commit_syncs.ts).
 *
 * Consumer offsets go to the catalog's writer (_writer.ts), one transaction at a time beside
 * the log's, each acknowledged after the catalog's WAL is on disk.
 *
 * @module
 */
import { clearImmediate, setImmediate } from "node:timers";
import type { OutgoingMessage } from "../port.ts";
import { OrderGroups } from "./_order_groups.ts";
import { CommitSyncs } from "./_commit_syncs.ts";
import { appendsThatFit, groupRuns, type TransactionRun } from "./_commit_shape.ts";
import type { TopicState } from "./_catalog.ts";
import { BatchEncoder, RECORD_HEADER_BYTES } from "./_batch.ts";
import { LOG_RECORD_HEADER_BYTES } from "./_log_record.ts";
import type { LogRun, MessageLog } from "./_message_log.ts";
import type { CommitWatch } from "./_log_watchers.ts";
import type { WriterLink } from "./_writer_link.ts";

/** One queued append() call. */
export interface PendingAppend {
  readonly state: TopicState;
  readonly partition: number;
  readonly messages: readonly OutgoingMessage[];
  /** Runs after the write, before the fsync (see AppendRequest.onCommitted). */
  readonly onCommitted?: (baseOffset: number) => void;
  /** Nobody waits for its fsync (AppendRequest.syncLater). */
  readonly syncLater?: boolean;
  /** Its sender's order across a failure (AppendRequest.orderGroup). */
  readonly orderGroup?: object;
  readonly resolve: (baseOffset: number) => void;
  readonly reject: (error: unknown) => void;
}

/** One queued storeOffset() call. */
interface PendingOffset {
  readonly entry: readonly [string, number, number, number];
  readonly resolve: () => void;
  readonly reject: (error: unknown) => void;
}

/** The appends of one partition within one transaction. */
type Run = TransactionRun<PendingAppend>;

/** Counters for tests and metrics. */
export interface GroupCommitStats {
  /** Transactions written and synced. */
  commits: number;
  /** Messages written and synced. */
  appended: number;
}

/** Header-bytes guess per message when sizing a batch buffer (it grows if short). */
const HEADER_GUESS_BYTES = 64;

/**
 * The append queue. Bounded by its callers: the gateway limits appends in flight per client
 * (`max_inflight_publishes_per_client`) and overall (`max_pending_appends`).
 */
export class GroupCommit {
  readonly stats: GroupCommitStats = { commits: 0, appended: 0 };
  readonly #link: WriterLink;
  readonly #log: MessageLog;
  readonly #maxBatch: number;
  readonly #now: () => number;
  readonly #onError: (e: unknown) => unknown;
  /** Told of each transaction's messages once readable and once on disk. */
  readonly #told: CommitWatch;
  readonly #encoder = new BatchEncoder();
  #queue: PendingAppend[] = [];
  #offsets: PendingOffset[] = [];
  #timer: ReturnType<typeof setImmediate> | undefined;
  #inFlight = false;
  /** A consumer-offset transaction is under way. */
  #offsetsInFlight = false;
  /** Transactions someone waits for, written, whose fsync has not finished yet. */
  #unsynced = 0;
  /** The fsync of the newest such transaction (they settle in order: it covers the rest). */
  #newestDurable: Promise<void> | undefined;
  /** When each written transaction is fsynced. */
  readonly #syncs: CommitSyncs;
  #idle: (() => void)[] = [];
  /** Senders with a failed append: their later appends are rejected, not written. */
  readonly #groups = new OrderGroups();

  /** @param onError maps a failed transaction's error to what each append rejects with. */
  constructor(
    link: WriterLink,
    log: MessageLog,
    maxBatch: number,
    now: () => number,
    onError: (e: unknown) => unknown,
    told: CommitWatch = { grew() {}, durable() {} },
    lazySyncMs = 0,
    lingerMs = 0,
  ) {
    this.#syncs = new CommitSyncs(() => log.sync(), lingerMs, lazySyncMs);
    this.#link = link;
    this.#log = log;
    this.#maxBatch = Math.max(1, maxBatch);
    this.#now = now;
    this.#onError = onError;
    this.#told = told;
  }

  /** Number of append() calls waiting for a transaction. */
  get pending(): number {
    return this.#queue.length;
  }

  /** Queues an append for the next transaction. */
  enqueue(append: PendingAppend): void {
    this.#queue.push(append);
    this.#schedule();
  }

  /** Queues a consumer-offset store; it commits with the next offsets transaction. */
  storeOffset(consumer: string, state: TopicState, partition: number, offset: number) {
    return new Promise<void>((resolve, reject) => {
      this.#offsets.push({ entry: [consumer, state.id, partition, offset], resolve, reject });
      // After the current run of JavaScript: the stores it makes (a tick of the readers' timer)
      // share one catalog transaction and its fsyncs.
      if (this.#offsets.length === 1) queueMicrotask(() => this.#sendOffsets());
    });
  }

  /** Resolves once everything queued so far has been committed (or failed). */
  drain(): Promise<void> {
    this.#syncs.hurry(...this.#lazyHooks); // now, not after the linger or the interval
    if (this.#isIdle()) return Promise.resolve();
    return new Promise((resolve) => this.#idle.push(resolve));
  }

  /** Rejects everything still queued (the writer is gone). */
  failAll(error: unknown): void {
    const queue = this.#queue;
    const offsets = this.#offsets;
    this.#queue = [];
    this.#offsets = [];
    if (this.#timer !== undefined) clearImmediate(this.#timer);
    this.#timer = undefined;
    for (const a of queue) a.reject(error);
    for (const o of offsets) o.reject(error);
    this.#wakeIdle();
  }

  #isIdle(): boolean {
    return !this.#inFlight && !this.#offsetsInFlight && this.#unsynced === 0 &&
      this.#syncs.lazyRunning === 0 && this.#queue.length === 0 && this.#offsets.length === 0;
  }

  #schedule(): void {
    // setImmediate, not setTimeout(0): nested timers are clamped to a minimum delay.
    // setImmediate runs after the poll phase, so every socket read of this loop turn has queued
    // its appends.
    if (this.#inFlight || this.#timer !== undefined) return;
    this.#timer = setImmediate(this.#onTick);
  }

  readonly #onTick = (): void => {
    this.#timer = undefined;
    this.#send();
  };

  /** Writes the next transaction if there is something to write and nothing in flight. */
  #send(): void {
    if (this.#inFlight || this.#queue.length === 0) {
      this.#wakeIdle();
      return;
    }
    this.#queue = this.#groups.drop(this.#queue);
    if (this.#queue.length === 0) return this.#wakeIdle();
    const batch = this.#take();
    const timestampMicros = this.#now();
    let runs = groupRuns(batch);
    let encoded = this.#encode(batch, runs, timestampMicros);
    // roomFor(0): what is left of the active segment; a bigger transaction may be cut.
    if (encoded.data.length > this.#log.roomFor(0) && this.#cutToRoom(batch)) {
      runs = groupRuns(batch);
      encoded = this.#encode(batch, runs, timestampMicros);
    }
    const { data, logRuns, messages } = encoded;
    this.#inFlight = true;
    const lazy = this.#syncs.defersLazy && batch.every((a) => a.syncLater === true);
    this.#log.append(data, logRuns, timestampMicros).then(
      (bases) => {
        if (lazy) return this.#writtenLazy(batch, runs, bases, messages);
        this.#unsynced++;
        this.#visible(runs, bases);
        // Durable only after the fsync, which runs off the event loop; meanwhile the next
        // transaction may be written (syncs settle in order, so appends resolve in order).
        const durable = this.#newestDurable = this.#syncs.durable(messages);
        durable.then(
          () => this.#committed(runs, bases, messages),
          (e) => this.#failed(batch, e),
        ).finally(() => {
          this.#unsynced--;
          if (this.#newestDurable === durable) this.#newestDurable = undefined;
          // Drop the settled appends now: a promoted closure that still pointed at them
          // would keep every message of the batch alive until the next full GC.
          batch.length = 0;
          runs.length = 0;
          this.#wakeIdle();
        });
      },
      (e) => this.#failed(batch, e),
    ).finally(() => {
      this.#inFlight = false;
      // Everything that arrived during the write goes now, in one transaction.
      this.#send();
    });
  }

  /**
   * Leaves in `batch` the appends the log has room for now (_commit_shape.ts) and puts the rest
   * back at the head of the queue, in order, for the next transaction; true when it cut.
   */
  #cutToRoom(batch: PendingAppend[]): boolean {
    const fit = appendsThatFit(batch, (first) => this.#log.roomFor(first));
    if (fit === batch.length) return false;
    this.#queue = batch.splice(fit).concat(this.#queue);
    return true;
  }

  /** A `syncLater` transaction is written: readable, confirmed, its fsync deferred. */
  #writtenLazy(batch: PendingAppend[], runs: Run[], bases: number[], messages: number): void {
    this.#visible(runs, bases);
    this.#committed(runs, bases, messages, false);
    batch.length = 0;
    runs.length = 0;
    this.#syncs.writtenLazy(...this.#lazyHooks);
  }

  /** What a deferred fsync does: tell the watchers, or count and log its failure (nobody
   * waits to be rejected); then wake a drain. */
  readonly #lazyHooks = [
    () => this.#told.durable(),
    (e: unknown) => void this.#onError(e),
    () => this.#wakeIdle(),
  ] as const;

  /** One transaction's log records, a record per run (partition), in one buffer. */
  #encode(
    batch: readonly PendingAppend[],
    runs: readonly Run[],
    timestampMicros: number,
  ): { data: Uint8Array; logRuns: LogRun[]; messages: number } {
    const encoder = this.#encoder;
    let payloadBytes = 0;
    let messages = 0;
    for (const a of batch) {
      messages += a.messages.length;
      for (const m of a.messages) payloadBytes += m.payload.length;
    }
    encoder.begin(
      payloadBytes + messages * (RECORD_HEADER_BYTES + HEADER_GUESS_BYTES) +
        runs.length * LOG_RECORD_HEADER_BYTES,
    );
    const logRuns: LogRun[] = [];
    for (const run of runs) {
      const at = encoder.position;
      encoder.reserve(LOG_RECORD_HEADER_BYTES);
      let size = 0;
      for (const a of run.appends) {
        for (let j = 0; j < a.messages.length; j++) {
          size += encoder.add(a.messages[j], timestampMicros);
        }
      }
      logRuns.push({
        topicId: run.state.id,
        partition: run.partition,
        count: run.count,
        size,
        at,
        dataBytes: encoder.position - at - LOG_RECORD_HEADER_BYTES,
      });
    }
    return { data: new Uint8Array(encoder.take(), 0, encoder.position), logRuns, messages };
  }

  /** Sends the queued consumer offsets as one catalog transaction if none is in flight. */
  #sendOffsets(): void {
    if (this.#offsetsInFlight) return;
    if (this.#offsets.length === 0) return this.#wakeIdle();
    const offsets = this.#offsets;
    this.#offsets = [];
    this.#offsetsInFlight = true;
    const link = this.#link;
    // A position may count messages that are readable but not on disk yet (`#visible`): they
    // are synced first, so a power cut never keeps an offset past the log's end (the offsets
    // after it, given again to new messages, would be skipped).
    const logSynced = this.#syncs.lazyPending
      ? this.#log.sync()
      : (this.#newestDurable ?? Promise.resolve());
    logSynced.then(() => link.request({ type: "offsets", offsets: offsets.map((o) => o.entry) }))
      .then(() => link.syncCommitted())
      .then(() => {
        for (const o of offsets) o.resolve();
      }, (e) => {
        // As it came: a catalog failure says nothing about appends (the backend words it).
        for (const o of offsets) o.reject(e);
      })
      .finally(() => this.#offsetsDone());
  }

  #offsetsDone(): void {
    this.#offsetsInFlight = false;
    this.#sendOffsets();
    this.#wakeIdle();
  }

  /**
   * After the write, before its fsync: the messages become readable (poll, nextOffset), each
   * append's `onCommitted` runs and the log's growth watchers are told, so live subscribers and
   * the forwarder do not wait for the disk. Only a written transaction gets here; one whose
   * fsync then fails stays in the log but its appends reject (no PUBACK).
   */
  #visible(runs: Run[], bases: number[]): void {
    for (let r = 0; r < runs.length; r++) {
      let base = bases[r];
      for (const a of runs[r].appends) {
        if (a.onCommitted) {
          try {
            a.onCommitted(base);
          } catch { /* the caller's hook must not fail the append */ }
        }
        base += a.messages.length;
      }
      this.#told.grew(runs[r].state, runs[r].partition, base);
    }
  }

  /** After the fsync (a `syncLater` one: after the write): the appends resolve. */
  #committed(runs: Run[], bases: number[], messages: number, durable = true): void {
    this.stats.commits++;
    this.stats.appended += messages;
    for (let r = 0; r < runs.length; r++) {
      let base = bases[r];
      for (const a of runs[r].appends) {
        a.resolve(base);
        base += a.messages.length;
      }
    }
    if (durable) this.#told.durable();
  }

  #failed(batch: PendingAppend[], e: unknown): void {
    const error = this.#onError(e);
    for (const a of batch) {
      this.#groups.noteFailed(a);
      a.reject(error);
    }
  }

  #wakeIdle(): void {
    if (!this.#isIdle() || this.#idle.length === 0) return;
    const idle = this.#idle;
    this.#idle = [];
    for (const resolve of idle) resolve();
  }

  /** Takes the next batch off the queue: at most maxBatch messages (a bigger append alone). */
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
