/**
 * One connection's way in, read top to bottom for one PUBLISH:
 *
 * - P1 validate: done by the decoder before the packet gets here.
 * - P2 match, P3 resolve, P4 permit, P5 partition, P6 envelope: `PublishPreparer.prepare`
 *   (`publish.ts`), called by {@link ConnectionPublisher.publish}.
 * - P7 append: {@link ConnectionPublisher.publish} collects the prepared message into this
 *   read's batch for its partition (`#collect`); at the end of the read (or when a batch is
 *   full, or before waiting) `flush` makes one append per partition (`#append`); the backend's
 *   answer settles the QoS 1 PUBACK slots (`#confirmed`, `#failed`).
 * - QoS 2 [MQTT-4.3.3]: appended like QoS 1 and answered with a PUBREC; its packet id is held
 *   from the confirmed append to the PUBREL (`release`, `qos2_in.ts`), so a PUBLISH that comes
 *   again under it (DUP) gets its PUBREC again without a second append.
 *
 * Made on a connection's first PUBLISH: a connection that only connected, or only subscribes,
 * holds none of this. The fast path allocates no outcome object per message; outcomes are
 * counted here and PUBACKs leave in arrival order through the {@link AckQueue}.
 *
 * @module
 */
import { AckType } from "../codec/encoder.ts";
import type { PublishPacket } from "../codec/packets.ts";
import type { OutgoingMessage, PartitionAddress } from "../log/port.ts";
import type { Principal } from "../log/port.ts";
import type { Span, SpanContext } from "@opentelemetry/api";
import { startAppendSpan } from "../observe/tracing.ts";
import { SPAN_STATUS_ERROR } from "../observe/otel.ts";
import { type AckCloser, type AckOutbox, AckQueue } from "./ack_queue.ts";
import type { SessionContext } from "./context.ts";
import { PacketIdSet } from "./packet_ids.ts";
import { Qos2Inbound } from "./qos2_in.ts";
import { type Denied, type Failed, placedAt, type Prepared } from "./publish.ts";
import { appendAndOffer } from "./append_offer.ts";
import type { V5Session } from "./v5_session.ts";
import { type ContentRefusal, Puback5, refuseContent5 } from "./publish_v5.ts";
import { coordinatesPuback, failureCode, refusalPuback, unknownPubcomp } from "./publish_acks.ts";
import { keepRetained, type RetainedNotes } from "./publish_retained.ts";

/** Messages of one read bound for one partition, appended together. */
interface PartitionBatch {
  /** The append's target; `balancedOver` set = the backend picks the partition. */
  readonly address: PartitionAddress & { readonly balancedOver?: number };
  /** Replaced by an empty list once the backend has them, when nobody needs them after. */
  messages: OutgoingMessage[];
  /** The AckQueue slot of each message; -1 for QoS 0 (no PUBACK). */
  readonly slots: number[];
  /** QoS 1 and 2 messages among them: only those are timed (PUBACK latency). */
  qos1: number;
  /** QoS 2 messages among them (their packet ids are held once appended). */
  qos2: number;
}

/**
 * Empties a settled batch. Without this, a promoted closure context keeps each batch's
 * messages reachable until the next full GC, and young-generation GC copies those dead
 * messages at every scavenge under QoS 1 load: long pauses, the PUBACK latency tail (see
 * docs/BENCHMARKS.md, 'Figures behind the code').
 */
function release(b: PartitionBatch): void {
  b.messages.length = 0;
  b.slots.length = 0;
  b.qos1 = 0;
  b.qos2 = 0;
}

/** What the publisher needs of its connection: its outbox, the close (AckCloser), the trace. */
export interface PublishSite extends AckCloser {
  readonly spanContext: SpanContext | null;
  /** Where PUBACKs, PUBRECs and PUBCOMPs go. */
  readonly outbox: AckOutbox;
  /** The stored session, whose QoS 2 packet ids outlive the connection; null when clean. */
  readonly session?: { qos2Received?: PacketIdSet } | null;
  /** MQTT 5 session state; null on 3.1.1. */
  readonly v5?: V5Session | null;
  /** Closes, telling an MQTT 5 client why. */
  disconnect?(reasonCode: number, reason: string): void;
}

