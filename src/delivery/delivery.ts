/**
 * The way out (DESIGN §4): subscribe S1–S5 (`subscribe.ts`), route R1–R6 (`route.ts`), PUBACK
 * settlement and client queues (`settle.ts`), client detach. Implements the session's
 * {@link DeliveryPort}.
 *
 * @module
 */
import { SUBACK_FAILURE } from "../codec/encoder.ts";
import type { Subscription as MqttSubscription } from "../codec/packets.ts";
import type { CompiledMap } from "../mapping/mod.ts";
import type { LogBackend, OutgoingMessage, PartitionAddress } from "../log/port.ts";
import type { Logger } from "../observe/logger.ts";
import type { GatewayMetrics } from "../observe/gateway_metrics.ts";
import type { DeadlineWheel } from "../base/deadline_wheel.ts";
import type { DeliveryPort, Subscriber } from "../session/delivery_port.ts";
import type { OutboundBudget } from "../session/outbox.ts";
import type { PublishPreparer } from "../session/publish.ts";
import type { Clock } from "../base/clock.ts";
import type { ClientQueue, QueueLimits } from "./client_queue.ts";
import type { SharedReader } from "./reader.ts";
import { SubscriptionRegistry, type Triple, tripleKey } from "./registry.ts";
import { Router } from "./route.ts";
import { ClientQueues } from "./settle.ts";
import { type SubscribeOptions, Subscriptions } from "./subscribe.ts";

/** Limits and identity of delivery. */
export interface DeliveryOptions extends SubscribeOptions, QueueLimits {}

/** Subscription handling, shared readers and routing for the whole gateway. */
export class Delivery implements DeliveryPort {
  readonly registry = new SubscriptionRegistry<ClientQueue>();
  readonly readers: Map<string, SharedReader>;
  /** The gateway is stopping: no new subscriptions, no strikes (see {@link beginStop}). */
  #stopping = false;
  #clients: ClientQueues;
  #subscriptions: Subscriptions;

  constructor(deps: {
    backend: LogBackend;
    preparer: PublishPreparer;
    options: DeliveryOptions;
    budget: OutboundBudget;
    deadlines: DeadlineWheel;
    clock: Clock;
    metrics: GatewayMetrics;
    logger: Logger;
  }) {
    this.#clients = new ClientQueues({ ...deps, limits: deps.options });
    const clients = this.#clients;
    const router = new Router(this.registry, deps.metrics, (q, why) => clients.evict(q, why));
    this.#subscriptions = new Subscriptions({
      ...deps,
      registry: this.registry,
      clients,
      route: (rd, batch) => router.routeBatch(rd, batch),
      stopping: () => this.#stopping,
    });
    this.readers = this.#subscriptions.readers;
  }

  /** S1–S5 for every filter of one SUBSCRIBE; one return code per filter. */
  async subscribe(sub: Subscriber, filters: readonly MqttSubscription[]): Promise<number[]> {
    if (this.#stopping) return filters.map(() => SUBACK_FAILURE);
    const queue = this.#clients.queueOf(sub);
    const codes: number[] = [];
    for (const f of filters) codes.push(await this.#subscriptions.subscribeOne(queue, f));
    return codes;
  }

  /** Removes the subscriptions; per filter, whether one existed (MQTT 5 UNSUBACK 0x11). */
  unsubscribe(sub: Subscriber, filters: readonly string[]): boolean[] {
    const queue = this.#clients.get(sub);
    if (!queue) return filters.map(() => false);
    return filters.map((f) => {
      const s = this.registry.remove(queue, f);
      if (s) this.#subscriptions.release(s);
      return s !== undefined;
    });
  }

  /** The client's subscriptions, for MQTT 5 SUBACK 0x97 (`max_subscriptions_per_client`). */
  subscriptionsOf(sub: Subscriber): { count: number; has(filter: string): boolean } {
    const queue = this.#clients.get(sub);
    if (!queue) return { count: 0, has: () => false };
    return {
      count: this.registry.countFor(queue),
      has: (f) => this.registry.get(queue, f) !== undefined,
    };
  }

  puback(sub: Subscriber, packetId: number): void {
    this.#clients.puback(sub, packetId);
  }

  detach(sub: Subscriber): void {
    const queue = this.#clients.remove(sub);
    if (!queue) return;
    for (const [, s] of this.registry.removeClient(queue)) this.#subscriptions.release(s);
    // A client closed by the gateway's own stop has not left: its copies are not struck,
    // so the final commit stays before them and a restart delivers them again (at least once).
    queue.strikeAll(!this.#stopping);
  }

  /** This gateway appended to a partition: wake its reader now. */
  notifyAppended(
    address: PartitionAddress,
    baseOffset: number | null,
    messages: readonly OutgoingMessage[],
  ): void {
    const reader = this.readers.get(tripleKey(address));
    if (!reader) return;
    if (baseOffset === null) reader.signal();
    else reader.offerAppended(baseOffset, messages);
  }

  /**
   * The gateway begins to stop (call before closing connections): readers stop polling, new
   * SUBSCRIBEs are refused, and copies pending for clients closed from now on are not struck.
   * Without this, closing the connections would strike every unacknowledged copy and the
   * final commit would store an offset past messages no subscriber acknowledged.
   */
  beginStop(): void {
    this.#stopping = true;
    for (const r of this.readers.values()) r.stop();
  }

  /**
   * Stops every reader and waits for their final commits, which store only the settled
   * prefix: what is still unsettled is delivered again after a restart.
   */
  async stop(): Promise<void> {
    this.#stopping = true;
    this.#clients.stop();
    for (const r of this.readers.values()) r.stop(true);
    await Promise.all([...this.readers.values()].map((r) => r.done));
  }

  /**
   * After a topic-map reload: every subscribed topic whose resolution (stream, topic, key)
   * changed is subscribed again under the new map with its granted QoS. Returns how many
   * subscriptions moved (see {@link Subscriptions.reresolve}).
   */
  reresolve(previous: CompiledMap): Promise<number> {
    return this.#subscriptions.reresolve(previous);
  }

  /** Figures for metrics and the status page. */
  readerStats(): {
    triple: Triple;
    position: number;
    committed: number;
    unsettled: number;
    subscribers: number;
  }[] {
    return [...this.readers.values()].map((r) => ({
      triple: r.triple,
      position: r.position,
      committed: r.committedOffset,
      unsettled: r.ledger.size,
      subscribers: r.subscribers,
    }));
  }
}
