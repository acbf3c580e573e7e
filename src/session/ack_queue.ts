/**
 * PUBACKs leave in the order the PUBLISHes arrived (DESIGN §3 "Order"), even when appends
 * to different partitions confirm out of order. Each QoS 1 publish takes a slot; a slot is
 * released only when every earlier slot is released.
 *
 * A slot ends as `ack` (send PUBACK), or `close`: a denied or failed QoS 1 publish gets no
 * PUBACK, and MQTT 3.1.1 then requires the connection to be closed [MQTT-3.3.5-2], after
 * the PUBACKs owed for earlier publishes are sent.
 *
 * @module
 */

/** How a slot ended. */
export type SlotEnd = "ack" | "close";

interface Slot {
  readonly packetId: number;
  end: SlotEnd | null;
}

/** Ordered PUBACK release. */
export class AckQueue {
  #slots: Slot[] = [];
  #head = 0;
  #onAck: (packetId: number) => void;
  #onClose: () => void;

  constructor(onAck: (packetId: number) => void, onClose: () => void) {
    this.#onAck = onAck;
    this.#onClose = onClose;
  }

  /** Slots not yet released. */
  get pending(): number {
    return this.#slots.length - this.#head;
  }

  /** Takes the next slot for a QoS 1 publish; settle it later with {@link settle}. */
  take(packetId: number): Slot {
    const s: Slot = { packetId, end: null };
    this.#slots.push(s);
    return s;
  }

  /** Ends a slot and releases every ended slot at the head, in order. */
  settle(slot: Slot, end: SlotEnd): void {
    slot.end = end;
    while (this.#head < this.#slots.length) {
      const s = this.#slots[this.#head];
      if (s.end === null) break;
      this.#head++;
      if (s.end === "close") {
        this.#onClose();
        this.#slots = [];
        this.#head = 0;
        return;
      }
      this.#onAck(s.packetId);
    }
    // Compact now and then so the array does not grow with the connection's lifetime.
    if (this.#head > 1024 && this.#head * 2 > this.#slots.length) {
      this.#slots = this.#slots.slice(this.#head);
      this.#head = 0;
    }
  }
}
