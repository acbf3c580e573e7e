/**
 * The way out (DESIGN §4): subscribe S1–S5, route R1–R6, PUBACK settlement, client detach.
 * Implements the session's {@link DeliveryPort}.
 *
 * @module
 */
import { SUBACK_FAILURE } from "../codec/encoder.ts";
import type { Subscription as MqttSubscription } from "../codec/packets.ts";
import { encodePublish } from "../codec/encoder.ts";
import { utf8, utf8Length } from "../base/utf8.ts";
import {
  checkResolution,
  type CompiledMap,
  partitionForKey,
  resolveTopic,
} from "../mapping/mod.ts";
import { openEnvelope } from "../log/envelope.ts";
import { canPoll } from "../access/permissions.ts";
import type { LogBackend, OutgoingMessage, PartitionAddress, StoredMessage } from "../log/port.ts";
import type { Logger } from "../observe/logger.ts";
import { startDeliverySpan } from "../observe/tracing.ts";
import type { SpanContext } from "@opentelemetry/api";
import type { GatewayMetrics } from "../observe/gateway_metrics.ts";
import type { DeadlineWheel } from "../base/deadline_wheel.ts";
import type { DeliveryPort, Subscriber } from "../session/delivery_port.ts";
import type { OutboundBudget } from "../session/outbox.ts";
import type { PublishPreparer } from "../session/publish.ts";
import type { Clock } from "../base/clock.ts";
import { ClientQueue, type QueueLimits } from "./client_queue.ts";
import { type ReaderOptions, SharedReader } from "./reader.ts";
import { type Subscription, SubscriptionRegistry, type Triple, tripleKey } from "./registry.ts";

/** Limits and identity of delivery. */
export interface DeliveryOptions extends ReaderOptions, QueueLimits {
  readonly maxSubscriptionsPerClient: number;
  readonly maxTopicBytes: number;
  readonly maxTopicLevels: number;
}

