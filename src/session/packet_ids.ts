/**
 * A set of MQTT packet identifiers (1..65535) as a bitmap: the QoS 2 publishes a client has
 * sent whose PUBREL has not come yet [MQTT-4.3.3-3]. The id space bounds it: 8192 bytes at most,
 * made at the first QoS 2 publish (a connection that never sends QoS 2 holds none).
 *
 * @module
 */

/** Bytes of the bitmap: one bit per packet id. */
const BITMAP_BYTES = 65536 / 8;

/** Packet ids awaiting their PUBREL. */
export class PacketIdSet {
  #bits: Uint8Array | null = null;
  #size = 0;

  get size(): number {
    return this.#size;
  }

  has(id: number): boolean {
    const bits = this.#bits;
    return bits !== null && (bits[id >> 3] & (1 << (id & 7))) !== 0;
  }

  /** Adds `id`; false when it was already there. */
  add(id: number): boolean {
    const bits = this.#bits ??= new Uint8Array(BITMAP_BYTES);
    const mask = 1 << (id & 7);
    if ((bits[id >> 3] & mask) !== 0) return false;
    bits[id >> 3] |= mask;
    this.#size++;
    return true;
  }

  /** Removes `id`; false when it was not there. */
  delete(id: number): boolean {
    if (!this.has(id)) return false;
    this.#bits![id >> 3] &= ~(1 << (id & 7));
    if (--this.#size === 0) this.#bits = null; // nothing pending: give the bitmap back
    return true;
  }
}
