/**
 * Copies of small byte ranges (PUBLISH payloads) carved out of shared blocks instead of one
 * ArrayBuffer each. A `slice` of a 100-byte payload is an off-heap backing store: a `calloc`
 * when decoded and a `free` when collected, per message. Blocks save much of the gateway's CPU
 * per message under QoS 0 ingest: one block serves
 * dozens of payloads, and glibc's allocator does not slow down when they die young.
 *
 * A block lives while any copy carved from it does, so a copy kept long holds up to
 * {@link BLOCK_BYTES}: whoever keeps a message beyond its append (a subscriber's ledger and
 * queue) takes its own copy with {@link ownBytes}. Copies are never written to after they are
 * made; the blocks are filled front to back and never reused.
 *
 * @module
 */

/** Bytes per shared block: the most one retained copy can keep alive. */
export const BLOCK_BYTES = 4096;

/** Longer ranges get a store of their own (a block would hold too few of them to pay). */
export const MAX_SHARED_BYTES = 512;

let block = new Uint8Array(BLOCK_BYTES);
let used = 0;

/** A copy of `b[from, to)`: carved from the current block when small, else its own store. */
export function copyBytes(b: Uint8Array, from: number, to: number): Uint8Array {
  const n = to - from;
  if (n > MAX_SHARED_BYTES) return b.slice(from, to);
  if (used + n > BLOCK_BYTES) {
    block = new Uint8Array(BLOCK_BYTES);
    used = 0;
  }
  block.set(b.subarray(from, to), used);
  const copy = block.subarray(used, used + n);
  used += (n + 7) & ~7; // each copy starts 8-aligned (a reader may view it as wider words)
  return copy;
}

/**
 * `b` itself when it owns its whole store; otherwise (a copy carved from a block, any other
 * view) a copy that does.
 */
export function ownBytes(b: Uint8Array): Uint8Array {
  return b.byteOffset === 0 && b.byteLength === b.buffer.byteLength ? b : b.slice();
}
