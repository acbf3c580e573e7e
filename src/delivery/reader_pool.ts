/**
 * The shared readers (S5): one per triple, however many subscriptions read it. A
 * reader counts the subscriptions that reference its triple and stops at none; a new one starts
 * after this gateway's stored offset the first time since start (recovery), later at the next
 * offset.
 *
 * @module
 */
import { type ReaderDeps, SharedReader } from "./reader.ts";
import { type Triple, tripleKey } from "./registry.ts";

/** Shared readers by triple key. */
export class ReaderPool {
  readonly readers = new Map<string, SharedReader>();
  /** Triples whose first reader since start resumed from the stored offset (recovery). */
  #recovered = new Set<string>();
  /** Handed on to every reader. */
  readonly #deps: ReaderDeps;

  constructor(deps: ReaderDeps) {
    this.#deps = deps;
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
      const start = await this.#startOffset(triple, key);
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
    this.#recovered.add(key);
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
      });
    }
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

  /** Where a new reader of the triple starts. */
  async #startOffset(triple: Triple, key: string): Promise<number> {
    const { backend, options } = this.#deps;
    if (this.#recovered.has(key)) return await backend.nextOffset(triple);
    // First reader since start: resume after the stored offset so unsettled messages
    // from before a crash are delivered again (at least once).
    const stored = await backend.getOffset(options.consumer, triple);
    const start = stored === null ? await backend.nextOffset(triple) : stored + 1;
    this.#recovered.add(key);
    return start;
  }
}
