/**
 * Routing (R1–R6): every polled message gets an ack-ledger entry, then one copy per
 * client whose subscriptions match it and started before it (`targets.ts`: overlapping filters
 * give one copy), at the lower of the two QoS levels. MQTT 5 subscribers get the stored
 * properties back (`out_v5.ts`).
 *
 * @module
 */
import { encodePublish } from "../codec/encoder.ts";
import { utf8 } from "../base/utf8.ts";
import { type MqttView, openEnvelope } from "../stored/envelope.ts";
import type { StoredMessage } from "../log/port.ts";
import type { GatewayMetrics } from "../observe/gateway_metrics.ts";
import { startDeliverySpan } from "../observe/tracing.ts";
import type { SpanContext } from "@opentelemetry/api";
import type { ClientQueue } from "./client_queue.ts";
import type { SharedReader } from "./reader.ts";
import type { AckLedger, LedgerEntry } from "./ledger.ts";
import { expiryLeft } from "./out_v5.ts";
import type { ShareGroup, Subscription, SubscriptionRegistry } from "./registry.ts";
import { pickMember } from "./share/groups.ts";
import { dedupe, finishTargets, type Target, targetOf } from "./targets.ts";
import { HARD_CAP_GRACE_MS, overHardCap, roomUnderHardCap } from "./pacing.ts";

export type { Target };

/** Makes the copies of polled messages and hands them to client queues. */
export class Router {
  #registry: SubscriptionRegistry<ClientQueue>;
  #metrics: GatewayMetrics;
  #evict: (q: ClientQueue, reason: string) => void;
  /** How long a subscriber at its hard cap may make no progress while a reader waits (ms). */
  readonly #hardCapGraceMs: number;
  /** Plain QoS 0 copies the last `#targets` call offered itself. */
  #plainCopies = 0;

  constructor(
    registry: SubscriptionRegistry<ClientQueue>,
    metrics: GatewayMetrics,
    evict: (q: ClientQueue, reason: string) => void,
    limits: { readonly slowConsumerTimeoutMs: number },
  ) {
    this.#registry = registry;
    this.#metrics = metrics;
    this.#evict = evict;
    this.#hardCapGraceMs = Math.min(HARD_CAP_GRACE_MS, limits.slowConsumerTimeoutMs);
  }

  /**
   * Routes one polled batch inside a delivery span linked to the connections it served. When a
   * QoS 1 subscriber's copy would pass its hard cap, the rest of the batch waits for it
   * (`roomUnderHardCap`): the returned promise resolves once all is routed; undefined when
   * nothing had to wait.
   */
  routeBatch(reader: SharedReader, batch: readonly StoredMessage[]): Promise<void> | undefined {
    const served = new Set<SpanContext>();
    const t = reader.triple;
    const span = startDeliverySpan(t.stream, t.topic, t.partition, batch);
    const end = () => {
      let links = 0;
      for (const c of served) {
        if (links++ >= 16) break; // bounded links per span
        span.addLink({ context: c });
      }
      span.end();
    };
    const rest = this.#routeFrom(reader, batch, 0, served);
    if (rest !== undefined) return rest.finally(end);
    end();
    return undefined;
  }

