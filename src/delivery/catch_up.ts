/**
 * A catch-up: one client's backlog on one triple, read from the log from a position the shared
 * reader has already passed (a stored session's position, a replay's start), delivered to that
 * client only, then handed over to the shared reader. Live messages never need a reader per
 * client: the catch-up reads only what lies behind the shared reader, and ends when it reaches
 * it (its subscriptions then start at that offset on the shared reader, which skipped them
 * until then: their start offset was `Infinity`).
 *
 * Bounds: it is paced by the client's socket (`pacing.ts`): it polls only what the client's
 * queue has room for in bytes and offers each copy once it fits, waiting for the queue to
 * drain otherwise, so QoS 0 copies are not dropped and a client that reads is not evicted
 * (one that stops reading is, after `slow_consumer_timeout_ms`); a replay
 * delivers at most `limits.max_replay_messages` per subscription, then skips the rest to live
 * (counted and logged). What retention removed is skipped, counted and logged with the gap.
 *
 * @module
 */
import { type MqttView, openEnvelope } from "../stored/envelope.ts";
import type { LogBackend, StoredMessage } from "../log/port.ts";
import type { Logger } from "../observe/logger.ts";
import type { GatewayMetrics } from "../observe/gateway_metrics.ts";
import { filterMatches } from "../mapping/mod.ts";
import type { SpanContext } from "@opentelemetry/api";
import type { ClientQueue } from "./client_queue.ts";
import { AckLedger } from "./ledger.ts";
import type { SharedReader } from "./reader.ts";
import { type Subscription, type Triple, tripleKey } from "./registry.ts";
import { expiryLeft } from "./out_v5.ts";
import { deliverCopies } from "./route.ts";
import { dedupe, finishTargets, type Target, targetOf } from "./targets.ts";
import { copiesBytes, drained, ReadAhead, roomFor, sleep, WAIT_MS } from "./pacing.ts";

export { sleep, WAIT_MS };

/** Messages a subscription may still replay (shared by its catch-ups on every triple). */
export interface ReplayBudget {
  left: number;
}

/** What a catch-up needs of delivery. */
export interface CatchUpDeps {
  readonly backend: Pick<LogBackend, "poll">;
  readonly metrics: GatewayMetrics;
  readonly logger: Logger;
  readonly pollBatch: number;
  readonly maxClientBytes: number;
  /** The triple's shared reader (reserved by the subscriptions, so it outlives the catch-up). */
  reader(key: string): SharedReader | undefined;
  /** The client is still attached and the gateway not stopping. */
  live(queue: ClientQueue): boolean;
  evict(q: ClientQueue, reason: string): void;
}

/** One client's backlog on one triple. */
export class CatchUp {
  readonly key: string;
  readonly ledger: AckLedger;
  /** Next offset to read: everything before it was delivered or skipped. */
  position: number;
  #queue: ClientQueue;
  #triple: Triple;
  #subs: Subscription<ClientQueue>[];
  #budget: ReplayBudget;
  #deps: CatchUpDeps;
  #served = new Set<SpanContext>();
  /** Matching messages read and passed over once the replay budget was spent. */
  #over = 0;
  /** Offsets jumped without reading once the budget was spent (matching or not: unknown). */
  #jumped = 0;

  constructor(
    queue: ClientQueue,
    triple: Triple,
    subs: Subscription<ClientQueue>[],
    from: number,
    budget: ReplayBudget,
    deps: CatchUpDeps,
  ) {
    this.key = tripleKey(triple);
    this.ledger = new AckLedger(from - 1);
    this.position = from;
    this.#queue = queue;
    this.#triple = triple;
    this.#subs = subs;
    this.#budget = budget;
    this.#deps = deps;
  }

