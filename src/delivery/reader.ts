/**
 * A shared reader: one per triple (stream, topic, partition), however many subscribers.
 * It polls batches with auto-commit off, hands each message to the router, and
 * stores the consumer offset only up to the ledger's safe offset (POLL ≠ ACK), monotonically
 * and batched by count or interval.
 *
 * An idle reader of the log on this machine waits for the log to say the partition grew
 * (`LocalLog.watchGrowth`, through the reader pool): only this gateway appends there, so there is
 * nothing to look for in between. An idle reader of Iggy, where other gateways append too, is
 * woken by this gateway's own appends and otherwise looks again after a backoff that doubles up
 * to `IDLE_MAX_MS`.
 *
 * @module
 */
import type { LogBackend, StoredMessage } from "../log/port.ts";
import type { LocalLog } from "../log/local_log.ts";
import type { Logger } from "../observe/logger.ts";
import type { GatewayMetrics } from "../observe/gateway_metrics.ts";
import { nextTick } from "../base/tick.ts";
import { ownBytes } from "../base/byte_blocks.ts";
import { AckLedger } from "./ledger.ts";
import { type Triple, tripleKey } from "./registry.ts";

const IDLE_MIN_MS = 1;
const IDLE_MAX_MS = 50;
const ERROR_BACKOFF_MAX_MS = 2000;

/** Options of a reader. */
export interface ReaderOptions {
  readonly consumer: string;
  readonly pollBatch: number;
  readonly commitIntervalMs: number;
  readonly commitBatchCount: number;
  /** Bound on polled-but-unsettled messages; at the bound the reader stops polling. */
  readonly maxUnsettled: number;
}

/**
 * Routes a polled batch (offsets ascending, all ≥ the reader's old position); a promise when
 * part of it waits for a subscriber's room: the reader routes nothing else until it resolves.
 */
export type RouteFn = (
  reader: SharedReader,
  batch: readonly StoredMessage[],
) => Promise<void> | undefined;

/** What every shared reader works with (the reader pool hands its own to each reader). */
export interface ReaderDeps {
  /** The readers' polls and offset commits; the pool's next offsets for new subscriptions. */
  readonly backend: Pick<LogBackend, "poll" | "storeOffset" | "nextOffset">;
  readonly options: ReaderOptions;
  readonly route: RouteFn;
  readonly metrics: GatewayMetrics;
  readonly logger: Logger;
  /**
   * The log on this machine, which says when a partition grew: idle readers wait for that
   * instead of looking again on a timer. Null for Iggy (appends from other gateways go unseen).
   */
  readonly growth: Pick<LocalLog, "watchGrowth"> | null;
}

/** Shared reader of one triple. */
export class SharedReader {
  readonly triple: Triple;
  /** `tripleKey(triple)`, made once. */
  readonly key: string;
  readonly ledger: AckLedger;
  /** Subscriptions that reference this triple. */
  subscribers = 0;
  /** Next offset to poll. */
  position: number;
  readonly #deps: ReaderDeps;
  #committed: number;
  #committing = false;
  #started = false;
  #stopped = false;
  #abandoned = false;
  #ended = false;
  /** The offset after the last message the local log said is readable (-1: none said yet). */
  #grownTo = -1;
  /** Ends the current sleep (null: not sleeping); its timer ends it too. */
  #wake: (() => void) | null = null;
  #sleepTimer: ReturnType<typeof setTimeout> | undefined;
  /** Ends a poll that waits in the backend for new messages (Iggy 0.12 long poll) on stop. */
  #polling = new AbortController();
  /** A routed batch still waiting for a subscriber's room; null: none. */
  #routing: Promise<void> | null = null;
  /** Resolves when the loop has ended (after stop + settle + final commit). */
  done: Promise<void> = Promise.resolve();

  constructor(triple: Triple, startOffset: number, deps: ReaderDeps) {
    this.triple = triple;
    this.key = tripleKey(triple);
    this.position = startOffset;
    this.ledger = new AckLedger(startOffset - 1);
    this.#committed = startOffset - 1;
    this.#deps = deps;
  }

  /** Last stored offset (-1 = none). */
  get committedOffset(): number {
    return this.#committed;
  }

  get stopped(): boolean {
    return this.#stopped;
  }

