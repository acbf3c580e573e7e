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
import { type SubscriptionRegistry, tripleKey } from "./registry.ts";

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
    const subs = this.#registry.lookup(view.topic);
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
}
