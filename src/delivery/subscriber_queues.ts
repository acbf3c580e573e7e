/**
 * The client side of delivery: one {@link ClientQueue} per subscriber, PUBACK
 * settlement, resends of unacknowledged copies, pausing and eviction of slow consumers.
 *
 * @module
 */
import type { Logger } from "../observe/logger.ts";
import type { GatewayMetrics } from "../observe/gateway_metrics.ts";
import type { Clock } from "../base/clock.ts";
import type { DeadlineWheel } from "../base/deadline_wheel.ts";
import type { Subscriber } from "../session/delivery_port.ts";
import type { OutboundBudget } from "../session/outbox.ts";
import { ClientQueue, type QueueLimits } from "./client_queue.ts";

/** What the client queues work with. */
export interface ClientQueuesDeps {
  readonly limits: QueueLimits;
  readonly budget: OutboundBudget;
  readonly deadlines: DeadlineWheel;
  readonly clock: Clock;
  readonly metrics: GatewayMetrics;
  readonly logger: Logger;
}

/** Every subscriber's queue, and the one resend timer they share. */
export class ClientQueues {
  #queues = new Map<Subscriber, ClientQueue>();
  readonly #deps: ClientQueuesDeps;
  #resendTimer: ReturnType<typeof setInterval> | undefined;

  constructor(deps: ClientQueuesDeps) {
    this.#deps = deps;
    const resend = deps.limits.resendAfterMs ?? 0;
    if (resend > 0) {
      // One timer for every client's resends (not one per copy).
      this.#resendTimer = setInterval(() => {
        const now = deps.clock.now();
        let n = 0;
        for (const q of this.#queues.values()) n += q.resendDue(now);
        if (n > 0) deps.metrics.resent.inc({}, n);
      }, Math.max(100, Math.min(1000, resend / 4)));
      Deno.unrefTimer(this.#resendTimer as unknown as number);
    }
  }

  /** Every client's queue. */
  all(): IterableIterator<ClientQueue> {
    return this.#queues.values();
  }

  /** The subscriber's queue, if it has one. */
  get(sub: Subscriber): ClientQueue | undefined {
    return this.#queues.get(sub);
  }

  /** The subscriber's queue, created (wired to its outbox and the deadline wheel) when missing. */
  queueOf(sub: Subscriber): ClientQueue {
    let q = this.#queues.get(sub);
    if (q) return q;
    const { limits, budget, clock, deadlines } = this.#deps;
    q = new ClientQueue(sub, limits, budget);
    q.now = () => clock.now();
    const queue = q;
    queue.onEvict = (reason) => this.evict(queue, reason);
    queue.onPauseChange = (paused) => {
      if (paused) {
        queue.lastActivity = clock.now();
        deadlines.add(queue);
      } else deadlines.remove(queue);
    };
    sub.outbox.onWritten = () => queue.refill();
    this.#queues.set(sub, q);
    return q;
  }

  /** The client's PUBACK settles its copy. */
  puback(sub: Subscriber, packetId: number): void {
    this.#queues.get(sub)?.puback(packetId);
  }

  /** The client's PUBREC (QoS 2) settles its copy; PUBREL goes out. */
  pubrec(sub: Subscriber, packetId: number, reasonCode: number): void {
    this.#queues.get(sub)?.pubrec(packetId, reasonCode);
  }

  /** The client's PUBCOMP frees a QoS 2 copy's packet id. */
  pubcomp(sub: Subscriber, packetId: number): void {
    this.#queues.get(sub)?.pubcomp(packetId);
  }

  /** Forgets the subscriber's queue (detach); returns it, or undefined when it had none. */
  remove(sub: Subscriber): ClientQueue | undefined {
    const queue = this.#queues.get(sub);
    if (!queue) return undefined;
    this.#queues.delete(sub);
    this.#deps.deadlines.remove(queue);
    return queue;
  }

  /**
   * Closes a slow consumer; the session then detaches it, which strikes its copies and returns
   * its bytes to the global budget. Once per client: a queue already closed (evicted, or
   * detached) is left alone, however many offers still find it over its cap.
   */
  evict(q: ClientQueue, reason: string): void {
    if (!q.close()) return;
    const { metrics, logger } = this.#deps;
    metrics.evictions.inc();
    logger.limited("warn", "Evicting slow consumer", { client_id: q.sub.clientId, reason });
    // MQTT 5: DISCONNECT 0x97 Quota exceeded first. The session calls detach(), which strikes
    // its copies.
    if (q.sub.disconnect) q.sub.disconnect(0x97, reason);
    else q.sub.close(reason);
  }

  /** Ends the resend timer. */
  stop(): void {
    if (this.#resendTimer !== undefined) clearInterval(this.#resendTimer);
  }
}