/** Subscription handling, shared readers and routing for the whole gateway. */
export class Delivery implements DeliveryPort {
  readonly registry = new SubscriptionRegistry<ClientQueue>();
  readonly readers = new Map<string, SharedReader>();
  #queues = new Map<Subscriber, ClientQueue>();
  /** Triples whose first reader since start resumed from the stored offset (recovery). */
  #recovered = new Set<string>();
  /** The gateway is stopping: no new subscriptions, no strikes (see {@link beginStop}). */
  #stopping = false;
  #backend: LogBackend;
  #preparer: PublishPreparer;
  #opts: DeliveryOptions;
  #budget: OutboundBudget;
  #deadlines: DeadlineWheel;
  #clock: Clock;
  #metrics: GatewayMetrics;
  #logger: Logger;

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
    this.#backend = deps.backend;
    this.#preparer = deps.preparer;
    this.#opts = deps.options;
    this.#budget = deps.budget;
    this.#deadlines = deps.deadlines;
    this.#clock = deps.clock;
    this.#metrics = deps.metrics;
    this.#logger = deps.logger;
    const resend = deps.options.resendAfterMs ?? 0;
    if (resend > 0) {
      // One timer for every client's resends (not one per copy).
      this.#resendTimer = setInterval(() => {
        const now = this.#clock.now();
        let n = 0;
        for (const q of this.#queues.values()) n += q.resendDue(now);
        if (n > 0) this.#metrics.resent.inc({}, n);
      }, Math.max(100, Math.min(1000, resend / 4)));
      Deno.unrefTimer(this.#resendTimer as unknown as number);
    }
  }

  #resendTimer: ReturnType<typeof setInterval> | undefined;

  /** S1–S5 for every filter of one SUBSCRIBE; one return code per filter. */
  async subscribe(sub: Subscriber, filters: readonly MqttSubscription[]): Promise<number[]> {
    if (this.#stopping) return filters.map(() => SUBACK_FAILURE);
    const queue = this.#queueOf(sub);
    const codes: number[] = [];
    for (const f of filters) codes.push(await this.#subscribeOne(queue, f));
    return codes;
  }

  async #subscribeOne(queue: ClientQueue, f: MqttSubscription): Promise<number> {
    const topic = f.filter;
    const refuse = (reason: string) => {
      this.#logger.limited("info", "Subscription refused", {
        client_id: queue.sub.clientId,
        filter: topic,
        reason,
      });
      return SUBACK_FAILURE;
    };
    // S1: exact topics only (wildcards come later), same limits as PUBLISH topics.
    if (topic.length === 0) return refuse("empty filter");
    if (topic.includes("#") || topic.includes("+")) {
      return refuse("wildcard filters are not supported");
    }
    if (utf8Length(topic) > this.#opts.maxTopicBytes) return refuse("filter too long");
    if (topic.split("/").length > this.#opts.maxTopicLevels) return refuse("too many levels");
    if (topic.startsWith("$SYS")) return refuse("$SYS is reserved");
    const existing = this.registry.get(queue, topic);
    if (!existing && this.registry.countFor(queue) >= this.#opts.maxSubscriptionsPerClient) {
      return refuse("max_subscriptions_per_client reached");
    }
    // S2: resolve with the same map as the way in.
    const r = this.#preparer.resolve(topic);
    const invalid = checkResolution(r);
    if (invalid !== null) return refuse(invalid);
    // S3: poll right on the mapped stream/topic.
    if (!canPoll(queue.sub.principal.permissions, r.stream, r.topic)) {
      return refuse(`no poll right on ${r.stream}/${r.topic}`);
    }
    const granted: 0 | 1 = f.qos === 0 ? 0 : 1; // QoS 2 asked → 1 granted (DESIGN §2)
    if (existing) {
      existing.qos = granted; // [MQTT-3.8.4-3] replace, no duplicate copies
      return granted;
    }
    let info;
    try {
      info = await this.#preparer.topics.lookup(r.stream, r.topic);
    } catch (err) {
      return refuse(`topic lookup failed: ${String((err as Error)?.message ?? err)}`);
    }
    if (info === null) return refuse(`target ${r.stream}/${r.topic} does not exist`);
    const partitions = r.partitionKey !== null
      ? [partitionForKey(r.partitionKey, info.partitions)]
      : Array.from({ length: info.partitions }, (_, i) => i);
    const startOffsets = new Map<string, number>();
    // Readers created here start polling only once the subscription is in the registry:
    // a reader resuming after the stored offset would otherwise route (and settle, with no
    // copies) the very messages a restart must deliver again. Every reader returned by
    // #ensureReader already counts this subscription (reserved), so it cannot stop while
    // the remaining partitions are being prepared.
    const fresh: SharedReader[] = [];
    const giveBack = () => {
      for (const k of startOffsets.keys()) {
        const reader = this.readers.get(k);
        if (reader && --reader.subscribers <= 0) reader.stop();
      }
      this.#startReaders(fresh);
    };
    try {
      for (const partition of partitions) {
        const triple = { stream: r.stream, topic: r.topic, partition };
        startOffsets.set(tripleKey(triple), await this.#ensureReader(triple, fresh));
      }
    } catch (err) {
      giveBack();
      return refuse(`backend error: ${String((err as Error)?.message ?? err)}`);
    }
    if (this.#stopping || this.#queues.get(queue.sub) !== queue) {
      giveBack();
      return SUBACK_FAILURE; // client went away (or the gateway began to stop) meanwhile
    }
    const s: Subscription<ClientQueue> = { client: queue, qos: granted, startOffsets };
    this.registry.upsert(s, topic);
    this.#startReaders(fresh);
    return granted;
  }

  /**
   * Starts readers created by a subscribe; any reader of `keys` left without subscribers (the
   * subscribe failed) is stopped, so it ends instead of polling for nobody.
   */
  #startReaders(fresh: SharedReader[]): void {
    for (const reader of fresh) {
      if (reader.subscribers <= 0) reader.stop();
      const key = tripleKey(reader.triple);
      reader.start(() => {
        if (this.readers.get(key) === reader) this.readers.delete(key);
      });
    }
  }

  /**
   * S5: the reader of a triple, created when missing (and then pushed to `fresh`, not yet
   * started); returns the subscription's start offset on the triple.
   */
  async #ensureReader(triple: Triple, fresh: SharedReader[]): Promise<number> {
    const key = tripleKey(triple);
    const live = (r: SharedReader | undefined): r is SharedReader =>
      r !== undefined && (!r.stopped || r.revive());
    for (;;) {
      const existing = this.readers.get(key);
      if (live(existing)) {
        // Joining a live reader: start at the partition's next offset now (DESIGN §4).
        existing.subscribers++; // reserve at once, so it cannot stop during the await
        try {
          return await this.#backend.nextOffset(triple);
        } catch (err) {
          if (--existing.subscribers <= 0) existing.stop();
          throw err;
        }
      }
      let start: number;
      if (!this.#recovered.has(key)) {
        // First reader since start: resume after the stored offset so unsettled messages
        // from before a crash are delivered again (at least once).
        const stored = await this.#backend.getOffset(this.#opts.consumer, triple);
        start = stored === null ? await this.#backend.nextOffset(triple) : stored + 1;
        this.#recovered.add(key);
      } else {
        start = await this.#backend.nextOffset(triple);
      }
      if (live(this.readers.get(key))) continue; // raced with another subscribe: join it
      const reader = new SharedReader(
        triple,
        start,
        this.#backend,
        this.#opts,
        (rd, batch) => this.#routeBatch(rd, batch),
        this.#metrics,
        this.#logger,
      );
      reader.subscribers = 1; // reserved for the subscription being prepared
      this.readers.set(key, reader);
      fresh.push(reader);
      return start;
    }
  }

  /** R1–R6 for one polled message. */
  /** Routes one polled batch inside a delivery span linked to the connections it served. */
  #routeBatch(reader: SharedReader, batch: readonly StoredMessage[]): void {
    const served = new Set<SpanContext>();
    const t = reader.triple;
    const span = startDeliverySpan(t.stream, t.topic, t.partition, batch.length, []);
    for (const m of batch) this.#route(reader, m, served);
    let links = 0;
    for (const c of served) {
      if (links++ >= 16) break; // bounded links per span
      span.addLink({ context: c });
    }
    span.end();
  }

  #route(reader: SharedReader, m: StoredMessage, served: Set<SpanContext>): void {
    const view = openEnvelope(m);
    if (view === null) {
      this.#metrics.skippedForeign.inc();
      reader.ledger.record(m.offset, 0);
      return;
    }
    const subs = this.registry.lookup(view.topic);
    if (subs === undefined) {
      reader.ledger.record(m.offset, 0);
      return;
    }
    const key = tripleKey(reader.triple);
    const targets: [ClientQueue, 0 | 1][] = [];
    let qos1 = 0;
    for (const s of subs.values()) {
      const start = s.startOffsets.get(key);
      if (start === undefined || m.offset < start) continue; // subscribed after this message
      const qos = view.qos < s.qos ? view.qos : s.qos;
      targets.push([s.client, qos]);
      if (qos === 1) qos1++;
    }
    const entry = reader.ledger.record(m.offset, qos1);
    if (targets.length === 0) return;
    this.#metrics.routed.inc();
    const topicBytes = utf8(view.topic);
    let qos0Packet: Uint8Array | null = null;
    for (const [q, qos] of targets) {
      const sc = q.sub.spanContext;
      if (sc !== null) served.add(sc);
      if (qos === 0) {
        qos0Packet ??= encodePublish(topicBytes, view.payload, 0, 0, false);
        if (q.offerQos0(qos0Packet) === "dropped") this.#metrics.droppedQos0.inc();
        else this.#metrics.deliveredQos[0].inc();
        continue;
      }
      const bytes = topicBytes.length + view.payload.length + 8;
      const offer = q.offerQos1({
        topicBytes,
        payload: view.payload,
        ledger: reader.ledger,
        entry: entry!,
        bytes,
      });
      if (offer === "evict") {
        reader.ledger.settle(entry!); // this copy is struck with the client
        this.#evict(q, "slow consumer: hard cap of outbound bytes reached");
      } else this.#metrics.deliveredQos[1].inc();
    }
  }

  unsubscribe(sub: Subscriber, filters: readonly string[]): void {
    const queue = this.#queues.get(sub);
    if (!queue) return;
    for (const f of filters) {
      const s = this.registry.remove(queue, f);
      if (s) this.#release(s);
    }
  }

  puback(sub: Subscriber, packetId: number): void {
    this.#queues.get(sub)?.puback(packetId);
  }

  detach(sub: Subscriber): void {
    const queue = this.#queues.get(sub);
    if (!queue) return;
    this.#queues.delete(sub);
    this.#deadlines.remove(queue);
    for (const [, s] of this.registry.removeClient(queue)) this.#release(s);
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
    if (this.#resendTimer !== undefined) clearInterval(this.#resendTimer);
    for (const r of this.readers.values()) r.stop(true);
    await Promise.all([...this.readers.values()].map((r) => r.done));
  }

  #release(s: Subscription<ClientQueue>): void {
    for (const k of s.startOffsets.keys()) {
      const reader = this.readers.get(k);
      if (reader && --reader.subscribers <= 0) reader.stop();
    }
  }

  #evict(q: ClientQueue, reason: string): void {
    this.#metrics.evictions.inc();
    this.#logger.limited("warn", "Evicting slow consumer", { client_id: q.sub.clientId, reason });
    q.sub.close(reason); // the session calls detach(), which strikes its copies
  }

  #queueOf(sub: Subscriber): ClientQueue {
    let q = this.#queues.get(sub);
    if (q) return q;
    q = new ClientQueue(sub, this.#opts, this.#budget);
    q.now = () => this.#clock.now();
    const queue = q;
    queue.onEvict = (reason) => this.#evict(queue, reason);
    queue.onPauseChange = (paused) => {
      if (paused) {
        queue.lastActivity = this.#clock.now();
        this.#deadlines.add(queue);
      } else this.#deadlines.remove(queue);
    };
    sub.outbox.onWritten = () => queue.refill();
    this.#queues.set(sub, q);
    return q;
  }

  /**
   * After a topic-map reload: every subscribed topic whose resolution (stream, topic, key)
   * changed is subscribed again under the new map with its granted QoS, so it reads the new
   * triple(s) from now on. A topic that no longer resolves to anything allowed is dropped (and
   * logged). Returns how many subscriptions moved.
   */
  async reresolve(previous: CompiledMap): Promise<number> {
    let moved = 0;
    for (const topic of this.registry.topics()) {
      const before = resolveTopic(previous, topic);
      const after = this.#preparer.resolve(topic);
      if (
        before.stream === after.stream && before.topic === after.topic &&
        before.partitionKey === after.partitionKey
      ) continue;
      for (const [queue, sub] of [...(this.registry.lookup(topic) ?? new Map())]) {
        this.registry.remove(queue, topic);
        this.#release(sub);
        const code = await this.#subscribeOne(queue, { filter: topic, qos: sub.qos });
        if (code === SUBACK_FAILURE) {
          this.#logger.warn("Subscription dropped after reload", {
            client_id: queue.sub.clientId,
            topic,
          });
        }
        moved++;
      }
    }
    return moved;
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
