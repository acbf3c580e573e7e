/**
 * When retention runs (_retention.ts says what it drops): one pass at a time, on a timer and on
 * demand, stopped at its next chunk boundary when the store closes. After dropping, a pass
 * stores every partition's floors, then deletes the segments nothing needs any more.
 *
 * @module
 */
import type { Catalog } from "./_catalog.ts";
import type { MessageLog } from "./_message_log.ts";
import { type RetentionLimits, runRetentionPass } from "./_retention.ts";
import type { WriterLink } from "./_writer_link.ts";

/** Runs the retention passes of one open store. */
export class RetentionRunner {
  readonly #log: MessageLog;
  readonly #catalog: Catalog;
  readonly #link: WriterLink;
  readonly #limits: RetentionLimits;
  #pass: Promise<number> | undefined;
  #stopped = false;
  #timer: ReturnType<typeof setInterval> | undefined;

  constructor(log: MessageLog, catalog: Catalog, link: WriterLink, limits: RetentionLimits) {
    this.#log = log;
    this.#catalog = catalog;
    this.#link = link;
    this.#limits = limits;
  }

  /**
   * Runs `run` every `intervalMs`; a failing pass (e.g. disk I/O error) is retried next
   * interval, appends report health.
   */
  schedule(intervalMs: number, run: () => Promise<unknown>): void {
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
    }
  }

  /** Ends the timer; a pass under way stops at its next chunk boundary and is waited for. */
  async stop(): Promise<void> {
    clearInterval(this.#timer);
    this.#stopped = true;
    await this.#pass?.catch(() => 0);
  }

  async #runPass(now: number): Promise<number> {
    const log = this.#log;
    const deleted = await runRetentionPass(
      log,
      this.#catalog.topics(),
      this.#limits,
      now,
      () => this.#stopped,
    );
    if ((deleted > 0 || log.hasRetainedOut()) && !this.#stopped) {
      // Floors first: the dropped batches stay on disk until their segment goes (a reopened
      // log must skip them), and once a segment is gone only the floors say how far each
      // partition's offsets went.
      const floors: [number, number, number, number][] = [];
      for (const p of log.partitions()) floors.push([p.topicId, p.partition, p.start, p.next]);
      await this.#link.request({ type: "floors", floors });
      await this.#link.syncCommitted();
      await log.deleteRetainedOut();
    }
    return deleted;
  }
}
