/**
 * Flow control of one subscriber (DESIGN §4 "Slow consumers"): the QoS 1 in-flight window,
 * the per-client and global outbound byte caps, pausing and eviction.
 *
 * Bytes counted against the caps are the outbox's queued bytes (written to the socket yet or
 * not) plus QoS 1 copies waiting for a window slot. A client whose socket does not drain
 * keeps its bytes queued, so it crosses the cap, is paused, and is evicted if it does not
 * drain within `slow_consumer_timeout_ms` or reaches the hard cap (twice the per-client cap).
 *
 * @module
 */
import { encodePublish } from "../codec/encoder.ts";
import type { OutboundBudget } from "../session/outbox.ts";
import type { Subscriber } from "../session/delivery_port.ts";
import type { DeadlineOwner } from "../base/deadline_wheel.ts";
import type { AckLedger, LedgerEntry } from "./ledger.ts";

/** A QoS 1 copy awaiting a window slot or a PUBACK. */
export interface Copy {
  readonly topicBytes: Uint8Array;
  readonly payload: Uint8Array;
  readonly ledger: AckLedger;
  readonly entry: LedgerEntry;
  readonly bytes: number;
  /** MQTT 5 property block of this copy; null or absent for a 3.1.1 subscriber. */
  readonly props?: Uint8Array | null;
  /** RETAIN flag (MQTT 5 Retain As Published). */
  readonly retain?: boolean;
}

/** Limits of a client queue. */
export interface QueueLimits {
  readonly maxInflight: number;
  readonly maxClientBytes: number;
  readonly slowConsumerTimeoutMs: number;
  /** Resend an un-PUBACKed QoS 1 copy (DUP set) after this long; 0 = never. */
  readonly resendAfterMs?: number;
}

/** Result of offering a copy to a client. */
export type Offer = "sent" | "queued" | "dropped" | "evict";

/** Per-subscriber delivery state. */
export class ClientQueue implements DeadlineOwner {
  readonly sub: Subscriber;
  #limits: QueueLimits;
  #budget: OutboundBudget;
  /** The in-flight window: ours, or the MQTT 5 client's Receive Maximum when smaller. */
  readonly #maxInflight: number;
  #inflight = new Map<number, Copy>();
  /** When each in-flight copy was (last) written, for resends. */
  #sentAt = new Map<number, number>();
  /** Clock for resends (ms); set by the owner. */
  now: () => number = () => performance.now();
  #waiting: Copy[] = [];
  #waitingBytes = 0;
  #nextId = 1;
  /** Paused since (ms) for the deadline wheel; timeoutMs 0 when not paused. */
  lastActivity = 0;
  timeoutMs = 0;
  /** Set by the owner: called when the client must be evicted. */
  onEvict: (reason: string) => void = () => {};
  /** Set by the owner: whether the client is paused changes the wheel registration. */
  onPauseChange: (paused: boolean) => void = () => {};

  constructor(sub: Subscriber, limits: QueueLimits, budget: OutboundBudget) {
    this.sub = sub;
    this.#limits = limits;
    this.#budget = budget;
    this.#maxInflight = Math.min(limits.maxInflight, sub.v5?.receiveMaximum ?? Infinity);
  }

  /** Bytes counted against this client's cap. */
  get queuedBytes(): number {
    return this.sub.outbox.queuedBytes + this.#waitingBytes;
  }

  get paused(): boolean {
    return this.timeoutMs > 0;
  }

  get inflight(): number {
    return this.#inflight.size;
  }

