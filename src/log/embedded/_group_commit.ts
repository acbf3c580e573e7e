/**
 * Group commit, pipelined: append() calls queue here; whenever no transaction is in flight the
 * queue (at most `maxBatch` messages) is encoded into one buffer, transferred to the writer
 * (_writer.ts) and committed there as ONE transaction (one fsync, one stored batch per
 * partition). While it commits, the next appends accumulate and go right after its reply:
 * at most one transaction in flight, everything that arrived meanwhile in the next one.
 * Each append resolves only after the COMMIT that holds it and the WAL fsync after that COMMIT
 * (_file_sync.ts; the next transaction commits while the disk syncs); a failed transaction or
 * fsync rejects every append in it. A transaction is readable as soon as it is committed (the
 * commit hook and each append's `onCommitted`), before that fsync. Consumer offsets ride along
 * with the next transaction.
 *
 * @module
 */
import { clearImmediate, setImmediate } from "node:timers";
import type { OutgoingMessage } from "../port.ts";
import type { TopicState } from "./_catalog.ts";
import { BatchEncoder, RECORD_HEADER_BYTES } from "./_batch.ts";
import { RUN_FIELDS } from "./_writer.ts";
import type { WriterLink } from "./_writer_link.ts";

/** One queued append() call. */
export interface PendingAppend {
  readonly state: TopicState;
  readonly partition: number;
  readonly messages: readonly OutgoingMessage[];
  /** Runs after the COMMIT, before the fsync (see AppendRequest.onCommitted). */
  readonly onCommitted?: (baseOffset: number) => void;
  readonly resolve: (baseOffset: number) => void;
  readonly reject: (error: unknown) => void;
}

/** One queued storeOffset() call. */
interface PendingOffset {
  readonly entry: readonly [string, number, number, number];
  readonly resolve: () => void;
  readonly reject: (error: unknown) => void;
}

/** The appends of one partition within one transaction, in arrival order. */
interface Run {
  readonly state: TopicState;
  readonly partition: number;
  readonly appends: PendingAppend[];
  count: number;
}

/** A task run while no transaction commits. */
interface ExclusiveJob {
  readonly task: () => Promise<void>;
  readonly done: PromiseWithResolvers<void>;
}

/**
 * What a committed (not yet fsynced) transaction changed: flattened (topic, partition) pairs
 * that grew.
 */
export type CommitHook = (grown: readonly (TopicState | number)[]) => void;

/** Counters for tests and metrics. */
export interface GroupCommitStats {
  /** Transactions committed. */
  commits: number;
  /** Messages committed. */
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
  readonly #maxBatch: number;
  readonly #now: () => number;
  readonly #onCommit: CommitHook;
  readonly #onError: (e: unknown) => unknown;
  readonly #onDurable: () => void;
  readonly #encoder = new BatchEncoder();
  #queue: PendingAppend[] = [];
  #offsets: PendingOffset[] = [];
  #timer: ReturnType<typeof setImmediate> | undefined;
  #inFlight = false;
  /** Transactions committed whose fsync has not finished yet. */
  #unsynced = 0;
  #idle: (() => void)[] = [];
  /** A task to run alone between two transactions (see {@link exclusive}). */
  #exclusive: ExclusiveJob | undefined;

