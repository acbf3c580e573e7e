/**
 * XXH3-64 and XXH32 (seed 0) over `hash-wasm`, the one copy for the process: one async
 * initialisation ({@link loadHashes}, called once at startup), then synchronous,
 * allocation-free hashing. XXH3-64 seals Iggy message frames and batches (IGGY.md §4.6); XXH32
 * is Iggy's messages-key partition function (IGGY.md §5, `mapping/partition.ts`) and the
 * embedded log's record checksum.
 *
 * @module
 */

import { createXXHash3, createXXHash32, type IHasher } from "hash-wasm";

let hasher3: IHasher | undefined;
let hasher32: IHasher | undefined;
let loading: Promise<void> | undefined;

/** Loads the hashers once; every other function here needs it to have resolved. */
export function loadHashes(): Promise<void> {
  loading ??= (async () => {
    const [a, b] = await Promise.all([createXXHash3(0, 0), createXXHash32(0)]);
    hasher3 = a;
    hasher32 = b;
  })();
  return loading;
}

/** Whether {@link loadHashes} has completed, so hashing will not throw. */
export function hashesLoaded(): boolean {
  return hasher3 !== undefined && hasher32 !== undefined;
}

function ready(h: IHasher | undefined): IHasher {
  if (!h) throw new Error("Hashes not loaded: await loadHashes() first");
  return h;
}

// hash-wasm's binary digest is the canonical (big-endian) representation.
function digestBigEndian(h: IHasher): bigint {
  const d = h.digest("binary");
  let v = 0n;
  for (const byte of d) v = (v << 8n) | BigInt(byte);
  return v;
}

/** XXH3-64, seed 0, of the concatenation of `parts`. */
export function xxh3_64(...parts: Uint8Array[]): bigint {
  const h = ready(hasher3);
  h.init();
  for (const p of parts) h.update(p);
  return digestBigEndian(h);
}

/**
 * XXH32, seed 0, as an unsigned 32-bit number. A string is hashed as its UTF-8 bytes
 * (hash-wasm encodes it itself, so a partition key costs no encoded copy).
 */
export function xxh32(data: Uint8Array | string): number {
  const h = ready(hasher32);
  h.init();
  h.update(data);
  const d = h.digest("binary"); // canonical (big-endian) XXH32 bytes
  return ((d[0] << 24) | (d[1] << 16) | (d[2] << 8) | d[3]) >>> 0;
}

/**
 * XXH3-64, seed 0, of `data` (then `more`), written little-endian at `out[at..at+8]`: the
 * frame and batch seals, without a BigInt per hash.
 */
export function xxh3_64Into(
  data: Uint8Array,
  out: Uint8Array,
  at: number,
  more?: Uint8Array,
): void {
  const h = ready(hasher3);
  h.init();
  h.update(data);
  if (more !== undefined) h.update(more);
  const d = h.digest("binary"); // big-endian
  for (let i = 0; i < 8; i++) out[at + i] = d[7 - i];
}
