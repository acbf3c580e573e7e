/**
 * The way from a prepared PUBLISH to its acknowledgement, owned by one object per publishing
 * connection (the {@link Appender}): the messages of one read grouped per partition (`add`),
 * one append per partition (`flush`), the offer to live subscribers, where the backend placed
 * the messages, and the acknowledgement slots ({@link AckQueue}), which write each PUBACK or
 * PUBREC into the connection's outbox in arrival order. Nothing goes back to the preparer.
 *
 * Live subscribers get the messages once the backend has committed them (`onCommitted`:
 * embedded, written but not yet synced) or, from a backend that does not call it, at its receipt;
 * a backend that lets go of the messages once encoded gets the only reference unless a reader of
 * the partition or a wildcard subscription wants them (the reader is then told to poll); a target
 * the backend no longer has leaves the topic cache, so the next publish checks it again.
 *
 * @module
 */
import type { PublishPacket } from "../codec/packets.ts";
import {
  type AppendReceipt,
  BackendError,
  type LogBackend,
  type OutgoingMessage,
  type PartitionAddress,
} from "../log/port.ts";
import type { Span, SpanContext } from "@opentelemetry/api";
import { startAppendSpan } from "../observe/tracing.ts";
import { SPAN_STATUS_ERROR } from "../observe/otel.ts";
import { type AckCloser, type AckOutbox, AckQueue } from "./ack_queue.ts";
import type { GatewayMetrics } from "../observe/gateway_metrics.ts";
import type { Logger } from "../observe/logger.ts";
import type { Clock } from "../base/clock.ts";
import type { GatewayConfig } from "../config/types.ts";
import type { AppendBudget } from "./append_budget.ts";
import type { DeliveryPort } from "./delivery_port.ts";
import { PacketIdSet } from "./packet_ids.ts";
import { Qos2Inbound } from "./qos2_in.ts";
import type { PreparedAppend, PublishPreparer } from "./publish.ts";
import { coordinatesPuback, failurePuback } from "./publish_acks.ts";
import { noteFailedAppend } from "./append_failure.ts";
import type { V5Session } from "./v5_session.ts";

/**
 * The services one append and its offer use (a will's append too): a part of `SessionContext`,
 * named here because the context holds the will publisher, which appends through this file.
 */
export interface OfferContext {
  readonly backend: LogBackend;
  readonly delivery: DeliveryPort;
  readonly preparer: PublishPreparer;
}

/** The services an {@link Appender} uses. */
export interface AppendContext extends OfferContext {
  readonly metrics: GatewayMetrics;
  readonly logger: Logger;
  readonly clock: Clock;
  readonly appendBudget: AppendBudget;
  readonly config: GatewayConfig;
}

/** What the appender needs of its connection. */
export interface AppendSite extends AckCloser {
  /** Where PUBACKs and PUBRECs go, in arrival order. */
  readonly outbox: AckOutbox;
  readonly spanContext: SpanContext | null;
  /** The stored session, whose QoS 2 packet ids outlive the connection; null when clean. */
  readonly session: { qos2Received?: PacketIdSet } | null;
  /** MQTT 5 session state; null on 3.1.1. */
  readonly v5: V5Session | null;
}

/** What is appended: `messages` is replaced by an empty list once nobody needs them after. */
export interface OfferedAppend {
  /** The target; `balancedOver` set = the backend picks the partition. */
  readonly address: PartitionAddress & { readonly balancedOver?: number };
  messages: OutgoingMessage[];
  /** Where the backend put them: set once, from the receipt (the address when it did not say). */
  placed?: PartitionAddress;
}

/** Where a backend that placed the batch itself put it. */
function placedAt(asked: PartitionAddress, partition?: number): PartitionAddress {
  if (partition === undefined || partition === asked.partition) return asked;
  return { stream: asked.stream, topic: asked.topic, partition };
}

/**
 * Appends `a.messages` to `a.address` and offers them to live subscribers (see above); sets
 * `a.placed`. `syncLater`: only QoS 0 messages, nobody waits for their sync
 * (`AppendRequest.syncLater`); `orderGroup`: the sender's order across a failure
 * (`AppendRequest.orderGroup`).
 */
