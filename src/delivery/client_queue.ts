/**
 * Flow control of one subscriber: the QoS 1 in-flight window,
 * the per-client and global outbound byte caps, pausing and eviction.
 *
 * Bytes counted against the caps are the outbox's queued bytes (written to the socket yet or
 * not) plus QoS 1 copies waiting for a window slot. A client whose socket does not drain
 * keeps its bytes queued, so it crosses the cap, is paused, and is evicted if it does not
 * drain within `slow_consumer_timeout_ms`. A live copy that would pass the hard cap (twice the
 * per-client cap) waits in its reader for the client to drain (`pacing.ts` `roomUnderHardCap`).
 * Backlogs (catch-ups, replays, retained sets) offer only what fits under the cap and wait for
 * the queue to drain (`pacing.ts`); waiting, the queue counts as paused. A closed queue
 * (evicted or detached) takes nothing and holds nothing of the global budget.
 *
 * QoS 2 copies [MQTT-4.3.3] share the window: a copy's entry is settled at its PUBREC (the
 * client owns the message then: it is not sent again), and its packet id stays taken, counted
 * in the window, until the PUBCOMP answers our PUBREL.
 *
 * @module
 */
import { AckType } from "../codec/encoder.ts";
import type { OutboundBudget } from "../session/outbox.ts";
import type { Subscriber } from "../session/delivery_port.ts";
import type { DeadlineOwner } from "../base/deadline_wheel.ts";
import { copyAt, type Qos2Out } from "../session/qos2_out.ts";
import type { ShareGroup } from "./registry.ts";
import { type CopyOf, encodeCopy, type SharedCopyOf } from "./copy.ts";
import { DrainWaiters } from "./drain_waiters.ts";

/** A QoS 1 or 2 copy awaiting a window slot or a PUBACK (QoS 2: a PUBREC). */
export type Copy = CopyOf<ClientQueue>;
/** The group and message of a shared subscription's copy (`share/groups.ts`). */
export type SharedCopy = SharedCopyOf<ClientQueue>;

/** Memory a QoS 1 copy waiting for a window slot takes beyond its bytes, about. */
const WAITING_COPY_BYTES = 128;

/** Limits of a client queue. */
export interface QueueLimits {
  readonly maxInflight: number;
  readonly maxClientBytes: number;
  readonly slowConsumerTimeoutMs: number;
  /** Resend an un-PUBACKed QoS 1 copy (DUP set) after this long; 0 = never. */
  readonly resendAfterMs?: number;
}

/**
 * Result of offering a copy to a client; "struck": the queue is closed (evicted or detached),
 * it took nothing.
 */
export type Offer = "sent" | "queued" | "dropped" | "evict" | "struck";

/** Per-subscriber delivery state. */
export class ClientQueue implements DeadlineOwner {
  readonly sub: Subscriber;
  #limits: QueueLimits;
  #budget: OutboundBudget;
  /** The in-flight window: ours, or the MQTT 5 client's Receive Maximum when smaller. */
  readonly #maxInflight: number;
  #inflight = new Map<number, Copy>();
  /** QoS 2 copies PUBRECed: our PUBREL is out, the client's PUBCOMP not in yet. */
  #releasing: Set<number> | null = null;
  /** Resumed: QoS 2 copies sent before, their packet ids by {@link copyAt} (and the ids). */
  #resendIds: Map<string, number> | null = null;
  #reservedIds: Set<number> | null = null;
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
  deadlineSlot: number | undefined = undefined;
  /** Evicted or detached: takes no offer and holds nothing of the budgets. */
  #closed = false;
  /** Backlogs waiting for this queue to drain (`pacing.ts`). */
  readonly #drains = new DrainWaiters();
  /** Bytes backlogs have polled ahead for this client and not yet offered (`pacing.ts`). */
  readAhead = 0;
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

  /** No window slot free, or paused: a share group passes this member over (`share/groups.ts`). */
  get full(): boolean {
    return this.paused || this.inflight >= this.#maxInflight;
  }

  /** Packet ids taken: copies awaiting a PUBACK or PUBREC, and PUBRELs awaiting a PUBCOMP. */
  get inflight(): number {
    return this.#inflight.size + (this.#releasing?.size ?? 0);
  }

  /** QoS 1 copies waiting for a window slot. */
  get waiting(): number {
    return this.#waiting.length;
  }

  /** Per triple key, the lowest offset among this client's unsettled QoS 1 copies. */
  lowestUnsettled(): Map<string, number> {
    const out = new Map<string, number>();
    const note = (c: Copy) => {
      const o = out.get(c.key);
      if (o === undefined || c.entry.offset < o) out.set(c.key, c.entry.offset);
    };
    this.#inflight.forEach(note);
    this.#waiting.forEach(note);
    return out;
  }

