/**
 * PUBACKs leave in the order the PUBLISHes arrived, even when appends
 * to different partitions confirm out of order. Each QoS 1 publish takes a slot; a slot is
 * released only when every earlier slot is released.
 *
 * A QoS 2 publish takes a slot too; its acknowledgement is a PUBREC [MQTT-4.3.3-2], released
 * in the same order [MQTT-4.6.0-3].
 *
 * Released acknowledgements are written straight into the connection's outbox: the plain
 * 4-byte ones in place (`Outbox.pushAck`), MQTT 5 ones with a reason code or properties as
 * encoded when their slot was settled.
 *
 * A slot ends as `ack` (send PUBACK), or `close`: a denied or failed QoS 1 publish gets no
 * PUBACK, and MQTT 3.1.1 then requires the connection to be closed [MQTT-3.3.5-2], after
 * the PUBACKs owed for earlier publishes are sent.
 *
 * @module
 */
import { AckType } from "../codec/encoder.ts";
import type { Outbox } from "./outbox.ts";

/** How a slot ended. */
export type SlotEnd = "ack" | "close";

/** Where released acknowledgements are written: the connection's outbox. */
export type AckOutbox = Pick<Outbox, "push" | "pushAck">;

/** Who closes the connection when a slot ends without an acknowledgement. */
export interface AckCloser {
  unacknowledged(): void;
}

/** A slot's state in the ring, above its packet id (bits 16 and up of a slot's entry). */
const OPEN = 0;
const ACK = 1;
const CLOSE = 2;
/** Or-ed into a slot's state: the publish was QoS 2 (its answer is a PUBREC). */
const REC = 4;
const STATE_SHIFT = 16;
const ID_MASK = 0xffff;

const NO_SLOTS: Uint32Array<ArrayBuffer> = new Uint32Array(0);

/** Initial ring size; it doubles when more slots are open at once (bounded by the caller). */
const INITIAL_SLOTS = 32;

/**
 * Rings of {@link INITIAL_SLOTS} not in use: a queue that empties gives its ring back and takes
 * one again at its next QoS 1 publish, so a connection between publishes holds none (a device
 * that publishes once in a while is idle nearly all the time). Bounded: beyond it they are
 * collected.
 */
const spareRings: Uint32Array<ArrayBuffer>[] = [];
const MAX_SPARE_RINGS = 64;

/**
 * Ordered PUBACK release. Slots are sequence numbers into a ring of packet ids and states
 * (one typed array), not objects: a QoS 1 publish then allocates nothing here, and no array
 * keeps released slots reachable (a per-publish object lived until the next full GC).
 */
export class AckQueue {
  // The shared empty ring while no slot is open: an idle or QoS 0 connection holds no ring of
  // its own (memory per idle connection is a benchmark floor).
  #slots = NO_SLOTS;
  /** Sequence number of the oldest open slot, and of the next slot to take. */
  #head = 0;
  #tail = 0;
  /** MQTT 5 PUBACKs encoded per slot (reason codes, coordinates); made on first use. */
  #packets: (Uint8Array | undefined)[] | null = null;
  readonly #outbox: AckOutbox;
  readonly #closer: AckCloser;

  constructor(outbox: AckOutbox, closer: AckCloser) {
    this.#outbox = outbox;
    this.#closer = closer;
  }

  /** Slots not yet released. */
  get pending(): number {
    return this.#tail - this.#head;
  }

  /** Takes the next slot for a QoS 1 (or 2) publish; settle it later with {@link settle}. */
  take(packetId: number, qos2 = false): number {
    if (this.#tail - this.#head === this.#slots.length) this.#grow();
    this.#slots[this.#tail & (this.#slots.length - 1)] = packetId |
      ((qos2 ? OPEN | REC : OPEN) << STATE_SHIFT);
    return this.#tail++;
  }

  /** The open slot was taken for a QoS 2 publish. */
  isQos2(slot: number): boolean {
    return ((this.#slots[slot & (this.#slots.length - 1)] >>> STATE_SHIFT) & REC) !== 0;
  }

  /** The packet id a still open slot was taken for. */
  packetIdOf(slot: number): number {
    return this.#slots[slot & (this.#slots.length - 1)] & ID_MASK;
  }

  /**
   * Ends a slot and releases every ended slot at the head, in order. `packet`: with "ack", the
   * MQTT 5 PUBACK to send for it (a reason code such as 0x87 keeps the connection open).
   */
  settle(slot: number, end: SlotEnd, packet?: Uint8Array): void {
    // A slot below the head was released by a "close" that emptied the queue: nothing to do.
    if (slot < this.#head || slot >= this.#tail) return;
    const slots = this.#slots;
    const mask = slots.length - 1;
    const entry = slots[slot & mask];
    slots[slot & mask] = (entry & (ID_MASK | (REC << STATE_SHIFT))) |
      ((end === "ack" ? ACK : CLOSE) << STATE_SHIFT);
    // Set (or cleared) on every settle once in use, so no stale packet outlives its slot.
    if (packet !== undefined || this.#packets !== null) {
      (this.#packets ??= [])[slot & mask] = packet;
    }
    while (this.#head < this.#tail) {
      const at = this.#head & mask;
      const state = slots[at] >>> STATE_SHIFT;
      if ((state & ~REC) === OPEN) break;
      this.#head++;
      if ((state & ~REC) === CLOSE) {
        this.#closer.unacknowledged();
        this.#head = this.#tail;
        break;
      }
      const type = (state & REC) !== 0 ? AckType.PUBREC : AckType.PUBACK;
      const packets = this.#packets;
      const p = packets === null ? undefined : packets[at];
      if (p === undefined) this.#outbox.pushAck(slots[at] & ID_MASK, type);
      else {
        p[0] = type; // a v5 PUBREC is laid out as its PUBACK
        this.#outbox.push(p);
        packets![at] = undefined;
      }
    }
    if (this.#head === this.#tail) this.#giveBackRing();
  }

  /** Doubles the ring (or takes the first), keeping open slots at their sequence numbers. */
  #grow(): void {
    const old = this.#slots;
    if (old.length === 0) {
      this.#slots = spareRings.pop() ?? new Uint32Array(INITIAL_SLOTS);
      return;
    }
    const slots = new Uint32Array(old.length * 2);
    const oldMask = old.length - 1;
    const mask = slots.length - 1;
    const oldPackets = this.#packets;
    const packets: (Uint8Array | undefined)[] | null = oldPackets === null ? null : [];
    for (let seq = this.#head; seq < this.#tail; seq++) {
      slots[seq & mask] = old[seq & oldMask];
      if (packets !== null) packets[seq & mask] = oldPackets![seq & oldMask];
    }
    this.#packets = packets;
    this.#slots = slots;
  }

  /**
   * With no slot open, an initial-size ring goes back to the spares (a bigger one stays: its
   * connection keeps many publishes in flight). A stale MQTT 5 packet list goes too.
   */
  #giveBackRing(): void {
    const slots = this.#slots;
    if (slots.length !== INITIAL_SLOTS) return;
    this.#slots = NO_SLOTS;
    this.#packets = null;
    if (spareRings.length < MAX_SPARE_RINGS) spareRings.push(slots);
  }
}
