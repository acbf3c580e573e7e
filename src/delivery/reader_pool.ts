/**
 * The shared readers (S5): one per triple, however many subscriptions read it. A
 * reader counts the subscriptions that reference its triple and stops at none; a new one starts
 * at its partition's next offset, whether or not the gateway just started: a new subscription
 * sees what is appended after its SUBACK, never older messages. What a live subscriber had not settled
 * before a restart has no one to go to (a clean session ended with its connection; a stored
 * session and a parked `$share` group resume from positions of their own), so the gateway's
 * stored consumer offset is never a start. On the log on this machine the pool tells each reader
 * when its partition grew, so an idle reader waits instead of looking again on a timer. One
 * timer stores every reader's offset each `commit_interval_ms`, so the stores of one tick go to
 * the log's catalog as one transaction (_group_commit.ts) rather than one per reader at
 * scattered times, each with its own fsyncs and its own pause of the event loop.
 *
 * @module
 */
import { type ReaderDeps, SharedReader } from "./reader.ts";
import { type Triple, tripleKey } from "./registry.ts";

/** Shared readers by triple key. */
export class ReaderPool {
  readonly readers = new Map<string, SharedReader>();
  /** Handed on to every reader. */
  readonly #deps: ReaderDeps;
  /** Ends the watch of the local log's growth; null for Iggy. */
  readonly #unwatch: (() => void) | null;
  /** Stores the readers' offsets on the interval; set while a reader is started. */
  #commitTimer: ReturnType<typeof setInterval> | undefined;

  constructor(deps: ReaderDeps) {
    this.#deps = deps;
    this.#unwatch = deps.growth?.watchGrowth((address, next) => {
      if (this.readers.size > 0) this.readers.get(tripleKey(address))?.grew(next);
    }) ?? null;
  }

  /** Stops telling readers of the log's growth (the gateway stops). */
  close(): void {
    this.#unwatch?.();
    this.#stopCommits();
  }

  /**
   * The reader of a triple, reserved for one more subscription: joined when live, created when
   * missing (then pushed to `fresh`, not yet started: see {@link start}). Returns the offset
   * from which the new subscription sees messages: a live reader's partition's next offset now,
   * a new reader's start.
   */
  async reserve(triple: Triple, fresh: SharedReader[]): Promise<number> {
    const key = tripleKey(triple);
    for (;;) {
      const existing = this.#live(key);
      if (existing !== undefined) {
        existing.subscribers++; // reserve at once, so it cannot stop during the await
        try {
          return await this.#deps.backend.nextOffset(triple);
        } catch (err) {
          this.release(key);
          throw err;
        }
      }
      const start = await this.#deps.backend.nextOffset(triple);
      if (this.#live(key) !== undefined) continue; // raced with another subscribe: join it
      fresh.push(this.#create(triple, start));
      return start;
    }
  }

  /**
   * Reserves the triple's reader synchronously, creating and starting one at `offset` when none
   * is live (a wildcard subscription joining a target it just saw appended to).
   */
  reserveNow(triple: Triple, offset: number): void {
    const key = tripleKey(triple);
    const existing = this.#live(key);
    if (existing !== undefined) {
      existing.subscribers++;
      return;
    }
    this.start([this.#create(triple, offset)]);
  }

  /** One subscription less on the triple; its reader stops at none. */
  release(key: string): void {
    const reader = this.readers.get(key);
    if (reader && --reader.subscribers <= 0) reader.stop();
  }

  /**
   * Starts readers a subscribe created; one left without subscribers (the subscribe failed) is
   * stopped first, so it ends instead of polling for nobody.
   */
  start(fresh: SharedReader[]): void {
    for (const reader of fresh) {
      if (reader.subscribers <= 0) reader.stop();
      const key = reader.key;
      reader.start(() => {
        if (this.readers.get(key) === reader) this.readers.delete(key);
        if (this.readers.size === 0) this.#stopCommits();
      });
    }
    if (this.readers.size > 0) this.#startCommits();
  }

  #startCommits(): void {
    if (this.#commitTimer !== undefined) return;
    this.#commitTimer = setInterval(() => {
      for (const reader of this.readers.values()) reader.maybeCommit(true);
    }, this.#deps.options.commitIntervalMs);
    Deno.unrefTimer(this.#commitTimer as unknown as number);
  }

  #stopCommits(): void {
    clearInterval(this.#commitTimer);
    this.#commitTimer = undefined;
  }

  #live(key: string): SharedReader | undefined {
    const r = this.readers.get(key);
    return r !== undefined && (!r.stopped || r.revive()) ? r : undefined;
  }

  #create(triple: Triple, start: number): SharedReader {
    const reader = new SharedReader(triple, start, this.#deps);
    reader.subscribers = 1; // reserved for the subscription being prepared
    this.readers.set(reader.key, reader);
    return reader;
  }
}