  /** Reads and delivers until it reaches the shared reader, then hands over. */
  async run(): Promise<void> {
    const d = this.#deps;
    const q = this.#queue;
    const polls = new BehindPolls(d, this.#triple, this.key, "Catch-up poll failed");
    const ahead = new ReadAhead(d.maxClientBytes, d.pollBatch);
    try {
      while (d.live(q)) {
        const reader = d.reader(this.key);
        if (reader === undefined || !this.#subs.some((s) => s.startOffsets.has(this.key))) return;
        if (this.position >= reader.position) return this.#handOver(this.position);
        if (this.#budget.left <= 0) {
          this.#jumped += reader.position - this.position;
          return this.#handOver(reader.position);
        }
        const n = ahead.reserve(q, reader.position - this.position);
        if (n === 0) {
          await drained(q);
          continue;
        }
        const batch = await polls.next(this.position, n);
        if (batch === null || !d.live(q)) continue;
        ahead.polled(q, batch);
        const first = batch.length > 0 ? batch[0].offset : reader.position;
        if (first > this.position) this.#gap(first - this.position);
        if (batch.length === 0) this.position = reader.position;
        for (const m of batch) {
          const done = this.#deliver(m); // a promise only when it waits for room
          if (!(done === true || (done !== false && await done))) return;
          ahead.offered(q, m);
          this.position = m.offset + 1;
        }
        ahead.release(q);
      }
    } finally {
      ahead.release(q);
    }
  }

  /**
   * One message to this client: one copy per prefix of its matching subscriptions, with the
   * MQTT 5 options applied as on the shared reader (`targets.ts`), once its queue has room;
   * expired messages go nowhere. False when the client went away meanwhile.
   */
  #deliver(m: StoredMessage): boolean | Promise<boolean> {
    const view = openEnvelope(m);
    const left = view === null ? null : expiryLeft(m);
    if (view === null || (left !== null && left <= 0)) {
      if (view !== null) this.#deps.metrics.expired.inc();
      this.ledger.record(m.offset, 0);
      return true;
    }
    const found: Target[] = [];
    for (const s of this.#subs) {
      // Unsubscribed meanwhile (its start offsets were cleared): nothing more for it.
      if (!s.startOffsets.has(this.key) || !filterMatches(s.match, view.topic)) continue;
      const t = targetOf(s, m);
      if (t !== null) found.push(t);
    }
    if (found.length > 0 && this.#budget.left <= 0) { // only what it would have delivered
      this.#over++;
      found.length = 0;
    }
    const d = this.#deps;
    const targets = finishTargets(dedupe(found), m, view, left, d.metrics);
    if (targets.length === 0) {
      this.ledger.record(m.offset, 0);
      return true;
    }
    const bytes = copiesBytes(targets, view);
    if (this.#queue.blockedBy(bytes) === null) return this.#offer(m, view, targets);
    return roomFor(this.#queue, bytes).then((ok) => ok && this.#offer(m, view, targets));
  }

  #offer(m: StoredMessage, view: MqttView, targets: Target[]): boolean {
    const d = this.#deps;
    if (!d.live(this.#queue)) return false;
    if (this.#budget.left <= 0) { // spent by another triple's catch-up while this one waited
      this.#over++;
      this.ledger.record(m.offset, 0);
      return true;
    }
    const qos1 = targets.filter((t) => t.qos > 0).length; // QoS 1 and 2 copies hold it
    const entry = this.ledger.record(m.offset, qos1);
    this.#budget.left--;
    d.metrics.routed.inc();
    deliverCopies(targets, view, this, entry, this.#served, d.metrics, d.evict);
    this.#served.clear();
    return true;
  }

  /** From `offset` on, the shared reader delivers to these subscriptions. */
  #handOver(offset: number): void {
    if (this.#over > 0 || this.#jumped > 0) this.#skipped("max_replay_messages reached");
    this.#over = 0;
    this.#jumped = 0;
    this.position = offset;
    for (const s of this.#subs) {
      if (s.startOffsets.get(this.key) === Infinity) s.startOffsets.set(this.key, offset);
    }
  }

  #gap(count: number): void {
    this.#deps.metrics.retentionGaps.inc({}, count);
    this.#deps.logger.limited("warn", "Messages removed by retention were skipped", {
      client_id: this.#queue.sub.clientId,
      stream: this.#triple.stream,
      topic: this.#triple.topic,
      partition: this.#triple.partition,
      from_offset: this.position,
      skipped: count,
    });
  }

  /** The metric counts matching messages only; offsets jumped unread are logged apart. */
  #skipped(reason: string): void {
    this.#deps.metrics.replaySkipped.inc({}, this.#over);
    this.#deps.logger.limited("info", "Replay skipped to live", {
      client_id: this.#queue.sub.clientId,
      stream: this.#triple.stream,
      topic: this.#triple.topic,
      partition: this.#triple.partition,
      skipped: this.#over,
      skipped_offsets: this.#jumped,
      reason,
    });
  }
}

/**
 * The polls of one catch-up behind a shared reader: a failed poll is logged (rate-limited) and
 * answered with null once a back-off has passed, doubling up to 2 s until a poll succeeds.
 */
export class BehindPolls {
  #backoff = WAIT_MS;

  constructor(
    private readonly deps: { readonly backend: Pick<LogBackend, "poll">; readonly logger: Logger },
    private readonly triple: Triple,
    private readonly key: string,
    private readonly failure: string,
  ) {}

  /** Up to `n` messages from `from`; null after a failure (retry then). */
  async next(from: number, n: number): Promise<StoredMessage[] | null> {
    try {
      const batch = await this.deps.backend.poll(this.triple, from, n);
      this.#backoff = WAIT_MS;
      return batch;
    } catch (err) {
      this.deps.logger.limited("warn", this.failure, { key: this.key, error: err });
      await sleep(this.#backoff);
      this.#backoff = Math.min(this.#backoff * 2, 2000);
      return null;
    }
  }
}