export function appendAndOffer(
  ctx: OfferContext,
  a: OfferedAppend,
  syncLater = false,
  orderGroup?: object,
): Promise<AppendReceipt> {
  let offered = false;
  const onCommitted = (baseOffset: number) => {
    offered = true;
    ctx.delivery.notifyAppended(a.address, baseOffset, a.messages);
  };
  const appended = ctx.backend.append({
    ...a.address,
    messages: a.messages,
    onCommitted,
    syncLater,
    orderGroup,
  });
  // On the Iggy path: held until the receipt, every message in flight survives the scavenges of
  // a whole send; dropped here, they die young and the GC's share of the gateway's busy time
  // drops.
  if (ctx.backend.remote?.releasesMessages && !ctx.delivery.wantsAppended(a.address)) {
    a.messages = [];
  }
  return appended.then(
    (receipt) => {
      const at = a.placed = placedAt(a.address, receipt.partition);
      if (!offered) ctx.delivery.notifyAppended(at, receipt.baseOffset, a.messages);
      return receipt;
    },
    (err) => {
      if (err instanceof BackendError && err.code === "not_found") {
        ctx.preparer.topics.invalidate(a.address.stream, a.address.topic);
      }
      throw err;
    },
  );
}

/** Messages of one read bound for one partition, appended together. */
interface PartitionBatch extends OfferedAppend {
  /** The AckQueue slot of each message; -1 for QoS 0 (no PUBACK). */
  readonly slots: number[];
  /** QoS 1 and 2 messages among them: only those are timed (PUBACK latency). */
  qos1: number;
  /** QoS 2 messages among them (their packet ids are held once appended). */
  qos2: number;
  /** The publish spans of its traced messages; null while none is (telemetry not exported). */
  spans: Span[] | null;
}

/** An empty batch for `address`. */
function newBatch(address: PartitionBatch["address"]): PartitionBatch {
  return { address, messages: [], slots: [], qos1: 0, qos2: 0, placed: undefined, spans: null };
}

/**
 * Empties a settled batch. Without this, a promoted closure context keeps each batch's
 * messages reachable until the next full GC, and young-generation GC copies those dead
 * messages at every scavenge under QoS 1 load: long pauses, the PUBACK latency tail.
 */
function release(b: PartitionBatch): void {
  b.messages.length = 0;
  b.slots.length = 0;
  b.qos1 = 0;
  b.qos2 = 0;
  b.placed = undefined;
  b.spans = null;
}

/** Appends, offers and acknowledges the PUBLISHes of one connection. */
export class Appender {
  readonly #ctx: AppendContext;
  readonly #site: AppendSite;
  readonly #acks: AckQueue;
  /** The packet ids of QoS 2 publishes; made at the first QoS 2 publish or PUBREL. */
  #qos2Ids: Qos2Inbound | null = null;
  /**
   * This read's appends: the first partition's batch (most reads publish to one partition), and
   * those of other partitions by address (made at the first read that needs it).
   */
  #first: PartitionBatch | null = null;
  #more: Map<PartitionBatch["address"], PartitionBatch> | null = null;
  /** Messages of this connection waiting for the backend (bounded per client). */
  #inflight = 0;
  #roomWaiter: (() => void) | null = null;
  /** A graceful stop waits for no appends in flight and no PUBACK owed. */
  #idle: PromiseWithResolvers<void> | null = null;

  constructor(ctx: AppendContext, site: AppendSite) {
    this.#ctx = ctx;
    this.#site = site;
    this.#acks = new AckQueue(site.outbox, site);
  }