  /** Offers a QoS 0 copy (already encoded, shared between subscribers). */
  offerQos0(packet: Uint8Array): Offer {
    if (this.#overCap(packet.length)) return "dropped";
    this.sub.outbox.push(packet);
    return "sent";
  }

  /** Offers a QoS 1 copy: sent now, queued behind the window, or the client is evicted. */
  offerQos1(copy: Copy): Offer {
    if (this.queuedBytes + copy.bytes > 2 * this.#limits.maxClientBytes) {
      return "evict"; // hard cap reached
    }
    if (this.#overCap(copy.bytes)) this.#pause();
    if (this.#inflight.size < this.#maxInflight && this.#waiting.length === 0) {
      this.#send(copy);
      return "sent";
    }
    this.#waiting.push(copy);
    this.#waitingBytes += copy.bytes;
    this.#budget.bytes += copy.bytes;
    return "queued";
  }

  /** A PUBACK from the client: settle its copy, refill the window. */
  puback(packetId: number): void {
    const copy = this.#inflight.get(packetId);
    if (!copy) return; // unknown or already struck: ignore [MQTT-4.3.2]
    this.#inflight.delete(packetId);
    this.#sentAt.delete(packetId);
    copy.ledger.settle(copy.entry);
    this.refill();
  }

  /** Moves waiting copies into the window and unpauses once under the cap. */
  refill(): void {
    while (this.#waiting.length > 0 && this.#inflight.size < this.#maxInflight) {
      const copy = this.#waiting.shift()!;
      this.#waitingBytes -= copy.bytes;
      this.#budget.bytes -= copy.bytes;
      this.#send(copy);
    }
    if (this.paused && this.queuedBytes <= this.#limits.maxClientBytes) {
      this.timeoutMs = 0;
      this.onPauseChange(false);
    }
  }

  /**
   * Strikes every pending copy (client gone or evicted) so offsets can move again. With
   * `settle` false (the gateway stops) the copies are only dropped: their ledger entries
   * stay unsettled, so the stored offset stays before them and a restart delivers them again.
   */
  strikeAll(settle = true): void {
    if (settle) {
      for (const copy of this.#inflight.values()) copy.ledger.settle(copy.entry);
      for (const copy of this.#waiting) copy.ledger.settle(copy.entry);
    }
    this.#budget.bytes -= this.#waitingBytes;
    this.#inflight.clear();
    this.#sentAt.clear();
    this.#waiting = [];
    this.#waitingBytes = 0;
    if (this.paused) {
      this.timeoutMs = 0;
      this.onPauseChange(false);
    }
  }

  /** Deadline wheel: paused longer than `slow_consumer_timeout_ms`. */
  expire(): void {
    this.onEvict(`slow consumer: queue over cap for ${this.#limits.slowConsumerTimeoutMs} ms`);
  }

  #overCap(bytes: number): boolean {
    return this.queuedBytes + bytes > this.#limits.maxClientBytes ||
      this.#budget.bytes + bytes > this.#budget.maxBytes;
  }

  #pause(): void {
    if (this.paused) return;
    this.timeoutMs = this.#limits.slowConsumerTimeoutMs;
    this.onPauseChange(true);
  }

  #send(copy: Copy): void {
    const id = this.#allocateId();
    this.#inflight.set(id, copy);
    if (this.#limits.resendAfterMs) this.#sentAt.set(id, this.now());
    this.sub.outbox.push(encodeCopy(copy, id, false));
  }

  /**
   * Resends, with the DUP flag and the same packet id [MQTT-3.3.1-1], every in-flight copy
   * not PUBACKed within `resendAfterMs`; skipped while the client is over its byte cap (a
   * resend must not grow a queue that is not draining). Returns how many were resent.
   */
  resendDue(now: number): number {
    const after = this.#limits.resendAfterMs ?? 0;
    if (after <= 0 || this.paused) return 0;
    let n = 0;
    for (const [id, at] of this.#sentAt) {
      if (now - at < after) continue;
      const copy = this.#inflight.get(id);
      if (!copy || this.queuedBytes + copy.bytes > this.#limits.maxClientBytes) continue;
      this.sub.outbox.push(encodeCopy(copy, id, true));
      this.#sentAt.set(id, now);
      n++;
    }
    return n;
  }

  /** Per-client packet ids, never reusing one still in flight. */
  #allocateId(): number {
    for (;;) {
      const id = this.#nextId;
      this.#nextId = id === 65535 ? 1 : id + 1;
      if (!this.#inflight.has(id)) return id;
    }
  }
}

/** A QoS 1 copy as a PUBLISH with packet id `id`. */
function encodeCopy(copy: Copy, id: number, dup: boolean): Uint8Array {
  return encodePublish(
    copy.topicBytes,
    copy.payload,
    1,
    id,
    dup,
    copy.retain ?? false,
    copy.props ?? null,
  );
}
