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

/** A slot's state in the ring. */
const OPEN = 0;
const ACK = 1;
const CLOSE = 2;
/** Or-ed into a slot's state: the publish was QoS 2 (its answer is a PUBREC). */
const REC = 4;

const NO_IDS = new Uint16Array(0);
const NO_ENDS = new Uint8Array(0);

/** Initial ring size; it doubles when more slots are open at once (bounded by the caller). */
const INITIAL_SLOTS = 32;

/**
 * Ordered PUBACK release. Slots are sequence numbers into a ring of packet ids and states
 * (two typed arrays), not objects: a QoS 1 publish then allocates nothing here, and no array
 * keeps released slots reachable (a per-publish object lived until the next full GC).
 */
export class AckQueue {
  // Shared empty arrays until the first QoS 1 publish: an idle or QoS 0 connection holds no
  // ring of its own (memory per idle connection is a benchmark floor).
  #ids = NO_IDS;
  #ends = NO_ENDS;
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
    if (this.#tail - this.#head === this.#ids.length) this.#grow();
    const at = this.#tail & (this.#ids.length - 1);
    this.#ids[at] = packetId;
    this.#ends[at] = qos2 ? OPEN | REC : OPEN;
    return this.#tail++;
  }

  /** The open slot was taken for a QoS 2 publish. */
  isQos2(slot: number): boolean {
    return (this.#ends[slot & (this.#ids.length - 1)] & REC) !== 0;
  }

  /** The packet id a still open slot was taken for. */
  packetIdOf(slot: number): number {
    return this.#ids[slot & (this.#ids.length - 1)];
  }

  /**
   * Ends a slot and releases every ended slot at the head, in order. `packet`: with "ack", the
   * MQTT 5 PUBACK to send for it (a reason code such as 0x87 keeps the connection open).
   */
  settle(slot: number, end: SlotEnd, packet?: Uint8Array): void {
    // A slot below the head was released by a "close" that emptied the queue: nothing to do.
    if (slot < this.#head || slot >= this.#tail) return;
    const mask = this.#ids.length - 1;
    this.#ends[slot & mask] = (end === "ack" ? ACK : CLOSE) | (this.#ends[slot & mask] & REC);
    // Set (or cleared) on every settle once in use, so no stale packet outlives its slot.
    if (packet !== undefined || this.#packets !== null) {
      (this.#packets ??= [])[slot & mask] = packet;
    }
    while (this.#head < this.#tail) {
      const at = this.#head & mask;
      const state = this.#ends[at] & ~REC;
      if (state === OPEN) break;
      this.#head++;
      if (state === CLOSE) {
        this.#closer.unacknowledged();
        this.#head = this.#tail;
        return;
      }
      const type = (this.#ends[at] & REC) !== 0 ? AckType.PUBREC : AckType.PUBACK;
      const packets = this.#packets;
      const packet = packets === null ? undefined : packets[at];
      if (packet === undefined) this.#outbox.pushAck(this.#ids[at], type);
      else {
        packet[0] = type; // a v5 PUBREC is laid out as its PUBACK
        this.#outbox.push(packet);
        packets![at] = undefined;
      }
    }
  }

  /** Doubles the ring (or makes the first), keeping open slots at their sequence numbers. */
  #grow(): void {
    const ids = new Uint16Array(Math.max(INITIAL_SLOTS, this.#ids.length * 2));
    const ends = new Uint8Array(ids.length);
    const oldMask = this.#ids.length - 1;
    const mask = ids.length - 1;
    const old = this.#packets;
    const packets: (Uint8Array | undefined)[] | null = old === null ? null : [];
    for (let seq = this.#head; seq < this.#tail; seq++) {
      ids[seq & mask] = this.#ids[seq & oldMask];
      ends[seq & mask] = this.#ends[seq & oldMask];
      if (packets !== null) packets[seq & mask] = old![seq & oldMask];
    }
    this.#packets = packets;
    this.#ids = ids;
    this.#ends = ends;
  }
}