  /** QoS 1/2 copies of share group `g` this client holds unsettled (in flight or waiting). */
  unsettledOf(g: ShareGroup<ClientQueue>): number {
    let n = 0;
    for (const c of this.#inflight.values()) if (c.shared?.group === g) n++;
    for (const c of this.#waiting) if (c.shared?.group === g) n++;
    return n;
  }

  get closed(): boolean {
    return this.#closed;
  }

  /** Takes no offer from now on; false when it already was closed (count an eviction once). */
  close(): boolean {
    if (this.#closed) return false;
    this.#closed = true;
    return true;
  }

  /**
   * Bytes a backlog counts against this client's cap: those queued, and what each copy waiting
   * for a window slot costs in memory beyond its bytes (a backlog of tiny QoS 1 messages is
   * bounded in copies too).
   */
  get heldBytes(): number {
    return this.queuedBytes + this.#waiting.length * WAITING_COPY_BYTES;
  }

  /**
   * What keeps a backlog's copy of `bytes` out now: this client's cap ("client"), the global
   * one ("global"), or nothing (null). A copy alone in an empty queue always fits this
   * client's cap, so a message larger than the cap still reaches a client that reads.
   */
  blockedBy(bytes: number): "client" | "global" | null {
    const held = this.heldBytes;
    if (held > 0 && held + bytes > this.#limits.maxClientBytes) return "client";
    return this.#budget.bytes + bytes > this.#budget.maxBytes ? "global" : null;
  }

  /**
   * Resolves once the queue drains a little (bytes written, an acknowledgement) or closes, or
   * `stop` resolves. Meanwhile it counts as paused: a client that neither reads nor acknowledges
   * for `slow_consumer_timeout_ms` while a backlog waits for it is evicted. A wait given up by
   * `stop` ends the pause when no one else waits and the queue is under its cap.
   */
  drain(stop?: Promise<void>): Promise<void> {
    if (this.#closed) return Promise.resolve();
    this.#pause();
    return this.#drains.add(stop, () => this.#resumeUnderCap());
  }

  /** Whether a QoS 1 copy of `bytes` takes this queue past twice its cap (never when empty). */
  overHardCap(bytes: number): boolean {
    const queued = this.queuedBytes;
    return queued > 0 && queued + bytes > 2 * this.#limits.maxClientBytes;
  }

  /** Offers a QoS 0 copy (already encoded, shared between subscribers). */
  offerQos0(packet: Uint8Array): Offer {
    if (this.#closed) return "struck";
    if (this.#overCap(packet.length)) return "dropped";
    this.sub.outbox.push(packet);
    return "sent";
  }

  /** Offers a QoS 1 copy: sent now, queued behind the window, or the client is evicted. */
  offerQos1(copy: Copy): Offer {
    if (this.#closed) return "struck";
    if (this.overHardCap(copy.bytes)) return "evict";
    if (this.#overCap(copy.bytes)) this.#pause();
    if (this.inflight < this.#maxInflight && this.#waiting.length === 0) {
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
    // Unknown, already struck, or a QoS 2 copy (which a PUBREC answers): ignore [MQTT-4.3.2].
    if (!copy || copy.qos !== 1) return;
    this.#inflight.delete(packetId);
    this.#sentAt.delete(packetId);
    copy.ledger.settle(copy.entry);
    this.refill();
  }

  /**
   * A PUBREC: the client has the QoS 2 copy, so its entry settles; PUBREL goes out, and the
   * packet id stays taken until the PUBCOMP. An MQTT 5 reason code ≥ 0x80 ends the exchange
   * there [MQTT-4.3.3-8]. A PUBREC of an id already released is answered with PUBREL again.
   */
  pubrec(packetId: number, reasonCode: number): void {
    const copy = this.#inflight.get(packetId);
    if (!copy || copy.qos !== 2) {
      if (this.#releasing?.has(packetId)) this.sub.outbox.pushAck(packetId, AckType.PUBREL);
      return;
    }
    this.#inflight.delete(packetId);
    this.#sentAt.delete(packetId);
    copy.ledger.settle(copy.entry);
    if (reasonCode < 0x80) this.#release(packetId);
    this.refill();
  }

  /** A PUBCOMP: the QoS 2 exchange is over, its packet id free. */
  pubcomp(packetId: number): void {
    if (this.#releasing?.delete(packetId) !== true) return;
    this.#sentAt.delete(packetId);
    this.refill();
  }

  /** The QoS 2 copies in flight, for a stored session going offline; null when none. */
  qos2Out(): Qos2Out | null {
    const sent = new Map<string, number>();
    for (const [id, c] of this.#inflight) {
      if (c.qos === 2) sent.set(copyAt(c.key, c.entry.offset), id);
    }
    const releasing = this.#releasing === null ? [] : [...this.#releasing];
    return sent.size === 0 && releasing.length === 0 ? null : { releasing, sent };
  }

  /**
   * A resumed session's QoS 2 exchanges: PUBRELs go again at once, and copies sent before
   * keep their packet ids for when the catch-up sends them again [MQTT-4.4.0-1].
   */
  resumeQos2(out: Qos2Out): void {
    for (const id of out.releasing) this.#release(id);
    if (out.sent.size === 0) return;
    this.#resendIds = new Map(out.sent);
    this.#reservedIds = new Set(out.sent.values());
  }

  #release(packetId: number): void {
    (this.#releasing ??= new Set()).add(packetId);
    if (this.#limits.resendAfterMs) this.#sentAt.set(packetId, this.now());
    this.sub.outbox.pushAck(packetId, AckType.PUBREL);
  }

  /** Moves waiting copies into the window and unpauses once under the cap. */
  refill(): void {
    while (this.#waiting.length > 0 && this.inflight < this.#maxInflight) {
      const copy = this.#waiting.shift()!;
      this.#waitingBytes -= copy.bytes;
      this.#budget.bytes -= copy.bytes;
      this.#send(copy);
    }
    this.#drains.wake();
    this.#resumeUnderCap();
  }

  #resumeUnderCap(): void {
    if (this.paused && this.queuedBytes <= this.#limits.maxClientBytes) {
      this.timeoutMs = 0;
      this.onPauseChange(false);
    }
  }

  /**
   * Strikes every pending copy (client gone or evicted) so offsets can move again, but a
   * shared subscription's copy that `reoffer` hands to another member of its group. With
   * `settle` false (the gateway stops) the copies are only dropped: their ledger entries
   * stay unsettled, so the stored offset stays before them and a restart delivers them again.
   */
  strikeAll(settle = true, reoffer?: (copy: Copy) => boolean): void {
    if (settle) {
      // A shared subscription's copy goes to another member when there is one (`reoffer`).
      for (const copy of this.#inflight.values()) {
        if (copy.shared === undefined || reoffer?.(copy) !== true) copy.ledger.settle(copy.entry);
      }
      for (const copy of this.#waiting) {
        if (copy.shared === undefined || reoffer?.(copy) !== true) copy.ledger.settle(copy.entry);
      }
    }
    this.#closed = true;
    this.#budget.bytes -= this.#waitingBytes;
    this.#inflight.clear();
    this.#releasing = this.#resendIds = this.#reservedIds = null;
    this.#sentAt.clear();
    this.#waiting = [];
    this.#waitingBytes = 0;
    if (this.paused) {
      this.timeoutMs = 0;
      this.onPauseChange(false);
    }
    this.#drains.wake();
  }

  /** Deadline wheel: paused (over its cap, or a backlog waiting) for `slow_consumer_timeout_ms`. */
  expire(): void {
    const ms = this.#limits.slowConsumerTimeoutMs;
    this.onEvict(`slow consumer: queue ${this.#drains.waiting ? "full" : "over cap"} for ${ms} ms`);
  }

  #overCap(bytes: number): boolean {
    const queued = this.queuedBytes;
    return (queued > 0 && queued + bytes > this.#limits.maxClientBytes) ||
      this.#budget.bytes + bytes > this.#budget.maxBytes;
  }

  #pause(): void {
    if (this.paused) return;
    this.timeoutMs = this.#limits.slowConsumerTimeoutMs;
    this.onPauseChange(true);
  }

  #send(copy: Copy): void {
    const again = this.#resendIds === null ? undefined : this.#sentBefore(copy);
    const id = again ?? this.#allocateId();
    this.#inflight.set(id, copy);
    if (this.#limits.resendAfterMs) this.#sentAt.set(id, this.now());
    this.sub.outbox.push(encodeCopy(copy, id, again !== undefined));
  }

  /** The packet id a QoS 2 copy had before the reconnect (taken off the list), if any. */
  #sentBefore(copy: Copy): number | undefined {
    if (copy.qos !== 2) return undefined;
    const at = copyAt(copy.key, copy.entry.offset);
    const id = this.#resendIds!.get(at);
    if (id === undefined) return undefined;
    this.#resendIds!.delete(at);
    this.#reservedIds!.delete(id);
    if (this.#resendIds!.size === 0) this.#resendIds = this.#reservedIds = null;
    return id;
  }

  /**
   * Resends, with the DUP flag and the same packet id [MQTT-3.3.1-1], every in-flight copy
   * not PUBACKed (or PUBRECed) within `resendAfterMs`, and each PUBREL not PUBCOMPed; skipped
   * while the client is over its byte cap (a resend must not grow a queue that is not
   * draining). Returns how many were resent.
   */
  resendDue(now: number): number {
    const after = this.#limits.resendAfterMs ?? 0;
    if (after <= 0 || this.paused) return 0;
    let n = 0;
    for (const [id, at] of this.#sentAt) {
      if (now - at < after) continue;
      if (this.#releasing?.has(id)) {
        this.sub.outbox.pushAck(id, AckType.PUBREL);
        this.#sentAt.set(id, now);
        n++;
        continue;
      }
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
      if (this.#inflight.has(id) || this.#releasing?.has(id) || this.#reservedIds?.has(id)) {
        continue;
      }
      return id;
    }
  }
}
