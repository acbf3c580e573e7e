/**
 * Makes written data durable off the event loop: fsyncs one file from its own handle with
 * Deno's asynchronous `syncData()` (it runs on a blocking-I/O thread; an fsync covers the file's
 * data whichever descriptor wrote it). Used for the message log's active segment
 * (_log_segment.ts) and the catalog's `-wal` file (the catalog commits with `synchronous =
 * NORMAL`, so a COMMIT writes its WAL frames without fsync). An append resolves — and its PUBACK
 * goes out — only after a sync that started after its write has finished, so "PUBACK after
 * durable commit" (DESIGN §6) holds, but the event loop keeps reading sockets and writing the
 * next batch while the disk works, and one fsync covers every transaction written before it
 * started (group commit across transactions).
 *
 * @module
 */

/** fsyncs one file, coalescing concurrent requests into one call at a time. */
export class FileSync {
  readonly #path: string;
  #file: Promise<Deno.FsFile> | undefined;
  /** The fsync now running, if any. There is never more than one. */
  #running: Promise<void> | undefined;
  /** Callers that asked while one was running: they share the next fsync. */
  #waiting: PromiseWithResolvers<void> | undefined;
  #closed = false;
  /** Completed fsync calls, for stats and tests. */
  syncs = 0;

  /** @param path the file; "" for none (a ":memory:" store): every sync is a no-op. */
  constructor(path: string) {
    this.#path = path;
  }

  /**
   * Resolves once everything committed before this call is on disk; rejects when the fsync
   * fails (the appends waiting on it must not be acknowledged). Syncs run one at a time and
   * settle in call order.
   */
  sync(): Promise<void> {
    if (this.#path === "" || this.#closed) return Promise.resolve();
    if (!this.#running) return this.#running = this.#run();
    // The running fsync may have started before the caller's COMMIT: wait for the next one.
    this.#waiting ??= Promise.withResolvers<void>();
    return this.#waiting.promise;
  }

  /** Waits for the syncs under way, then closes the file; later syncs are no-ops. */
  async close(): Promise<void> {
    this.#closed = true;
    await (this.#waiting?.promise ?? this.#running)?.catch(() => {});
    const file = await this.#file?.catch(() => undefined);
    this.#file = undefined;
    try {
      file?.close();
    } catch { /* already closed */ }
  }

  /** One fsync; when it ends, the next starts at once for whoever waited meanwhile. */
  #run(): Promise<void> {
    const done = this.#fsync();
    const next = () => {
      const waiting = this.#waiting;
      this.#waiting = undefined;
      if (!waiting) {
        this.#running = undefined;
        return;
      }
      const running = this.#running = this.#run();
      running.then(waiting.resolve, waiting.reject);
    };
    // Registered before the caller's handlers, so the next fsync is under way before the
    // appends of this one are acknowledged.
    done.then(next, next);
    return done;
  }

  async #fsync(): Promise<void> {
    try {
      // Opened on first use: the WAL exists once the writer has committed.
      this.#file ??= Deno.open(this.#path, { read: true });
      await (await this.#file).syncData();
      this.syncs++;
    } catch (e) {
      this.#file = undefined; // reopened next time
      throw e;
    }
  }
}