/** The PUBLISH pipeline of one connected client. */
export class ConnectionPublisher {
  readonly #ctx: SessionContext;
  readonly #site: PublishSite;
  readonly #principal: Principal;
  readonly #clientId: string;
  readonly #acks: AckQueue;
  /** The packet ids of QoS 2 publishes; made at the first QoS 2 publish or PUBREL. */
  #qos2Ids: Qos2Inbound | null = null;
  /** This read's appends per partition. */
  readonly #batches = new Map<PartitionBatch["address"], PartitionBatch>();
  /** Messages of this connection waiting for the backend (bounded per client). */
  #inflight = 0;
  #roomWaiter: (() => void) | null = null;
  /** A graceful stop waits for no appends in flight and no PUBACK owed. */
  #idle: PromiseWithResolvers<void> | null = null;
  readonly #retainedNotes: RetainedNotes = { refusalLogged: false };

  constructor(ctx: SessionContext, site: PublishSite, principal: Principal, clientId: string) {
    this.#ctx = ctx;
    this.#site = site;
    this.#principal = principal;
    this.#clientId = clientId;
    this.#acks = new AckQueue(site.outbox, site);
  }

  /** The QoS 2 packet ids: appended ones are the stored session's (they outlive the connection). */
  get #qos2(): Qos2Inbound {
    if (this.#qos2Ids !== null) return this.#qos2Ids;
    const session = this.#site.session;
    const held = session ? (session.qos2Received ??= new PacketIdSet()) : null;
    return this.#qos2Ids = new Qos2Inbound(held);
  }

  /** Messages waiting for the backend. */
  get inflight(): number {
    return this.#inflight;
  }

  /**
   * P2–P7 for one PUBLISH. Returns a promise only when the next packet must wait: the target's
   * metadata is not cached (this connection only waits, so per-partition order holds).
   */
  publish(p: PublishPacket): Promise<void> | undefined {
    if (p.qos === 2) {
      const seen = this.#qos2.arrived(p.packetId);
      // Sent again before its PUBREL: in the log already (its PUBREC again), or on its way.
      if (seen === "appended") this.#acks.settle(this.#acks.take(p.packetId, true), "ack");
      if (seen !== "new") return undefined;
    }
    if (p.qos > 0 && this.#site.v5 != null && this.#pastReceiveMaximum()) {
      return this.#receiveMaximumExceeded();
    }
    if (p.properties !== undefined) {
      const refusal = refuseContent5(p);
      if (refusal !== null) return this.#refuseContent(p, refusal);
    }
    const prepared = this.#ctx.preparer.prepare(p, this.#principal, this.#clientId);
    if (p.retain && this.#ctx.retained !== undefined) return this.#retained(p, prepared);
    if (prepared instanceof Promise) {
      this.flush();
      return prepared.then((r) => this.#collect(p, r));
    }
    this.#collect(p, prepared);
    return undefined;
  }

  /**
   * RETAIN (`publish_retained.ts`): what came before is appended first; the retained store is
   * changed, then the message is appended (the next packet waits: retained sets are rare).
   */
  async #retained(p: PublishPacket, pending: Prepared | Promise<Prepared>): Promise<void> {
    this.flush();
    this.#inflight++; // a graceful stop waits for it
    let r = await pending;
    const ctx = this.#ctx;
    if (r.kind === "append" && ctx.retained !== undefined) {
      const deps = { retained: ctx.retained, metrics: ctx.metrics, logger: ctx.logger };
      const v5 = this.#site.v5 != null;
      r = await keepRetained(deps, p, r, v5, this.#clientId, this.#retainedNotes);
    }
    this.#inflight--;
    this.#collect(p, r);
    this.flush();
  }

  /**
   * MQTT 5: the client has as many QoS 1 and 2 PUBLISHes unanswered (no PUBACK, or no PUBCOMP)
   * as the Receive Maximum our CONNACK gave it, and sent one more [MQTT-3.3.4-9].
   */
  #pastReceiveMaximum(): boolean {
    const max = Math.min(65_535, this.#ctx.config.limits.max_inflight_publishes_per_client);
    return this.#acks.pending + (this.#qos2Ids?.awaitingRelease ?? 0) >= max;
  }

  /** DISCONNECT 0x93 Receive Maximum exceeded, after what came before is appended. */
  #receiveMaximumExceeded(): undefined {
    const reason = "more QoS 1/2 PUBLISHes unanswered than the Receive Maximum";
    this.#ctx.metrics.outcome.rejected.inc();
    this.#ctx.logger.limited("warn", "Publish rejected", { client_id: this.#clientId, reason });
    this.flush();
    this.#site.disconnect?.(0x93, reason);
    return undefined;
  }

  /** P7, first half: the prepared message joins this read's batch for its partition. */
  #collect(p: PublishPacket, r: Prepared): void {
    if (r.kind !== "append") return this.#refuse(p, r);
    const ctx = this.#ctx;
    ctx.metrics.ruleHit(r.rule).inc();
    // The preparer hands out one address object per partition: it is the batch key.
    const a = r.address;
    let batch = this.#batches.get(a);
    if (!batch) {
      this.#batches.set(a, batch = { address: a, messages: [], slots: [], qos1: 0, qos2: 0 });
    }
    batch.messages.push(r.message);
    if (p.qos > 0) batch.qos1++;
    if (p.qos === 2) batch.qos2++;
    batch.slots.push(p.qos > 0 ? this.#acks.take(p.packetId, p.qos === 2) : -1);
    this.#inflight++;
    if (batch.messages.length >= ctx.config.limits.max_append_batch) this.flush();
  }

  /**
   * `denied` or `failed` before the append: counted, logged, no PUBACK [MQTT-3.3.5-2]; MQTT 5
   * gets a PUBACK with the reason code instead, and the connection stays open.
   */
  #refuse(p: PublishPacket, r: Denied | Failed): void {
    const ctx = this.#ctx;
    ctx.metrics.outcome[r.kind].inc();
    ctx.logger.limited("warn", `Publish ${r.kind}`, {
      client_id: this.#clientId,
      reason: r.reason,
    });
    const v5 = this.#site.v5;
    if (p.qos === 2) this.#qos2.notAppended(p.packetId); // a resend is a new message
    if (p.qos > 0) {
      const slot = this.#acks.take(p.packetId, p.qos === 2);
      if (v5 == null) this.#acks.settle(slot, "close");
      else {
        const code = r.kind === "failed"
          ? Puback5.UNSPECIFIED_ERROR
          : (r.reasonCode ?? Puback5.NOT_AUTHORIZED);
        this.#acks.settle(slot, "ack", refusalPuback(v5, p.packetId, code, r.reason));
      }
    }
    this.#checkIdle();
  }