  #routeFrom(
    reader: SharedReader,
    batch: readonly StoredMessage[],
    from: number,
    served: Set<SpanContext>,
  ): Promise<void> | undefined {
    for (let i = from; i < batch.length; i++) {
      const paced = this.#route(reader, batch[i], served);
      if (paced !== undefined) {
        return paced.then(() => this.#routeFrom(reader, batch, i + 1, served));
      }
    }
    return undefined;
  }

  /** R1–R6 for one polled message; a promise when its copies wait for a queue's room. */
  #route(
    reader: SharedReader,
    m: StoredMessage,
    served: Set<SpanContext>,
  ): Promise<void> | undefined {
    const view = openEnvelope(m);
    if (view === null) {
      this.#metrics.skippedForeign.inc();
      reader.ledger.record(m.offset, 0);
      return undefined;
    }
    // MQTT 5 message expiry: an expired message goes to nobody (one header lookup per message).
    const left = expiryLeft(m);
    if (left !== null && left <= 0) {
      this.#metrics.expired.inc();
      reader.ledger.record(m.offset, 0);
      return undefined;
    }
    const found = this.#targets(view, reader.key, m, served);
    if (found === null) {
      reader.ledger.record(m.offset, 0);
      if (this.#plainCopies > 0) this.#metrics.routed.inc();
      return undefined;
    }
    const targets = finishTargets(found, m, view, left, this.#metrics);
    const full = overHardCap(targets, view);
    if (full !== null) {
      return roomUnderHardCap(full, this.#hardCapGraceMs, this.#evict)
        .then(() => this.#deliver(reader, m, view, targets, served));
    }
    this.#deliver(reader, m, view, targets, served);
    return undefined;
  }

  /** R4–R6: records the message's ledger entry and hands its copies to their queues. */
  #deliver(
    reader: SharedReader,
    m: StoredMessage,
    view: MqttView,
    targets: Target[],
    served: Set<SpanContext>,
  ): void {
    let qos1 = 0; // copies that hold the entry until acknowledged (QoS 1 and 2)
    for (const t of targets) if (t.qos > 0) qos1++;
    const entry = reader.ledger.record(m.offset, qos1);
    if (targets.length === 0) {
      if (this.#plainCopies > 0) this.#metrics.routed.inc();
      return;
    }
    this.#metrics.routed.inc();
    deliverCopies(targets, view, reader, entry, served, this.#metrics, this.#evict, m);
  }

  /**
   * R2–R3: one target per (client, prefix) among the subscriptions that match the message's
   * topic and started at or before it on this triple (`key`) [MQTT-3.3.5-1]. Null when none is
   * left to make. A QoS 0 message's copies for 3.1.1 subscribers of its exact topic are all one
   * packet: offered here as they are found ({@link Router.#offerPlain}), with no target each,
   * since per subscriber a target was most of what a fan-out allocated; their count is left in
   * `#plainCopies`.
   */
  #targets(
    view: MqttView,
    key: string,
    m: StoredMessage,
    served: Set<SpanContext>,
  ): Target[] | null {
    const topic = view.topic;
    this.#plainCopies = 0;
    const exact = this.#registry.exact(topic);
    const wild = this.#registry.hasWildcards;
    if (exact === undefined && !wild) return null;
    const offset = m.offset;
    const out: Target[] = [];
    let shared: SharedHits | null = null;
    if (exact !== undefined) {
      let plain: Uint8Array | null = view.qos === 0 ? null : NOT_PLAIN;
      for (const s of exact) {
        const start = s.startOffsets.get(key);
        if (start === undefined || offset < start) continue; // subscribed after this message
        if (s.share !== undefined) shared = addShared(shared, s);
        else if (plain !== NOT_PLAIN && isPlain(s)) {
          plain ??= encodePublish(utf8(topic), view.payload, 0, 0, false);
          this.#offerPlain(s.client, plain, served);
        } else {
          const t = targetOf(s, m);
          if (t !== null) out.push(t);
        }
      }
    }
    const exactCount = out.length;
    if (wild) {
      // A client offered its plain copy above gets no second one through a wildcard filter.
      let offered: Set<ClientQueue> | null = null;
      this.#registry.matchWildcards(topic, (s) => {
        const start = s.startOffsets.get(key);
        if (start === undefined || offset < start) return;
        if (s.share !== undefined) shared = addShared(shared, s);
        else {
          if (this.#plainCopies > 0 && isPlain(s)) {
            offered ??= plainClients(exact!, key, offset);
            if (offered.has(s.client)) return;
          }
          const t = targetOf(s, m);
          if (t !== null) out.push(t);
        }
      });
    }
    // Exact filters are unique per (client, prefix); only wildcard hits can overlap, and a
    // lone target overlaps nothing (a fleet's one wildcard subscriber: no map per message).
    const found = out.length > exactCount && out.length > 1 ? dedupe(out) : out;
    if (shared !== null) {
      for (const [g, members] of shared) {
        if (g.owned === undefined || g.owned.has(key)) found.push(sharedTarget(g, members, m));
      }
    }
    return found.length > 0 || this.#plainCopies > 0 ? found : null;
  }

  /** Offers a plain QoS 0 copy (see {@link Router.#targets}). */
  #offerPlain(q: ClientQueue, packet: Uint8Array, served: Set<SpanContext>): void {
    this.#plainCopies++;
    const sc = q.sub.spanContext;
    if (sc !== null) served.add(sc);
    offerQos0Copy(q, packet, this.#metrics);
  }
}

/** Stands for "this message's copies are not all plain QoS 0 ones" in {@link Router.#targets}. */
const NOT_PLAIN = new Uint8Array(0);

/** A 3.1.1 subscription under the plain topic, not shared: its QoS 0 copy is the common one. */
function isPlain(s: Subscription<ClientQueue>): boolean {
  return s.prefix === "" && s.share === undefined && s.client.sub.v5 == null;
}

/** The clients {@link Router.#targets} offered a plain copy through the exact filters. */
function plainClients(
  exact: Iterable<Subscription<ClientQueue>>,
  key: string,
  offset: number,
): Set<ClientQueue> {
  const out = new Set<ClientQueue>();
  for (const s of exact) {
    const start = s.startOffsets.get(key);
    if (start !== undefined && offset >= start && isPlain(s)) out.add(s.client);
  }
  return out;
}

/** Offers a QoS 0 copy, counted as delivered or dropped (a closed client's is neither). */
function offerQos0Copy(q: ClientQueue, packet: Uint8Array, metrics: GatewayMetrics): void {
  const offer = q.offerQos0(packet);
  if (offer === "dropped") metrics.droppedQos0.inc();
  else if (offer !== "struck") metrics.deliveredQos[0].inc();
}

/** The share groups a message matched, each with its members that may have it. */
type SharedHits = Map<ShareGroup<ClientQueue>, Subscription<ClientQueue>[]>;

function addShared(hits: SharedHits | null, s: Subscription<ClientQueue>): SharedHits {
  const out = hits ?? new Map();
  const members = out.get(s.share!);
  if (members === undefined) out.set(s.share!, [s]);
  else if (!members.includes(s)) members.push(s);
  return out;
}

/** The copy of a shared subscription: one member of the group, its turn [MQTT-4.8.2]. */
export function sharedTarget(
  g: ShareGroup<ClientQueue>,
  members: readonly Subscription<ClientQueue>[],
  m: StoredMessage,
): Target {
  const s = pickMember(g, members);
  // No Local is refused on shared subscriptions [MQTT-3.8.3-4]: targetOf gives a target.
  const t = targetOf(s, m)!;
  t.share = g;
  return t;
}

/**
 * R4–R6: encodes and enqueues each target's copy; QoS 1 copies hold the ledger entry. 3.1.1
 * copies under the plain topic share one encoding; prefixed (replay) ones share one per prefix;
 * MQTT 5 copies (their own property block) are encoded one by one.
 */
export function deliverCopies(
  targets: readonly Target[],
  view: MqttView,
  reader: { readonly ledger: AckLedger; readonly key: string },
  entry: LedgerEntry | null,
  served: Set<SpanContext>,
  metrics: GatewayMetrics,
  evict: (q: ClientQueue, reason: string) => void,
  m?: StoredMessage,
): void {
  let plainBytes: Uint8Array | null = null;
  let plainQos0: Uint8Array | null = null;
  let prefixed: Map<string, [Uint8Array, Uint8Array | null]> | null = null;
  for (const { client: q, qos, prefix, props, retain, share } of targets) {
    let tb: Uint8Array;
    let qos0: Uint8Array | null;
    let slot: [Uint8Array, Uint8Array | null] | undefined;
    if (prefix === "") {
      tb = plainBytes ??= utf8(view.topic);
      qos0 = plainQos0;
    } else {
      slot = (prefixed ??= new Map()).get(prefix);
      if (slot === undefined) prefixed.set(prefix, slot = [utf8(prefix + view.topic), null]);
      [tb, qos0] = slot;
    }
    const sc = q.sub.spanContext;
    if (sc !== null) served.add(sc);
    if (qos === 0) {
      if (props !== null || retain) {
        qos0 = encodePublish(tb, view.payload, 0, 0, false, retain, props);
      } else if (qos0 === null) {
        qos0 = encodePublish(tb, view.payload, 0, 0, false);
        if (slot !== undefined) slot[1] = qos0;
        else plainQos0 = qos0;
      }
      offerQos0Copy(q, qos0, metrics);
      continue;
    }
    const bytes = tb.length + view.payload.length + 8 + (props?.length ?? 0);
    const offer = q.offerQos1({
      qos,
      topicBytes: tb,
      payload: view.payload,
      ledger: reader.ledger,
      entry: entry!,
      bytes,
      key: reader.key,
      props,
      retain,
      ...(share !== undefined && m !== undefined ? { shared: { group: share, m, view } } : {}),
    });
    if (offer === "evict" || offer === "struck") {
      reader.ledger.settle(entry!); // this copy is struck with the client
      if (offer === "evict") evict(q, "slow consumer: hard cap of outbound bytes reached");
    } else metrics.deliveredQos[qos].inc();
  }
}
