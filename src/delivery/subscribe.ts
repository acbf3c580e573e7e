/**
 * Subscribing (DESIGN §4, S1–S5): check the filter, resolve it with the same map as the way in,
 * check the poll right, then join or create the shared reader of every triple it reads.
 *
 * @module
 */
import { SUBACK_FAILURE } from "../codec/encoder.ts";
import type { Subscription as MqttSubscription } from "../codec/packets.ts";
import { utf8Length } from "../base/utf8.ts";
import {
  checkResolution,
  type CompiledMap,
  partitionForKey,
  type Resolution,
  resolveTopic,
} from "../mapping/mod.ts";
import { canPoll } from "../access/permissions.ts";
import type { LogBackend, StoredMessage } from "../log/port.ts";
import type { Logger } from "../observe/logger.ts";
import type { GatewayMetrics } from "../observe/gateway_metrics.ts";
import type { PublishPreparer } from "../session/publish.ts";
import type { ClientQueue } from "./client_queue.ts";
import { type ReaderOptions, SharedReader } from "./reader.ts";
import {
  type Subscription,
  type SubscriptionRegistry,
  type Triple,
  tripleKey,
} from "./registry.ts";
import type { ClientQueues } from "./settle.ts";

/** Limits of subscriptions, and the readers' options. */
export interface SubscribeOptions extends ReaderOptions {
  readonly maxSubscriptionsPerClient: number;
  readonly maxTopicBytes: number;
  readonly maxTopicLevels: number;
}

/** S1: why an exact topic filter is refused, or null when it is acceptable. */
function checkFilter(topic: string, opts: SubscribeOptions): string | null {
  // Exact topics only (wildcards come later), same limits as PUBLISH topics.
  if (topic.length === 0) return "empty filter";
  if (topic.includes("#") || topic.includes("+")) return "wildcard filters are not supported";
  if (utf8Length(topic) > opts.maxTopicBytes) return "filter too long";
  if (topic.split("/").length > opts.maxTopicLevels) return "too many levels";
  if (topic.startsWith("$SYS")) return "$SYS is reserved";
  return null;
}

/** The subscriptions and the shared readers they hold. */
export class Subscriptions {
  readonly readers = new Map<string, SharedReader>();
  /** Triples whose first reader since start resumed from the stored offset (recovery). */
  #recovered = new Set<string>();
  #registry: SubscriptionRegistry<ClientQueue>;
  #clients: ClientQueues;
  #backend: LogBackend;
  #preparer: PublishPreparer;
  #opts: SubscribeOptions;
  #route: (reader: SharedReader, batch: readonly StoredMessage[]) => void;
  #stopping: () => boolean;
  #metrics: GatewayMetrics;
  #logger: Logger;

  constructor(deps: {
    registry: SubscriptionRegistry<ClientQueue>;
    clients: ClientQueues;
    backend: LogBackend;
    preparer: PublishPreparer;
    options: SubscribeOptions;
    route: (reader: SharedReader, batch: readonly StoredMessage[]) => void;
    stopping: () => boolean;
    metrics: GatewayMetrics;
    logger: Logger;
  }) {
    this.#registry = deps.registry;
    this.#clients = deps.clients;
    this.#backend = deps.backend;
    this.#preparer = deps.preparer;
    this.#opts = deps.options;
    this.#route = deps.route;
    this.#stopping = deps.stopping;
    this.#metrics = deps.metrics;
    this.#logger = deps.logger;
  }

