/**
 * Makes written data durable off the event loop: fsyncs one file with Deno's asynchronous
 * `syncData()` (it runs on a blocking-I/O thread; an fsync covers the file's data whichever
 * descriptor wrote it). Used for the message log's active segment (_log_segment.ts) and the
 * catalog's `-wal` file (the catalog commits with `synchronous = NORMAL`, so a COMMIT writes its
 * WAL frames without fsync). An append resolves — and its PUBACK goes out — only after a sync
 * that started after its write has finished, so "PUBACK after durable commit" holds,
 * but the event loop keeps reading sockets and writing the next batch while the disk works, and
 * one fsync covers every transaction written before it started (group commit across
 * transactions).
 *
 * Up to {@link MAX_OVERLAPPING_SYNCS} fsyncs run at once, each from its own handle (Deno queues
 * the blocking calls of one handle behind each other). With one at a time, a transaction
 * written just after an fsync started waited for the rest of it and then for its own; and one
 * slow fsync held every transaction behind it. Here a transaction's own fsync starts at once,
 * and the disk runs overlapping flushes side by side, each about as fast as one alone.
 *
 * Settling stays in call order: an fsync that finishes covers every sync request made before it
 * started, so it settles those too, oldest first; one that fails rejects only its own callers,
 * and only once everything asked before them has settled.
 *
 * @module
 */

/** fsyncs of one file that may be under way at the same time. */
export const MAX_OVERLAPPING_SYNCS = 2;

/** Callers that share one fsync: everything they wrote before it started. */
interface SyncGroup {
  /** Start order of its fsync; 0 while it waits for a free handle. */
  seq: number;
  outcome: "pending" | "done" | "failed";
  error?: unknown;
  readonly settle: PromiseWithResolvers<void>;
}

/** fsyncs one file, at most {@link MAX_OVERLAPPING_SYNCS} at once, settling in call order. */
export class FileSync {
  readonly #path: string;
  /** One lazily opened handle per slot; a slot's handle is reopened after it fails. */
  readonly #handles: (Promise<Deno.FsFile> | undefined)[] = [];
  /** Slots with no fsync running. */
  readonly #free: number[] = [];
  /** Groups whose fsync runs or ran and that have not settled yet, in start order. */
  #started: SyncGroup[] = [];
  /** Callers that asked while every slot was busy: they share the next fsync to start. */
  #waiting: SyncGroup | undefined;
  /** fsync calls under way (close waits for them, settled or not). */
  readonly #running = new Set<Promise<void>>();
  #nextSeq = 1;
  #closed = false;
  /** Completed fsync calls, for stats and tests. */
  syncs = 0;

  /** @param path the file; "" for none (a ":memory:" store): every sync is a no-op. */
  constructor(path: string) {
    this.#path = path;
    for (let slot = MAX_OVERLAPPING_SYNCS - 1; slot >= 0; slot--) this.#free.push(slot);
  }

  /**
   * Resolves once everything written before this call is on disk; rejects when its fsync
   * fails (the appends waiting on it must not be acknowledged). Settles in call order.
   */
  sync(): Promise<void> {
    if (this.#path === "" || this.#closed) return Promise.resolve();
    if (this.#waiting) return this.#waiting.settle.promise;
    const group: SyncGroup = { seq: 0, outcome: "pending", settle: Promise.withResolvers() };
    const slot = this.#free.pop();
    // Every slot busy: the running fsyncs may have started before the caller's write.
    if (slot === undefined) this.#waiting = group;
    else this.#start(group, slot);
    return group.settle.promise;
  }

  /** Waits for the syncs under way, then closes the handles; later syncs are no-ops. */
  async close(): Promise<void> {
    this.#closed = true;
    const open = [...this.#started, ...(this.#waiting ? [this.#waiting] : [])];
    await Promise.all(open.map((g) => g.settle.promise.catch(() => {})));
    await Promise.all([...this.#running].map((p) => p.catch(() => {})));
    for (const handle of this.#handles) {
      const file = await handle?.catch(() => undefined);
      try {
        file?.close();
      } catch { /* already closed */ }
    }
    this.#handles.length = 0;
  }

  #start(group: SyncGroup, slot: number): void {
    group.seq = this.#nextSeq++;
    this.#started.push(group);
    const running = this.#fsync(slot);
    this.#running.add(running);
    running.then(
      () => this.#finished(slot, () => this.#covered(group.seq)),
      (error) => this.#finished(slot, () => this.#failed(group, error)),
    ).finally(() => this.#running.delete(running));
  }

  /** A slot is free again: the waiting callers' fsync starts before anyone is settled. */
  #finished(slot: number, record: () => void): void {
    const waiting = this.#waiting;
    this.#waiting = undefined;
    if (waiting) this.#start(waiting, slot);
    else this.#free.push(slot);
    record();
    this.#settleInOrder();
  }

  /** The fsync numbered `seq` finished: everything asked before it started is on disk. */
  #covered(seq: number): void {
    for (const g of this.#started) {
      if (g.seq > seq) break;
      if (g.outcome === "pending") g.outcome = "done";
    }
  }

  #failed(group: SyncGroup, error: unknown): void {
    // A later fsync may already have covered this group's writes.
    if (group.outcome !== "pending") return;
    group.outcome = "failed";
    group.error = error;
  }

  /** Settles finished groups from the oldest, stopping at the first still pending. */
  #settleInOrder(): void {
    let n = 0;
    for (; n < this.#started.length; n++) {
      const g = this.#started[n];
      if (g.outcome === "pending") break;
      if (g.outcome === "done") g.settle.resolve();
      else g.settle.reject(g.error);
    }
    if (n > 0) this.#started = this.#started.slice(n);
  }

  async #fsync(slot: number): Promise<void> {
    // Opened on first use: the WAL exists once the writer has committed.
    const handle = this.#handles[slot] ??= Deno.open(this.#path, { read: true });
    let file: Deno.FsFile | undefined;
    try {
      file = await handle;
      await file.syncData();
      this.syncs++;
    } catch (e) {
      this.#handles[slot] = undefined; // reopened next time
      try {
        file?.close();
      } catch { /* already closed */ }
      throw e;
    }
  }
}