  /** @param onError maps a failed transaction's error to what each append rejects with. */
  constructor(
    link: WriterLink,
    maxBatch: number,
    now: () => number,
    onCommit: CommitHook,
    onError: (e: unknown) => unknown,
    onDurable: () => void = () => {},
  ) {
    this.#link = link;
    this.#maxBatch = Math.max(1, maxBatch);
    this.#now = now;
    this.#onCommit = onCommit;
    this.#onError = onError;
    this.#onDurable = onDurable;
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

  /** Queues a consumer-offset store; it commits with the next transaction. */
  storeOffset(consumer: string, state: TopicState, partition: number, offset: number) {
    return new Promise<void>((resolve, reject) => {
      this.#offsets.push({ entry: [consumer, state.id, partition, offset], resolve, reject });
      this.#schedule();
    });
  }

  /**
   * Runs `task` while no transaction commits: after the one in flight, before the next
   * (the checkpoint's tail, _writer_link.ts). One at a time; a second call while one waits
   * shares it.
   */
  exclusive(task: () => Promise<void>): Promise<void> {
    if (this.#exclusive) return this.#exclusive.done.promise;
    this.#exclusive = { task, done: Promise.withResolvers<void>() };
    this.#schedule();
    return this.#exclusive.done.promise;
  }

  /** Resolves once everything queued so far has been committed (or failed). */
  drain(): Promise<void> {
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
    return !this.#inFlight && this.#unsynced === 0 && this.#queue.length === 0 &&
      this.#offsets.length === 0 && this.#exclusive === undefined;
  }

  #schedule(): void {
    // setImmediate, not setTimeout(0): nested timers are clamped to ≥ 4 ms. setImmediate runs
    // after the poll phase, so every socket read of this loop turn has queued its appends.
    if (this.#inFlight || this.#timer !== undefined) return;
    this.#timer = setImmediate(this.#onTick);
  }

  readonly #onTick = (): void => {
    this.#timer = undefined;
    this.#send();
  };

  /** Sends the next transaction if there is something to send and nothing in flight. */
  #send(): void {
    if (!this.#inFlight && this.#exclusive) return this.#runExclusive(this.#exclusive);
    if (this.#inFlight || (this.#queue.length === 0 && this.#offsets.length === 0)) {
      this.#wakeIdle();
      return;
    }
    const batch = this.#take();
    const offsets = this.#offsets;
    this.#offsets = [];
    const runs = groupRuns(batch);
    const timestampMicros = this.#now();
    const encoder = this.#encoder;
    let payloadBytes = 0;
    let messages = 0;
    for (const a of batch) {
      messages += a.messages.length;
      for (const m of a.messages) payloadBytes += m.payload.length;
    }
    encoder.begin(payloadBytes + messages * (RECORD_HEADER_BYTES + HEADER_GUESS_BYTES));
    const fields = new Float64Array(runs.length * RUN_FIELDS);
    for (let r = 0; r < runs.length; r++) {
      const run = runs[r];
      let size = 0;
      for (const a of run.appends) {
        for (let j = 0; j < a.messages.length; j++) {
          size += encoder.add(a.messages[j], timestampMicros);
        }
      }
      fields.set([run.state.id, run.partition, run.count, encoder.position, size], r * RUN_FIELDS);
    }
    const bytes = encoder.position;
    const data = encoder.take();
    this.#inFlight = true;
    this.#link.request(
      { type: "commit", data, runs: fields, timestampMicros, offsets: offsets.map((o) => o.entry) },
      [data, fields.buffer],
    ).then(
      (bases) => {
        this.#link.noteCommitted(bytes);
        this.#unsynced++;
        this.#visible(runs, bases as number[]);
        // Durable only after the WAL's fsync, which runs off the event loop; meanwhile the
        // next transaction may commit (syncs settle in order, so appends resolve in order).
        this.#link.syncCommitted().then(
          () => this.#committed(runs, offsets, bases as number[], messages),
          (e) => this.#failed(batch, offsets, e),
        ).finally(() => {
          this.#unsynced--;
          // Drop the settled appends now: a promoted closure that still pointed at them
          // would keep every message of the batch alive until the next full GC.
          batch.length = 0;
          runs.length = 0;
          this.#wakeIdle();
        });
      },
      (e) => this.#failed(batch, offsets, e),
    ).finally(() => {
      this.#inFlight = false;
      // Everything that arrived during the commit goes now, in one transaction.
      this.#send();
    });
  }

  #runExclusive(job: ExclusiveJob): void {
    this.#inFlight = true;
    job.task().then(job.done.resolve, job.done.reject).finally(() => {
      this.#exclusive = undefined;
      this.#inFlight = false;
      this.#send();
    });
  }

  /**
   * After the COMMIT, before its fsync: the messages become readable (poll, nextOffset, the
   * append signals) and each append's `onCommitted` runs, so live subscribers do not wait for
   * the disk. Readers never see a transaction that rolled back: only a committed one gets here;
   * one whose fsync then fails stays in the log but its appends reject (no PUBACK).
   */
  #visible(runs: Run[], bases: number[]): void {
    const touched: (TopicState | number)[] = [];
    for (let r = 0; r < runs.length; r++) {
      const { state, partition, appends, count } = runs[r];
      let base = bases[r];
      state.committedNext[partition] = base + count;
      state.next[partition] = base + count;
      touched.push(state, partition);
      for (const a of appends) {
        if (a.onCommitted) {
          try {
            a.onCommitted(base);
          } catch { /* the caller's hook must not fail the append */ }
        }
        base += a.messages.length;
      }
    }
    this.#onCommit(touched);
  }

  /** After the fsync: the appends resolve (PUBACKs go out) and the offsets are stored. */
  #committed(runs: Run[], offsets: PendingOffset[], bases: number[], messages: number): void {
    this.stats.commits++;
    this.stats.appended += messages;
    for (let r = 0; r < runs.length; r++) {
      let base = bases[r];
      for (const a of runs[r].appends) {
        a.resolve(base);
        base += a.messages.length;
      }
    }
    for (const o of offsets) o.resolve();
    this.#onDurable();
  }

  #failed(batch: PendingAppend[], offsets: PendingOffset[], e: unknown): void {
    const error = this.#onError(e);
    for (const a of batch) a.reject(error);
    for (const o of offsets) o.reject(error);
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

/** Groups a batch's appends by (topic, partition), keeping arrival order within each. */
function groupRuns(batch: readonly PendingAppend[]): Run[] {
  const runs: Run[] = [];
  const byTopic = new Map<TopicState, (Run | undefined)[]>();
  for (const a of batch) {
    let perPartition = byTopic.get(a.state);
    if (!perPartition) byTopic.set(a.state, perPartition = []);
    let run = perPartition[a.partition];
    if (!run) {
      run = { state: a.state, partition: a.partition, appends: [], count: 0 };
      perPartition[a.partition] = run;
      runs.push(run);
    }
    run.appends.push(a);
    run.count += a.messages.length;
  }
  return runs;
}