  /** MQTT 5: refused for its content (`rejected`): PUBACK `code` (QoS 1) or DISCONNECT. */
  #refuseContent(p: PublishPacket, refusal: ContentRefusal): undefined {
    const ctx = this.#ctx;
    const reason = refusal.reason;
    ctx.metrics.outcome.rejected.inc();
    ctx.logger.limited("warn", "Publish rejected", { client_id: this.#clientId, reason });
    const v5 = this.#site.v5;
    if (p.qos === 0 || v5 == null) {
      this.flush(); // what came before it is appended
      this.#site.disconnect?.(refusal.disconnectCode, reason);
      return;
    }
    const puback = refusalPuback(v5, p.packetId, refusal.pubackCode, reason);
    if (p.qos === 2) this.#qos2.notAppended(p.packetId);
    this.#acks.settle(this.#acks.take(p.packetId, p.qos === 2), "ack", puback);
    this.#checkIdle();
  }

  /** P7, second half: one append per partition for everything this read produced. */
  flush(): void {
    const batches = this.#batches;
    if (batches.size === 0) return;
    for (const b of batches.values()) this.#append(b);
    batches.clear();
  }

  #append(b: PartitionBatch): void {
    const ctx = this.#ctx;
    const n = b.messages.length;
    // A clock read per batch and per answer is a visible share of the CPU under QoS 0, for a
    // latency only QoS 1 messages have.
    const started = b.qos1 > 0 ? ctx.clock.now() : 0;
    ctx.appendBudget.add(n);
    ctx.metrics.appendBatch.observe(n);
    const { stream, topic, partition } = b.address;
    const span = startAppendSpan(this.#site.spanContext, stream, topic, partition, n);
    // Live subscribers get the messages once committed; the PUBACKs wait for the disk.
    // QoS 0 only: nobody waits for the disk (the embedded log syncs it a little later).
    // 3.1.1 closes on a failed append: nothing sent after it may be appended before its resend.
    appendAndOffer(ctx, b, b.qos1 === 0, this.#site.v5 == null ? this : undefined).then(
      (receipt) => {
        const at = placedAt(b.address, receipt.partition);
        this.#confirmed(b, at, n, started, span, receipt.baseOffset);
        release(b);
      },
      (err) => {
        this.#failed(b, n, err, span);
        release(b);
      },
    );
  }

  /** The append is confirmed: PUBACKs may go (in order), outcomes `acked` and `appended`. */
  #confirmed(
    b: PartitionBatch,
    at: PartitionAddress,
    n: number,
    started: number,
    span: Span,
    baseOffset: number | null,
  ): void {
    const ctx = this.#ctx;
    const seconds = b.qos1 > 0 ? (ctx.clock.now() - started) / 1000 : 0;
    const v5 = this.#site.v5;
    const qos2 = b.qos2 > 0; // a QoS 1 batch skips the per-slot QoS 2 check
    let acked = 0;
    for (let i = 0; i < b.slots.length; i++) {
      const slot = b.slots[i];
      if (slot < 0) continue;
      acked++;
      ctx.metrics.pubackLatency.observe(seconds);
      if (qos2 && this.#acks.isQos2(slot)) this.#qos2.appended(this.#acks.packetIdOf(slot));
      if (v5?.pubackCoordinates !== true) this.#acks.settle(slot, "ack");
      else {
        const id = this.#acks.packetIdOf(slot);
        const offset = baseOffset === null ? null : baseOffset + i;
        this.#acks.settle(slot, "ack", coordinatesPuback(v5, id, at, offset));
      }
    }
    if (acked > 0) ctx.metrics.outcome.acked.inc(acked);
    if (n - acked > 0) ctx.metrics.outcome.appended.inc(n - acked);
    span.end();
    this.#settled(n);
  }

  /** The append failed: outcome `failed`, no PUBACK (the device retries). */
  #failed(b: PartitionBatch, n: number, err: unknown, span: Span): void {
    const ctx = this.#ctx;
    ctx.metrics.outcome.failed.inc(n);
    ctx.logger.limited("error", "Append failed; no PUBACK", {
      stream: b.address.stream,
      topic: b.address.topic,
      error: err,
    });
    const message = String((err as Error)?.message ?? err);
    span.setStatus({ code: SPAN_STATUS_ERROR, message });
    span.end();
    const v5 = this.#site.v5;
    for (const slot of b.slots) {
      if (slot < 0) continue;
      // Not in the log: the client's resend of a QoS 2 publish must be appended.
      if (b.qos2 > 0 && this.#acks.isQos2(slot)) {
        this.#qos2.notAppended(this.#acks.packetIdOf(slot));
      }
      if (v5 == null) this.#acks.settle(slot, "close");
      else {
        const id = this.#acks.packetIdOf(slot);
        this.#acks.settle(slot, "ack", refusalPuback(v5, id, failureCode(err), message));
      }
    }
    this.#settled(n);
  }