  /** Starts polling (once); `onEnd` runs when the loop has ended. */
  start(onEnd: () => void = () => {}): void {
    if (this.#started) return;
    this.#started = true;
    this.done = this.#loop().finally(onEnd);
  }

  /** The local log says the partition's messages are readable up to `next` (exclusive). */
  grew(next: number): void {
    if (next > this.#grownTo) this.#grownTo = next;
    if (next > this.position) this.signal();
  }

  /** New messages may be there: wake an idle reader now. */
  signal(): void {
    const wake = this.#wake;
    if (wake === null) return;
    this.#wake = null;
    clearTimeout(this.#sleepTimer);
    wake();
  }

  /**
   * Stops polling; the loop ends after what is in flight has settled, then commits. With
   * `abandon` (the gateway stops) the loop ends at once: the final commit stores only the
   * settled prefix, so what is still unsettled is delivered again after a restart.
   */
  stop(abandon = false): void {
    this.#stopped = true;
    this.#polling.abort();
    if (abandon) this.#abandoned = true;
    this.signal();
  }

  /**
   * Messages this gateway just appended to the triple, confirmed at `baseOffset`. When the
   * reader is exactly caught up they are routed from memory, saving a poll round trip (the
   * latency of the 1:1 path); otherwise this is just a signal to poll. A poll already in
   * flight that returns the same offsets skips them (position moved past).
   */
  offerAppended(
    baseOffset: number,
    messages: readonly { payload: Uint8Array; headers: ReadonlyMap<string, string> }[],
  ): void {
    if (
      this.#stopped || baseOffset !== this.position || this.#routing !== null ||
      this.ledger.size + messages.length > this.#deps.options.maxUnsettled
    ) {
      this.signal();
      return;
    }
    const timestampMicros = Date.now() * 1000;
    const batch: StoredMessage[] = messages.map((m, i) => ({
      partition: this.triple.partition,
      offset: baseOffset + i,
      timestampMicros,
      // Held until every subscriber settles it: not in a block shared with other messages.
      payload: ownBytes(m.payload),
      headers: m.headers,
    }));
    this.position = baseOffset + messages.length;
    this.#route(batch);
    this.maybeCommit();
  }

  /** Takes back a stop whose loop has not ended yet (a new subscriber arrived). */
  revive(): boolean {
    if (this.#ended || this.#abandoned) return false;
    this.#stopped = false;
    if (this.#polling.signal.aborted) this.#polling = new AbortController();
    return true;
  }

  /** Stores the safe offset when it moved by `commit_batch_count`, or on the interval (the
   * pool's timer, {@link ReaderPool}). */
  maybeCommit(interval = false): void {
    const safe = this.ledger.safeOffset;
    if (safe <= this.#committed || this.#committing) return;
    const d = this.#deps;
    if (!interval && safe - this.#committed < d.options.commitBatchCount) return;
    this.#committing = true;
    d.backend.storeOffset(d.options.consumer, this.triple, safe).then(
      () => {
        // Monotonic: a later commit can only move forward.
        if (safe > this.#committed) this.#committed = safe;
        d.metrics.offsetCommits.inc();
      },
      (err) => d.logger.limited("warn", "Storing consumer offset failed", { error: err }),
    ).finally(() => {
      this.#committing = false;
    });
  }

  async #loop(): Promise<void> {
    const d = this.#deps;
    let idle = IDLE_MIN_MS;
    let errorBackoff = 50;
    for (;;) {
      if (this.#stopped) {
        // Stopping: wait until every routed copy settled (or was struck), then end.
        if ((this.ledger.size === 0 && this.#routing === null) || this.#abandoned) break;
        await this.#sleep(20);
        continue;
      }
      if (this.#routing !== null || this.ledger.size >= d.options.maxUnsettled) {
        await (this.#routing ?? this.#sleep(IDLE_MAX_MS)); // a paced batch, or settles: bounded
        continue;
      }
      let batch: StoredMessage[];
      try {
        batch = await d.backend.poll(
          this.triple,
          this.position,
          d.options.pollBatch,
          this.#polling.signal,
        );
        d.metrics.polls.inc();
        errorBackoff = 50;
      } catch (err) {
        d.logger.limited("warn", "Shared reader poll failed", {
          stream: this.triple.stream,
          topic: this.triple.topic,
          partition: this.triple.partition,
          error: err,
        });
        await this.#sleep(errorBackoff);
        errorBackoff = Math.min(errorBackoff * 2, ERROR_BACKOFF_MAX_MS);
        continue;
      }
      if (batch.length === 0) {
        idle = await this.#idle(idle);
        continue;
      }
      idle = IDLE_MIN_MS;
      const fresh = batch[0].offset >= this.position
        ? batch
        : batch.filter((m) => m.offset >= this.position);
      if (fresh.length > 0) {
        this.position = fresh[fresh.length - 1].offset + 1;
        this.#route(fresh);
      }
      this.maybeCommit();
      // Yield to I/O before the next poll: a backend that answers at once (embedded) would
      // otherwise let a reader that is behind route its whole backlog without one socket
      // write or PUBACK read in between, pushing every subscriber over its cap at once.
      await new Promise<void>((r) => nextTick(r));
    }
    this.#ended = true;
    this.maybeCommit(true);
    while (this.#committing) await this.#sleepPlain(5);
  }

  /**
   * After an empty poll: waits for the local log to grow, or (Iggy) for the back-off `idle`;
   * returns the next back-off. A growth or a stop said while the poll was out has had its
   * signal: it is looked at again (after the back-off, or at the loop's top), never waited for.
   */
  async #idle(idle: number): Promise<number> {
    if (this.#stopped) return idle;
    if (this.#deps.growth !== null && this.#grownTo <= this.position) {
      await this.#sleepUntilSignal();
      return idle;
    }
    await this.#sleep(idle);
    return Math.min(idle * 2, IDLE_MAX_MS);
  }

  /** Hands a batch to the router; one that waits holds back the next (order per triple). */
  #route(batch: readonly StoredMessage[]): void {
    const prior = this.#routing;
    const paced = prior === null
      ? this.#deps.route(this, batch)
      : prior.then(() => this.#deps.route(this, batch));
    if (paced === undefined) return;
    const routing: Promise<void> = paced.catch((err) => {
      this.#deps.logger.limited("error", "Routing a batch failed", { error: err });
    }).finally(() => {
      if (this.#routing === routing) this.#routing = null;
      this.maybeCommit();
    });
    this.#routing = routing;
  }

  /** Sleeps until `ms` pass or a signal arrives: both end it through {@link signal}. */
  #sleep(ms: number): Promise<void> {
    return new Promise((resolve) => {
      this.#wake = resolve;
      this.#sleepTimer = setTimeout(() => this.signal(), ms);
    });
  }

  /** Sleeps until a signal: the local log grew past the position, or the reader stops. */
  #sleepUntilSignal(): Promise<void> {
    return new Promise((resolve) => {
      this.#wake = resolve;
    });
  }

  #sleepPlain(ms: number): Promise<void> {
    return new Promise((r) => setTimeout(r, ms));
  }
}
