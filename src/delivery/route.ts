/**
 * Routing (DESIGN §4, R1–R6): every polled message gets an ack-ledger entry, then one copy per
 * subscriber that subscribed before it, at the lower of the two QoS levels.
 *
 * @module
 */
import { encodePublish } from "../codec/encoder.ts";
import { utf8 } from "../base/utf8.ts";
import { openEnvelope } from "../log/envelope.ts";
import type { StoredMessage } from "../log/port.ts";
import type { GatewayMetrics } from "../observe/gateway_metrics.ts";
import { startDeliverySpan } from "../observe/tracing.ts";
import type { SpanContext } from "@opentelemetry/api";
import type { ClientQueue } from "./client_queue.ts";
import type { SharedReader } from "./reader.ts";
import { type Subscription, type SubscriptionRegistry, tripleKey } from "./registry.ts";
import type { AckLedger, LedgerEntry } from "./ledger.ts";

/** Makes the copies of polled messages and hands them to client queues. */
export class Router {
  #registry: SubscriptionRegistry<ClientQueue>;
  #metrics: GatewayMetrics;
  #evict: (q: ClientQueue, reason: string) => void;

  constructor(
    registry: SubscriptionRegistry<ClientQueue>,
    metrics: GatewayMetrics,
    evict: (q: ClientQueue, reason: string) => void,
  ) {
    this.#registry = registry;
    this.#metrics = metrics;
    this.#evict = evict;
  }

  /** Routes one polled batch inside a delivery span linked to the connections it served. */
  routeBatch(reader: SharedReader, batch: readonly StoredMessage[]): void {
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

  /** R1–R6 for one polled message. */
  #route(reader: SharedReader, m: StoredMessage, served: Set<SpanContext>): void {
    const view = openEnvelope(m);
    if (view === null) {
      this.#metrics.skippedForeign.inc();
      reader.ledger.record(m.offset, 0);
      return;
    }
    const targets = this.#targets(view.topic, tripleKey(reader.triple), m.offset);
    if (targets === null) {
      reader.ledger.record(m.offset, 0);
      return;
    }
    let qos1 = 0;
    for (const t of targets) {
      if (t.qos > view.qos) t.qos = view.qos;
      if (t.qos === 1) qos1++;
    }
    const entry = reader.ledger.record(m.offset, qos1);
    if (targets.length === 0) return;
    this.#metrics.routed.inc();
    deliverCopies(targets, view, reader, entry, served, this.#metrics, this.#evict);
  }

  /**
   * R2–R3: one target per (client, prefix) among the subscriptions that match `topic` and
   * started at or before `offset` on this triple, at the highest granted QoS of those
   * [MQTT-3.3.5-1]: overlapping filters give one copy. Null when none match.
   */
  #targets(topic: string, key: string, offset: number): Target[] | null {
    const exact = this.#registry.exact(topic);
    const wild = this.#registry.hasWildcards;
    if (exact === undefined && !wild) return null;
    const out: Target[] = [];
    if (exact !== undefined) {
      for (const s of exact) {
        const start = s.startOffsets.get(key);
        if (start === undefined || offset < start) continue; // subscribed after this message
        out.push({ client: s.client, qos: s.qos, prefix: s.prefix });
      }
    }
    if (!wild) return out.length > 0 ? out : null;
    const exactCount = out.length;
    this.#registry.matchWildcards(topic, (s) => {
      const start = s.startOffsets.get(key);
      if (start !== undefined && offset >= start) {
        out.push({ client: s.client, qos: s.qos, prefix: s.prefix });
      }
    });
    // Exact filters are unique per (client, prefix); only wildcard hits can overlap.
    return out.length > exactCount ? dedupe(out) : out.length > 0 ? out : null;
  }
}

/** A copy to make: for one client, under one topic prefix. */
export interface Target {
  readonly client: ClientQueue;
  qos: 0 | 1;
  readonly prefix: string;
}

/** One target per (client, prefix), keeping the highest QoS [MQTT-3.3.5-1]. */
function dedupe(targets: Target[]): Target[] {
  const seen = new Map<ClientQueue, Target[]>();
  const out: Target[] = [];
  for (const t of targets) {
    const same = seen.get(t.client)?.find((x) => x.prefix === t.prefix);
    if (same !== undefined) {
      if (t.qos > same.qos) same.qos = t.qos;
      continue;
    }
    const list = seen.get(t.client);
    if (list) list.push(t);
    else seen.set(t.client, [t]);
    out.push(t);
  }
  return out;
}

/** R4–R6: encodes and enqueues each target's copy; QoS 1 copies hold the ledger entry. */
export function deliverCopies(
  targets: readonly Target[],
  view: { readonly topic: string; readonly payload: Uint8Array },
  reader: { readonly ledger: AckLedger; readonly key: string },
  entry: LedgerEntry | null,
  served: Set<SpanContext>,
  metrics: GatewayMetrics,
  evict: (q: ClientQueue, reason: string) => void,
): void {
  // Copies under the plain topic share one encoding; prefixed (replay) ones get their own.
  let plainBytes: Uint8Array | null = null;
  let plainQos0: Uint8Array | null = null;
  let prefixed: Map<string, [Uint8Array, Uint8Array | null]> | null = null;
  for (const { client: q, qos, prefix } of targets) {
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
      if (qos0 === null) {
        qos0 = encodePublish(tb, view.payload, 0, 0, false);
        if (slot !== undefined) slot[1] = qos0;
        else plainQos0 = qos0;
      }
      if (q.offerQos0(qos0) === "dropped") metrics.droppedQos0.inc();
      else metrics.deliveredQos[0].inc();
      continue;
    }
    const bytes = tb.length + view.payload.length + 8;
    const offer = q.offerQos1({
      topicBytes: tb,
      payload: view.payload,
      ledger: reader.ledger,
      entry: entry!,
      bytes,
      key: reader.key,
    });
    if (offer === "evict") {
      reader.ledger.settle(entry!); // this copy is struck with the client
      evict(q, "slow consumer: hard cap of outbound bytes reached");
    } else metrics.deliveredQos[1].inc();
  }
}
