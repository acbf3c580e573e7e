/**
 * The bytes that arrived of one packet not yet whole: one buffer grown by doubling, never past
 * the packet's announced size once it is known. A packet trickled a byte per read so costs at
 * most twice its bytes and is copied amortised once (a copy kept per read cost many times
 * the byte it held).
 *
 * @module
 */

/** The first buffer a held packet gets. */
const FIRST_HOLD_BYTES = 256;
const EMPTY = new Uint8Array(0);

/** One connection's unfinished packet. */
export class HeldPacket {
  #buf: Uint8Array = EMPTY;
  /** How many bytes are held. */
  length = 0;

  /** The held bytes (a view: valid until the next {@link append} or {@link clear}). */
  get bytes(): Uint8Array {
    return this.#buf.subarray(0, this.length);
  }

  /** Copies `bytes` after the held ones; `total` is the packet's size, or 0 while unknown. */
  append(bytes: Uint8Array, total: number): void {
    const needed = this.length + bytes.length;
    if (needed > this.#buf.length) {
      let size = Math.max(FIRST_HOLD_BYTES, this.#buf.length * 2, needed);
      if (total > 0) size = Math.min(size, Math.max(total, needed));
      const grown = new Uint8Array(size);
      grown.set(this.bytes);
      this.#buf = grown;
    }
    this.#buf.set(bytes, this.length);
    this.length = needed;
  }

  /** Lets the buffer go. */
  clear(): void {
    this.#buf = EMPTY;
    this.length = 0;
  }
}