  /** S1–S5 for one filter of a SUBSCRIBE; its return code. */
  async subscribeOne(queue: ClientQueue, f: MqttSubscription): Promise<number> {
    const topic = f.filter;
    const bad = checkFilter(topic, this.#opts);
    if (bad !== null) return this.#refuse(queue, topic, bad);
    const existing = this.#registry.get(queue, topic);
    if (!existing && this.#registry.countFor(queue) >= this.#opts.maxSubscriptionsPerClient) {
      return this.#refuse(queue, topic, "max_subscriptions_per_client reached");
    }
    // S2: resolve with the same map as the way in.
    const r = this.#preparer.resolve(topic);
    const invalid = checkResolution(r);
    if (invalid !== null) return this.#refuse(queue, topic, invalid);
    // S3: poll right on the mapped stream/topic.
    if (!canPoll(queue.sub.principal.permissions, r.stream, r.topic)) {
      return this.#refuse(queue, topic, `no poll right on ${r.stream}/${r.topic}`);
    }
    const granted: 0 | 1 = f.qos === 0 ? 0 : 1; // QoS 2 asked → 1 granted (DESIGN §2)
    if (existing) {
      existing.qos = granted; // [MQTT-3.8.4-3] replace, no duplicate copies
      existing.options = f.options; // MQTT 5: the options are replaced too
      return granted;
    }
    return await this.#attach(queue, topic, r, granted, f.options);
  }

  /** S4–S5: finds the target's partitions and subscribes to the reader of each. */
  async #attach(
    queue: ClientQueue,
    topic: string,
    r: Resolution,
    granted: 0 | 1,
    options?: MqttSubscription["options"],
  ): Promise<number> {
    let info;
    try {
      info = await this.#preparer.topics.lookup(r.stream, r.topic);
    } catch (err) {
      return this.#refuse(
        queue,
        topic,
        `topic lookup failed: ${String((err as Error)?.message ?? err)}`,
      );
    }
    if (info === null) {
      return this.#refuse(queue, topic, `target ${r.stream}/${r.topic} does not exist`);
    }
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
    try {
      for (const partition of partitions) {
        const triple = { stream: r.stream, topic: r.topic, partition };
        startOffsets.set(tripleKey(triple), await this.#ensureReader(triple, fresh));
      }
    } catch (err) {
      this.#giveBack(startOffsets, fresh);
      return this.#refuse(queue, topic, `backend error: ${String((err as Error)?.message ?? err)}`);
    }
    if (this.#stopping() || this.#clients.get(queue.sub) !== queue) {
      this.#giveBack(startOffsets, fresh);
      return SUBACK_FAILURE; // client went away (or the gateway began to stop) meanwhile
    }
    const s: Subscription<ClientQueue> = { client: queue, qos: granted, startOffsets };
    if (options !== undefined) s.options = options;
    this.#registry.upsert(s, topic);
    this.#startReaders(fresh);
    return granted;
  }

  #refuse(queue: ClientQueue, topic: string, reason: string): number {
    this.#logger.limited("info", "Subscription refused", {
      client_id: queue.sub.clientId,
      filter: topic,
      reason,
    });
    return SUBACK_FAILURE;
  }

  /** Undoes the reservations of a subscribe that failed, then starts (or ends) fresh readers. */
  #giveBack(startOffsets: Map<string, number>, fresh: SharedReader[]): void {
    for (const k of startOffsets.keys()) {
      const reader = this.readers.get(k);
      if (reader && --reader.subscribers <= 0) reader.stop();
    }
    this.#startReaders(fresh);
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
      const start = await this.#startOffset(triple, key);
      if (live(this.readers.get(key))) continue; // raced with another subscribe: join it
      const reader = new SharedReader(
        triple,
        start,
        this.#backend,
        this.#opts,
        this.#route,
        this.#metrics,
        this.#logger,
      );
      reader.subscribers = 1; // reserved for the subscription being prepared
      this.readers.set(key, reader);
      fresh.push(reader);
      return start;
    }
  }

  /** Where a new reader of the triple starts. */
  async #startOffset(triple: Triple, key: string): Promise<number> {
    if (this.#recovered.has(key)) return await this.#backend.nextOffset(triple);
    // First reader since start: resume after the stored offset so unsettled messages
    // from before a crash are delivered again (at least once).
    const stored = await this.#backend.getOffset(this.#opts.consumer, triple);
    const start = stored === null ? await this.#backend.nextOffset(triple) : stored + 1;
    this.#recovered.add(key);
    return start;
  }

  /** A subscription ends: every reader it held loses a subscriber and stops at none. */
  release(s: Subscription<ClientQueue>): void {
    for (const k of s.startOffsets.keys()) {
      const reader = this.readers.get(k);
      if (reader && --reader.subscribers <= 0) reader.stop();
    }
  }

  /**
   * After a topic-map reload: every subscribed topic whose resolution (stream, topic, key)
   * changed is subscribed again under the new map with its granted QoS, so it reads the new
   * triple(s) from now on. A topic that no longer resolves to anything allowed is dropped (and
   * logged). Returns how many subscriptions moved.
   */
  async reresolve(previous: CompiledMap): Promise<number> {
    let moved = 0;
    for (const topic of this.#registry.topics()) {
      const before = resolveTopic(previous, topic);
      const after = this.#preparer.resolve(topic);
      if (
        before.stream === after.stream && before.topic === after.topic &&
        before.partitionKey === after.partitionKey
      ) continue;
      for (const [queue, sub] of [...(this.#registry.lookup(topic) ?? new Map())]) {
        this.#registry.remove(queue, topic);
        this.release(sub);
        const code = await this.subscribeOne(queue, {
          filter: topic,
          qos: sub.qos,
          ...(sub.options ? { options: sub.options } : {}),
        });
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
}