  #settled(n: number): void {
    this.#inflight -= n;
    this.#ctx.appendBudget.release(n);
    const w = this.#roomWaiter;
    this.#roomWaiter = null;
    w?.();
    this.#checkIdle();
  }

  /**
   * PUBREL: the client's QoS 2 publish is complete, its packet id free again; PUBCOMP
   * [MQTT-4.3.3-4]. MQTT 5 says 0x92 Packet Identifier not found for an id not held.
   */
  release(packetId: number): undefined {
    const held = this.#qos2.released(packetId);
    if (held || this.#site.v5 == null) this.#site.outbox.pushAck(packetId, AckType.PUBCOMP);
    else this.#site.outbox.push(unknownPubcomp(packetId));
  }

  /** Resolves when an append settles (the per-client bound may have room again). */
  room(): Promise<void> {
    return new Promise<void>((r) => this.#roomWaiter = r);
  }

  /** Resolves when no append is in flight and no PUBACK is owed (or on {@link wake}). */
  idle(): Promise<void> {
    if (this.#inflight === 0 && this.#acks.pending === 0) return Promise.resolve();
    return (this.#idle ??= Promise.withResolvers<void>()).promise;
  }

  /** The connection closed: nobody waits for room or idleness any more. */
  wake(): void {
    this.#roomWaiter?.();
    this.#idle?.resolve();
    this.#idle = null;
  }

  #checkIdle(): void {
    if (this.#idle === null || this.#inflight > 0 || this.#acks.pending > 0) return;
    this.#idle.resolve();
    this.#idle = null;
  }
}

/**
 * Back-pressure before each read: per-client and gateway-wide bounds on waiting appends. The
 * promise to wait for before checking again, or undefined when the read may go on.
 */
export function readGate(
  ctx: SessionContext,
  pub: ConnectionPublisher | null,
): Promise<void> | undefined {
  if (pub !== null && pub.inflight >= ctx.config.limits.max_inflight_publishes_per_client) {
    return pub.room();
  }
  if (ctx.appendBudget.full) return ctx.appendBudget.room();
  return undefined;
}
