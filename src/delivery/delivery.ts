/**
 * The way out: subscribe S1–S5 (`subscribe.ts`), route R1–R6 (`route.ts`), PUBACK settlement and
 * client queues (`subscriber_queues.ts`), client detach: the session's {@link DeliveryPort}.
 *
 * @module
 */
import { shareGauges, type ShareGroupStats, shareGroupStats } from "./share/stats.ts";
import { SUBACK_FAILURE } from "../codec/encoder.ts";
import type { CompiledMap } from "../mapping/mod.ts";
import type { LogBackend, OutgoingMessage, PartitionAddress } from "../log/port.ts";
import type { Logger } from "../observe/logger.ts";
import type { GatewayMetrics } from "../observe/gateway_metrics.ts";
import type { DeadlineWheel } from "../base/deadline_wheel.ts";
import type {
  AckPacket,
  DeliveryPort,
  Subscriber,
  SubscribeRequest,
} from "../session/delivery_port.ts";
import type { OutboundBudget } from "../session/outbox.ts";
import type { PublishPreparer } from "../session/publish.ts";
import type { Clock } from "../base/clock.ts";
import type { ClientQueue, Copy, QueueLimits } from "./client_queue.ts";
import type { SharedReader } from "./reader.ts";
import { type Subscription, SubscriptionRegistry, type Triple, tripleKey } from "./registry.ts";
import { deliverCopies, Router, sharedTarget } from "./route.ts";
import { finishTargets } from "./targets.ts";
import { expiryLeft } from "./out_v5.ts";
import { joinAt, reresolve } from "./reresolve.ts";
import { lowestPositionOf, SessionDelivery } from "./session_delivery.ts";
import type { StoredSessions } from "../session/stored_sessions.ts";
import { H_TOPIC } from "../stored/envelope.ts";
import { ClientQueues } from "./subscriber_queues.ts";
import { type SubscribeOptions, Subscriptions } from "./subscribe.ts";
import type { RetainedStore } from "../stored/retained/retained_store.ts";
import { type RetainedOutDeps, sendRetained, wantsRetained } from "./retained_out.ts";

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
  #stored: SessionDelivery;
  #backend: LogBackend;
  #metrics: GatewayMetrics;
  #logger: Logger;
  /** Closes a slow consumer (its queue's hard cap reached). */
  #evict: (q: ClientQueue, why: string) => void;
  /** Triples wildcard subscriptions are joining while the backend is asked for the offset. */
  #joining = new Set<string>();
  /** Retained messages at SUBSCRIBE; null without a retained store. */
  #retained: RetainedOutDeps | null;
  /** Filters of each client's last SUBSCRIBE owed their retained messages after the SUBACK. */
  #retainedDue = new Map<ClientQueue, string[]>();
  /** The retained set being sent to each subscription (a new SUBSCRIBE supersedes it). */
  #retainedSets = new WeakMap<Subscription<ClientQueue>, object>();

  constructor(deps: {
    backend: LogBackend;
    preparer: PublishPreparer;
    options: DeliveryOptions;
    budget: OutboundBudget;
    deadlines: DeadlineWheel;
    clock: Clock;
    metrics: GatewayMetrics;
    logger: Logger;
    sessions: StoredSessions;
    retained?: RetainedStore;
  }) {
    this.#backend = deps.backend;
    this.#metrics = deps.metrics;
    this.#logger = deps.logger;
    this.#clients = new ClientQueues({ ...deps, limits: deps.options });
    const clients = this.#clients;
    const evict = this.#evict = (q: ClientQueue, why: string) => clients.evict(q, why);
    const router = new Router(this.registry, deps.metrics, evict, deps.options);
    this.#subscriptions = new Subscriptions({
      ...deps,
      registry: this.registry,
      clients,
      route: (rd, batch) => router.routeBatch(rd, batch),
      stopping: () => this.#stopping,
      storedStart: (filter) => {
        const sessions = deps.sessions.subscribedTo(filter);
        return sessions.length === 0 ? null : lowestPositionOf(deps.backend, sessions);
      },
    });
    this.readers = this.#subscriptions.readers;
    shareGauges(deps.metrics.registry, this.#subscriptions.shares, this.#subscriptions.spread);
    this.#retained = deps.retained === undefined ? null : {
      retained: deps.retained,
      preparer: deps.preparer,
      metrics: deps.metrics,
      evict,
    };
    this.#stored = new SessionDelivery({
      ...deps,
      subscriptions: this.#subscriptions,
      clients,
      commitIntervalMs: deps.options.commitIntervalMs,
    });
  }

  /** S1–S5 for every filter of one SUBSCRIBE; one return code per filter. */
  async subscribe(sub: Subscriber, filters: readonly SubscribeRequest[]): Promise<number[]> {
    if (this.#stopping) return filters.map(() => SUBACK_FAILURE);
    const queue = this.#clients.queueOf(sub);
    const codes: number[] = [];
    const due: string[] = [];
    for (const f of filters) {
      const existed = this.registry.get(queue, f.filter) !== undefined;
      const code = await this.#subscriptions.subscribeOne(queue, f);
      codes.push(code);
      if (code < SUBACK_FAILURE && wantsRetained(f, existed)) due.push(f.filter);
      if (sub.session !== null && code < SUBACK_FAILURE) {
        this.#stored.subscribed(queue, sub.session, f.filter, code as 0 | 1 | 2, f.options);
      }
    }
    if (this.#retained !== null && due.length > 0) this.#retainedDue.set(queue, due);
    return codes;
  }

  /** The retained messages owed by the client's last SUBSCRIBE, after its SUBACK. */
  afterSuback(sub: Subscriber): void {
    const queue = this.#clients.get(sub);
    const due = queue === undefined ? undefined : this.#retainedDue.get(queue);
    if (due === undefined || this.#retained === null) return;
    this.#retainedDue.delete(queue!);
    for (const filter of due) {
      const s = this.registry.get(queue!, filter);
      if (s !== undefined) this.#sendRetained(this.#retained, s, filter);
    }
  }

  /** One retained set, sent while its client and subscription stand and no newer set began. */
  #sendRetained(deps: RetainedOutDeps, s: Subscription<ClientQueue>, filter: string): void {
    const q = s.client;
    const set = {};
    this.#retainedSets.set(s, set);
    const current = () =>
      !this.#stopping && this.#retainedSets.get(s) === set &&
      this.registry.get(q, filter) === s && this.#clients.get(q.sub) === q;
    sendRetained(deps, s, current).catch((err) => {
      this.#logger.warn("Sending retained messages failed", {
        client_id: q.sub.clientId,
        filter,
        error: err,
      });
    });
  }

  /** A resumed stored session: its subscriptions come back from its stored positions. */
  async resume(sub: Subscriber): Promise<void> {
    const session = sub.session;
    if (this.#stopping || session === null) return;
    const queue = this.#clients.queueOf(sub);
    if (session.qos2Out !== undefined) {
      queue.resumeQos2(session.qos2Out);
      session.qos2Out = undefined;
    }
    await this.#stored.resume(queue, session);
  }

  /** Removes the subscriptions; per filter, whether one existed (MQTT 5 UNSUBACK 0x11). */
  unsubscribe(sub: Subscriber, filters: readonly string[]): boolean[] {
    const queue = this.#clients.get(sub);
    if (!queue) return filters.map(() => false);
    const existed = filters.map((f) => {
      const s = this.registry.remove(queue, f);
      if (s) this.#subscriptions.release(s);
      return s !== undefined;
    });
    if (sub.session !== null) this.#stored.unsubscribed(sub.session, filters);
    return existed;
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

  acknowledged(sub: Subscriber, p: AckPacket): void {
    if (p.type === "puback") this.#clients.puback(sub, p.packetId);
    else if (p.type === "pubrec") this.#clients.pubrec(sub, p.packetId, p.reasonCode ?? 0);
    else this.#clients.pubcomp(sub, p.packetId);
  }

  /** Resolves when the stored sessions' position stores asked so far are answered. */
  readonly positionsStored = (): Promise<void> => this.#stored.settled();

  detach(sub: Subscriber): void {
    const queue = this.#clients.remove(sub);
    // QoS 2 copies in flight: a stored session takes their exchanges up again on its return.
    // (Set only when there are some: most sessions never get the field.)
    const qos2 = queue?.qos2Out() ?? null;
    if (sub.session !== null && (qos2 !== null || sub.session.qos2Out !== undefined)) {
      sub.session.qos2Out = qos2 ?? undefined;
    }
    // A stored session's positions are taken before its copies are struck.
    if (sub.session !== null) this.#stored.detached(queue, sub.session);
    if (!queue) return;
    this.#retainedDue.delete(queue);
    const parking = sub.session !== null ? this.#lastMembers(queue) : [];
    for (const [, s] of this.registry.removeClient(queue)) this.#subscriptions.release(s);
    for (const [key, at] of parking) this.#subscriptions.shares.park(key, at);
    // A client closed by the gateway's own stop has not left: its copies are not struck,
    // so the final commit stays before them and a restart delivers them again (at least once).
    queue.strikeAll(!this.#stopping, (copy) => this.#reoffer(copy));
  }

  /**
   * The share groups whose last connected member `queue` is (its session stored): each group's
   * position per triple, the first offset this member has not settled there.
   */
  #lastMembers(queue: ClientQueue): [string, Map<string, number>][] {
    const out: [string, Map<string, number>][] = [];
    let positions: Map<string, number> | undefined;
    for (const s of this.registry.ofClient(queue)?.values() ?? []) {
      const g = s.share;
      if (g === undefined || g.members.length !== 1 || g.members[0] !== s) continue;
      positions ??= this.#stored.positions(queue);
      const at = new Map<string, number>();
      for (const k of s.startOffsets.keys()) {
        const p = positions.get(k);
        if (p !== undefined) at.set(k, p);
      }
      out.push([g.key, at]);
    }
    return out;
  }

  /**
   * A shared subscription's copy its member left unacknowledged goes to another connected member
   * of the group [MQTT-4.8.2]; false when there is none (the copy is struck).
   */
  #reoffer(copy: Copy): boolean {
    const { group, m, view } = copy.shared!;
    const members = group.members.filter((s) => this.#clients.get(s.client.sub) === s.client);
    if (members.length === 0) return false;
    const t = finishTargets(
      [sharedTarget(group, members, m)],
      m,
      view,
      expiryLeft(m),
      this.#metrics,
    );
    if (t.length === 0) return false;
    const reader = { ledger: copy.ledger, key: copy.key };
    deliverCopies(t, view, reader, copy.entry, new Set(), this.#metrics, this.#evict, m);
    if (t[0].qos === 0) copy.ledger.settle(copy.entry); // a QoS 0 copy is done once queued
    return true;
  }

  /**
   * An append's messages are wanted when a wildcard subscription may join its partition or a
   * reader reads it. An unkeyed append's partition is known only from its receipt: then any
   * reader counts.
   */
  wantsAppended(address: PartitionAddress & { readonly balancedOver?: number }): boolean {
    if (this.registry.hasWildcards) return true;
    if (address.balancedOver !== undefined) return this.readers.size > 0;
    return this.readers.size > 0 && this.readers.has(tripleKey(address));
  }

  /**
   * This gateway appended to a partition: wake its reader now. Without the messages (the
   * session dropped them, no reader or wildcard wanted them when appended) it polls them.
   */
  notifyAppended(
    address: PartitionAddress,
    baseOffset: number | null,
    messages: readonly OutgoingMessage[],
  ): void {
    const given = messages.length > 0;
    if (given && this.registry.hasWildcards) this.#extendWildcards(address, baseOffset, messages);
    const reader = this.readers.get(tripleKey(address));
    if (!reader) return;
    if (baseOffset === null || !given) reader.signal();
    else reader.offerAppended(baseOffset, messages);
  }

  /**
   * Wildcard subscriptions whose filter matches an appended message's topic but which do not
   * read its triple yet (the target appeared after their SUBSCRIBE) join it from this append.
   * A backend that did not say the offset (Iggy 0.9) is asked for the partition's next offset.
   */
  #extendWildcards(
    address: PartitionAddress,
    baseOffset: number | null,
    messages: readonly OutgoingMessage[],
  ): void {
    const key = tripleKey(address);
    const joining: Subscription<ClientQueue>[] = [];
    let last: string | undefined;
    for (const m of messages) {
      const topic = m.headers.get(H_TOPIC);
      if (topic === undefined || topic === last) continue;
      last = topic;
      this.registry.matchWildcards(topic, (s) => {
        if (!s.startOffsets.has(key) && !joining.includes(s)) joining.push(s);
      });
    }
    if (joining.length === 0) return;
    if (baseOffset !== null) {
      for (const s of joining) joinAt(this.#subscriptions, s, address, baseOffset);
      return;
    }
    if (this.#joining.has(key)) return;
    this.#joining.add(key);
    this.#backend.nextOffset(address).then((next) => {
      const from = Math.max(0, next - messages.length);
      for (const s of joining) {
        // Unsubscribed or disconnected during the await: a join would hold the reader forever.
        if (this.registry.get(s.client, s.prefix + s.match) !== s) continue;
        joinAt(this.#subscriptions, s, address, from);
      }
    }, () => {}).finally(() => this.#joining.delete(key));
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
    await this.#subscriptions.spread?.stop(); // positions stored while the readers still stand
    for (const r of this.readers.values()) r.stop(true);
    await Promise.all([...this.readers.values()].map((r) => r.done));
    this.#subscriptions.pool.close();
    await this.#stored.stop();
  }

  /**
   * After a topic-map reload: every subscribed topic whose resolution (stream, topic, key)
   * changed is subscribed again under the new map with its granted QoS. Returns how many
   * subscriptions moved (see {@link Subscriptions.reresolve}).
   */
  reresolve(previous: CompiledMap): Promise<number> {
    return reresolve(this.#subscriptions, previous);
  }

  /** Share groups with members connected: members, lag, partitions dealt here. */
  shareStats(): ShareGroupStats[] {
    return shareGroupStats(this.#subscriptions.shares, this.#subscriptions.spread);
  }

  /** Share groups waiting for a member (their last one left with a stored session). */
  get parkedShareGroups(): number {
    return this.#subscriptions.shares.parked;
  }

  /** Partitions this gateway deals to its share groups (split with other gateways). */
  get sharePartitionsOwned(): number {
    return this.#subscriptions.spread?.owned() ?? 0;
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
