/**
 * When the group commit (_group_commit.ts) fsyncs what it has written: at once, after a short
 * linger, or later.
 *
 * - A transaction someone waits for (QoS 1 and 2, wills, positions) is `durable()`: its appends
 *   resolve after an fsync that started after its write. With `lingerMs` 0 that fsync starts at
 *   once. With a linger, the first such transaction starts a timer and later ones join it until
 *   it fires or they hold {@link LINGER_ENOUGH_MESSAGES}: one fsync then covers them all. A
 *   stream of single readings (a fleet of devices) thus costs one fsync per linger, not one per
 *   reading, for at most `lingerMs` more before each PUBACK. The write itself is not delayed:
 *   live subscribers get the messages as before.
 * - A transaction nobody waits for (QoS 0 only) is `writtenLazy()`: the next fsync covers it,
 *   or one after `lazyMs` does.
 *
 * Fsyncs settle in the order they were asked for (_file_sync.ts), so appends resolve in order.
 *
 * @module
 */

/** Lingering transactions holding this many messages are worth their fsync now. */
export const LINGER_ENOUGH_MESSAGES = 64;

/** The fsyncs of the message log, timed. */
export class CommitSyncs {
  readonly #sync: () => Promise<void>;
  readonly #lingerMs: number;
  readonly #lazyMs: number;
  /** The fsync the lingering transactions wait for; undefined while none lingers. */
  #lingering: PromiseWithResolvers<void> | undefined;
  #lingerMessages = 0;
  #lingerTimer: ReturnType<typeof setTimeout> | undefined;
  /** A `writtenLazy` transaction was written and no fsync was asked for since. */
  #lazyDirty = false;
  #lazyTimer: ReturnType<typeof setTimeout> | undefined;
  /** Fsyncs started by the lazy timer, still running (the idle check waits for them). */
  lazyRunning = 0;

  /**
   * @param sync fsyncs everything written before the call
   * @param lingerMs how long a durable transaction waits for others to share its fsync; 0 = none
   * @param lazyMs interval of the deferred fsync of QoS 0 transactions; 0 = none deferred
   */
  constructor(sync: () => Promise<void>, lingerMs: number, lazyMs: number) {
    this.#sync = sync;
    this.#lingerMs = lingerMs;
    this.#lazyMs = lazyMs;
  }

  /** A `writtenLazy` transaction may not be on disk yet. */
  get lazyPending(): boolean {
    return this.#lazyDirty || this.lazyRunning > 0;
  }

  /** Nobody waits for the fsync of a transaction of QoS 0 only (see the module). */
  get defersLazy(): boolean {
    return this.#lazyMs > 0;
  }

  /** A transaction of `messages` someone waits for is written: resolves once it is on disk. */
  durable(messages: number): Promise<void> {
    this.#lazyDirty = false; // the fsync below covers every earlier write
    if (this.#lingerMs === 0) return this.#sync();
    const group = this.#lingering ??= this.#linger();
    this.#lingerMessages += messages;
    if (this.#lingerMessages >= LINGER_ENOUGH_MESSAGES) this.#endLinger();
    return group.promise;
  }

  /** A transaction nobody waits for is written; `onSynced` runs after its deferred fsync. */
  writtenLazy(onSynced: () => void, onFailed: (e: unknown) => void, onDone: () => void): void {
    this.#lazyDirty = true;
    this.#lazyTimer ??= setTimeout(() => this.#syncLazy(onSynced, onFailed, onDone), this.#lazyMs);
  }

  /** Everything written so far goes to disk now: the linger ends, the deferred fsync starts. */
  hurry(onSynced: () => void, onFailed: (e: unknown) => void, onDone: () => void): void {
    this.#endLinger();
    if (this.#lazyTimer !== undefined) this.#syncLazy(onSynced, onFailed, onDone);
  }

  #linger(): PromiseWithResolvers<void> {
    this.#lingerTimer = setTimeout(() => this.#endLinger(), this.#lingerMs);
    return Promise.withResolvers<void>();
  }

  #endLinger(): void {
    const group = this.#lingering;
    if (group === undefined) return;
    clearTimeout(this.#lingerTimer);
    this.#lingerTimer = undefined;
    this.#lingering = undefined;
    this.#lingerMessages = 0;
    this.#sync().then(group.resolve, group.reject);
  }

  /** The deferred fsync, unless an fsync someone waited for covered them meanwhile. */
  #syncLazy(onSynced: () => void, onFailed: (e: unknown) => void, onDone: () => void): void {
    clearTimeout(this.#lazyTimer);
    this.#lazyTimer = undefined;
    if (!this.#lazyDirty) return;
    this.#lazyDirty = false;
    this.lazyRunning++;
    this.#sync().then(onSynced, onFailed).finally(() => {
      this.lazyRunning--;
      onDone();
    });
  }
}