  /** The QoS 2 packet ids: appended ones are the stored session's (they outlive the connection). */
  get qos2(): Qos2Inbound {
    if (this.#qos2Ids !== null) return this.#qos2Ids;
    const session = this.#site.session;
    const held = session ? (session.qos2Received ??= new PacketIdSet()) : null;
    return this.#qos2Ids = new Qos2Inbound(held);
  }

  /** Messages waiting for the backend. */
  get inflight(): number {
    return this.#inflight;
  }

  /** QoS 1 and 2 PUBLISHes unanswered: no PUBACK or PUBREC yet, or no PUBCOMP yet. */
  get unanswered(): number {
    return this.#acks.pending + (this.#qos2Ids?.awaitingRelease ?? 0);
  }

  /**
   * The prepared message joins this read's batch for its partition; `span`: its publish span,
   * ended when the append is answered.
   */
  add(p: PublishPacket, r: PreparedAppend, span: Span | null = null): void {
    // The preparer hands out one address object per partition: it is the batch key.
    const a = r.address;
    let batch = this.#first;
    if (batch === null) batch = this.#first = newBatch(a);
    else if (batch.address !== a) {
      const more = this.#more ??= new Map();
      batch = more.get(a);
      if (!batch) more.set(a, batch = newBatch(a));
    }
    if (span !== null) (batch.spans ??= []).push(span);
    batch.messages.push(r.message);
    if (p.qos > 0) batch.qos1++;
    if (p.qos === 2) batch.qos2++;
    batch.slots.push(p.qos > 0 ? this.#acks.take(p.packetId, p.qos === 2) : -1);
    this.#inflight++;
    if (batch.messages.length >= this.#ctx.config.limits.max_append_batch) this.flush();
  }

  /**
   * A QoS 1 or 2 PUBLISH that is not appended, answered in its turn: `puback` (MQTT 5, with its
   * reason code), or none and the connection closes (3.1.1) [MQTT-3.3.5-2].
   */
  notAppended(p: PublishPacket, puback: Uint8Array | null): void {
    if (p.qos === 2) this.qos2.notAppended(p.packetId); // a resend is a new message
    if (p.qos > 0) {
      const slot = this.#acks.take(p.packetId, p.qos === 2);
      if (puback === null) this.#acks.settle(slot, "close");
      else this.#acks.settle(slot, "ack", puback);
    }
    this.#checkIdle();
  }

  /** A QoS 2 PUBLISH sent again after its append: its PUBREC again, in its turn. */
  acknowledgeAgain(packetId: number): void {
    this.#acks.settle(this.#acks.take(packetId, true), "ack");
  }

  /** Counts `pending` as in flight until it settles (a graceful stop waits for it). */
  async holding<T>(pending: Promise<T>): Promise<T> {
    this.#inflight++;
    try {
      return await pending;
    } finally {
      this.#inflight--;
    }
  }

  /** One append per partition for everything this read produced. */
  flush(): void {
    const first = this.#first;
    if (first === null) return;
    this.#first = null;
    this.#append(first);
    const more = this.#more;
    if (more === null || more.size === 0) return;
    for (const b of more.values()) this.#append(b);
    more.clear();
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
    const span = startAppendSpan(this.#site.spanContext, stream, topic, partition, n, b.spans);
    // Live subscribers get the messages once committed; the PUBACKs wait for the disk.
    // QoS 0 only: nobody waits for the disk (the embedded log syncs it a little later).
    // 3.1.1 closes on a failed append: nothing sent after it may be appended before its resend.
    appendAndOffer(ctx, b, b.qos1 === 0, this.#site.v5 == null ? this : undefined).then(
      (receipt) => {
        this.#confirmed(b, n, started, span, receipt.baseOffset);
        release(b);
      },
      (err) => {
        this.#failed(b, n, err, span);
        release(b);
      },
    );
  }

  /** The append is confirmed: PUBACKs may go (in order), outcomes `acked` and `appended`. */
  #confirmed(b: PartitionBatch, n: number, started: number, span: Span, base: number | null): void {
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
      if (qos2 && this.#acks.isQos2(slot)) this.qos2.appended(this.#acks.packetIdOf(slot));
      if (v5?.pubackCoordinates !== true) this.#acks.settle(slot, "ack");
      else {
        const id = this.#acks.packetIdOf(slot);
        const offset = base === null ? null : base + i;
        this.#acks.settle(slot, "ack", coordinatesPuback(v5, id, b.placed!, offset));
      }
    }
    if (acked > 0) ctx.metrics.outcome.acked.inc(acked);
    if (n - acked > 0) ctx.metrics.outcome.appended.inc(n - acked);
    span.end();
    if (b.spans !== null) { for (const s of b.spans) s.end(); }
    this.#settled(n);
  }

  /** The append failed: outcome `failed`; no PUBACK on 3.1.1 (the device retries). */
  #failed(b: PartitionBatch, n: number, err: unknown, span: Span): void {
    const ctx = this.#ctx;
    ctx.metrics.outcome.failed.inc(n);
    noteFailedAppend(ctx, b.address, b.slots, err);
    const status = { code: SPAN_STATUS_ERROR, message: String((err as Error)?.message ?? err) };
    span.setStatus(status);
    span.end();
    if (b.spans !== null) { for (const s of b.spans) s.setStatus(status).end(); }
    const v5 = this.#site.v5;
    for (const slot of b.slots) {
      if (slot < 0) continue;
      // Not in the log: the client's resend of a QoS 2 publish must be appended.
      if (b.qos2 > 0 && this.#acks.isQos2(slot)) this.qos2.notAppended(this.#acks.packetIdOf(slot));
      if (v5 == null) this.#acks.settle(slot, "close");
      else this.#acks.settle(slot, "ack", failurePuback(v5, this.#acks.packetIdOf(slot), err));
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
