/**
 * When retention runs (_retention.ts says what it drops): one pass at a time, on a timer and on
 * demand, stopped at its next chunk boundary when the store closes. After dropping, a pass
 * stores every partition's floors, then deletes the segments nothing needs any more.
 *
 * @module
 */
import type { Catalog } from "./_catalog.ts";
import type { MessageLog, PartitionLog } from "./_message_log.ts";
import { setImmediate } from "node:timers";
import { CHUNK_RECORDS, type RetentionLimits, runRetentionPass } from "./_retention.ts";
import { type ForwardHold, hasRoom, needsRoom, reclaimOldestSegment } from "./_reclaim.ts";
import type { WriterLink } from "./_writer_link.ts";
import type { RetentionTally } from "./_retention_report.ts";

/** Forward mode: what must be kept for the upstream, and the store's bound. */
export interface ForwardRoom {
  readonly hold: ForwardHold;
  readonly maxStoreBytes: number;
}

/** The store's bound, and whom to tell when a pass leaves room for the next segment again. */
export interface StoreSpace {
  readonly maxBytes: number;
  freed(): void;
}

/** Runs the retention passes of one open store. */
export class RetentionRunner {
  readonly #log: MessageLog;
  readonly #catalog: Catalog;
  readonly #link: WriterLink;
  readonly #limits: RetentionLimits;
  readonly #room: ForwardRoom | undefined;
  readonly #space: StoreSpace | undefined;
  /** Told what a pass that deleted messages deleted, once the pass is done. */
  readonly #onDeleted: ((tally: RetentionTally) => void) | undefined;
  #pass: Promise<number> | undefined;
  /** A pass was asked for while one ran: run another after it. */
  #again = false;
  #stopped = false;
  #timer: ReturnType<typeof setInterval> | undefined;
  /** What the timer runs (the owner's pass, with its error handling). */
  #scheduled: (() => Promise<unknown>) | undefined;

  constructor(
    log: MessageLog,
    catalog: Catalog,
    link: WriterLink,
    limits: RetentionLimits,
    room?: ForwardRoom,
    space?: StoreSpace,
    onDeleted?: (tally: RetentionTally) => void,
  ) {
    this.#space = space;
    this.#onDeleted = onDeleted;
    this.#log = log;
    this.#catalog = catalog;
    this.#link = link;
    this.#limits = room ? { ...limits, keepFrom: room.hold.firstUnforwarded } : limits;
    this.#room = room;
  }

  /** Forward mode: whether the next segment would not fit (a pass then frees the oldest). */
  get needsRoom(): boolean {
    return this.#room !== undefined && needsRoom(this.#log, this.#room.maxStoreBytes);
  }

  /**
   * Runs a pass soon (forward mode, when the store needs room): at once when none runs, else
   * once more after the one under way. Failures are left to the next pass and to appends.
   */
  soon(): void {
    if (this.#stopped || !this.#scheduled || !this.#room) return;
    if (this.#pass) this.#again = true;
    else this.#scheduled().catch(() => {});
  }

  /**
   * Runs `run` every `intervalMs`; a failing pass (e.g. disk I/O error) is retried next
   * interval, appends report health.
   */
  schedule(intervalMs: number, run: () => Promise<unknown>): void {
    this.#scheduled = run;
    this.#timer = setInterval(() => {
      if (!this.#pass) run().catch(() => {});
    }, Math.max(1, intervalMs));
  }

  /** One pass as of `now` (µs), after any pass under way; resolves with messages dropped. */
  async run(now: number): Promise<number> {
    while (this.#pass) await this.#pass.catch(() => 0);
    this.#pass = this.#runPass(now);
    try {
      return await this.#pass;
    } finally {
      this.#pass = undefined;
      if (this.#again) {
        this.#again = false;
        queueMicrotask(() => this.soon());
      }
    }
  }

  /** Ends the timer; a pass under way stops at its next chunk boundary and is waited for. */
  async stop(): Promise<void> {
    clearInterval(this.#timer);
    this.#stopped = true;
    await this.#pass?.catch(() => 0);
  }

  /**
   * Drops partition `p`'s stored batches that end at or before `before` (a batch straddling it
   * stays), whatever their age: the record topics' compaction (their records before a restated
   * snapshot are superseded). Forward mode: not what is still to forward (the next compaction
   * drops it). One pass at a time with retention; then floors and segments as after a pass.
   * Resolves with the messages dropped.
   */
  async truncate(p: PartitionLog, upTo: number): Promise<number> {
    while (this.#pass) await this.#pass.catch(() => 0);
    const before = Math.min(upTo, this.#limits.keepFrom?.(p.topicId, p.partition) ?? Infinity);
    const dropping = (async () => {
      let dropped = 0;
      for (;;) {
        const { messages, records } = this.#log.dropOldest(
          p,
          (_, end) => end <= before,
          CHUNK_RECORDS,
        );
        dropped += messages;
        if (records < CHUNK_RECORDS || this.#stopped) break;
        await new Promise((resolve) => setImmediate(resolve));
      }
      if (dropped > 0) await this.#storeFloorsAndFree();
      return dropped;
    })();
    this.#pass = dropping;
    try {
      return await dropping;
    } finally {
      this.#pass = undefined;
    }
  }

  async #runPass(now: number): Promise<number> {
    const log = this.#log;
    const stopped = () => this.#stopped;
    const tally: RetentionTally = new Map();
    const topics = this.#catalog.topics();
    let deleted = await runRetentionPass(log, topics, this.#limits, now, stopped, tally);
    if (this.#room && needsRoom(log, this.#room.maxStoreBytes)) {
      const reclaimed = await reclaimOldestSegment(log, this.#room.hold, stopped, tally);
      // One segment a pass: go on while there is still no room and this one freed some.
      if (reclaimed > 0) this.#again = true;
      deleted += reclaimed;
    }
    if ((deleted > 0 || log.hasRetainedOut()) && !this.#stopped) await this.#storeFloorsAndFree();
    if (tally.size > 0) this.#onDeleted?.(tally);
    return deleted;
  }

  /** After dropping: every partition's floors, then the segments nothing needs any more. */
  async #storeFloorsAndFree(): Promise<void> {
    const log = this.#log;
    // Floors first: the dropped batches stay on disk until their segment goes (a reopened log
    // must skip them), and once a segment is gone only the floors say how far each partition's
    // offsets went.
    const floors: [number, number, number, number][] = [];
    for (const p of log.partitions()) floors.push([p.topicId, p.partition, p.start, p.next]);
    await this.#link.request({ type: "floors", floors });
    await this.#link.syncCommitted();
    await log.deleteRetainedOut();
    const space = this.#space;
    if (space && hasRoom(log, space.maxBytes)) space.freed();
  }
}
