/**
 * Routing (DESIGN §4, R1–R6): every polled message gets an ack-ledger entry, then one copy per
 * subscriber that subscribed before it, at the lower of the two QoS levels. MQTT 5 subscribers
 * get the stored properties back (`out_v5.ts`).
 *
 * @module
 */
import { encodePublish, publishSize } from "../codec/encoder.ts";
import { utf8, utf8Length } from "../base/utf8.ts";
import { type MqttView, openEnvelope } from "../log/envelope.ts";
import type { StoredMessage } from "../log/port.ts";
import type { GatewayMetrics } from "../observe/gateway_metrics.ts";
import { startDeliverySpan } from "../observe/tracing.ts";
import type { SpanContext } from "@opentelemetry/api";
import type { ClientQueue } from "./client_queue.ts";
import type { SharedReader } from "./reader.ts";
import type { LedgerEntry } from "./ledger.ts";
import { expiryLeft, isOwnMessage, OutboundProperties, retainOf } from "./out_v5.ts";
import { type Subscription, type SubscriptionRegistry, tripleKey } from "./registry.ts";

/** Makes the copies of polled messages and hands them to client queues. */
export class Router {
  #registry: SubscriptionRegistry<ClientQueue>;
  #metrics: GatewayMetrics;
  #evict: (q: ClientQueue, reason: string) => void;
  /** QoS 1 copies the last {@link #targets} call counted. */
  #qos1 = 0;

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
    // MQTT 5 message expiry: an expired message goes to nobody (one header lookup per message).
    const left = expiryLeft(m);
    if (left !== null && left <= 0) {
      this.#metrics.expired.inc();
      reader.ledger.record(m.offset, 0);
      return;
    }
    const subs = this.#registry.lookup(view.topic);
    if (subs === undefined) {
      reader.ledger.record(m.offset, 0);
      return;
    }
    const targets = this.#targets(reader, m, view, left, subs.values());
    const entry = reader.ledger.record(m.offset, this.#qos1);
    if (targets.length === 0) return;
    this.#metrics.routed.inc();
    this.#deliver(reader, view, targets, entry, served);
  }

  /**
   * Who gets a copy, at which QoS, with which MQTT 5 properties: every subscription from before
   * the message, except its own publisher under No Local and copies over a v5 subscriber's
   * Maximum Packet Size (dropped and counted [MQTT-3.1.2-25]).
   */
  #targets(
    reader: SharedReader,
    m: StoredMessage,
    view: MqttView,
    left: number | null,
    subs: Iterable<Subscription<ClientQueue>>,
  ): Target[] {
    const key = tripleKey(reader.triple);
    const list: Target[] = [];
    let qos1 = 0;
    let v5: OutboundProperties | null = null;
    for (const s of subs) {
      const start = s.startOffsets.get(key);
      if (start === undefined || m.offset < start) continue; // subscribed after this message
      const qos = view.qos < s.qos ? view.qos : s.qos;
      const sub5 = s.client.sub.v5;
      if (sub5 == null) {
        list.push([s.client, qos, null, false]);
      } else {
        if (isOwnMessage(s, m, s.client.sub.clientId)) continue;
        const props = (v5 ??= new OutboundProperties(m, left)).for(s);
        const size = publishSize(utf8Length(view.topic), view.payload.length, qos, props);
        if (size > sub5.maximumPacketSize) {
          this.#metrics.droppedTooLarge.inc();
          continue;
        }
        list.push([s.client, qos, props, retainOf(s, m)]);
      }
      if (qos === 1) qos1++;
    }
    this.#qos1 = qos1; // a field, not a result object: no allocation per message
    return list;
  }

  /** R4–R6: one copy per target, into its client queue. */
  #deliver(
    reader: SharedReader,
    view: MqttView,
    targets: readonly Target[],
    entry: LedgerEntry | null,
    served: Set<SpanContext>,
  ): void {
    const topicBytes = utf8(view.topic);
    let qos0Packet: Uint8Array | null = null;
    for (const [q, qos, props, retain] of targets) {
      const sc = q.sub.spanContext;
      if (sc !== null) served.add(sc);
      if (qos === 0) {
        const packet = props === null
          ? (qos0Packet ??= encodePublish(topicBytes, view.payload, 0, 0, false))
          : encodePublish(topicBytes, view.payload, 0, 0, false, retain, props);
        if (q.offerQos0(packet) === "dropped") this.#metrics.droppedQos0.inc();
        else this.#metrics.deliveredQos[0].inc();
        continue;
      }
      const bytes = topicBytes.length + view.payload.length + 8 + (props?.length ?? 0);
      const offer = q.offerQos1({
        topicBytes,
        payload: view.payload,
        ledger: reader.ledger,
        entry: entry!,
        bytes,
        props,
        retain,
      });
      if (offer === "evict") {
        reader.ledger.settle(entry!); // this copy is struck with the client
        this.#evict(q, "slow consumer: hard cap of outbound bytes reached");
      } else this.#metrics.deliveredQos[1].inc();
    }
  }
}

/** A copy to make: the client, its QoS, the MQTT 5 property block (null: 3.1.1), RETAIN. */
type Target = [ClientQueue, 0 | 1, Uint8Array | null, boolean];
