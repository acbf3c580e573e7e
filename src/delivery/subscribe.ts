/**
 * Subscribing (DESIGN §4, S1–S5): check the filter, resolve it with the same map as the way in,
 * check the poll right, then join or create the shared reader of every triple it reads.
 *
 * @module
 */
import { SUBACK_FAILURE } from "../codec/encoder.ts";
import type { Subscription as MqttSubscription } from "../codec/packets.ts";
import { utf8Length } from "../base/utf8.ts";
import { canPoll } from "../access/permissions.ts";
import { type CompiledMap, filterProblem, isWildcardFilter, resolveTopic } from "../mapping/mod.ts";
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
import { type FilterTripleDeps, filterTriples } from "./filter_triples.ts";

/** Limits of subscriptions, and the readers' options. */
export interface SubscribeOptions extends ReaderOptions {
  readonly maxSubscriptionsPerClient: number;
  readonly maxTopicBytes: number;
  readonly maxTopicLevels: number;
  /** Triples one filter may resolve to; beyond → SUBACK 0x80. */
  readonly maxTriplesPerSubscription: number;
}

/** S1: why a topic filter is refused, or null when it is acceptable. */
function checkFilter(topic: string, opts: SubscribeOptions): string | null {
  // Same limits as PUBLISH topics; wildcards only as whole levels, "#" last.
  if (topic.length === 0) return "empty filter";
  const misplaced = filterProblem(topic);
  if (misplaced !== null) return misplaced;
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
  #tripleDeps: FilterTripleDeps;

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
    this.#tripleDeps = {
      preparer: deps.preparer,
      backend: deps.backend,
      maxTriples: deps.options.maxTriplesPerSubscription,
    };
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
    const granted: 0 | 1 = f.qos === 0 ? 0 : 1; // QoS 2 asked → 1 granted (DESIGN §2)
    if (existing) {
      existing.qos = granted; // [MQTT-3.8.4-3] replace, no duplicate copies
      return granted;
    }
    // S2–S3: resolve with the same map as the way in; poll right per triple.
    let resolved;
    try {
      resolved = await filterTriples(this.#tripleDeps, queue.sub.principal, topic);
    } catch (err) {
      return this.#refuse(queue, topic, `backend error: ${String((err as Error)?.message ?? err)}`);
    }
    if (resolved.refused !== undefined) return this.#refuse(queue, topic, resolved.refused);
    const s: Subscription<ClientQueue> = {
      client: queue,
      qos: granted,
      startOffsets: new Map(),
      match: topic,
      prefix: "",
      wildcard: isWildcardFilter(topic),
    };
    return await this.#attach(s, topic, resolved.triples);
  }

  /** S4–S5: joins (or creates) the reader of every triple, then registers the subscription. */
  async #attach(s: Subscription<ClientQueue>, filter: string, triples: Triple[]): Promise<number> {
    const queue = s.client;
    const startOffsets = s.startOffsets;
    // Readers created here start polling only once the subscription is in the registry:
    // a reader resuming after the stored offset would otherwise route (and settle, with no
    // copies) the very messages a restart must deliver again. Every reader returned by
    // #ensureReader already counts this subscription (reserved), so it cannot stop while
    // the remaining partitions are being prepared.
    const fresh: SharedReader[] = [];
    try {
      for (const triple of triples) {
        startOffsets.set(tripleKey(triple), await this.#ensureReader(triple, fresh));
      }
    } catch (err) {
      this.#giveBack(startOffsets, fresh);
      return this.#refuse(
        queue,
        filter,
        `backend error: ${String((err as Error)?.message ?? err)}`,
      );
    }
    if (this.#stopping() || this.#clients.get(queue.sub) !== queue) {
      this.#giveBack(startOffsets, fresh);
      return SUBACK_FAILURE; // client went away (or the gateway began to stop) meanwhile
    }
    this.#registry.upsert(s, filter);
    this.#startReaders(fresh);
    return s.qos;
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
      fresh.push(this.#newReader(triple, start));
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
    for (const k of s.startOffsets.keys()) this.#releaseKey(k);
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
      const subs = [...(this.#registry.lookup(topic) ?? new Map()).values()];
      if (subs.length === 0) continue;
      if (subs[0].wildcard) {
        for (const sub of subs) if (await this.retarget(sub, topic)) moved++;
        continue;
      }
      const before = resolveTopic(previous, subs[0].match);
      const after = this.#preparer.resolve(subs[0].match);
      if (
        before.stream === after.stream && before.topic === after.topic &&
        before.partitionKey === after.partitionKey
      ) continue;
      for (const sub of subs) {
        const queue = sub.client;
        this.#registry.remove(queue, topic);
        this.release(sub);
        const code = await this.subscribeOne(queue, { filter: topic, qos: sub.qos });
        if (code === SUBACK_FAILURE) this.#dropped(queue, topic);
        moved++;
      }
    }
    return moved;
  }

  /**
   * Resolves a wildcard subscription again (after a reload, or when a new target appeared):
   * readers of new triples are joined from their next offset, triples no longer resolved are
   * released, kept triples keep their start offsets. Returns whether the triples changed; a
   * filter that now resolves to nothing allowed is dropped (and logged).
   */
  async retarget(sub: Subscription<ClientQueue>, filter: string): Promise<boolean> {
    const queue = sub.client;
    let resolved;
    try {
      resolved = await filterTriples(this.#tripleDeps, queue.sub.principal, sub.match);
    } catch {
      return false; // backend trouble: keep what it has
    }
    if (this.#registry.get(queue, filter) !== sub) return false; // gone meanwhile
    if (resolved.refused !== undefined) {
      this.#registry.remove(queue, filter);
      this.release(sub);
      this.#dropped(queue, filter);
      return true;
    }
    const wanted = new Map(resolved.triples.map((t) => [tripleKey(t), t]));
    const removed = [...sub.startOffsets.keys()].filter((k) => !wanted.has(k));
    const added = [...wanted].filter(([k]) => !sub.startOffsets.has(k)).map(([, t]) => t);
    if (removed.length === 0 && added.length === 0) return false;
    for (const k of removed) {
      sub.startOffsets.delete(k);
      this.#releaseKey(k);
    }
    const fresh: SharedReader[] = [];
    for (const t of added) {
      try {
        sub.startOffsets.set(tripleKey(t), await this.#ensureReader(t, fresh));
      } catch { /* this triple stays out; the next reload tries again */ }
    }
    this.#startReaders(fresh);
    return true;
  }

  /**
   * A wildcard subscription meets a triple it does not read yet (a target created after its
   * SUBSCRIBE, seen on this gateway's own append): it joins the triple's reader from
   * `fromOffset`, synchronously so the append that revealed it is routed. Bounded by
   * `max_triples_per_subscription`; needs the poll right. Returns whether it joined.
   */
  joinAt(sub: Subscription<ClientQueue>, triple: Triple, fromOffset: number): boolean {
    const key = tripleKey(triple);
    if (sub.startOffsets.has(key) || this.#stopping()) return false;
    if (sub.startOffsets.size >= this.#opts.maxTriplesPerSubscription) return false;
    if (!canPoll(sub.client.sub.principal.permissions, triple.stream, triple.topic)) return false;
    const existing = this.readers.get(key);
    if (existing !== undefined && (!existing.stopped || existing.revive())) {
      existing.subscribers++;
      sub.startOffsets.set(key, fromOffset);
      return true;
    }
    const reader = this.#newReader(triple, fromOffset);
    this.#recovered.add(key);
    sub.startOffsets.set(key, fromOffset);
    this.#startReaders([reader]);
    return true;
  }

  #newReader(triple: Triple, start: number): SharedReader {
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
    this.readers.set(tripleKey(triple), reader);
    return reader;
  }

  #dropped(queue: ClientQueue, filter: string): void {
    this.#logger.warn("Subscription dropped after reload", {
      client_id: queue.sub.clientId,
      topic: filter,
    });
  }

  #releaseKey(k: string): void {
    const reader = this.readers.get(k);
    if (reader && --reader.subscribers <= 0) reader.stop();
  }
}
